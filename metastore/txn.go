package metastore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Transactions (KIP-98). The metastore holds the state of every
// transactional id, so that any write broker can coordinate it after the
// one that did dies, and the offsets a transaction commits for consumer
// groups, held apart from the committed offsets until the transaction
// commits. It does not decide transitions; the transaction coordinator
// (package txn) does, and writes each new state with PutTxn, a
// compare-and-set on the state's Version, so two brokers that both think
// they coordinate an id can never both move it.

// TxnStatus is Kafka's TransactionState.
type TxnStatus string

const (
	TxnEmpty          TxnStatus = "Empty"
	TxnOngoing        TxnStatus = "Ongoing"
	TxnPrepareCommit  TxnStatus = "PrepareCommit"
	TxnPrepareAbort   TxnStatus = "PrepareAbort"
	TxnCompleteCommit TxnStatus = "CompleteCommit"
	TxnCompleteAbort  TxnStatus = "CompleteAbort"
)

// TxnState is one transactional id's state (Kafka's TransactionMetadata).
type TxnState struct {
	TransactionalID string `json:"id"`
	ProducerID      int64  `json:"pid"`
	Epoch           int16  `json:"epoch"`
	// LastProducerID and LastEpoch are the id and epoch before the last
	// bump, for a producer retrying InitProducerId (KIP-360); -1 if none.
	LastProducerID int64            `json:"lpid"`
	LastEpoch      int16            `json:"lepoch"`
	TimeoutMs      int32            `json:"timeout"`
	Status         TxnStatus        `json:"status"`
	Partitions     []TopicPartition `json:"tps,omitempty"`
	// Groups whose offsets the transaction commits (AddOffsetsToTxn).
	Groups []string `json:"groups,omitempty"`
	// StartMs is when the transaction became Ongoing, UpdateMs the last
	// change (the coordinator's wall clock, for timeouts and expiry).
	StartMs  int64 `json:"start"`
	UpdateMs int64 `json:"update"`
	// TxnVersion is the transaction version (Kafka's
	// clientTransactionVersion, KIP-890) the producer ends its
	// transactions with: 2 bumps the epoch at every EndTxn, 0 does not.
	TxnVersion int8 `json:"tv,omitempty"`
	// NextProducerID and HasNext: in a Prepare* state of transaction
	// version 2 whose epoch is exhausted, the producer id the producer
	// continues with (at epoch 0) once the transaction completes.
	NextProducerID int64 `json:"npid,omitempty"`
	HasNext        bool  `json:"hasnext,omitempty"`
	// Version is set by the metastore: the raft index of the write that
	// stored this state. PutTxn compares it.
	Version uint64 `json:"v"`
}

// TxnEnd says what a PutTxn does with the transaction's pending offsets.
type TxnEnd int8

const (
	TxnKeepOffsets    TxnEnd = 0
	TxnCommitOffsets  TxnEnd = 1 // make them the groups' committed offsets
	TxnDiscardOffsets TxnEnd = 2
)

var (
	// ErrTxnConflict: PutTxn or DeleteTxn with a Version that is not the
	// stored one (another coordinator moved the state).
	ErrTxnConflict = errors.New("metastore: transaction state changed concurrently")
	// ErrTxnFenced: TxnCommitOffsets with an older producer epoch.
	ErrTxnFenced = errors.New("metastore: producer epoch fenced")
	// ErrTxnUnknownProducer: TxnCommitOffsets for a transactional id with
	// no state or another producer id.
	ErrTxnUnknownProducer = errors.New("metastore: unknown producer id for the transactional id")
	// ErrTxnConcurrent: TxnCommitOffsets while the transaction completes.
	ErrTxnConcurrent = errors.New("metastore: transaction is completing")
)

// PutTxn stores st if the stored state's Version is version (0: none
// stored), and applies end to its pending offsets in the same write. It
// returns the new Version.
func (c *Client) PutTxn(ctx context.Context, st TxnState, version uint64, end TxnEnd) (uint64, error) {
	r, err := c.write(ctx, command{Op: opPutTxn, Name: st.TransactionalID, Txn: &st, Count: int64(version), TxnEnd: int8(end)})
	return uint64(r.Int), err
}

// DeleteTxn removes a transactional id's state (expiry) if its Version is
// version, and its pending offsets.
func (c *Client) DeleteTxn(ctx context.Context, id string, version uint64) error {
	_, err := c.write(ctx, command{Op: opDeleteTxn, Name: id, Count: int64(version)})
	return err
}

// TxnCommitOffsets adds offsets to those transaction id commits for group,
// pending until it commits. The producer id must be the stored one and
// the epoch not older. f fences it as CommitOffsets (the group's
// coordinator; the zero Fence writes unfenced).
func (c *Client) TxnCommitOffsets(ctx context.Context, f Fence, id string, producerID int64, epoch int16, group string, offsets []OffsetCommit) error {
	t := time.Now()
	offs := make([]OffsetCommit, len(offsets))
	copy(offs, offsets)
	for i := range offs {
		if offs[i].CommitTime.IsZero() {
			offs[i].CommitTime = t
		}
	}
	_, err := c.write(ctx, fencedWrite(command{Op: opTxnOffsets, Name: id, Group: group, Offsets: offs, ProducerID: producerID, ProducerEpoch: epoch}, f))
	return err
}

// GetTxn reads one transactional id's state linearizably.
func (c *Client) GetTxn(ctx context.Context, id string) (TxnState, bool, error) {
	resp, err := c.read(ctx, &readRequest{What: "txn", Name: id})
	if err != nil || len(resp.Txns) == 0 {
		return TxnState{}, false, err
	}
	return resp.Txns[0], true, nil
}

// ListTxns reads every transactional id's state linearizably.
func (c *Client) ListTxns(ctx context.Context) ([]TxnState, error) {
	resp, err := c.read(ctx, &readRequest{What: "txns"})
	if err != nil {
		return nil, err
	}
	return resp.Txns, nil
}

// PendingTxnOffsets reads the partitions of group with offsets pending in
// an open transaction (OffsetFetch's require_stable, KIP-447).
func (c *Client) PendingTxnOffsets(ctx context.Context, group string) ([]TopicPartition, error) {
	resp, err := c.read(ctx, &readRequest{What: "txn_pending", Group: group})
	if err != nil {
		return nil, err
	}
	var tps []TopicPartition
	for _, o := range resp.Offsets {
		tps = append(tps, o.TopicPartition)
	}
	return tps, nil
}

func txnPrefix(id string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(id)))
	return append(b, id...)
}

func txnOffsetKey(id, group, topic string, partition int32) []byte {
	b := txnPrefix(id)
	b = binary.BigEndian.AppendUint16(b, uint16(len(group)))
	b = append(b, group...)
	return append(b, offsetKey(topic, partition)...)
}

// parseTxnOffsetKey returns the group and the offsets-bucket key.
func parseTxnOffsetKey(k []byte) (group string, okey []byte, ok bool) {
	if len(k) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(k))
	k = k[2:]
	if len(k) < n+2 {
		return "", nil, false
	}
	k = k[n:]
	g := int(binary.BigEndian.Uint16(k))
	k = k[2:]
	if len(k) < g+5 {
		return "", nil, false
	}
	return string(k[:g]), k[g:], true
}

func (a *applier) txnState(id string) (TxnState, bool) {
	v := a.tx.Bucket(bucketTxnState).Get([]byte(id))
	if v == nil {
		return TxnState{}, false
	}
	var st TxnState
	mustUnmarshal(v, &st)
	return st, true
}

func (a *applier) applyTxn(c *command) result {
	fail := func(err error) result { return result{Err: errCode(err)} }
	if c.Name == "" || len(c.Name) > 0xffff {
		return fail(ErrInvalidRequest)
	}
	cur, found := a.txnState(c.Name)
	switch c.Op {
	case opPutTxn, opDeleteTxn:
		if uint64(c.Count) != cur.Version || (c.Count == 0 && found) {
			return fail(ErrTxnConflict)
		}
		end := TxnEnd(c.TxnEnd)
		if c.Op == opDeleteTxn {
			a.del(a.tx.Bucket(bucketTxnState), []byte(c.Name))
			end = TxnDiscardOffsets
		} else {
			if c.Txn == nil || c.Txn.TransactionalID != c.Name {
				return fail(ErrInvalidRequest)
			}
			st := *c.Txn
			st.Version = a.index
			a.put(a.tx.Bucket(bucketTxnState), []byte(c.Name), mustJSON(st))
		}
		if end != TxnKeepOffsets {
			a.endTxnOffsets(c.Name, end == TxnCommitOffsets)
		}
		return result{Int: int64(a.index)}
	case opTxnOffsets:
		if c.Group == "" {
			return fail(ErrInvalidRequest)
		}
		// Fenced and ordered as a commit of the group's coordinator.
		if err := a.checkFence(c); err != nil {
			return fail(err)
		}
		switch {
		case !found || cur.ProducerID != c.ProducerID:
			return fail(ErrTxnUnknownProducer)
		case c.ProducerEpoch != cur.Epoch:
			return fail(ErrTxnFenced)
		case cur.Status == TxnPrepareCommit || cur.Status == TxnPrepareAbort:
			return fail(ErrTxnConcurrent)
		}
		if err := a.checkWriteOrder(c, streamOffsets); err != nil {
			return fail(err)
		}
		b := a.tx.Bucket(bucketTxnOffsets)
		for _, o := range c.Offsets {
			a.put(b, txnOffsetKey(c.Name, c.Group, o.Topic, o.Partition), encodeOffsetValue(offsetValue{
				Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata,
				CommitTime: o.CommitTime.UnixMilli(), Rev: a.index,
			}))
		}
		return result{}
	}
	return fail(ErrInvalidRequest)
}

// endTxnOffsets commits (or drops) every pending offset of transaction id.
// A committed offset takes the revision of this entry (the marker), so
// readers of commits since a revision see it. A pending offset whose
// partition has a commit stored after it (a plain commit between the
// transactional commit and the marker) is dropped, as Kafka's
// replayEndTransactionMarker keeps the later of the two record offsets.
// Pending offsets stored before they carried their revision (Rev 0) are
// applied as before.
func (a *applier) endTxnOffsets(id string, commit bool) {
	b := a.tx.Bucket(bucketTxnOffsets)
	prefix := txnPrefix(id)
	var keys [][]byte
	cur := b.Cursor()
	for k, v := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Next() {
		keys = append(keys, append([]byte{}, k...))
		if !commit {
			continue
		}
		group, okey, ok := parseTxnOffsetKey(k)
		if !ok || !bytes.Equal(k[:len(prefix)], prefix) {
			continue
		}
		gb, err := a.tx.Bucket(bucketOffsets).CreateBucketIfNotExists([]byte(group))
		if err != nil {
			panic(fmt.Sprintf("metastore: offsets bucket: %v", err))
		}
		pv, err := decodeOffsetValue(v)
		if err != nil { // not ours to judge: stored as it was, as before
			a.put(gb, append([]byte{}, okey...), append([]byte{}, v...))
			continue
		}
		if pv.Rev != 0 {
			if stored := gb.Get(okey); stored != nil {
				if cv, err := decodeOffsetValue(stored); err == nil && cv.Rev > pv.Rev {
					continue
				}
			}
		}
		pv.Rev = a.index
		a.put(gb, append([]byte{}, okey...), encodeOffsetValue(pv))
	}
	for _, k := range keys {
		a.del(b, k)
	}
}

// readTxns answers the "txn" (Name), "txns" and "txn_pending" (Group)
// reads.
func readTxns(tx *bolt.Tx, r *readRequest, resp *Response) error {
	switch r.What {
	case "txn":
		if v := tx.Bucket(bucketTxnState).Get([]byte(r.Name)); v != nil {
			var st TxnState
			mustUnmarshal(v, &st)
			resp.Txns = []TxnState{st}
		}
	case "txns":
		return tx.Bucket(bucketTxnState).ForEach(func(_, v []byte) error {
			var st TxnState
			mustUnmarshal(v, &st)
			resp.Txns = append(resp.Txns, st)
			return nil
		})
	case "txn_pending":
		return tx.Bucket(bucketTxnOffsets).ForEach(func(k, _ []byte) error {
			group, okey, ok := parseTxnOffsetKey(k)
			if !ok || group != r.Group {
				return nil
			}
			if topic, p, ok := parseOffsetKey(okey); ok {
				resp.Offsets = append(resp.Offsets, OffsetCommit{TopicPartition: TopicPartition{Topic: topic, Partition: p}})
			}
			return nil
		})
	}
	return nil
}
