package metastore

import (
	"testing"
	"time"
)

// txnOrderSetup starts a three-node quorum, claims group grp for broker 7
// and opens transaction tx (producer 5, epoch 0).
func txnOrderSetup(t *testing.T) (*overtake, TxnState, uint64) {
	t.Helper()
	s := newOvertake(t)
	st := TxnState{TransactionalID: "tx", ProducerID: 5, Epoch: 0, LastProducerID: -1, LastEpoch: -1, Status: TxnOngoing}
	v, err := s.cl.PutTxn(s.ctx, st, 0, TxnKeepOffsets)
	if err != nil {
		t.Fatal(err)
	}
	return s, st, v
}

func (s *overtake) txnCommit(off int64) {
	s.t.Helper()
	if err := s.cl.TxnCommitOffsets(s.ctx, s.f, "tx", 5, 0, "grp", []OffsetCommit{{TopicPartition: s.tp, Offset: off}}); err != nil {
		s.t.Fatalf("transactional commit of %d: %v", off, err)
	}
}

// TestTxnMarkerKeepsNewerPlainCommit: a plain commit of the same partition
// stored after a transactional offset commit and before the transaction's
// commit marker is more recent; applying the marker keeps it (Kafka's
// replayEndTransactionMarker compares the record offsets the same way).
// A transactional commit stored after a plain one still replaces it.
func TestTxnMarkerKeepsNewerPlainCommit(t *testing.T) {
	s, st, v := txnOrderSetup(t)
	other := TopicPartition{Topic: "t", Partition: 1}
	if err := s.cl.CommitOffsets(s.ctx, s.f, "grp", []OffsetCommit{{TopicPartition: other, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	s.txnCommit(10)
	if err := s.cl.TxnCommitOffsets(s.ctx, s.f, "tx", 5, 0, "grp", []OffsetCommit{{TopicPartition: other, Offset: 11}}); err != nil {
		t.Fatal(err)
	}
	if err := s.commit(s.ctx, s.cl, 20); err != nil {
		t.Fatal(err)
	}
	st.Status = TxnCompleteCommit
	if _, err := s.cl.PutTxn(s.ctx, st, v, TxnCommitOffsets); err != nil {
		t.Fatal(err)
	}
	offs, err := s.cl.FetchOffsets(s.ctx, "grp", []TopicPartition{s.tp, other})
	if err != nil || len(offs) != 2 {
		t.Fatalf("fetch: %+v %v", offs, err)
	}
	got := map[int32]int64{}
	for _, o := range offs {
		got[o.Partition] = o.Offset
	}
	if got[0] != 20 {
		t.Errorf("partition 0: committed offset %d, want 20: the marker replaced the newer plain commit with the transaction's 10", got[0])
	}
	if got[1] != 11 {
		t.Errorf("partition 1: committed offset %d, want the transaction's 11 (stored after the plain commit of 1)", got[1])
	}
}

// TestTxnOffsetsCarryMarkerRevision: offsets a transaction committed get
// the revision of the marker that applied them, so a reader of commits
// since an earlier revision (the __consumer_offsets view) sees them.
func TestTxnOffsetsCarryMarkerRevision(t *testing.T) {
	s, st, v := txnOrderSetup(t)
	s.txnCommit(10)
	_, before, err := s.cl.OffsetsSince(s.ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Status = TxnCompleteCommit
	marker, err := s.cl.PutTxn(s.ctx, st, v, TxnCommitOffsets)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.cl.OffsetsSince(s.ctx, before, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Group != "grp" || got[0].Offset != 10 || got[0].Rev != marker {
		t.Fatalf("commits since revision %d: %+v, want grp t-0 offset 10 at the marker's revision %d", before, got, marker)
	}
	if !got[0].CommitTime.Before(time.Now().Add(time.Second)) || got[0].CommitTime.IsZero() {
		t.Fatalf("commit time %v", got[0].CommitTime)
	}
}
