package txn

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metastore"
)

// TestTransactionV2 walks a transactional id through KIP-890 part 2:
// partitions and a group added implicitly (AddImplicit, as a partition
// leader and a group coordinator do), each EndTxn v5 bumping the epoch
// and its markers carrying the bumped one, retries with the old epoch,
// the empty abort, a fence (a timed-out transaction) that a late EndTxn
// of the old epoch cannot pass for a retry, and the epoch's exhaustion
// (a new producer id at epoch 0).
func TestTransactionV2(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	const id = "v2"
	now := func() int64 { return e.now.Load() }
	pid, e0, c := e.c.InitProducerID(ctx, id, 10_000, -1, -1)
	if c != 0 {
		t.Fatal(code(c))
	}
	steps := []struct {
		what string
		do   func() EndResult
		want int16
		// wantEpoch is the answer's epoch when want is OK (-2: not checked).
		wantEpoch int16
		status    metastore.TxnStatus
		markers   []string
	}{
		{"implicit add of a partition", func() EndResult {
			return EndResult{Code: AddImplicit(ctx, e.store, id, pid, e0, []metastore.TopicPartition{tpA}, "", now())}
		}, 0, -2, metastore.TxnOngoing, nil},
		{"implicit add of a group", func() EndResult {
			return EndResult{Code: AddImplicit(ctx, e.store, id, pid, e0, nil, "g", now())}
		}, 0, -2, metastore.TxnOngoing, nil},
		{"implicit add with another epoch", func() EndResult {
			return EndResult{Code: AddImplicit(ctx, e.store, id, pid, e0+1, []metastore.TopicPartition{tpB}, "", now())}
		}, kerr.ProducerFenced.Code, -2, metastore.TxnOngoing, nil},
		{"implicit add with another producer id", func() EndResult {
			return EndResult{Code: AddImplicit(ctx, e.store, id, pid+1, e0, []metastore.TopicPartition{tpB}, "", now())}
		}, kerr.InvalidProducerIDMapping.Code, -2, metastore.TxnOngoing, nil},
		{"EndTxn v5 with an epoch never given", func() EndResult { return e.c.EndTxn(ctx, id, pid, e0+1, true, 2) },
			kerr.ProducerFenced.Code, -2, metastore.TxnOngoing, nil},
		{"EndTxn v5 commit", func() EndResult { return e.c.EndTxn(ctx, id, pid, e0, true, 2) },
			0, e0 + 1, metastore.TxnCompleteCommit, []string{fmt.Sprintf("a-0:%d/%d:true", pid, e0+1)}},
		{"EndTxn v5 commit retried with the old epoch", func() EndResult { return e.c.EndTxn(ctx, id, pid, e0, true, 2) },
			0, e0 + 1, metastore.TxnCompleteCommit, nil},
		{"EndTxn v5 abort with the old epoch", func() EndResult { return e.c.EndTxn(ctx, id, pid, e0, false, 2) },
			kerr.InvalidTxnState.Code, -2, metastore.TxnCompleteCommit, nil},
		{"EndTxn v5 commit of nothing", func() EndResult { return e.c.EndTxn(ctx, id, pid, e0+1, true, 2) },
			kerr.InvalidTxnState.Code, -2, metastore.TxnCompleteCommit, nil},
		{"EndTxn v5 abort of nothing bumps", func() EndResult { return e.c.EndTxn(ctx, id, pid, e0+1, false, 2) },
			0, e0 + 2, metastore.TxnCompleteAbort, nil},
		{"the next transaction, at the new epoch", func() EndResult {
			return EndResult{Code: AddImplicit(ctx, e.store, id, pid, e0+2, []metastore.TopicPartition{tpB}, "", now())}
		}, 0, -2, metastore.TxnOngoing, nil},
		{"EndTxn v5 abort", func() EndResult { return e.c.EndTxn(ctx, id, pid, e0+2, false, 2) },
			0, e0 + 3, metastore.TxnCompleteAbort, []string{fmt.Sprintf("b-1:%d/%d:false", pid, e0+3)}},
	}
	for _, s := range steps {
		r := s.do()
		if r.Code != s.want {
			t.Fatalf("%s: %s, want %s", s.what, code(r.Code), code(s.want))
		}
		if s.wantEpoch != -2 && (r.Epoch != s.wantEpoch || r.ProducerID != pid) {
			t.Errorf("%s: producer %d epoch %d, want %d epoch %d", s.what, r.ProducerID, r.Epoch, pid, s.wantEpoch)
		}
		if st := e.state(t, id); st.Status != s.status {
			t.Errorf("%s: status %s, want %s", s.what, st.Status, s.status)
		}
		if m := e.markers.take(); !slices.Equal(m, s.markers) {
			t.Errorf("%s: markers %v, want %v", s.what, m, s.markers)
		}
	}

	// A timed-out transaction is aborted as a version 2 abort (Kafka
	// 4.4): the epoch goes up once, the markers carry it; the producer's
	// EndTxn v5 at its old epoch is a commit refused with
	// INVALID_TXN_STATE or an abort taken as the retry of that abort
	// (answered with the new epoch); before v5 it is PRODUCER_FENCED.
	e4 := e0 + 3
	if c := AddImplicit(ctx, e.store, id, pid, e4, []metastore.TopicPartition{tpA}, "", now()); c != 0 {
		t.Fatal(code(c))
	}
	e.now.Add(11_000)
	e.c.Sweep(ctx, false)
	st := e.waitStatus(t, id, metastore.TxnCompleteAbort)
	if st.Epoch != e4+1 || st.TxnVersion != 2 || st.LastEpoch != e4 {
		t.Errorf("after the timeout: epoch %d version %d last epoch %d, want %d, 2, %d", st.Epoch, st.TxnVersion, st.LastEpoch, e4+1, e4)
	}
	if m := e.markers.take(); !slices.Equal(m, []string{fmt.Sprintf("a-0:%d/%d:false", pid, e4+1)}) {
		t.Errorf("timed-out abort: markers %v", m)
	}
	if r := e.c.EndTxn(ctx, id, pid, e4, true, 0); r.Code != kerr.ProducerFenced.Code {
		t.Errorf("EndTxn v4 commit of the timed-out producer: %s, want PRODUCER_FENCED", code(r.Code))
	}
	if r := e.c.EndTxn(ctx, id, pid, e4, true, 2); r.Code != kerr.InvalidTxnState.Code {
		t.Errorf("EndTxn v5 commit of the timed-out producer: %s, want INVALID_TXN_STATE", code(r.Code))
	}
	if r := e.c.EndTxn(ctx, id, pid, e4, false, 2); r.Code != 0 || r.ProducerID != pid || r.Epoch != e4+1 {
		t.Errorf("EndTxn v5 abort of the timed-out producer: %s producer %d epoch %d, want OK with %d epoch %d", code(r.Code), r.ProducerID, r.Epoch, pid, e4+1)
	}
	if m := e.markers.take(); len(m) != 0 {
		t.Errorf("the abort's retry wrote markers %v", m)
	}

	// VerifyEach (AddPartitionsToTxn v4+ VerifyOnly).
	e5 := e4 + 1
	if c := AddImplicit(ctx, e.store, id, pid, e5, []metastore.TopicPartition{tpA}, "", now()); c != 0 {
		t.Fatal(code(c))
	}
	got := e.c.VerifyEach(ctx, id, pid, e5, []metastore.TopicPartition{tpA, tpB})
	if got[tpA] != 0 || got[tpB] != kerr.TransactionAbortable.Code {
		t.Errorf("VerifyEach: %v, want a-0 OK and b-1 TRANSACTION_ABORTABLE", got)
	}
	if got := e.c.VerifyEach(ctx, id, pid, e5+1, []metastore.TopicPartition{tpA}); got[tpA] != kerr.ProducerFenced.Code {
		t.Errorf("VerifyEach with another epoch: %s", code(got[tpA]))
	}

	// The epoch exhausted: the markers carry the last epoch, the producer
	// continues with a new producer id at epoch 0; a retry with the old
	// id and epoch is answered the same.
	cur := e.state(t, id)
	cur.Epoch = maxEpoch
	if _, err := e.store.PutTxn(ctx, cur, cur.Version, metastore.TxnKeepOffsets); err != nil {
		t.Fatal(err)
	}
	r := e.c.EndTxn(ctx, id, pid, maxEpoch, true, 2)
	if r.Code != 0 || r.ProducerID == pid || r.Epoch != 0 {
		t.Fatalf("EndTxn v5 at the last epoch: %s producer %d epoch %d, want a new producer id at epoch 0", code(r.Code), r.ProducerID, r.Epoch)
	}
	if m := e.markers.take(); !slices.Equal(m, []string{fmt.Sprintf("a-0:%d/%d:true", pid, math.MaxInt16)}) {
		t.Errorf("markers at the last epoch: %v", m)
	}
	if again := e.c.EndTxn(ctx, id, pid, maxEpoch, true, 2); again != r {
		t.Errorf("EndTxn v5 retried after the new producer id: %+v, want %+v", again, r)
	}
	if st := e.state(t, id); st.ProducerID != r.ProducerID || st.Epoch != 0 || st.Status != metastore.TxnCompleteCommit {
		t.Errorf("state after the exhausted epoch: %+v", st)
	}
}
