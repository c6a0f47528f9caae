package replica

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// ackedBatch is a batch a client had acknowledged, and where.
type ackedBatch struct {
	res  ProduceResult
	body []byte
}

// checkAcked verifies that every acknowledged batch is on every running
// replica exactly once, at its acknowledged offsets, in order, and below the
// high watermark, and that the acknowledged offsets are dense: the
// tests' batches are all the data of the partition, and raft's own
// entries take no offset, so they are 0..n-1 with no gap.
func (c *testCluster) checkAcked(acked []ackedBatch) {
	c.t.Helper()
	checkDenseAcks(c.t, acked)
	for n, r := range c.running() {
		all := batchesOf(c.t, logBytes(c.t, r))
		byBase := map[int64]storedBatch{}
		seen := map[string]int{}
		for _, x := range all {
			byBase[x.base] = x
			if !x.control {
				seen[string(body(x.raw))]++
			}
		}
		prev := int64(-1)
		for i, a := range acked {
			if a.res.BaseOffset < r.LogStartOffset() {
				continue
			}
			x, ok := byBase[a.res.BaseOffset]
			if !ok {
				c.t.Fatalf("node %d: acked batch %d at offset %d missing", n, i, a.res.BaseOffset)
			}
			if !bytes.Equal(body(x.raw), a.body) || x.last != a.res.LastOffset {
				c.t.Fatalf("node %d: offset %d holds another batch than the one acked", n, a.res.BaseOffset)
			}
			if seen[string(a.body)] != 1 {
				c.t.Fatalf("node %d: acked batch %d stored %d times", n, i, seen[string(a.body)])
			}
			if a.res.BaseOffset <= prev {
				c.t.Fatalf("node %d: acked batches out of order at %d", n, i)
			}
			prev = a.res.BaseOffset
			if a.res.LastOffset >= r.HighWatermark() {
				c.t.Fatalf("node %d: acked batch %d (last %d) above hw %d", n, i, a.res.LastOffset, r.HighWatermark())
			}
		}
	}
}

func TestRaftConvergence(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4, 5}, ReplicaOptions{Mode: ModeRaft})
	var acked []ackedBatch
	for i := range 60 {
		b := c.idem(fmt.Sprint("v", i), 1+i%5)
		res := c.produce(b, AcksAll)
		acked = append(acked, ackedBatch{res, append([]byte(nil), body(b)...)})
	}
	_, lr := c.leader()
	c.converged(acked[len(acked)-1].res.LastOffset+1, 10*time.Second)
	c.checkAcked(acked)
	// The committed prefix ends at the high watermark: the leader's
	// committed entries map to it exactly.
	if hw := lr.HighWatermark(); hw != lr.LogEndOffset() {
		t.Fatalf("leader hw %d, log end %d", hw, lr.LogEndOffset())
	}
	// Leader epochs are raft terms.
	all := batchesOf(t, logBytes(t, lr))
	for _, x := range all {
		if x.epoch <= 0 || uint64(x.epoch) > lr.Term() {
			t.Fatalf("batch at %d has leader epoch %d, term %d", x.base, x.epoch, lr.Term())
		}
	}
	if end, ep := lr.OffsetForLeaderEpoch(int32(lr.Term())); end != lr.LogEndOffset() || ep != int32(lr.Term()) {
		t.Fatalf("OffsetForLeaderEpoch(%d) = %d, %d", lr.Term(), end, ep)
	}
}

// TestRaftWithWAL: the same replication over logs that make appends
// durable through the log package's broker-wide write-ahead log.
func TestRaftWithWAL(t *testing.T) {
	c := newWALCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	var acked []ackedBatch
	produceN := func(prefix string, n int) {
		for i := range n {
			b := c.idem(fmt.Sprint(prefix, i), 2)
			acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
		}
	}
	produceN("a", 30)
	old, _ := c.leader()
	c.stop(old)
	produceN("b", 30)
	c.start(old)
	produceN("c", 10)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 15*time.Second)
	c.checkAcked(acked)
	for _, n := range []NodeID{1, 2, 3, 4} {
		c.stop(n)
	}
	for _, n := range []NodeID{1, 2, 3, 4} {
		c.start(n)
	}
	produceN("d", 5)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 15*time.Second)
	c.checkAcked(acked)
}

// checkDenseAcks fails unless the acknowledged offsets, in the order they
// were acknowledged, are exactly 0..n-1: each batch starts where the one
// before it ended.
func checkDenseAcks(t testing.TB, acked []ackedBatch) {
	t.Helper()
	next := int64(0)
	for i, a := range acked {
		if a.res.BaseOffset != next {
			t.Fatalf("acked batch %d at offsets %d..%d, want it at %d (offsets not dense)", i, a.res.BaseOffset, a.res.LastOffset, next)
		}
		next = a.res.LastOffset + 1
	}
}
