package replica

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// crashImage replaces node n's directory by what a kill -9 at this instant
// would leave (its replica's files are quiescent while raftMu is held),
// and stops its host.
func (c *testCluster) crash(n NodeID) {
	c.t.Helper()
	r := c.rep(n)
	image := filepath.Join(c.t.TempDir(), "image")
	r.raftMu.Lock()
	copyTree(c.t, c.nodeDir(n), image)
	r.raftMu.Unlock()
	c.stop(n)
	if err := os.RemoveAll(c.nodeDir(n)); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(image, c.nodeDir(n)); err != nil {
		c.t.Fatal(err)
	}
}

// TestRaftNemesis runs rounds of random faults (a node isolated, a voter
// killed and restarted from its crash image, lossy links) while an
// idempotent producer writes with retries, then heals everything and checks
// that every acknowledged batch is everywhere, once, at its offsets, and
// that all logs are byte-identical.
func TestRaftNemesis(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	var acked []ackedBatch
	seq := int32(0)
	// At most one voter is out (isolated or down) at a time, so a
	// majority can always make progress.
	down, isolated := NodeID(-1), NodeID(-1)
	for round := range 12 {
		switch rng.IntN(5) {
		case 0:
			n := NodeID(1 + rng.IntN(4))
			if n != down && (down < 0 || n == 4) {
				t.Logf("round %d: isolate %d", round, n)
				c.net.Heal()
				c.net.Partition(n)
				isolated = n
			}
		case 1:
			t.Logf("round %d: lossy links", round)
			c.net.SetFaults(0.15, 0.1, 0, 10*time.Millisecond)
		case 2:
			n := NodeID(1 + rng.IntN(3))
			if down < 0 && (isolated < 0 || isolated == 4 || isolated == n) {
				down = n
				t.Logf("round %d: kill -9 %d", round, down)
				c.crash(down)
			}
		default:
			t.Logf("round %d: heal", round)
			c.net.Heal()
			isolated = -1
			if down >= 0 {
				c.start(down)
				down = -1
			}
		}
		for i := range 6 {
			n := 1 + rng.IntN(4)
			b := testBatch(fmt.Sprint("n", round, "-", i), n, 11, 0, seq)
			seq += int32(n)
			acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
		}
	}
	c.net.Heal()
	if down >= 0 {
		c.start(down)
	}
	c.converged(acked[len(acked)-1].res.LastOffset+1, 20*time.Second)
	c.checkAcked(acked)
}
