package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/log"
)

// TestRaftDeleteRecords: DeleteRecords at the leader moves the log start
// of every voter and learner to the same offset through one raft entry;
// data offsets do not change, the entry is not data and takes no offset
// (the high watermark does not move, the next batch gets the offset after
// the last, every log stays dense), and it survives a restart and reaches a
// replica that was down through the log or a snapshot.
func TestRaftDeleteRecords(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft}, slowElections)
	for i := range 10 {
		c.produce(testBatch(fmt.Sprintf("v%d", i), 3, -1, -1, -1), AcksAll)
	}
	c.converged(30, 10*time.Second)
	ln, lr := c.leader()
	hw := lr.HighWatermark()
	if hw != 30 {
		t.Fatalf("high watermark %d after 30 records, want 30 (dense offsets)", hw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Refusals, as Kafka answers them.
	if _, err := lr.DeleteRecords(ctx, hw+1); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the high watermark: %v, want ErrOffsetOutOfRange", err)
	}
	for n, r := range c.running() {
		if n == ln {
			continue
		}
		if _, err := r.DeleteRecords(ctx, 5); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("DeleteRecords at non-leader %d: %v, want ErrNotLeader", n, err)
		}
	}

	before, err := lr.Read(7, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	first := batchesOf(t, before.Data)[0]

	// One follower misses the entry and gets it after a restart.
	down := NodeID(1)
	if ln == down {
		down = 2
	}
	c.stop(down)
	low, err := lr.DeleteRecords(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if low != 7 || lr.LogStartOffset() != 7 {
		t.Fatalf("low watermark %d, leader log start %d, want 7", low, lr.LogStartOffset())
	}
	if got, end := lr.HighWatermark(), lr.LogEndOffset(); got != hw || end != hw {
		t.Fatalf("high watermark %d, log end %d after DeleteRecords, want %d (the entry takes no offset)", got, end, hw)
	}
	// Below the start: nothing moves, no error.
	if low, err := lr.DeleteRecords(ctx, 3); err != nil || low != 7 {
		t.Fatalf("DeleteRecords below the log start: %d, %v; want 7, nil", low, err)
	}
	res := c.produce(testBatch("after", 2, -1, -1, -1), AcksAll)
	if res.BaseOffset != hw {
		t.Fatalf("produce after DeleteRecords at %d, want %d (the entry takes no offset)", res.BaseOffset, hw)
	}
	c.start(down)
	c.converged(res.LastOffset+1, 10*time.Second)
	checkFor(t, 10*time.Second, func() error {
		for n, r := range c.running() {
			if got := r.LogStartOffset(); got != 7 {
				return fmt.Errorf("node %d log start %d, want 7", n, got)
			}
		}
		return nil
	})
	// Offsets of data are unchanged: offset 7 still holds the record
	// produced there.
	for n, r := range c.running() {
		rr, err := r.Read(7, 1<<20)
		if err != nil {
			t.Fatalf("node %d: read at 7: %v", n, err)
		}
		bs := batchesOf(t, rr.Data)
		if len(bs) == 0 || bs[0].base != first.base || string(bs[0].raw) != string(first.raw) {
			t.Fatalf("node %d: the batch holding offset 7 changed after DeleteRecords", n)
		}
	}
	// A second move, then every replica restarts: the log start holds.
	if _, err := c.rep(ln).DeleteRecords(ctx, -1); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecords(-1) at the replica: %v, want ErrOffsetOutOfRange (the server maps -1)", err)
	}
	_, lr = c.leader()
	if _, err := lr.DeleteRecords(ctx, lr.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	want := lr.LogStartOffset()
	for _, n := range c.nodes() {
		c.stop(n)
		c.start(n)
	}
	checkFor(t, 10*time.Second, func() error {
		for n, r := range c.running() {
			if got := r.LogStartOffset(); got != want {
				return fmt.Errorf("node %d log start %d after restart, want %d", n, got, want)
			}
		}
		return nil
	})
	// The command entries were read back from raft.index and raft.confs:
	// the next batch still continues the dense offsets.
	if res := c.produce(testBatch("restarted", 1, -1, -1, -1), AcksAll); res.BaseOffset != want {
		t.Fatalf("produce after restart at %d, want %d", res.BaseOffset, want)
	}
	c.converged(want+1, 10*time.Second)
}
