package replica

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A solo group proposes its batches by reference (raft_ref.go): raft holds
// no copy of them, the caller gets a batch back only once the log has it,
// and a member added later is sent the batches themselves, read from the
// log, never a reference.
func TestRaftSoloProposesByReference(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, nil, ReplicaOptions{Mode: ModeRaft, Log: bigSegments()})
	_, r := c.leader()
	const n, size = 24, 128 << 10
	batches := make([][]byte, n)
	acked := make([]ackedBatch, n)
	for i := range batches {
		batches[i] = c.idem(strings.Repeat(string(rune('a'+i)), size), 1)
		acked[i].body = append([]byte(nil), body(batches[i])...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, b := range batches {
		p, err := r.Propose(b, AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.BatchReleased():
		case <-ctx.Done():
			t.Fatal("batch never released")
		}
		end := r.LogEndOffset()
		res, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if end <= res.LastOffset {
			t.Fatalf("batch %d (offsets %d..%d) released with the log ending at %d: the caller may reuse memory the log has not written", i, res.BaseOffset, res.LastOffset, end)
		}
		acked[i].res = res
	}
	runtime.ReadMemStats(&after)
	// raft's clone of each entry would allocate n*size bytes at least.
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("proposing %d KiB allocated %d KiB", n*size>>10, got>>10)
	if got > n*size/2 {
		t.Fatalf("proposing %d KiB to a solo group allocated %d KiB: raft copied the batches", n*size>>10, got>>10)
	}
	c.checkAcked(acked)

	// A read broker joins: it gets every batch, from the log.
	checkFor(t, 10*time.Second, func() error {
		cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer ccancel()
		return r.ChangeMembership(cctx, Members{Voters: []NodeID{1}, Learners: []NodeID{2}})
	})
	c.members = Members{Voters: []NodeID{1}, Learners: []NodeID{2}}
	c.start(2)
	for i := range 5 {
		b := c.idem(fmt.Sprint("after", i), 2)
		acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
	}
	c.converged(acked[len(acked)-1].res.LastOffset+1, 10*time.Second)
	c.checkAcked(acked)
	if f := c.hosts[1].FailedReplicas(); f != 0 {
		t.Fatalf("%d replicas failed on the leader", f)
	}
}
