package log

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-broker/sluice/protocol"
)

// txnLog writes, for two producers, a history with open, committed and
// aborted transactions, a non-transactional batch in between, and a
// marker for a transaction with no data in the partition:
//
//	0-1  p1 txn data (2 records)      3    p2 txn data
//	2    plain batch                  4    p1 COMMIT
//	5    p1 txn data                  6    p2 ABORT   (p2: 3..6)
//	7    p1 ABORT  (p1: 5..7)         8    p3 COMMIT without data
//	9    p2 txn data (open)
func txnLog(t *testing.T, l *Log) {
	t.Helper()
	txn := func(pid int64, seq int32, n int) []byte {
		return mkBatch(spec{n: n, pid: pid, idem: true, seq: seq, attrs: protocol.AttrTransactional})
	}
	marker := func(pid int64, commit bool) []byte {
		return protocol.TxnMarkerBatch(pid, 0, commit, 0, 0)
	}
	for i, b := range [][]byte{
		txn(1, 0, 2), mkBatch(spec{}), txn(2, 0, 1), marker(1, true), txn(1, 2, 1),
		marker(2, false), marker(1, false), marker(3, true), txn(2, 1, 1),
	} {
		if _, err := l.Append(b); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

func TestTransactionIndex(t *testing.T) {
	check := func(t *testing.T, l *Log, how string) {
		t.Helper()
		if got := l.FirstUnstableOffset(); got != 9 {
			t.Errorf("%s: first unstable offset %d, want 9 (p2's open transaction)", how, got)
		}
		for _, c := range []struct {
			from, upTo int64
			want       string
		}{
			{0, 10, "[{2 3 6} {1 5 7}]"},
			{0, 3, "[]"},                 // nothing aborted starts below 3
			{0, 4, "[{2 3 6}]"},          // p2's starts at 3
			{6, 10, "[{2 3 6} {1 5 7}]"}, // p1's marker at 7 too
			{7, 10, "[{1 5 7}]"},
			{8, 10, "[]"},
		} {
			got := fmt.Sprint(mustAborted(l.AbortedTxns(c.from, c.upTo)))
			if c.want == "[]" && got == "[]" {
				continue
			}
			if got != c.want {
				t.Errorf("%s: AbortedTxns(%d, %d) = %s, want %s", how, c.from, c.upTo, got, c.want)
			}
		}
	}
	dir := t.TempDir()
	l := openT(t, dir, testConfig())
	txnLog(t, l)
	check(t, l, "after appends")

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, testConfig())
	if !l.openedFromSnapshot {
		t.Error("clean reopen did not use the snapshot")
	}
	check(t, l, "after a clean reopen (snapshot)")

	crash(t, l)
	l = openT(t, dir, testConfig())
	check(t, l, "after a crash (rebuilt from the log)")

	// Truncation drops what it cuts: p1's abort marker at 7 goes, so its
	// transaction from 5 is open again and the earliest.
	if err := l.TruncateTo(7); err != nil {
		t.Fatal(err)
	}
	if got := l.FirstUnstableOffset(); got != 5 {
		t.Errorf("after truncating to 7: first unstable offset %d, want 5", got)
	}
	if got := fmt.Sprint(mustAborted(l.AbortedTxns(0, 10))); got != "[{2 3 6}]" {
		t.Errorf("after truncating to 7: aborted %s, want [{2 3 6}]", got)
	}
	l.Close()
}

// TestTransactionIndexReplicated: a follower that stores the leader's
// batches with AppendReplicated keeps the same state as the leader.
func TestTransactionIndexReplicated(t *testing.T) {
	leader := openT(t, t.TempDir(), testConfig())
	defer leader.Close()
	txnLog(t, leader)
	follower := openT(t, t.TempDir(), testConfig())
	defer follower.Close()
	for _, b := range readAll(t, leader) {
		if err := follower.AppendReplicated(append([]byte(nil), b...)); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := leader.FirstUnstableOffset(), follower.FirstUnstableOffset(); a != b {
		t.Errorf("first unstable offset: leader %d, follower %d", a, b)
	}
	if a, b := fmt.Sprint(mustAborted(leader.AbortedTxns(0, 100))), fmt.Sprint(mustAborted(follower.AbortedTxns(0, 100))); a != b {
		t.Errorf("aborted: leader %s, follower %s", a, b)
	}
}

func TestControlType(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := protocol.TxnMarkerBatch(7, 3, commit, 9, 1000)
		if !b.CRCValid() {
			t.Fatal("marker batch CRC")
		}
		want := protocol.ControlAbort
		if commit {
			want = protocol.ControlCommit
		}
		got, err := protocol.ControlType(b)
		if err != nil || got != want {
			t.Errorf("ControlType(commit=%v) = %d, %v; want %d", commit, got, err, want)
		}
		if _, err := protocol.ControlType(b[:protocol.BatchHeaderSize+3]); err == nil {
			t.Error("ControlType of a cut marker succeeded")
		}
	}
	if _, err := protocol.ControlType(mkBatch(spec{})); err == nil {
		t.Error("ControlType of a data batch succeeded")
	}
}

// TestMarkerEpochs: Kafka's appendEndTxnMarker checks. A marker whose
// coordinator epoch is below the one of the producer's last marker is
// refused (ErrCoordinatorFenced) and writes nothing: a zombie
// coordinator's late COMMIT must not end the producer's next
// transaction. With transaction version 2 the marker's producer epoch
// must be above the producer's (or equal for the retry of the marker
// that bumped it), before it at least equal. The last
// coordinator epoch survives a clean reopen (snapshot), a crash (rebuilt
// from the markers) and is what a follower derives.
func TestMarkerEpochs(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig())
	txn := func(epoch int16, seq int32) []byte {
		return mkBatch(spec{n: 1, pid: 1, epoch: epoch, idem: true, seq: seq, attrs: protocol.AttrTransactional})
	}
	marker := func(epoch int16, commit bool, coordEpoch int32) []byte {
		return protocol.TxnMarkerBatch(1, epoch, commit, coordEpoch, 0)
	}
	mustAppend(t, l, txn(0, 0))
	mustAppend(t, l, marker(0, true, 10)) // offset 1
	mustAppend(t, l, txn(0, 1))           // offset 2: the next transaction opens
	coordEpoch := func(how string, want int32) {
		t.Helper()
		if st, ok := l.ProducerState(1); !ok || st.CoordinatorEpoch != want {
			t.Errorf("%s: coordinator epoch %d (known %v), want %d", how, st.CoordinatorEpoch, ok, want)
		}
	}
	coordEpoch("after the first marker", 10)
	refuse := func(what string, b []byte, tv int8, want error) {
		t.Helper()
		leo := l.LogEndOffset()
		if _, err := l.AppendMarker(b, tv); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
		if l.LogEndOffset() != leo || l.FirstUnstableOffset() != 2 {
			t.Errorf("%s: log end %d (was %d), first unstable %d (want 2): the refused marker was written", what, l.LogEndOffset(), leo, l.FirstUnstableOffset())
		}
	}
	refuse("a late COMMIT of coordinator epoch 9", marker(0, true, 9), 0, ErrCoordinatorFenced)
	refuse("a marker at the producer's epoch with transaction version 2", marker(0, false, 11), 2, ErrInvalidProducerEpoch)
	if _, err := l.AppendMarker(marker(0, false, 10), 1); err != nil {
		t.Fatalf("a marker of the same coordinator epoch and producer epoch (version 1): %v", err)
	}
	// Transaction version 2: the marker's epoch is the one EndTxn bumped to.
	mustAppend(t, l, txn(1, 0)) // offset 4
	if _, err := l.AppendMarker(marker(2, true, 12), 2); err != nil {
		t.Fatalf("a version 2 marker at epoch+1: %v", err)
	}
	coordEpoch("after the version 2 marker", 12)
	if got := l.FirstUnstableOffset(); got != -1 {
		t.Errorf("first unstable offset %d, want -1", got)
	}
	if _, err := l.AppendMarker(marker(2, true, 11), 0); !errors.Is(err, ErrCoordinatorFenced) {
		t.Errorf("a marker of coordinator epoch 11 after 12: %v, want ErrCoordinatorFenced", err)
	}
	// Kafka 4.4's idempotent marker retry: a version 2 marker at the
	// producer's epoch with no batch stored at that epoch since the marker
	// that bumped it is that marker's retry, taken and written again; once
	// the next transaction stored a batch at that epoch it is refused.
	leo := l.LogEndOffset()
	if _, err := l.AppendMarker(marker(2, true, 12), 2); err != nil || l.LogEndOffset() != leo+1 {
		t.Fatalf("a retry of the version 2 marker: %v, log end %d (was %d), want it written", err, l.LogEndOffset(), leo)
	}
	mustAppend(t, l, txn(2, 0))
	leo = l.LogEndOffset()
	if _, err := l.AppendMarker(marker(2, true, 12), 2); !errors.Is(err, ErrInvalidProducerEpoch) || l.LogEndOffset() != leo {
		t.Errorf("a version 2 marker at the epoch of an open transaction: %v (log end %d, was %d), want ErrInvalidProducerEpoch and nothing written", err, l.LogEndOffset(), leo)
	}
	if _, err := l.AppendMarker(marker(2, false, 12), 1); err != nil {
		t.Fatalf("a version 1 ABORT of that transaction: %v", err)
	}
	if got := l.FirstUnstableOffset(); got != -1 {
		t.Errorf("first unstable offset %d after the abort, want -1", got)
	}

	// A follower derives the same state from the leader's batches.
	follower := openT(t, t.TempDir(), testConfig())
	for _, b := range readAll(t, l) {
		if err := follower.AppendReplicated(append([]byte(nil), b...)); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := follower.ProducerState(1); st.CoordinatorEpoch != 12 {
		t.Errorf("follower: coordinator epoch %d, want 12", st.CoordinatorEpoch)
	}
	follower.Close()

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, testConfig())
	if !l.openedFromSnapshot {
		t.Error("clean reopen did not use the snapshot")
	}
	coordEpoch("after a clean reopen (snapshot)", 12)
	crash(t, l)
	l = openT(t, dir, testConfig())
	coordEpoch("after a crash (rebuilt from the log)", 12)
	if _, err := l.AppendMarker(marker(2, true, 11), 0); !errors.Is(err, ErrCoordinatorFenced) {
		t.Errorf("after a crash, a marker of coordinator epoch 11: %v, want ErrCoordinatorFenced", err)
	}
	// Truncating away the last marker brings back the one before it.
	if err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	coordEpoch("after truncating the last marker", 10)
	l.Close()
}

// mustAborted is AbortedTxns's list, which a Log always has.
func mustAborted(a []AbortedTxn, err error) []AbortedTxn {
	if err != nil {
		panic(err)
	}
	return a
}
