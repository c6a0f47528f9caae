package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
	"github.com/sluice-broker/sluice/txn"
)

// The transaction coordinator (package txn) runs on every broker with the
// write role whose catalog is the metastore: producers reach only write
// brokers. This file wires it: which broker owns a transactional id, and
// how its markers reach the partitions (WriteMarkers, below).

// newTxnCoordinator returns nil on a broker without the write role or
// without a metastore catalog: the transaction APIs then answer
// NOT_COORDINATOR, and the client asks FindCoordinator again, which names
// a write broker.
func (s *Server) newTxnCoordinator() (*txn.Coordinator, error) {
	store, ok := s.catalog.(txn.Store)
	if !ok || !s.cfg.HasRole("write") {
		return nil, nil
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return txn.New(txn.Config{
		Store:          store,
		Markers:        s,
		NewProducerID:  s.producers.next,
		Owns:           s.ownsTxn,
		Logger:         s.log,
		MaxTimeout:     ms(s.cfg.TransactionMaxTimeoutMs),
		IDExpiration:   ms(s.cfg.TransactionalIDExpirationMs),
		AbortInterval:  ms(s.cfg.TxnAbortIntervalMs),
		ExpireInterval: ms(s.cfg.TxnExpireIntervalMs),
	})
}

// txnOwner is the write broker that coordinates transactional id; this
// broker if no write broker is registered yet (start-up).
func (s *Server) txnOwner(id string) int32 {
	if o := txn.Owner(id, s.catalog.Brokers()); o >= 0 {
		return o
	}
	if s.cfg.HasRole("write") {
		return s.cfg.NodeID
	}
	return -1
}

func (s *Server) ownsTxn(id string) bool { return s.txnOwner(id) == s.cfg.NodeID }

// errMarkersPending: some partition did not take its marker yet; the
// coordinator tries again.
var errMarkersPending = errors.New("transaction markers not yet written to every partition")

// WriteMarkers writes a transaction marker to each partition through its
// leader: this broker's own partitions directly, the others with
// WriteTxnMarkers to their leaders, all at once (each leader's commit
// waits overlap). Partitions of deleted topics are skipped. It implements
// txn.MarkerWriter.
func (s *Server) WriteMarkers(ctx context.Context, m txn.Marker, tps []metastore.TopicPartition) error {
	remote := map[int32]map[string][]int32{}
	var mu sync.Mutex
	var failed []string
	fail := func(what string, err error) {
		mu.Lock()
		failed = append(failed, fmt.Sprintf("%s: %v", what, err))
		mu.Unlock()
	}
	type pending struct {
		tp   metastore.TopicPartition
		wait func(context.Context) error
	}
	var waits []pending
	for _, tp := range tps {
		t, ok := s.catalog.TopicByName(tp.Topic)
		if !ok || int(tp.Partition) >= len(t.Partitions) {
			continue
		}
		wait, err := s.proposeMarker(t, tp.Partition, m.ProducerID, m.Epoch, m.Commit, m.CoordinatorEpoch, m.TxnVersion)
		switch {
		case err == nil:
			waits = append(waits, pending{tp, wait})
		case errors.Is(err, partition.ErrCoordinatorFenced):
			s.markerFenced(tp.Topic, tp.Partition, m, err)
		case errors.Is(err, partition.ErrInvalidProducerEpoch):
			s.markerSkipped(tp.Topic, tp.Partition, m)
		case errors.Is(err, partition.ErrNotLeader) || errors.Is(err, errNotHosted):
			leader := t.Partitions[tp.Partition].Leader
			if leader < 0 || leader == s.cfg.NodeID {
				fail(fmt.Sprintf("%s-%d", tp.Topic, tp.Partition), errors.New("no leader"))
				continue
			}
			if remote[leader] == nil {
				remote[leader] = map[string][]int32{}
			}
			remote[leader][tp.Topic] = append(remote[leader][tp.Topic], tp.Partition)
		default:
			fail(fmt.Sprintf("%s-%d", tp.Topic, tp.Partition), err)
		}
	}
	var wg sync.WaitGroup
	for leader, topics := range remote {
		wg.Go(func() {
			if err := s.sendMarkers(ctx, leader, m, topics); err != nil {
				fail(fmt.Sprintf("leader %d", leader), err)
			}
		})
	}
	for _, w := range waits {
		switch err := w.wait(ctx); {
		case errors.Is(err, partition.ErrCoordinatorFenced):
			s.markerFenced(w.tp.Topic, w.tp.Partition, m, err)
		case errors.Is(err, partition.ErrInvalidProducerEpoch):
			s.markerSkipped(w.tp.Topic, w.tp.Partition, m)
		case err != nil:
			fail(fmt.Sprintf("%s-%d", w.tp.Topic, w.tp.Partition), err)
		}
	}
	wg.Wait()
	if len(failed) > 0 {
		return fmt.Errorf("%w: %v", errMarkersPending, failed)
	}
	return nil
}

// markerFenced: a partition refused a marker for its coordinator epoch
// (TRANSACTION_COORDINATOR_FENCED): the producer's markers there come
// from a later decision, so this one is stale, and the coordinator stops
// sending it, as Kafka's TransactionMarkerRequestCompletionHandler does
// (its state write then fails on the metastore version, if another
// broker moved the transaction on).
func (s *Server) markerFenced(topic string, partition int32, m txn.Marker, err error) {
	s.log.Info().Str("topic", topic).Int32("partition", partition).Int64("producer_id", m.ProducerID).
		Int32("coordinator_epoch", m.CoordinatorEpoch).Err(err).Msg("transaction marker fenced by a later coordinator epoch; not sent again")
}

// markerSkipped: a partition refused a marker for its producer epoch
// (INVALID_PRODUCER_EPOCH): a marker of a newer epoch ended the
// transaction there already, so this one is stale and the coordinator
// stops sending it, as Kafka's TransactionMarkerRequestCompletionHandler
// does.
func (s *Server) markerSkipped(topic string, partition int32, m txn.Marker) {
	s.log.Info().Str("topic", topic).Int32("partition", partition).Int64("producer_id", m.ProducerID).Int16("epoch", m.Epoch).
		Msg("transaction marker fenced by a newer producer epoch; skipped")
}

// proposeMarker appends (proposes, on a raft partition) a marker to a
// partition this broker leads; wait returns once it is committed. A
// marker whose producer epoch the partition has seen bumped past fails
// with partition.ErrInvalidProducerEpoch (with transaction version 2, txnVersion
// from WriteTxnMarkers v2, its epoch must be above the producer's unless
// it is the retry of the marker that bumped it), one whose coordinator
// epoch is below the producer's last marker's there with
// partition.ErrCoordinatorFenced (log.ProducerEntry.CheckMarker); neither is
// written.
func (s *Server) proposeMarker(t metastore.Topic, idx int32, pid int64, epoch int16, commit bool, coordEpoch int32, txnVersion int8) (wait func(context.Context) error, err error) {
	p, err := s.partition(t, idx)
	if err != nil {
		return nil, err
	}
	b := protocol.TxnMarkerBatch(pid, epoch, commit, coordEpoch, time.Now().UnixMilli())
	b.SetLeaderEpoch(p.LeaderEpoch())
	prop, err := p.ProposeMarker(b, txnVersion, partition.AcksAll)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := prop.Wait(ctx)
		return err
	}, nil
}

// sendMarkers sends one WriteTxnMarkers request to another write broker.
func (s *Server) sendMarkers(ctx context.Context, leader int32, mk txn.Marker, topics map[string][]int32) error {
	cl, err := s.forwardClient()
	if err != nil {
		return err
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = mk.ProducerID, mk.Epoch, mk.Commit
	m.CoordinatorEpoch, m.TransactionVersion = mk.CoordinatorEpoch, mk.TxnVersion
	for topic, parts := range topics {
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, parts
		m.Topics = append(m.Topics, mt)
	}
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return err
	}
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode == kerr.TransactionCoordinatorFenced.Code {
					s.markerFenced(rt.Topic, rp.Partition, mk, kerr.TransactionCoordinatorFenced)
					continue
				}
				if rp.ErrorCode == kerr.InvalidProducerEpoch.Code {
					s.markerSkipped(rt.Topic, rp.Partition, mk)
					continue
				}
				if rp.ErrorCode != 0 && rp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					return fmt.Errorf("%s-%d: %w", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
				}
			}
		}
	}
	return nil
}

// fencedCode converts PRODUCER_FENCED for request versions from before
// KIP-588, which know only INVALID_PRODUCER_EPOCH, as Kafka does.
func fencedCode(code int16, old bool) int16 {
	if old && code == kerr.ProducerFenced.Code {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// txnTopicPartitions resolves a request's topics: the partitions that
// exist, and the code of each that does not (UNKNOWN_TOPIC_OR_PARTITION).
func (s *Server) txnTopicPartitions(topics map[string][]int32) (ok []metastore.TopicPartition, bad map[metastore.TopicPartition]int16) {
	bad = map[metastore.TopicPartition]int16{}
	for topic, parts := range topics {
		t, found := s.catalog.TopicByName(topic)
		for _, p := range parts {
			tp := metastore.TopicPartition{Topic: topic, Partition: p}
			if !found || p < 0 || int(p) >= len(t.Partitions) {
				bad[tp] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			ok = append(ok, tp)
		}
	}
	return ok, bad
}

var (
	errTxnNotVerified       = errors.New("transactional batch for a partition that is not in the producer's ongoing transaction")
	errTxnVerifyUnavailable = errors.New("the transaction's state cannot be read to verify the batch")
)

// verifyTxnBatch is KIP-890 at the partition leader, for the first
// transactional batch of a producer in a partition (one with no
// transaction of the batch's epoch open there).
//
// Produce v12+ (transaction version 2, part 2): the client sent no
// AddPartitionsToTxn, and the leader adds the partition to the
// producer's transaction itself (txn.AddImplicit), always, whatever
// transaction.partition.verification.enable says, as Kafka's leader does.
//
// Before v12 (part 1): the batch is taken only if the transaction's state
// in the metastore says the partition is in the producer's ongoing
// transaction at the batch's epoch. A batch that arrives after its
// transaction ended (a late retry) would otherwise open a transaction no
// marker ever ends, and hold the last stable offset back for good. Later
// batches of an open transaction need no check.
func (s *Server) verifyTxnBatch(ctx context.Context, txnID *string, topic string, partition int32, p hostedPartition, b protocol.Batch, version int16, added map[metastore.TopicPartition]error) error {
	implicit := version >= 12
	if !implicit && !s.cfg.TxnVerification {
		return nil
	}
	if !needsTxnCheck(p, b, implicit) {
		return nil
	}
	if err, ok := added[metastore.TopicPartition{Topic: topic, Partition: partition}]; ok {
		return err
	}
	store, ok := s.catalog.(txn.Store)
	if !ok {
		return nil
	}
	if txnID == nil || *txnID == "" {
		return fmt.Errorf("%w: the request has no transactional id", errTxnNotVerified)
	}
	tps := []metastore.TopicPartition{{Topic: topic, Partition: partition}}
	var code int16
	if implicit {
		code = txn.AddImplicit(ctx, store, *txnID, b.ProducerID(), b.ProducerEpoch(), tps, "", time.Now().UnixMilli())
	} else {
		code = txn.VerifyPartitions(ctx, store, *txnID, b.ProducerID(), b.ProducerEpoch(), tps)
	}
	return verifyError(code, *txnID, implicit, version)
}

// needsTxnCheck says whether the transactional batch b is its producer's
// first in the partition for its transaction, which verifyTxnBatch checks
// (implicit: transaction version 2, Produce v12+): with no transaction of
// the producer open there, or, with version 2, one of an older epoch (the
// epoch changes at every EndTxn: a batch of a newer epoch belongs to the
// next transaction, whose predecessor's marker has not reached this
// partition yet). Later batches of an open transaction need no check.
func needsTxnCheck(p hostedPartition, b protocol.Batch, implicit bool) bool {
	if !p.Storage().InOpenTxn(b.ProducerID()) {
		return true
	}
	ps, ok := p.Storage().ProducerState(b.ProducerID())
	return implicit && !(ok && ps.Epoch == b.ProducerEpoch())
}

// implicitAdds makes the implicit adds (txn.AddImplicit) of a Produce
// v12+ request at once, when it brings its producer's first
// transactional batches to two partitions or more that this broker leads:
// one compare-and-set of the transaction's state in the metastore instead
// of one per partition, as Kafka's leader sends the coordinator one
// AddPartitionsToTxn for the request. Each such partition maps to the
// batch's Produce error (nil once added); proposeBatch then takes it
// instead of adding the partition again. Partitions the request may not
// write to, that do not parse, or whose batches disagree on the producer
// are left out (checked one by one as before); nil when there is nothing
// to add together.
func (s *Server) implicitAdds(rc *reqCtx, req *kmsg.ProduceRequest) map[metastore.TopicPartition]error {
	store, ok := s.catalog.(txn.Store)
	if !ok {
		return nil
	}
	var tps []metastore.TopicPartition
	pid, epoch := int64(-1), int16(-1)
	for _, rt := range req.Topics {
		var t metastore.Topic
		if req.Version >= 13 {
			t, ok = s.produceTopicByID(metastore.TopicID(rt.TopicID))
		} else {
			t, ok = s.produceTopicByName(rt.Topic)
		}
		if !ok || coordinator.IsInternalTopic(t.Name) || !s.authorizeTopic(rc, acl.OpWrite, t.Name) {
			continue
		}
		for _, rp := range rt.Partitions {
			if rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				continue
			}
			b, err := protocol.ParseBatch(rp.Records)
			if err != nil || b.IsControl() || !b.IsTransactional() {
				continue
			}
			p, err := s.partition(t, rp.Partition)
			if err != nil || !needsTxnCheck(p, b, true) {
				continue
			}
			if pid < 0 {
				pid, epoch = b.ProducerID(), b.ProducerEpoch()
			} else if b.ProducerID() != pid || b.ProducerEpoch() != epoch {
				return nil
			}
			tps = append(tps, metastore.TopicPartition{Topic: t.Name, Partition: rp.Partition})
		}
	}
	if len(tps) < 2 {
		return nil
	}
	code := txn.AddImplicit(rc.ctx(), store, *req.TransactionID, pid, epoch, tps, "", time.Now().UnixMilli())
	err := verifyError(code, *req.TransactionID, true, req.Version)
	added := make(map[metastore.TopicPartition]error, len(tps))
	for _, tp := range tps {
		added[tp] = err
	}
	return added
}

// verifyError turns the code of a verification into Produce's answer, as
// Kafka's AddPartitionsToTxnManager and ReplicaManager do (KIP-890 part 1,
// KIP-1050): PRODUCER_FENCED is INVALID_PRODUCER_EPOCH; the retriable
// COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and
// COORDINATOR_LOAD_IN_PROGRESS are NOT_ENOUGH_REPLICAS (which older
// clients retry without a metadata refresh), and so is
// CONCURRENT_TRANSACTIONS up to v11, while v12+ (transaction version 2,
// whose clients retry it) gets CONCURRENT_TRANSACTIONS itself, as Kafka
// 4.4 answers by its TransactionSupportedOperation; TRANSACTION_ABORTABLE (the
// partition is not in the transaction) stays so from Produce v11, the
// first version whose clients handle it, and is INVALID_TXN_STATE below;
// INVALID_PRODUCER_ID_MAPPING and the rest pass as they are. An implicit
// add (v12+) that fails otherwise is INVALID_TXN_STATE.
func verifyError(code int16, txnID string, implicit bool, version int16) error {
	switch code {
	case 0:
		return nil
	case kerr.ProducerFenced.Code:
		return fmt.Errorf("%w: transactional id %q has another epoch", partition.ErrInvalidProducerEpoch, txnID)
	case kerr.ConcurrentTransactions.Code:
		if version >= 12 {
			return fmt.Errorf("%w: transactional id %q: %w", errTxnNotVerified, txnID, kerr.ConcurrentTransactions)
		}
		return errTxnVerifyUnavailable
	case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
		return errTxnVerifyUnavailable
	case kerr.TransactionAbortable.Code:
		if version < 11 {
			return fmt.Errorf("%w: not in transactional id %q's ongoing transaction", errTxnNotVerified, txnID)
		}
		return fmt.Errorf("%w: transactional id %q: %w", errTxnNotVerified, txnID, kerr.TransactionAbortable)
	}
	if implicit {
		return fmt.Errorf("%w (%s)", errTxnNotVerified, kerr.ErrorForCode(code))
	}
	return fmt.Errorf("%w: transactional id %q: %w", errTxnNotVerified, txnID, kerr.ErrorForCode(code))
}
