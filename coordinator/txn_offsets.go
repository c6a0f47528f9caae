package coordinator

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// TxnStore is what TxnOffsetCommit needs on top of Store;
// *metastore.Client implements it.
type TxnStore interface {
	// TxnCommitOffsets holds offsets pending in transaction id until
	// it commits (metastore.Client.TxnCommitOffsets).
	TxnCommitOffsets(ctx context.Context, f metastore.Fence, id string, producerID int64, epoch int16, group string, offsets []metastore.OffsetCommit) error
	// PendingTxnOffsets lists the group's partitions with offsets
	// pending in an open transaction.
	PendingTxnOffsets(ctx context.Context, group string) ([]metastore.TopicPartition, error)
}

// TxnOffsetCommit (key 28): offsets a transactional producer commits for
// a group as part of its transaction (KIP-98, KIP-447). They are held in
// the metastore apart from the group's committed offsets and become
// committed in the same write as the transaction's commit decision;
// an abort discards them. Nothing reads them before (OffsetFetch shows
// the committed offsets, and UNSTABLE_OFFSET_COMMIT to require_stable).
//
// Checks: the partitions must exist; a commit with a member id or a
// generation (v3+, KIP-447) must come from a current member at the
// current generation as for OffsetCommit; one without (v0-2, or a
// producer outside group management) is accepted as Kafka accepts it. The
// metastore checks the producer against the transaction's state:
// INVALID_PRODUCER_ID_MAPPING for another producer id, PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v3) for another epoch,
// CONCURRENT_TRANSACTIONS while the transaction completes.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var codes []*int16
	var offs []metastore.OffsetCommit
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		t, ok := c.store.TopicByName(rt.Topic)
		st.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case !ok || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case rp.Metadata != nil && len(*rp.Metadata) > maxMetadataBytes:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			oc := metastore.OffsetCommit{TopicPartition: metastore.TopicPartition{Topic: t.Name, Partition: rp.Partition},
				Offset: rp.Offset, LeaderEpoch: -1}
			if req.Version >= 2 {
				oc.LeaderEpoch = rp.LeaderEpoch
			}
			if rp.Metadata != nil {
				oc.Metadata = *rp.Metadata
			}
			offs = append(offs, oc)
			codes = append(codes, &sp.ErrorCode)
		}
		resp.Topics = append(resp.Topics, st)
	}
	failAll := func(code int16) *kmsg.TxnOffsetCommitResponse {
		for _, p := range codes {
			*p = code
		}
		return resp
	}
	if len(offs) == 0 {
		return resp
	}
	ts, ok := c.store.(TxnStore)
	if !ok {
		return failAll(kerr.CoordinatorNotAvailable.Code)
	}
	generation, memberID, instanceID := int32(-1), "", (*string)(nil)
	if req.Version >= 3 {
		generation, memberID, instanceID = req.Generation, req.MemberID, req.InstanceID
	}
	simple := generation < 0 && memberID == "" && instanceID == nil
	mode := lookupExisting
	if simple {
		mode = lookupCreate
	}
	g, code := c.getGroup(ctx, req.Group, mode)
	if code == kerr.GroupIDNotFound.Code {
		code = kerr.IllegalGeneration.Code
	}
	if code != 0 {
		return failAll(code)
	}
	g.mu.Lock()
	if g.dead {
		g.mu.Unlock()
		return failAll(kerr.NotCoordinator.Code)
	}
	if !simple {
		if code := g.validateCommitLocked(false, generation, memberID, instanceID, 9); code != 0 {
			g.mu.Unlock()
			return failAll(code)
		}
	}
	g.mu.Unlock()
	// The group's offset writes, plain and transactional, go one at a
	// time (commitSem), each fenced and numbered: the metastore refuses
	// one that a later one overtook (ErrOvertaken). The write is bounded
	// as a plain commit's (offsets.commit.timeout.ms).
	wctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	if !g.lockCommits(wctx) {
		return failAll(kerr.CoordinatorNotAvailable.Code)
	}
	err := ts.TxnCommitOffsets(wctx, c.fence(), req.TransactionalID, req.ProducerID, req.ProducerEpoch, g.name, offs)
	g.unlockCommits()
	switch {
	case err == nil:
		return resp
	case errors.Is(err, metastore.ErrFenced):
		c.fenced(g)
		return failAll(storeCode(err))
	case errors.Is(err, metastore.ErrTxnUnknownProducer):
		return failAll(kerr.InvalidProducerIDMapping.Code)
	case errors.Is(err, metastore.ErrTxnFenced):
		if req.Version < 3 {
			return failAll(kerr.InvalidProducerEpoch.Code)
		}
		return failAll(kerr.ProducerFenced.Code)
	case errors.Is(err, metastore.ErrTxnConcurrent):
		return failAll(kerr.ConcurrentTransactions.Code)
	}
	return failAll(storeCode(err))
}

// unstableOffsets returns the group's partitions with offsets pending in
// an open transaction, for OffsetFetch's require_stable (KIP-447).
func (c *Coordinator) unstableOffsets(ctx context.Context, group string) (map[metastore.TopicPartition]bool, error) {
	ts, ok := c.store.(TxnStore)
	if !ok {
		return nil, nil
	}
	tps, err := ts.PendingTxnOffsets(ctx, group)
	if err != nil || len(tps) == 0 {
		return nil, err
	}
	m := make(map[metastore.TopicPartition]bool, len(tps))
	for _, tp := range tps {
		m[tp] = true
	}
	return m, nil
}
