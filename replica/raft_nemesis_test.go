package replica

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// errKilled stops a replica at the instant its crash image is taken.
var errKilled = errors.New("killed by the test")

// crash replaces node n's directory by what a kill -9 at this instant
// would leave, and stops its host. It is kill followed by bury.
func (c *testCluster) crash(n NodeID) {
	c.t.Helper()
	c.bury(n, c.kill(n))
}

// kill takes node n's crash image and returns where it is. Its replica's
// files are quiescent while raftMu is held, and the replica is marked
// failed before raftMu is released, so, as after a real kill -9, nothing it
// does after the image is taken reaches anyone. Without that the replica
// went on until its host stopped: it could append and acknowledge entries
// the image did not hold, and the leader, holding that acknowledgement as
// the follower's match, sent the restarted node a commit index past its
// last index (raft's "tocommit(N) is out of range [lastIndex(M)]" panic).
func (c *testCluster) kill(n NodeID) string {
	c.t.Helper()
	r := c.rep(n)
	image := filepath.Join(c.t.TempDir(), "image")
	r.raftMu.Lock()
	copyTree(c.t, c.nodeDir(n), image)
	r.failed = errKilled // process steps, sends and answers nothing more
	r.isLeader.Store(false)
	r.raftMu.Unlock()
	return image
}

// bury stops node n's host and puts its crash image in place of its
// directory, ready for start.
func (c *testCluster) bury(n NodeID, image string) {
	c.t.Helper()
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

// TestRaftKillImageIsLast: a follower killed while the others go on
// acknowledges nothing its crash image does not hold, and restarts from
// that image into the group without raft finding its log short of what
// the leader was told. kill once left the replica running until its host
// stopped; its late acknowledgements made raft panic on restart
// ("tocommit(N) is out of range [lastIndex(M)]") in some TestRaftNemesis
// runs.
func TestRaftKillImageIsLast(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft}, slowElections)
	var acked []ackedBatch
	produceN := func(prefix string, n int) {
		for i := range n {
			b := c.idem(fmt.Sprint(prefix, i), 1+i%3)
			acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
		}
	}
	produceN("a", 5)
	ln, _ := c.leader()
	victim := NodeID(1)
	for victim == ln {
		victim++
	}
	vr := c.rep(victim)
	image := c.kill(victim)
	imageLast, _ := vr.st.LastIndex()
	var late atomic.Uint64
	c.net.OnSend(func(from, _ NodeID, e Envelope) bool {
		m := e.Msg
		if from == victim && m.GetType() == raftpb.MsgAppResp && !m.GetReject() && m.GetIndex() > imageLast {
			late.Store(m.GetIndex())
		}
		return true
	})
	// The leader and the other voter commit these; a victim still running
	// would store and acknowledge them within a heartbeat or two.
	produceN("b", 5)
	time.Sleep(200 * time.Millisecond)
	c.net.OnSend(nil)
	if i := late.Load(); i != 0 {
		t.Fatalf("node %d acknowledged entry %d after its crash image (last index %d) was taken", victim, i, imageLast)
	}
	c.bury(victim, image)
	vr = c.start(victim)
	produceN("c", 5)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 15*time.Second)
	c.checkAcked(acked)
	vr.raftMu.Lock()
	failed := vr.failed
	vr.raftMu.Unlock()
	if failed != nil {
		t.Fatalf("node %d after restart: %v", victim, failed)
	}
}
