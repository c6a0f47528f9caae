package log

import (
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
			got := fmt.Sprint(l.AbortedTxns(c.from, c.upTo))
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
	if got := fmt.Sprint(l.AbortedTxns(0, 10)); got != "[{2 3 6}]" {
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
	if a, b := fmt.Sprint(leader.AbortedTxns(0, 100)), fmt.Sprint(follower.AbortedTxns(0, 100)); a != b {
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
