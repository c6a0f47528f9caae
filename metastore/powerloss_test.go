//go:build linux

package metastore

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/internal/powerloss"
)

// TestClusterPowerLoss cuts the power of one member of three, three times,
// while a client commits increasing offsets, and restarts it from an image
// of what a power cut leaves of its bbolt file (internal/powerloss: the
// exact last committed state first, then seeded random cuts inside the
// last commit: data pages torn with the old meta page, or the data written
// with the meta page old, new or torn). bbolt syncs its file itself, so
// the metastore reports each committed transaction (fsutil.Synced). The
// member must reopen and rejoin without raft panicking, every node must
// converge to the same state, and no acknowledged commit may be lost.
// SLUICE_POWERLOSS_SEED replays the images.
func TestClusterPowerLoss(t *testing.T) {
	seed := powerloss.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	victim := uint64(1 + rng.Intn(3))
	var rec *powerloss.Recorder
	var recErr error
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.ID == victim && rec == nil && recErr == nil {
			rec, recErr = powerloss.Start(cfg.DataDir)
		}
	})
	if recErr != nil {
		t.Fatal(recErr)
	}
	t.Cleanup(func() { rec.Stop() })
	ctx := ctxT(t)
	cl := c.hub.HubClient(100, 1, 2, 3)
	if _, err := cl.CreateTopic(ctx, TopicSpec{Name: "t0", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	lastAcked := int64(-1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := cl.CommitOffsets(cctx, Fence{}, "g", []OffsetCommit{{TopicPartition: TopicPartition{"t0", 0}, Offset: i}})
			cancel()
			if err == nil {
				mu.Lock()
				lastAcked = i
				mu.Unlock()
			}
		}
	}()
	acked := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return lastAcked
	}
	waitMore := func(n int64) {
		from := acked()
		checkFor(t, 20*time.Second, 5*time.Millisecond, func() error {
			if a := acked(); a < from+n {
				return fmt.Errorf("acknowledged up to %d, waiting for %d", a, from+n)
			}
			return nil
		})
	}
	for round := 0; round < 3; round++ {
		waitMore(int64(10 + rng.Intn(20)))
		// The cut: isolate the member so that nothing it does from now on
		// reaches a peer, hold bbolt's writer so the file is quiet, then
		// read it as the page cache holds it.
		c.hub.Partition(victim)
		n := c.node(victim)
		tx, err := n.db.Begin(true)
		if err != nil {
			t.Fatal(err)
		}
		cutErr := rec.Cut()
		tx.Rollback()
		if cutErr != nil {
			t.Fatal(cutErr)
		}
		c.stop(victim)
		mode, iseed := powerloss.ImageFor(seed, round)
		image := filepath.Join(t.TempDir(), "image")
		if err := rec.Image(image, mode, iseed); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: power cut on member %d at acknowledged offset %d; restarting from the %s image %d", round, victim, acked(), mode, iseed)
		waitMore(5) // the others go on
		c.hub.Heal()
		c.dirs[victim] = image
		if rec, err = powerloss.Start(image); err != nil {
			t.Fatal(err)
		}
		c.start(victim, false)
	}
	waitMore(10)
	close(stop)
	wg.Wait()
	last := acked()
	c.waitLeader()
	c.waitConverged()
	for _, id := range c.ids() {
		if got := offsetsOn(c.node(id), "g")[TopicPartition{"t0", 0}]; got < last {
			t.Fatalf("member %d holds offset %d, below the last acknowledged %d", id, got, last)
		}
	}
}
