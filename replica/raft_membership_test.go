package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestRaftMembershipChange: a learner joins (a read broker added), another
// leaves, a learner is promoted to voter and a voter removed (joint
// consensus), with writes in between; every member converges.
func TestRaftMembershipChange(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	var acked []ackedBatch
	produceN := func(prefix string, n int) {
		for i := range n {
			b := c.idem(fmt.Sprint(prefix, i), 2)
			acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
		}
	}
	change := func(m Members) {
		t.Helper()
		checkFor(t, 10*time.Second, func() error {
			_, lr := c.leader()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			return lr.ChangeMembership(ctx, m)
		})
		c.members = m
	}
	produceN("a", 10)

	// A read broker joins.
	change(Members{Voters: []NodeID{1, 2, 3}, Learners: []NodeID{4, 5}})
	c.start(5)
	produceN("b", 10)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 10*time.Second)
	c.checkAcked(acked)

	// One leaves.
	change(Members{Voters: []NodeID{1, 2, 3}, Learners: []NodeID{5}})
	c.stop(4)
	produceN("c", 5)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 10*time.Second)

	// Node 5 becomes a voter and a voter that is not the leader leaves
	// (two voter changes: a joint configuration, left automatically).
	ln, _ := c.leader()
	gone := NodeID(1 + int(ln)%3)
	voters := []NodeID{5}
	for _, v := range []NodeID{1, 2, 3} {
		if v != gone {
			voters = append(voters, v)
		}
	}
	change(Members{Voters: voters})
	c.stop(gone)
	produceN("d", 5)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 10*time.Second)
	c.checkAcked(acked)
	for n, r := range c.running() {
		got := r.Members()
		if !slices.Equal(got.Voters, slices.Sorted(slices.Values(voters))) || len(got.Learners) != 0 {
			t.Fatalf("node %d has members %+v, want voters %v", n, got, voters)
		}
	}
	// The new configuration survives restarts, and node 5 can lead.
	for _, n := range voters {
		c.stop(n)
	}
	for _, n := range voters {
		c.start(n)
	}
	produceN("e", 3)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 10*time.Second)
	c.checkAcked(acked)
}

func TestRaftTransferLeadership(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	c.produce(testBatch("x", 1, -1, 0, 0), AcksAll)
	ln, lr := c.leader()
	to := NodeID(1 + int(ln)%3)
	if err := lr.TransferLeadership(4); err == nil {
		t.Fatal("transfer to a learner accepted")
	}
	// A leader that has not heard from the target within an election
	// timeout (a new leader, a loaded machine: seen in CI) refuses with
	// "not active" until it does.
	checkFor(t, 5*time.Second, func() error {
		if c.rep(to).IsLeader() {
			return nil
		}
		if n, r := c.leader(); n != to && r != lr {
			lr = r
		}
		return lr.TransferLeadership(to)
	})
	checkFor(t, 5*time.Second, func() error {
		if !c.rep(to).IsLeader() {
			// An election under load (seen once under -race in CI)
			// ends a transfer in flight: ask the leader of the new
			// term, as the controlled shutdown's retries do.
			if n, r := c.leader(); n != to && r.Term() > lr.Term() {
				lr = r
				_ = r.TransferLeadership(to)
			}
			return fmt.Errorf("node %d not leader", to)
		}
		return nil
	})
	if c.rep(4).Leader() != to && c.rep(4).Leader() != -1 {
		t.Logf("learner still names %d", c.rep(4).Leader())
	}
	c.produce(testBatch("y", 1, -1, 0, 0), AcksAll)
	c.converged(2, 10*time.Second)
}

// TestRaftCaughtUpAndSettled: what the reassignment loop waits on. The
// leader sees its running followers caught up and a stopped one fall
// behind once writes go on; a non-member and a non-leader answer false.
func TestRaftCaughtUpAndSettled(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft})
	c.produce(testBatch("a", 1, -1, 0, 0), AcksAll)
	ln, lr := c.leader()
	others := []NodeID{}
	for _, n := range []NodeID{1, 2, 3} {
		if n != ln {
			others = append(others, n)
		}
	}
	checkFor(t, 10*time.Second, func() error {
		for _, n := range others {
			if !lr.CaughtUp(n) {
				return fmt.Errorf("node %d not caught up", n)
			}
		}
		return nil
	})
	if lr.CaughtUp(9) {
		t.Fatal("a non-member is caught up")
	}
	if c.rep(others[0]).CaughtUp(others[1]) {
		t.Fatal("a follower answered CaughtUp")
	}
	if m, settled := lr.MembershipSettled(); !settled || len(m.Voters) != 3 {
		t.Fatalf("members %+v settled %v", m, settled)
	}
	c.stop(others[1])
	for i := range 5 {
		c.produce(testBatch(fmt.Sprint("b", i), 1, -1, 0, 0), AcksAll)
	}
	if lr.CaughtUp(others[1]) {
		t.Fatalf("stopped node %d still caught up", others[1])
	}
	if !lr.CaughtUp(others[0]) {
		// Acknowledged by a majority: the running follower has it all
		// unless a later heartbeat is still in flight.
		checkFor(t, 5*time.Second, func() error {
			if !lr.CaughtUp(others[0]) {
				return fmt.Errorf("node %d not caught up", others[0])
			}
			return nil
		})
	}
}

// TestRaftMembershipChangeRightAfterElection: a configuration change
// asked of a leader the moment it is elected (the reassignment loop acts
// at once on a leader change) takes effect. The old leader stops with
// writes in flight, so the new one is elected with entries it has not
// applied, and raft would silently drop a change proposed before it
// applies an entry of its own term.
func TestRaftMembershipChangeRightAfterElection(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft})
	for round := range 3 {
		c.produce(testBatch(fmt.Sprint("a", round), 1, -1, 0, 0), AcksAll)
		ln, lr := c.leader()
		for i := range 50 {
			if _, err := lr.Propose(testBatch(fmt.Sprint("b", round, i), 1, -1, 0, 0), AcksLeader); err != nil {
				t.Fatal(err)
			}
		}
		c.stop(ln)
		var nr *Replica
		for nr == nil {
			for _, r := range c.running() {
				if r.IsLeader() {
					nr = r
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
		learners := []NodeID{}
		if round%2 == 0 {
			learners = []NodeID{4}
		}
		want := Members{Voters: []NodeID{1, 2, 3}, Learners: learners}
		checkFor(t, 10*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return nr.ChangeMembership(ctx, want)
		})
		if got, settled := nr.MembershipSettled(); !settled || !slices.Equal(got.Learners, learners) {
			t.Fatalf("round %d: members %+v settled %v", round, got, settled)
		}
		c.start(ln)
	}
}

// TestRaftJoinFromInitialConfiguration: brokers that join a group after
// its configuration changed start from the configuration it was created
// with and replay the changes. The case that broke starting from the
// current one: the only voter is replaced (the newcomer is added as a
// learner first), then a read broker joins; replaying "add learner 2" on a
// configuration where 2 is already the voter would demote the last voter.
func TestRaftJoinFromInitialConfiguration(t *testing.T) {
	joinFromInitialConfiguration(t, ModeRaft)
}

// TestRaftAsyncJoinFromInitialConfiguration: the same in async mode, where
// a replica takes leader messages only from a voter of its configuration
// or the master the metastore records (mayLeadLocked). The joiners start
// from the initial configuration, which names node 1, not the master they
// hear from (node 2): found by the nemesis as a reassignment that never
// finished, its newcomer refusing every message of the master.
func TestRaftAsyncJoinFromInitialConfiguration(t *testing.T) {
	joinFromInitialConfiguration(t, ModeAsync)
}

func joinFromInitialConfiguration(t *testing.T, mode Mode) {
	initial := Members{Voters: []NodeID{1}, Learners: []NodeID{4}}
	c := newTestCluster(t, initial.Voters, initial.Learners, ReplicaOptions{Mode: mode})
	c.mu.Lock() // Assigned reads it
	c.joining = map[NodeID]bool{2: true, 5: true}
	c.mu.Unlock()
	var acked []ackedBatch
	for i := range 5 {
		b := c.idem(fmt.Sprint("a", i), 2)
		acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
	}
	change := func(m Members) {
		t.Helper()
		checkFor(t, 10*time.Second, func() error {
			_, lr := c.leader()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := lr.ChangeMembership(ctx, m); err != nil && !errors.Is(err, ErrNotLeader) {
				return err
			}
			for _, r := range c.running() {
				if got, settled := r.MembershipSettled(); r.IsLeader() && settled &&
					slices.Equal(got.Voters, m.Voters) && slices.Equal(got.Learners, m.Learners) {
					return nil
				}
			}
			return errors.New("not applied yet")
		})
	}
	// Node 2 joins as a learner, catches up, and replaces node 1.
	c.start(2)
	change(Members{Voters: []NodeID{1}, Learners: []NodeID{2, 4}})
	checkFor(t, 10*time.Second, func() error {
		if _, lr := c.leader(); !lr.CaughtUp(2) {
			return errors.New("node 2 not caught up")
		}
		return nil
	})
	change(Members{Voters: []NodeID{2}, Learners: []NodeID{4}})
	if mode == ModeAsync {
		// Node 2 is the sole voter: the server records it master.
		c.mu.Lock()
		c.master = 2
		c.mu.Unlock()
	}
	c.stop(1)
	// A read broker joins the group as it is now.
	c.start(5)
	change(Members{Voters: []NodeID{2}, Learners: []NodeID{4, 5}})
	for i := range 5 {
		b := c.idem(fmt.Sprint("b", i), 2)
		acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
	}
	c.converged(acked[len(acked)-1].res.LastOffset+1, 10*time.Second)
	c.checkAcked(acked)
	for n, r := range c.running() {
		if got, _ := r.MembershipSettled(); !slices.Equal(got.Voters, []NodeID{2}) || !slices.Equal(got.Learners, []NodeID{4, 5}) {
			t.Fatalf("node %d has members %+v", n, got)
		}
	}
}

// TestRaftRemoveStale: at start, a broker deletes the replicas of
// partitions no longer assigned to it, and keeps the others and any that
// is open.
func TestRaftRemoveStale(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, nil, ReplicaOptions{Mode: ModeRaft})
	c.produce(testBatch("x", 1, -1, 0, 0), AcksAll)
	h := c.hosts[1]
	other := Key{TopicID: [16]byte{9}, Index: 2}
	if _, err := h.Open("gone", other, Members{Voters: []NodeID{1}}, c.opts); err != nil {
		t.Fatal(err)
	}
	if err := h.Remove(other, false); err != nil { // closed, data kept
		t.Fatal(err)
	}
	dirs := func() []string {
		ents, _ := os.ReadDir(h.cfg.Dir)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		slices.Sort(out)
		return out
	}
	if got := dirs(); !slices.Equal(got, []string{"gone-2", "t-7"}) {
		t.Fatalf("dirs %v", got)
	}
	// Nothing is live: the open replica stays anyway.
	if err := h.RemoveStale(func([16]byte, int32) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if got := dirs(); !slices.Equal(got, []string{"t-7"}) {
		t.Fatalf("after RemoveStale: %v", got)
	}
	c.produce(testBatch("y", 1, -1, 0, 0), AcksAll)
}

// TestRaftProposeDuringJointChange: batches proposed while the voters
// change two at a time (a joint configuration, which raft leaves by
// appending an entry of its own when it applies the change) are
// acknowledged at the offsets they are stored at. The entry raft appends
// when leaving came after the proposer read the log's end, once; its
// batches were then told the offset of that entry.
func TestRaftProposeDuringJointChange(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4, 5}, ReplicaOptions{Mode: ModeRaft}, slowElections)
	warm := testBatch("warm", 1, -1, 0, 0)
	var mu sync.Mutex
	// Every acknowledged batch, the first included: checkAcked wants
	// them to cover the offsets from 0.
	acked := []ackedBatch{{c.produce(warm, AcksAll), append([]byte(nil), body(warm)...)}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				b := testBatch(fmt.Sprintf("w%d-%d", w, i), 3, -1, 0, 0)
				res := c.produce(b, AcksAll)
				mu.Lock()
				acked = append(acked, ackedBatch{res, append([]byte(nil), body(b)...)})
				mu.Unlock()
			}
		})
	}
	ln, _ := c.leader()
	others := []NodeID{4, 5}
	var olds []NodeID
	for _, v := range []NodeID{1, 2, 3} {
		if v != ln {
			olds = append(olds, v)
		}
	}
	// Swap the two voters that do not lead with the two learners, and
	// back, a few times: each swap is a joint change left automatically.
	for round := range 4 {
		voters, learners := append([]NodeID{ln}, others...), olds
		if round%2 == 1 {
			voters, learners = append([]NodeID{ln}, olds...), others
		}
		want := Members{Voters: slices.Sorted(slices.Values(voters)), Learners: slices.Sorted(slices.Values(learners))}
		checkFor(t, 10*time.Second, func() error {
			_, lr := c.leader()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			return lr.ChangeMembership(ctx, want)
		})
		c.members = want
	}
	close(stop)
	wg.Wait()
	slices.SortFunc(acked, func(a, b ackedBatch) int { return cmp.Compare(a.res.BaseOffset, b.res.BaseOffset) })
	c.converged(acked[len(acked)-1].res.LastOffset+1, 10*time.Second)
	c.checkAcked(acked)
	t.Logf("%d batches acknowledged during 4 joint changes", len(acked))
}

// TestRaftCrashInJointConfiguration: a voter is killed (-9) after it
// applied a joint configuration and before it applied the leaving of it.
// Its raft.conf holds the joint configuration, while the applied index it
// saved (a checkpoint, every minute) is below the entry that entered it, so
// at restart raft hands that entry out again. Applying it to a
// configuration that is already joint made raft panic ("config is already
// joint") at every restart. The voter must restart, leave the joint
// configuration with the group and serve the group's writes.
func TestRaftCrashInJointConfiguration(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	var acked []ackedBatch
	produceN := func(prefix string, n int) {
		for i := range n {
			b := c.idem(fmt.Sprint(prefix, i), 2)
			acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
		}
	}
	produceN("a", 10)
	ln, lr := c.leader()
	// f stays a voter and is the one killed; gone leaves; learner 4 is
	// promoted: two voters change, so raft goes through a joint
	// configuration.
	f := NodeID(1 + int(ln)%3)
	gone := NodeID(1 + int(f)%3)
	want := Members{Voters: slices.Sorted(slices.Values([]NodeID{ln, f, 4}))}

	// f gets every entry up to the one that leaves the joint
	// configuration, and is told the one that entered it is committed
	// (heartbeats carry the commit index up to what f holds), but never
	// gets the leaving: the appends carrying it are dropped. The old and
	// the new configuration each have a majority without f.
	var blocked atomic.Bool
	c.net.OnSend(func(from, to NodeID, e Envelope) bool {
		m := e.Msg
		if to != f || (m.GetType() != raftpb.MsgApp && m.GetType() != raftpb.MsgSnap) {
			return true
		}
		if m.GetType() == raftpb.MsgSnap && blocked.Load() {
			return false
		}
		for _, ent := range m.GetEntries() {
			if ent.GetType() != raftpb.EntryConfChangeV2 {
				continue
			}
			var cc raftpb.ConfChangeV2
			if err := proto.Unmarshal(ent.GetData(), &cc); err == nil && cc.LeaveJoint() {
				blocked.Store(true)
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := lr.ChangeMembership(ctx, want); err != nil {
		t.Fatalf("change to %+v: %v", want, err)
	}
	c.members = want
	fr := c.rep(f)
	checkFor(t, 10*time.Second, func() error {
		fr.st.mu.Lock()
		defer fr.st.mu.Unlock()
		if len(fr.st.cs.GetVotersOutgoing()) == 0 {
			return fmt.Errorf("node %d has not applied the joint configuration: %v", f, fr.st.cs)
		}
		return nil
	})
	c.crash(f)
	c.stop(gone)
	c.net.OnSend(nil)
	produceN("b", 5)
	c.start(f)
	produceN("c", 5)
	checkFor(t, 15*time.Second, func() error {
		r := c.rep(f)
		r.raftMu.Lock()
		failed := r.failed
		r.raftMu.Unlock()
		if failed != nil {
			return fmt.Errorf("node %d failed after its restart: %v", f, failed)
		}
		if got, settled := r.MembershipSettled(); !settled || !slices.Equal(got.Voters, want.Voters) || len(got.Learners) != 0 {
			return fmt.Errorf("node %d has members %+v (settled %v), want %+v", f, got, settled, want)
		}
		return nil
	})
	c.converged(acked[len(acked)-1].res.LastOffset+1, 15*time.Second)
	c.checkAcked(acked)
}

// TestRaftSameNameNewTopic: a topic deleted and created again under the
// same name has a new topic id but the same partition directories. The new
// partition's replica is not opened over the old one's files while the old
// replica is open (nor its partition.metadata rewritten), and it opens
// empty once the old one is removed. A directory the old topic left behind
// (closed, data kept) is removed, not served as the new topic's log.
func TestRaftSameNameNewTopic(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, nil, ReplicaOptions{Mode: ModeRaft})
	c.produce(testBatch("old", 1, -1, 0, 0), AcksAll)
	h := c.hosts[1]
	dir := filepath.Join(h.cfg.Dir, "t-7")
	oldID := c.key.TopicID
	newKey := Key{TopicID: [16]byte{7, 7}, Index: c.key.Index}
	members := Members{Voters: []NodeID{1}}
	if _, err := h.Open("t", newKey, members, c.opts); !errors.Is(err, ErrDirInUse) {
		t.Fatalf("opening the new topic's partition over the open old one: %v, want ErrDirInUse", err)
	}
	if id, err := readTopicID(dir); err != nil || id != oldID {
		t.Fatalf("the old replica's topic id is now %x (%v), want %x", id, err, oldID)
	}
	if err := h.Remove(c.key, true); err != nil {
		t.Fatal(err)
	}
	r, err := h.Open("t", newKey, members, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	if end := r.LogEndOffset(); end != 0 {
		t.Fatalf("the new topic's partition opened with log end %d, want 0", end)
	}
	p, err := r.Propose(testBatch("new", 1, -1, 0, 0), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// Closed with its data kept, then its topic deleted and created again
	// while the directory stayed (as after a failed removal).
	if err := h.Remove(newKey, false); err != nil {
		t.Fatal(err)
	}
	third := Key{TopicID: [16]byte{3, 3}, Index: c.key.Index}
	r, err = h.Open("t", third, members, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	if end := r.LogEndOffset(); end != 0 {
		t.Fatalf("a left-behind directory of a deleted topic was opened as the new topic's log (log end %d)", end)
	}
	if id, err := readTopicID(dir); err != nil || id != third.TopicID {
		t.Fatalf("topic id %x (%v), want %x", id, err, third.TopicID)
	}
}
