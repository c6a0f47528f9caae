//go:build linux

package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/internal/powerloss"
)

// TestRaftPowerLoss cuts the power of one voter of three, again and again,
// while an idempotent producer writes with acks=all, and restarts it from
// an image of what a power cut leaves of its directory: the log segments,
// indexes, raft.index, raft.state and raft.confs as last synced, with the
// unsynced rest lost, kept or torn (internal/powerloss; the first image is
// the exact last-synced state, later ones seeded random). A majority always
// survives, so nothing acknowledged may be lost; the voter must rejoin
// without raft panicking or the replica failing (no "tocommit out of range"
// from an entry it acknowledged before it was durable), and every log must
// end byte-identical and dense. SLUICE_POWERLOSS_SEED replays the images
// and cut points.
func TestRaftPowerLoss(t *testing.T) {
	testRaftPowerLoss(t, false)
}

// TestRaftPowerLossWAL is TestRaftPowerLoss with the log's write-ahead log.
func TestRaftPowerLossWAL(t *testing.T) {
	testRaftPowerLoss(t, true)
}

func testRaftPowerLoss(t *testing.T, wal bool) {
	seed := powerloss.Seed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	c := newTestCluster(t, nil, nil, ReplicaOptions{Mode: ModeRaft})
	c.members = Members{Voters: []NodeID{1, 2, 3}}
	c.wal = wal
	victim := NodeID(1 + rng.IntN(3))
	rec, err := powerloss.Start(c.nodeDir(victim))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Stop() })
	c.startAll()

	var mu sync.Mutex
	var acked []ackedBatch
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			b := c.idem(fmt.Sprint("pl", i), 1+i%3)
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := proposeOnce(c, b)
				if err == nil {
					mu.Lock()
					acked = append(acked, ackedBatch{res, append([]byte(nil), body(b)...)})
					mu.Unlock()
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	waitAcked := func(n int) {
		checkFor(t, 20*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(acked) < n {
				return fmt.Errorf("%d batches acknowledged, waiting for %d", len(acked), n)
			}
			return nil
		})
	}
	nacked := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	for round := 0; round < 3; round++ {
		waitAcked(nacked() + 5 + rng.IntN(20))
		// The cut: like kill, under raftMu, and the replica failed before
		// raftMu is released so nothing it does afterwards reaches a peer.
		r := c.rep(victim)
		r.raftMu.Lock()
		if err := rec.Cut(); err != nil {
			r.raftMu.Unlock()
			t.Fatal(err)
		}
		r.failed = errKilled
		r.isLeader.Store(false)
		r.raftMu.Unlock()
		mode, iseed := powerloss.ImageFor(seed, round)
		image := filepath.Join(t.TempDir(), "image")
		if err := rec.Image(image, mode, iseed); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: power cut on node %d after %d acknowledged batches; restarting from the %s image %d", round, victim, nacked(), mode, iseed)
		// The others go on while it is down.
		waitAcked(nacked() + 3)
		c.bury(victim, image)
		// What the restarted node finds is on its disk: the next round's
		// recorder starts from it.
		if rec, err = powerloss.Start(c.nodeDir(victim)); err != nil {
			t.Fatal(err)
		}
		c.start(victim)
	}
	waitAcked(nacked() + 5)
	close(stop)
	<-done
	c.converged(acked[len(acked)-1].res.LastOffset+1, 20*time.Second)
	c.checkAcked(acked)
	r := c.rep(victim)
	r.raftMu.Lock()
	failed := r.failed
	r.raftMu.Unlock()
	if failed != nil {
		t.Fatalf("node %d after its restarts: %v", victim, failed)
	}
}

// proposeOnce proposes b at the current leader with acks=all, without
// failing the test (it runs off the test goroutine); the caller retries the
// same idempotent batch on an error.
func proposeOnce(c *testCluster, b []byte) (ProduceResult, error) {
	for _, r := range c.running() {
		if !r.IsLeader() {
			continue
		}
		p, err := r.Propose(append([]byte(nil), b...), AcksAll)
		if err != nil {
			return ProduceResult{}, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return p.Wait(ctx)
	}
	return ProduceResult{}, fmt.Errorf("no leader")
}
