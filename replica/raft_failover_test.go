package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// startFollowing restarts node n as a learner of master from t, as a
// returning broker does once the metastore says another broker is the
// partition's master: Follow before anything else opens the replica.
func (c *testCluster) startFollowing(n, master NodeID, t Takeover) (*Replica, int64) {
	c.t.Helper()
	h := c.newHost(n)
	r, cut, err := h.Follow(c.topic, c.key, c.members, c.opts, master, t)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.hosts[n], c.reps[n] = h, r
	c.mu.Unlock()
	return r, cut
}

// TestRaftAsyncMaster: an async partition whose raft group is its master
// (node 1, the sole voter) and learners (2 and 3 write brokers, 4 a read
// broker).
//
//   - With every other node cut off, the master still answers acks=all on
//     its own durable write, commits it (the high watermark moves) and stays
//     leader past many election timeouts; the learners serve what they hold.
//   - The master dies holding records no write learner has, node 2
//     holding more than node 3; the read broker 4 has everything, its
//     commit index past what node 2 holds. Node 2, the most caught-up
//     write replica (DurableIndex), claims; it then receives the rest
//     before the master dies, and is promoted from its claim, cutting
//     what came after it: it leads a new term with everything up to the
//     claim committed and takes writes. Node 3 follows it,
//     cutting nothing. Node 4, not told yet, stays intact and online
//     (it refuses the new master's messages: in async mode only its
//     configuration's voter leads, and raft would answer the new
//     master's appends with its commit index, a match the master would
//     keep after the cut) and serves nothing new; following, it cuts the
//     records node 2 never had and counts them.
//   - The old master returns following node 2: it cuts exactly the records
//     node 2 never received, counts them (TruncatedRecords, and Follow's
//     answer), and every log ends byte-identical with the new writes.
func TestRaftAsyncMaster(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, []NodeID{2, 3, 4}, ReplicaOptions{Mode: ModeAsync})
	c.produce(testBatch("warm", 3, -1, 0, 0), AcksAll)
	c.converged(3, 10*time.Second)
	_, m := c.leader()
	if !m.IsLeader() || m != c.rep(1) {
		t.Fatal("node 1, the sole voter, does not lead")
	}

	// (a) Writable with every other node down.
	c.net.Partition(1)
	hw := m.HighWatermark()
	for i := range 5 {
		p, err := m.Propose(testBatch(fmt.Sprint("alone", i), 2, -1, 0, 0), AcksAll)
		if err != nil {
			t.Fatalf("the master cut off from everyone refused a write: %v", err)
		}
		if ok, err := answeredWithin(p, 5*time.Second); !ok || err != nil {
			t.Fatalf("acks=all on the cut-off master: answered %v, %v", ok, err)
		}
	}
	checkFor(t, 5*time.Second, func() error {
		if got := m.HighWatermark(); got != hw+10 {
			return fmt.Errorf("master high watermark %d, want %d: it does not commit on its own write", got, hw+10)
		}
		return nil
	})
	// Well past CheckQuorum's election timeout (15 ticks of 10ms).
	time.Sleep(time.Second)
	if !m.IsLeader() {
		t.Fatal("the cut-off master stepped down")
	}
	for _, n := range []NodeID{2, 3, 4} {
		if got := c.rep(n).HighWatermark(); got != hw {
			t.Fatalf("learner %d serves up to %d while cut off, it holds up to %d", n, got, hw)
		}
	}
	c.net.Heal()
	c.converged(hw+10, 10*time.Second)

	// (b) Node 2 (and 4) get 2 more batches than 3, the master 3 more
	// that only the read broker 4 gets, then dies.
	block := map[NodeID]bool{3: true}
	var blockMu = &c.mu
	c.net.OnSend(func(from, to NodeID, e Envelope) bool {
		blockMu.Lock()
		defer blockMu.Unlock()
		return !(from == 1 && block[to] && e.Msg.GetType() == raftpb.MsgApp)
	})
	base := m.HighWatermark()
	for i := range 2 {
		c.produce(testBatch(fmt.Sprint("on2", i), 4, -1, 0, 0), AcksAll)
	}
	checkFor(t, 5*time.Second, func() error {
		if i, _ := c.rep(1).DurableIndex(); func() uint64 { j, _ := c.rep(2).DurableIndex(); return j }() != i {
			return fmt.Errorf("node 2 has not caught up with the master")
		}
		return nil
	})
	blockMu.Lock()
	block[2] = true
	blockMu.Unlock()
	const lostRecords = 3 * 5
	for i := range 3 {
		c.produce(testBatch(fmt.Sprint("lost", i), 5, -1, 0, 0), AcksAll)
	}
	checkFor(t, 5*time.Second, func() error {
		if got := m.HighWatermark(); got != base+8+lostRecords {
			return fmt.Errorf("master high watermark %d, want %d", got, base+8+lostRecords)
		}
		return nil
	})
	checkFor(t, 5*time.Second, func() error {
		if got := c.rep(4).HighWatermark(); got != base+8+lostRecords {
			return fmt.Errorf("read broker high watermark %d, want %d", got, base+8+lostRecords)
		}
		return nil
	})

	// The master's lease lapses: the write learners' claims are compared
	// and node 2's wins. Before the master dies node 2 still receives the
	// lost batches: the promotion cuts them, since its claim was recorded.
	best, bestIdx := NodeID(-1), uint64(0)
	for _, n := range []NodeID{2, 3} { // the write learners
		if i, _ := c.rep(n).DurableIndex(); i > bestIdx {
			best, bestIdx = n, i
		}
	}
	if best != 2 {
		t.Fatalf("node %d is the most caught-up write replica, want 2", best)
	}
	tk := c.rep(2).Claim(m.Term())
	if tk.Index != bestIdx || tk.Offset != base+8 || tk.Term != m.Term() {
		t.Fatalf("claim %+v, want index %d offset %d term %d", tk, bestIdx, base+8, m.Term())
	}
	blockMu.Lock()
	block[2] = false
	blockMu.Unlock()
	checkFor(t, 5*time.Second, func() error {
		if got := c.rep(2).LogEndOffset(); got != base+8+lostRecords {
			return fmt.Errorf("node 2 log end %d, want %d", got, base+8+lostRecords)
		}
		return nil
	})
	c.stop(1)
	c.net.OnSend(nil)
	if err := c.hosts[2].Promote(c.key, tk); err != nil {
		t.Fatal(err)
	}
	if got := c.hosts[2].TruncatedRecords(); got != lostRecords {
		t.Fatalf("the promoted node 2 cut %d records received after its claim, want %d", got, lostRecords)
	}
	if err := c.hosts[2].Promote(c.key, tk); err != nil {
		t.Fatalf("promoting again: %v", err)
	}
	follow := func(n NodeID, want int64) {
		t.Helper()
		r, cut, err := c.hosts[n].Follow(c.topic, c.key, c.members, c.opts, 2, tk)
		if err != nil || cut != want {
			t.Fatalf("node %d following 2: cut %d (want %d), %v", n, cut, want, err)
		}
		c.mu.Lock()
		c.reps[n] = r
		c.mu.Unlock()
	}
	follow(3, 0)
	c.mu.Lock()
	c.reps[2], _ = c.hosts[2].Get(c.key)
	ahead := c.reps[4]
	delete(c.reps, 4) // not converged until it follows
	c.mu.Unlock()
	ln, nm := c.leader()
	if ln != 2 || nm.Term() <= tk.Term {
		t.Fatalf("leader %d in term %d after promoting 2 at term %d", ln, nm.Term(), tk.Term)
	}
	if got := nm.HighWatermark(); got != base+8 {
		t.Fatalf("new master's high watermark %d, want everything it holds (%d)", got, base+8)
	}
	if got := nm.Members(); !sameMembers(got.Voters, []NodeID{2}) || !sameMembers(got.Learners, []NodeID{1, 3, 4}) {
		t.Fatalf("new master's members %+v", got)
	}
	after := c.produce(testBatch("new", 6, -1, 0, 0), AcksAll)
	if after.BaseOffset != base+8 {
		t.Fatalf("new master wrote at %d, want %d", after.BaseOffset, base+8)
	}
	// Its log passes node 4's (which ends at index tk.Index+3), so that an
	// acknowledgement of node 4's commit index would not be refused as
	// past its log.
	for i := range 3 {
		after = c.produce(testBatch(fmt.Sprint("more", i), 1, -1, 0, 0), AcksAll)
	}
	c.converged(after.LastOffset+1, 10*time.Second) // 2, 3
	time.Sleep(300 * time.Millisecond)
	if err := ahead.Failed(); err != nil || ahead.HighWatermark() != base+8+lostRecords || ahead.LogEndOffset() != base+8+lostRecords {
		t.Fatalf("read broker before following: failed %v, high watermark %d, log end %d, want both %d", err, ahead.HighWatermark(), ahead.LogEndOffset(), base+8+lostRecords)
	}
	// Its log holds, committed, what the new master never received: it
	// refused the new master's messages, which raft would have answered
	// with an acknowledgement of its commit index, a match the master
	// keeps after the cut below (it would never send node 4 its entries).
	nm.raftMu.Lock()
	pr := nm.rn.Status().Progress[raftID(4)]
	nm.raftMu.Unlock()
	if pr.Match > tk.Index {
		t.Fatalf("the new master took node 4 to hold index %d before it followed, past the takeover at %d", pr.Match, tk.Index)
	}
	follow(4, lostRecords)
	c.converged(after.LastOffset+1, 10*time.Second) // 2, 3, 4

	// The old master returns.
	old, cut := c.startFollowing(1, 2, tk)
	if cut != lostRecords || c.hosts[1].TruncatedRecords() != lostRecords {
		t.Fatalf("old master cut %d records (counted %d), want %d", cut, c.hosts[1].TruncatedRecords(), lostRecords)
	}
	for n, want := range map[NodeID]int64{2: lostRecords, 3: 0, 4: lostRecords} {
		if got := c.hosts[n].TruncatedRecords(); got != want {
			t.Fatalf("node %d counted %d truncated records, want %d", n, got, want)
		}
	}
	c.converged(after.LastOffset+1, 10*time.Second)
	if old.IsLeader() || !c.rep(2).IsLeader() {
		t.Fatal("the old master leads again")
	}
	if got := old.Members(); !sameMembers(got.Voters, []NodeID{2}) {
		t.Fatalf("old master's members %+v", got)
	}
	// Following again changes nothing.
	if _, cut, err := c.hosts[1].Follow(c.topic, c.key, c.members, c.opts, 2, tk); err != nil || cut != 0 {
		t.Fatalf("following again: cut %d, %v", cut, err)
	}
	c.mu.Lock()
	c.reps[1], _ = c.hosts[1].Get(c.key)
	c.mu.Unlock()
	final := c.produce(testBatch("final", 1, -1, 0, 0), AcksAll)
	c.converged(final.LastOffset+1, 10*time.Second)
}

// TestRaftAsyncJoinAfterPromotion: a broker that joins an async group
// after a promotion (a read broker registered later) starts from the new
// master's configuration (Host.FollowJoining): the log's configuration
// changes up to the takeover name the old master, whom the joiner would
// otherwise take for the only one who may lead. It receives the whole
// log from the new master, byte for byte, and the old master, returning
// with a log the joiner never saw, cannot lead it.
func TestRaftAsyncJoinAfterPromotion(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, []NodeID{2, 3}, ReplicaOptions{Mode: ModeAsync})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A configuration change in the log before the takeover: 3 leaves
	// and comes back, both by the old master.
	c.produce(testBatch("warm", 3, -1, 0, 0), AcksAll)
	for _, m := range []Members{{Voters: []NodeID{1}, Learners: []NodeID{2}}, {Voters: []NodeID{1}, Learners: []NodeID{2, 3}}} {
		if err := c.rep(1).ChangeMembership(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	c.produce(testBatch("before", 2, -1, 0, 0), AcksAll)
	c.converged(5, 10*time.Second)
	tk := c.failOver(1, 2)
	c.follow(3, 2, tk)
	if ln, _ := c.leader(); ln != 2 {
		t.Fatalf("leader %d after promoting 2", ln)
	}
	c.mu.Lock()
	c.joining = map[NodeID]bool{5: true}
	c.mu.Unlock()
	if err := c.rep(2).ChangeMembership(ctx, Members{Voters: []NodeID{2}, Learners: []NodeID{1, 3, 5}}); err != nil {
		t.Fatal(err)
	}
	after := c.produce(testBatch("after", 4, -1, 0, 0), AcksAll)
	r5 := c.followJoining(5, 2, tk)
	c.converged(after.LastOffset+1, 10*time.Second)
	c.sameBytes()
	if got := r5.Members(); !sameMembers(got.Voters, []NodeID{2}) || !sameMembers(got.Learners, []NodeID{1, 3, 5}) {
		t.Fatalf("the joiner's members %+v, want the new master's", got)
	}
	// The old master comes back with its old configuration, as a broker
	// that missed the promotion would: the followers refuse to be led by
	// it, and it cannot lead a group whose voter it no longer is (the
	// joiner is not in its configuration: it hears nothing from it).
	c.start(1)
	time.Sleep(500 * time.Millisecond)
	if ln, _ := c.leader(1); ln != 2 {
		t.Fatalf("leader %d, want 2", ln)
	}
	if got := c.hosts[3].Refused()[RefusedNotLeader.String()]; got == 0 {
		t.Fatal("node 3 refused no leader message from the returning old master")
	}
	final := c.produce(testBatch("final", 1, -1, 0, 0), AcksAll)
	c.mu.Lock()
	delete(c.reps, 1)
	c.mu.Unlock()
	c.converged(final.LastOffset+1, 10*time.Second)
}

// TestRaftAsyncModeChange: the runtime transitions between raft's
// configuration and the async master's. EnterAsync on a raft leader of 3
// write brokers and a read broker demotes the other voters: every replica
// applies the master-only configuration, and the master, cut off from
// everyone, commits acks=all writes on its own and no one else campaigns.
// LeaveAsync with one write broker cut off promotes both back once the
// master and the other one (a majority) are caught up; from then on a
// write needs a majority again: with both others cut off it is not
// answered.
func TestRaftAsyncModeChange(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	c.produce(testBatch("warm", 2, -1, 0, 0), AcksAll)
	c.converged(2, 10*time.Second)
	ln, lr := c.leader()
	c.opts.Mode = ModeAsync
	for _, r := range c.running() {
		if err := r.SetOptions(c.opts); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lr.EnterAsync(ctx); err != nil {
		t.Fatal(err)
	}
	var others []NodeID
	for _, n := range []NodeID{1, 2, 3, 4} {
		if n != ln {
			others = append(others, n)
		}
	}
	checkFor(t, 10*time.Second, func() error {
		for n, r := range c.running() {
			if m := r.Members(); !sameMembers(m.Voters, []NodeID{ln}) || !sameMembers(m.Learners, others) {
				return fmt.Errorf("node %d applied %+v", n, m)
			}
		}
		return nil
	})

	c.net.Partition(ln)
	hw := lr.HighWatermark()
	p, err := lr.Propose(testBatch("alone", 3, -1, 0, 0), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := answeredWithin(p, 5*time.Second); !ok || err != nil {
		t.Fatalf("acks=all on the cut-off async master: %v %v", ok, err)
	}
	checkFor(t, 5*time.Second, func() error {
		if got := lr.HighWatermark(); got != hw+3 {
			return fmt.Errorf("high watermark %d, want %d", got, hw+3)
		}
		return nil
	})
	time.Sleep(time.Second) // several election timeouts
	for n, r := range c.running() {
		if r.IsLeader() != (n == ln) {
			t.Fatalf("node %d leader %v while the master is cut off", n, r.IsLeader())
		}
	}
	c.net.Heal()
	c.converged(hw+3, 10*time.Second)

	// Back to raft with one write broker cut off.
	c.opts.Mode = ModeRaft
	for _, r := range c.running() {
		if err := r.SetOptions(c.opts); err != nil {
			t.Fatal(err)
		}
	}
	cutOff := others[0]
	c.net.Partition(cutOff)
	checkFor(t, 10*time.Second, func() error {
		err := lr.LeaveAsync(ctx, []NodeID{1, 2, 3})
		if errors.Is(err, ErrNotCaughtUp) {
			return err
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	})
	if m := lr.Members(); !sameMembers(m.Voters, []NodeID{1, 2, 3}) || !sameMembers(m.Learners, []NodeID{4}) {
		t.Fatalf("members after LeaveAsync %+v", m)
	}
	c.produce(testBatch("majority", 1, -1, 0, 0), AcksAll)
	c.net.Heal()
	c.net.Partition(ln)
	hw = lr.HighWatermark()
	p, err = lr.Propose(testBatch("minority", 1, -1, 0, 0), AcksAll)
	if err == nil {
		if ok, err := answeredWithin(p, time.Second); ok && err == nil {
			t.Fatal("a write was answered by a raft leader cut off from both other voters")
		}
	}
	if got := lr.HighWatermark(); got != hw {
		t.Fatalf("high watermark moved from %d to %d with the leader cut off from both other voters", hw, got)
	}
	c.net.Heal()
	final := c.produce(testBatch("final", 1, -1, 0, 0), AcksAll)
	c.converged(final.LastOffset+1, 10*time.Second)
}

// newHost starts node n's host with nothing open.
func (c *testCluster) newHost(n NodeID) *Host {
	c.t.Helper()
	cfg := c.cfg
	cfg.Node = n
	cfg.Dir = filepath.Join(c.root, fmt.Sprint("node", n))
	cfg.Transport = c.net.Transport(n)
	cfg.Logger = cfg.Logger.With().Int32("node", int32(n)).Logger()
	h, err := NewHost(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return h
}

// failOver stops master from and promotes to in its place, from the
// takeover to claims at from's term, which it returns.
func (c *testCluster) failOver(from, to NodeID) Takeover {
	c.t.Helper()
	tk := c.rep(to).Claim(c.rep(from).Term())
	c.stop(from)
	c.promote(to, tk)
	return tk
}

// followJoining starts node n on a new host as a broker joining the
// partition after a promotion does (FollowJoining master from tk), and
// adds it to the cluster; Follow must cut nothing.
func (c *testCluster) followJoining(n, master NodeID, tk Takeover) *Replica {
	c.t.Helper()
	h := c.newHost(n)
	r, cut, err := h.FollowJoining(c.topic, c.key, c.members, c.opts, master, tk)
	if err != nil || cut != 0 {
		c.t.Fatalf("node %d following %d: cut %d, %v", n, master, cut, err)
	}
	c.mu.Lock()
	c.hosts[n], c.reps[n] = h, r
	c.mu.Unlock()
	return r
}

// TestRaftAsyncFollowCrash: a returning old master whose Follow stops
// right after its log was cut (as a crash there would) is left closed, not
// opened as the sole voter it was; the next Follow opens it and finishes
// (the commit index was brought back before the cut, so its files open),
// and the cut is counted once.
func TestRaftAsyncFollowCrash(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, []NodeID{2}, ReplicaOptions{Mode: ModeAsync})
	c.produce(testBatch("warm", 3, -1, 0, 0), AcksAll)
	c.converged(3, 10*time.Second)
	m := c.rep(1)
	c.net.Partition(1)
	for i := range 2 {
		p, err := m.Propose(testBatch(fmt.Sprint("lost", i), 5, -1, 0, 0), AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := answeredWithin(p, 5*time.Second); !ok || err != nil {
			t.Fatalf("acks=all on the cut-off master: %v %v", ok, err)
		}
	}
	checkFor(t, 5*time.Second, func() error {
		if got := m.HighWatermark(); got != 13 {
			return fmt.Errorf("master high watermark %d, want 13", got)
		}
		return nil
	})
	tk := c.rep(2).Claim(m.Term())
	c.stop(1)
	c.net.Heal()
	c.promote(2, tk)

	h := c.newHost(1)
	c.mu.Lock()
	c.hosts[1] = h // closed at cleanup
	c.mu.Unlock()
	crash := errors.New("crash after the cut")
	failoverHook = func(step string) error {
		if step == "follow-cut" {
			return crash
		}
		return nil
	}
	_, _, err := h.Follow(c.topic, c.key, c.members, c.opts, 2, tk)
	failoverHook = nil
	if !errors.Is(err, crash) {
		t.Fatalf("Follow with a crash after the cut: %v", err)
	}
	if _, open := h.Get(c.key); open {
		t.Fatal("a replica whose Follow stopped part-way was opened")
	}
	r, cut, err := h.Follow(c.topic, c.key, c.members, c.opts, 2, tk)
	if err != nil {
		t.Fatalf("Follow after the crash: %v", err)
	}
	if cut != 0 || h.TruncatedRecords() != 10 {
		t.Fatalf("cut %d again, %d counted in all, want 0 and 10", cut, h.TruncatedRecords())
	}
	c.mu.Lock()
	c.reps[1] = r
	c.mu.Unlock()
	res := c.produce(testBatch("new", 2, -1, 0, 0), AcksAll)
	if res.BaseOffset != 3 {
		t.Fatalf("new master wrote at %d, want 3", res.BaseOffset)
	}
	c.converged(5, 10*time.Second)
	if r.IsLeader() {
		t.Fatal("the old master leads")
	}
}

// TestRaftAsyncFailoverLaggingLearner: a read broker cut off while a raft
// group moves to the async configuration (EnterAsync's configuration
// changes are entries it lacks) follows a master promoted after the old
// master's death: it then receives those older configuration changes from
// the new master, and they must not be applied to the configuration the
// failover forced (applied, the first would demote the new master, the
// sole voter: raft panics and the replica goes offline). It catches up and
// keeps the forced configuration.
func TestRaftAsyncFailoverLaggingLearner(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	c.produce(testBatch("warm", 2, -1, 0, 0), AcksAll)
	c.converged(2, 10*time.Second)
	ln, lr := c.leader()
	c.net.Partition(4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lr.EnterAsync(ctx); err != nil {
		t.Fatal(err)
	}
	res := c.produce(testBatch("async", 3, -1, 0, 0), AcksAll)
	var w NodeID
	for _, n := range []NodeID{1, 2, 3} {
		if n != ln {
			w = n
			break
		}
	}
	checkFor(t, 5*time.Second, func() error {
		if got := c.rep(w).HighWatermark(); got != res.LastOffset+1 {
			return fmt.Errorf("node %d high watermark %d", w, got)
		}
		return nil
	})
	tk := c.rep(w).Claim(lr.Term())
	c.stop(ln)
	if err := c.hosts[w].Promote(c.key, tk); err != nil {
		t.Fatal(err)
	}
	c.net.Heal()
	for n := range c.running() {
		if n == w {
			continue
		}
		r, _, err := c.hosts[n].Follow(c.topic, c.key, c.members, c.opts, w, tk)
		if err != nil {
			t.Fatalf("node %d following %d: %v", n, w, err)
		}
		c.mu.Lock()
		c.reps[n] = r
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.reps[w], _ = c.hosts[w].Get(c.key)
	c.mu.Unlock()
	final := c.produce(testBatch("final", 1, -1, 0, 0), AcksAll)
	c.converged(final.LastOffset+1, 10*time.Second)
	for n, r := range c.running() {
		if err := r.Failed(); err != nil {
			t.Fatalf("node %d failed: %v", n, err)
		}
		if m := r.Members(); !sameMembers(m.Voters, []NodeID{w}) {
			t.Fatalf("node %d members %+v, want %d the sole voter", n, m, w)
		}
	}
}

// TestRaftAsyncStaleTakeover: the metastore keeps a promotion's takeover
// point after the master changes by other means (a reassignment moves the
// group through raft's configuration), so a replica may be asked to
// promote itself or to follow from a takeover it moved past. Node 2 is
// promoted from node 1 and goes on writing; the group then leaves the
// async configuration for voters 2 and 3 (as a move does) and takes more
// writes. Asked again to promote from the old takeover, node 2 refuses
// (it is in a later term): before, it cut every record written since.
// Asked to follow the departed master from it, node 3, whose configuration
// comes from a change after the takeover, keeps its configuration and its
// log. Every acknowledged record stays on both.
func TestRaftAsyncStaleTakeover(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, []NodeID{2, 3}, ReplicaOptions{Mode: ModeAsync})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.produce(testBatch("before", 3, -1, 0, 0), AcksAll)
	c.converged(3, 10*time.Second)
	tk := c.failOver(1, 2)
	c.mu.Lock()
	delete(c.reps, 1)
	c.mu.Unlock()
	c.follow(3, 2, tk)
	if ln, _ := c.leader(); ln != 2 {
		t.Fatalf("leader %d after promoting 2", ln)
	}
	c.produce(testBatch("promoted", 4, -1, 0, 0), AcksAll)
	c.converged(7, 10*time.Second)
	if err := c.rep(2).ChangeMembership(ctx, Members{Voters: []NodeID{2, 3}}); err != nil {
		t.Fatal(err)
	}
	last := c.produce(testBatch("moved", 5, -1, 0, 0), AcksAll)
	c.converged(last.LastOffset+1, 10*time.Second)

	if err := c.hosts[2].Promote(c.key, tk); !errors.Is(err, ErrNotPromotable) {
		t.Fatalf("promoted again from a takeover it moved past: %v", err)
	}
	r3, cut, err := c.hosts[3].Follow(c.topic, c.key, c.members, c.opts, 1, tk)
	if err != nil || cut != 0 {
		t.Fatalf("following the departed master from the old takeover: cut %d, %v", cut, err)
	}
	c.mu.Lock()
	c.reps[3] = r3
	c.mu.Unlock()
	if got := r3.Members(); !sameMembers(got.Voters, []NodeID{2, 3}) {
		t.Fatalf("node 3's configuration %+v, want voters 2 and 3", got)
	}
	if got := c.hosts[2].TruncatedRecords() + c.hosts[3].TruncatedRecords(); got != 0 {
		t.Fatalf("%d records cut", got)
	}
	final := c.produce(testBatch("final", 1, -1, 0, 0), AcksAll)
	c.converged(final.LastOffset+1, 10*time.Second)
	c.sameBytes()
}

// TestRaftAsyncMissedMasterMove: a read broker (4) that is down while a
// reassignment moves the async master, after a promotion, from the promoted
// master (2) to another write broker (3), and is restarted as a broker
// opens such a partition (FollowJoining the recorded master from the
// recorded takeover), catches up with the new master. Its configuration
// comes from a change master 2 made after the takeover, so following
// leaves it as it is, naming 2 the voter; before, it refused every message
// from 3 (only its configuration's voter led it), the only one that could
// send it the changes that make 3 the master, and never followed the
// partition again. The metastore records 3 as the master and 2's takeover
// (AsyncMaster): a replica past that takeover takes the recorded master as
// its leader.
func TestRaftAsyncMissedMasterMove(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, []NodeID{2, 3, 4}, ReplicaOptions{Mode: ModeAsync})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c.produce(testBatch("warm", 3, -1, 0, 0), AcksAll)
	c.converged(3, 10*time.Second)
	tk := c.failOver(1, 2)
	c.follow(3, 2, tk)
	c.follow(4, 2, tk)
	c.mu.Lock()
	c.master, c.takeover = 2, &tk
	c.mu.Unlock()
	// A configuration change by the promoted master: every replica's
	// configuration now comes from after the takeover.
	if err := c.rep(2).ChangeMembership(ctx, Members{Voters: []NodeID{2}, Learners: []NodeID{3, 4}}); err != nil {
		t.Fatal(err)
	}
	c.produce(testBatch("promoted", 2, -1, 0, 0), AcksAll)
	c.converged(5, 10*time.Second)

	// Node 4 goes down; the master moves from 2 to 3 through raft's
	// configuration, as a reassignment does, and 3 records itself master.
	c.stop(4)
	checkFor(t, 10*time.Second, func() error { return c.rep(2).LeaveAsync(ctx, []NodeID{2, 3}) })
	if err := c.rep(2).TransferLeadership(3); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, func() error {
		if !c.rep(3).IsLeader() {
			return errors.New("3 does not lead yet")
		}
		return nil
	})
	if err := c.rep(3).EnterAsync(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.master = 3
	c.mu.Unlock()
	c.produce(testBatch("moved", 4, -1, 0, 0), AcksAll)

	r4 := c.followJoining(4, 3, tk)
	final := c.produce(testBatch("final", 1, -1, 0, 0), AcksAll)
	c.converged(final.LastOffset+1, 10*time.Second)
	if got := r4.Members(); !sameMembers(got.Voters, []NodeID{3}) {
		t.Fatalf("node 4's configuration %+v, want 3 the sole voter", got)
	}
	if got := r4.host.Refused()[RefusedNotLeader.String()]; got != 0 {
		t.Fatalf("node 4 refused %d leader messages", got)
	}
}

// TestRaftAsyncDivergedAppendRefused: a replica whose committed log goes
// past a promotion's takeover point (node 3 got records from the old master
// that the promoted node 2 never received) and that takes the new master's
// messages before it follows it (here because the master is recorded
// without the promotion, which only a bug would do: mayLeadLocked refuses
// them otherwise) refuses the appends that disagree with what it
// committed (RefusedDiverged), instead of letting raft acknowledge its
// commit index: the new master would keep that match after the replica cut
// its log, ignore its rejections as stale and never send it the log again,
// with nothing said above debug level. Once it follows, it converges.
func TestRaftAsyncDivergedAppendRefused(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, []NodeID{2, 3}, ReplicaOptions{Mode: ModeAsync})
	c.produce(testBatch("warm", 3, -1, 0, 0), AcksAll)
	c.converged(3, 10*time.Second)
	tk := c.rep(2).Claim(c.rep(1).Term())
	c.net.OnSend(func(from, to NodeID, e Envelope) bool { return !(from == 1 && to == 2) })
	var lost ProduceResult
	for i := range 3 {
		lost = c.produce(testBatch(fmt.Sprint("lost", i), 2, -1, 0, 0), AcksAll)
	}
	checkFor(t, 5*time.Second, func() error {
		if got := c.rep(3).HighWatermark(); got != lost.LastOffset+1 {
			return fmt.Errorf("node 3 high watermark %d", got)
		}
		return nil
	})
	c.stop(1)
	c.mu.Lock()
	delete(c.reps, 1)
	c.mu.Unlock()
	// The new master's log passes node 3's before node 3 hears from it.
	c.net.OnSend(func(from, to NodeID, e Envelope) bool { return !(from == 2 && to == 3) })
	c.promote(2, tk)
	c.mu.Lock()
	ahead := c.reps[3]
	delete(c.reps, 3)
	c.master = 2 // recorded without its takeover: node 3 takes 2 as its leader
	c.mu.Unlock()
	for i := range 5 {
		c.produce(testBatch(fmt.Sprint("new", i), 1, -1, 0, 0), AcksAll)
	}
	c.net.OnSend(nil)
	checkFor(t, 5*time.Second, func() error {
		if got := c.hosts[3].Refused()[RefusedDiverged.String()]; got == 0 {
			return errors.New("node 3 refused no diverged append yet")
		}
		return nil
	})
	if got := ahead.HighWatermark(); got != lost.LastOffset+1 {
		t.Fatalf("node 3 high watermark %d before following, want %d", got, lost.LastOffset+1)
	}
	c.mu.Lock()
	c.reps[3] = ahead
	c.mu.Unlock()
	if cut := c.follow(3, 2, tk); cut != 6 {
		t.Fatalf("node 3 cut %d records, want 6", cut)
	}
	final := c.produce(testBatch("final", 1, -1, 0, 0), AcksAll)
	c.converged(final.LastOffset+1, 10*time.Second)
}
