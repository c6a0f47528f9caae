package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-broker/sluice/partition"
)

// answeredWithin reports whether p is answered within d, and its error.
func answeredWithin(p partition.Proposal, d time.Duration) (bool, error) {
	select {
	case <-p.Done():
		_, err := p.Wait(context.Background())
		return true, err
	case <-time.After(d):
		return false, nil
	}
}

// TestRaftModes: when acks=all is answered in each replication mode. The
// followers' append acknowledgements (MsgAppResp) to the leader are
// withheld by an OnSend hook; heartbeats still flow, so the leader keeps
// its term.
func TestRaftModes(t *testing.T) {
	// No semi-sync fallback here (TestRaftSemiSyncFallback has them).
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft, SemiSyncTimeout: time.Hour}, slowElections)
	ln, lr := c.leader()
	c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
	block := map[NodeID]bool{}
	setBlocked := func(ns ...NodeID) {
		c.net.mu.Lock()
		block = map[NodeID]bool{}
		for _, n := range ns {
			block[n] = true
		}
		c.net.mu.Unlock()
	}
	c.net.OnSend(func(from, to NodeID, e Envelope) bool {
		// Called with c.net.mu held.
		return !(to == ln && block[from] && e.Msg.GetType() == raftpb.MsgAppResp)
	})
	followers := []NodeID{}
	for _, n := range []NodeID{1, 2, 3} {
		if n != ln {
			followers = append(followers, n)
		}
	}
	propose := func(acks Acks) partition.Proposal {
		t.Helper()
		p, err := lr.Propose(testBatch("m", 1, -1, 0, 0), acks)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	setMode := func(m Mode) {
		o := *lr.opts.Load()
		o.Mode = m
		if err := lr.SetOptions(o); err != nil {
			t.Fatal(err)
		}
	}
	const wait = 300 * time.Millisecond

	t.Run("raft", func(t *testing.T) {
		setMode(ModeRaft)
		setBlocked(followers[0], followers[1], 4)
		all, one := propose(AcksAll), propose(AcksLeader)
		if ok, err := answeredWithin(one, wait); !ok || err != nil {
			t.Fatalf("acks=1 not answered after the leader's append: %v %v", ok, err)
		}
		if ok, err := answeredWithin(all, wait); ok {
			t.Fatalf("acks=all answered without a majority: %v", err)
		}
		setBlocked(followers[1], 4) // one voter acks: leader + one = majority
		if ok, err := answeredWithin(all, 5*time.Second); !ok || err != nil {
			t.Fatalf("acks=all not answered at commit: %v %v", ok, err)
		}
	})
	t.Run("raft-learner-does-not-count", func(t *testing.T) {
		setMode(ModeRaft)
		setBlocked(followers[0], followers[1])
		all := propose(AcksAll)
		if ok, err := answeredWithin(all, wait); ok {
			t.Fatalf("acks=all answered on a learner's ack: %v", err)
		}
		setBlocked()
		if ok, err := answeredWithin(all, 5*time.Second); !ok || err != nil {
			t.Fatalf("acks=all: %v %v", ok, err)
		}
	})
	t.Run("semi-sync", func(t *testing.T) {
		setMode(ModeSemiSync)
		setBlocked(followers[0], followers[1], 4)
		all := propose(AcksAll)
		if ok, err := answeredWithin(all, wait); ok {
			t.Fatalf("semi-sync acks=all answered with no replica's ack: %v", err)
		}
		// The learner (a read broker) acknowledges: it does not count.
		setBlocked(followers[0], followers[1])
		if ok, err := answeredWithin(all, wait); ok {
			t.Fatalf("semi-sync acks=all answered on a learner's ack: %v", err)
		}
		// One voter acknowledges.
		setBlocked(followers[1])
		if ok, err := answeredWithin(all, 5*time.Second); !ok || err != nil {
			t.Fatalf("semi-sync acks=all after one voter's ack: %v %v", ok, err)
		}
		if lr.SemiSyncFallback() || lr.host.SemiSyncFallbacks() != 0 {
			t.Fatal("semi-sync fell back with an hour's timeout")
		}
		setBlocked()
	})
	t.Run("async-before-the-master-configuration", func(t *testing.T) {
		// Async mode, but the group still has three voters (the leader
		// has not made itself sole voter yet): the leader's write alone
		// is not a commit, and another voter's election would cut it,
		// so acks=all waits for the commit as in raft mode. On the sole
		// voter it is answered on the write (TestRaftAsyncMaster).
		setMode(ModeAsync)
		setBlocked(followers[0], followers[1], 4)
		all := propose(AcksAll)
		if ok, err := answeredWithin(all, wait); ok {
			t.Fatalf("async acks=all answered on the write of a leader with other voters: %v", err)
		}
		setBlocked(followers[1], 4)
		if ok, err := answeredWithin(all, 5*time.Second); !ok || err != nil {
			t.Fatalf("async acks=all with three voters not answered at commit: %v %v", ok, err)
		}
		setBlocked()
	})
	setMode(ModeRaft)
	c.net.OnSend(nil)
	c.converged(lr.LogEndOffset(), 10*time.Second)
}

// TestRaftMinInsyncReplicas: acks=all in raft mode is refused with
// ErrNotEnoughReplicas while fewer voters than min.insync.replicas are in
// sync; acks=1 is not affected.
func TestRaftMinInsyncReplicas(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft, MinInsyncReplicas: 3}, slowElections)
	c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
	ln, lr := c.leader()
	f := NodeID(1 + int(ln)%3)
	c.net.Cut(ln, f)
	checkFor(t, 5*time.Second, func() error {
		if n := lr.InSyncVoters(); n != 2 {
			return errors.New("follower still counted in sync")
		}
		return nil
	})
	p, err := lr.Propose(testBatch("x", 1, -1, 0, 0), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := answeredWithin(p, 5*time.Second); !ok || !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with 2 of 3 in sync: %v %v", ok, err)
	}
	p, _ = lr.Propose(testBatch("y", 1, -1, 0, 0), AcksLeader)
	if ok, err := answeredWithin(p, 5*time.Second); !ok || err != nil {
		t.Fatalf("acks=1 with 2 of 3 in sync: %v %v", ok, err)
	}
	c.net.Heal()
	checkFor(t, 5*time.Second, func() error {
		if n := lr.InSyncVoters(); n != 3 {
			return errors.New("follower not back in sync")
		}
		return nil
	})
	c.produce(testBatch("z", 1, -1, 0, 0), AcksAll)
}

// With no other replica, semi-sync acks=all is answered after the leader's
// durable write.
func TestRaftSemiSyncSingleReplica(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, nil, ReplicaOptions{Mode: ModeSemiSync})
	c.produce(testBatch("only", 1, -1, 0, 0), AcksAll)
}

// TestRaftInSyncReplicas: the leader's ISR holds the voters and learners
// that are caught up; a cut-off follower (voter or learner) leaves it
// after MaxFollowerLag and returns once healed, and OnISRChange reports
// each change.
func TestRaftInSyncReplicas(t *testing.T) {
	var mu sync.Mutex
	var reported [][]NodeID
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft}, slowElections, func(cfg *HostConfig) {
		cfg.OnISRChange = func(_ Key, _ uint64, isr []NodeID) {
			mu.Lock()
			reported = append(reported, isr)
			mu.Unlock()
		}
	})
	c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
	ln, lr := c.leader()
	want := func(n int, absent NodeID) func() error {
		return func() error {
			isr := lr.InSyncReplicas()
			if len(isr) != n || isr[0] != ln || slices.Contains(isr, absent) {
				return fmt.Errorf("ISR %v, want %d replicas led by %d without %d", isr, n, ln, absent)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reported) == 0 || !sameMembers(reported[len(reported)-1], isr) {
				return fmt.Errorf("reported %v, ISR %v", reported, isr)
			}
			return nil
		}
	}
	checkFor(t, 5*time.Second, want(4, 0))
	// Followers that keep up with a stream of writes stay in sync: the
	// leader reports no change while they trail by the entries in flight.
	mu.Lock()
	before := len(reported)
	mu.Unlock()
	for i := 0; i < 200; i++ {
		if _, err := lr.Propose(testBatch(fmt.Sprint("stream", i), 1, -1, 0, 0), AcksLeader); err != nil {
			t.Fatal(err)
		}
	}
	c.produce(testBatch("end", 1, -1, 0, 0), AcksAll)
	c.converged(lr.HighWatermark(), 10*time.Second)
	mu.Lock()
	if len(reported) != before {
		t.Fatalf("ISR changed under a stream of writes: %v", reported[before:])
	}
	mu.Unlock()
	f := NodeID(1 + int(ln)%3)
	for _, out := range []NodeID{f, 4} {
		c.net.Cut(ln, out)
		checkFor(t, 5*time.Second, want(3, out))
		if out == f && lr.InSyncVoters() != 2 {
			t.Fatalf("in-sync voters %d with voter %d cut off", lr.InSyncVoters(), f)
		}
		c.produce(testBatch("more", 1, -1, 0, 0), AcksAll)
		c.net.Heal()
		checkFor(t, 5*time.Second, want(4, 0))
	}
	// A follower that answers heartbeats but receives no entries falls
	// behind while writes go on: heard from, yet out of the ISR.
	var starve atomic.Bool
	starve.Store(true)
	c.net.OnSend(func(from, to NodeID, e Envelope) bool {
		return !(starve.Load() && from == ln && to == f && e.Msg.GetType() == raftpb.MsgApp)
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.produce(testBatch("behind", 1, -1, 0, 0), AcksAll)
		if err := want(3, f)(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("a starved follower stays in sync: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	starve.Store(false)
	checkFor(t, 5*time.Second, want(4, 0))
	if ids := c.rep(f).InSyncReplicas(); ids != nil {
		t.Fatalf("a follower reports an ISR: %v", ids)
	}
}

// TestRaftMemberLags: the leader reports each member's lag in entries,
// offsets and time: none once caught up; for a learner cut off while 5
// batches of 10 records are committed, 5 entries, 50 offsets and a time
// that grows; none again once it is healed.
func TestRaftMemberLags(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft}, slowElections)
	c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
	ln, lr := c.leader()
	caughtUp := func() error {
		lags := lr.MemberLags()
		if len(lags) != 3 {
			return fmt.Errorf("lags %v", lags)
		}
		for id, l := range lags {
			if l != (MemberLag{}) {
				return fmt.Errorf("member %d lags %+v", id, l)
			}
		}
		return nil
	}
	checkFor(t, 5*time.Second, caughtUp)
	if _, ok := lr.MemberLags()[ln]; ok {
		t.Fatal("the leader reports a lag of its own")
	}
	c.net.Cut(ln, 4)
	for i := 0; i < 5; i++ {
		c.produce(testBatch(fmt.Sprint("cut", i), 10, -1, 0, 0), AcksAll)
	}
	var first MemberLag
	checkFor(t, 5*time.Second, func() error {
		l := lr.MemberLags()[4]
		if l.Entries != 5 || l.Offsets != 50 || l.Time <= 0 {
			return fmt.Errorf("cut-off learner lags %+v, want 5 entries, 50 offsets, some time", l)
		}
		first = l
		return nil
	})
	time.Sleep(100 * time.Millisecond)
	if l := lr.MemberLags()[4]; l.Time <= first.Time {
		t.Fatalf("lag time did not grow: %v then %v", first.Time, l.Time)
	}
	if f := lr.FollowerLag()[4]; f != 5 {
		t.Fatalf("FollowerLag %d, MemberLags 5 entries", f)
	}
	if rs := c.rep(NodeID(1 + int(ln)%3)).MemberLags(); rs != nil {
		t.Fatalf("a follower reports lags: %v", rs)
	}
	c.net.Heal()
	checkFor(t, 5*time.Second, caughtUp)
}

// TestRaftSemiSyncFallback: semi-sync with MySQL's semantics. With the
// voters' acknowledgements withheld, acks=all is answered only once
// semi.sync.timeout.ms has passed (not before, and not never); the
// partition has then fallen back (counted, SemiSyncFallback), so the next
// write is answered on the leader's write alone; once the replicas catch
// up it is semi-synchronous again, and a write without acknowledgements
// waits for the timeout again.
func TestRaftSemiSyncFallback(t *testing.T) {
	const timeout = 700 * time.Millisecond
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeSemiSync, SemiSyncTimeout: timeout}, slowElections)
	c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
	ln, lr := c.leader()
	var block atomic.Bool
	c.net.OnSend(func(from, to NodeID, e Envelope) bool {
		// Acknowledgements withheld, heartbeats flow: the leader keeps
		// its term, its followers fall behind.
		return !(block.Load() && to == ln && e.Msg.GetType() == raftpb.MsgAppResp)
	})
	propose := func(v string) (partition.Proposal, time.Time) {
		t.Helper()
		at := time.Now()
		p, err := lr.Propose(testBatch(v, 1, -1, 0, 0), AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		return p, at
	}
	// timedOut proposes with the acknowledgements withheld and checks the
	// answer comes after the timeout (from the proposal: the leader's
	// durable write comes later still) and within generous bounds.
	timedOut := func(v string, fallbacks int64) {
		t.Helper()
		p, at := propose(v)
		if ok, err := answeredWithin(p, 15*time.Second); !ok || err != nil {
			t.Fatalf("acks=all with no acknowledgement: answered %v, %v; want an answer after the timeout", ok, err)
		}
		if took := time.Since(at); took < timeout {
			t.Fatalf("acks=all answered after %v, before semi.sync.timeout.ms %v, with no acknowledgement", took, timeout)
		}
		if !lr.SemiSyncFallback() || lr.host.SemiSyncFallbacks() != fallbacks {
			t.Fatalf("after a timeout: fallback %v, %d fallbacks counted, want %d", lr.SemiSyncFallback(), lr.host.SemiSyncFallbacks(), fallbacks)
		}
		if hw := lr.HighWatermark(); hw > p.(*Proposal).res.LastOffset {
			t.Fatalf("high watermark %d covers an entry at %d no voter acknowledged", hw, p.(*Proposal).res.LastOffset)
		}
	}
	block.Store(true)
	timedOut("slow", 1)
	// Fallen back: answered on the leader's durable write.
	p, _ := propose("async")
	if ok, err := answeredWithin(p, timeout/2); !ok || err != nil {
		t.Fatalf("acks=all in the fallback not answered on the leader's write: %v %v", ok, err)
	}
	block.Store(false)
	checkFor(t, 10*time.Second, func() error {
		if lr.SemiSyncFallback() {
			return errors.New("still fallen back after the replicas caught up")
		}
		return nil
	})
	c.produce(testBatch("sync-again", 1, -1, 0, 0), AcksAll)
	// Semi-synchronous again: a write without acknowledgements waits.
	block.Store(true)
	timedOut("slow-again", 2)
	block.Store(false)
	c.net.OnSend(nil)
	c.converged(lr.LogEndOffset(), 10*time.Second)
	for _, n := range []NodeID{1, 2, 3, 4} {
		if n != ln && c.rep(n).SemiSyncFallback() {
			t.Fatalf("follower %d reports a fallback", n)
		}
	}
}

// TestRaftSemiSyncCutReplica: semi.sync.wait.replicas=2 over three voters,
// one of them cut off from the leader. acks=all is answered after
// semi.sync.timeout.ms, not stalled; the partition stays writable in the
// fallback with one voter short, and returns to semi-sync once the cut
// replica is healed and has caught up (under a stream of writes), when
// both voters' acknowledgements
// answer acks=all without a timeout.
func TestRaftSemiSyncCutReplica(t *testing.T) {
	const timeout = 700 * time.Millisecond
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeSemiSync, SemiSyncWaitReplicas: 2, SemiSyncTimeout: timeout}, slowElections)
	c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
	ln, lr := c.leader()
	cut := NodeID(1 + int(ln)%3)
	c.net.Cut(ln, cut)
	at := time.Now()
	res := c.produce(testBatch("cut", 1, -1, 0, 0), AcksAll)
	if took := time.Since(at); took < timeout {
		t.Fatalf("acks=all answered after %v with one of two replicas cut, before the %v timeout", took, timeout)
	}
	if !lr.SemiSyncFallback() || lr.host.SemiSyncFallbacks() != 1 {
		t.Fatalf("fallback %v, %d counted", lr.SemiSyncFallback(), lr.host.SemiSyncFallbacks())
	}
	for i := range 20 {
		c.produce(testBatch(fmt.Sprint("during", i), 1, -1, 0, 0), AcksAll)
	}
	// Raft still commits with the other voter: nothing is lost here.
	if hw := lr.HighWatermark(); hw <= res.LastOffset {
		t.Fatalf("high watermark %d, a majority holds %d", hw, res.LastOffset)
	}
	c.net.Heal()
	// A stream of pipelined writes goes on meanwhile: the healed replica
	// trails it, yet is found caught up.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Pipelined: nobody waits, so the followers always trail.
			if _, err := lr.Propose(testBatch(fmt.Sprint("stream", i), 1, -1, 0, 0), AcksNone); err != nil && !errors.Is(err, ErrBusy) {
				t.Error(err)
				return
			}
			if i%10 == 9 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	checkFor(t, 10*time.Second, func() error {
		if lr.SemiSyncFallback() {
			return errors.New("still fallen back after the cut replica caught up")
		}
		return nil
	})
	close(stop)
	wg.Wait()
	at = time.Now()
	c.produce(testBatch("healed", 1, -1, 0, 0), AcksAll)
	if lr.SemiSyncFallback() || lr.host.SemiSyncFallbacks() != 1 {
		t.Fatalf("after heal: fallback %v, %d counted (took %v)", lr.SemiSyncFallback(), lr.host.SemiSyncFallbacks(), time.Since(at))
	}
}

// TestRaftSemiSyncModeChange: a write semi-sync holds (committed by a
// majority, but semi.sync.wait.replicas=2 voters have not acknowledged it)
// is answered as soon as the topic changes to raft. One not yet committed
// is not answered by a change to async while the group still has other
// voters (the leader's write is not a commit there), and is at the commit.
func TestRaftSemiSyncModeChange(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeSemiSync, SemiSyncWaitReplicas: 2, SemiSyncTimeout: time.Hour}, slowElections)
	c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
	ln, lr := c.leader()
	f1 := NodeID(1 + int(ln)%3)
	f2 := NodeID(1 + int(f1)%3)
	var blocked sync.Map
	c.net.OnSend(func(from, to NodeID, e Envelope) bool {
		_, b := blocked.Load(from)
		return !(b && to == ln && e.Msg.GetType() == raftpb.MsgAppResp)
	})
	setMode := func(m Mode) {
		o := *lr.opts.Load()
		o.Mode = m
		if err := lr.SetOptions(o); err != nil {
			t.Fatal(err)
		}
	}
	blocked.Store(f1, true)
	p, err := lr.Propose(testBatch("held", 1, -1, 0, 0), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := answeredWithin(p, 300*time.Millisecond); ok {
		t.Fatalf("answered with one of two voters' acks: %v", err)
	}
	if err := lr.WaitCommitted(context.Background(), p.(*Proposal).res.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	setMode(ModeRaft)
	if ok, err := answeredWithin(p, 5*time.Second); !ok || err != nil {
		t.Fatalf("a committed write not answered after the change to raft: %v %v", ok, err)
	}
	setMode(ModeSemiSync)
	blocked.Store(f2, true)
	p, err = lr.Propose(testBatch("uncommitted", 1, -1, 0, 0), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := answeredWithin(p, 300*time.Millisecond); ok {
		t.Fatalf("answered with no voter's ack: %v", err)
	}
	setMode(ModeAsync)
	if ok, err := answeredWithin(p, 300*time.Millisecond); ok {
		t.Fatalf("an uncommitted write answered by the change to async with three voters: %v", err)
	}
	blocked.Delete(f2)
	if ok, err := answeredWithin(p, 5*time.Second); !ok || err != nil {
		t.Fatalf("a write not answered at its commit after the change to async: %v %v", ok, err)
	}
	c.net.OnSend(nil)
	c.converged(lr.LogEndOffset(), 10*time.Second)
}

// TestRaftAsyncLossReported: the leader of an async-mode group that still
// has other voters (before the move to the master's configuration), cut
// off from them, acknowledges nothing on its own durable write: the others
// elect a leader that never had those records and write on, and when the
// old leader returns it truncates to the new leader's log and counts the
// records cut (Host.TruncatedRecords), never silently diverged: every log
// ends byte-identical. None of them was acknowledged (they were, on the
// leader's write, before: a loaded machine's election lost them).
func TestRaftAsyncLossReported(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeAsync}, slowElections)
	c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
	c.converged(1, 10*time.Second)
	ln, lr := c.leader()
	c.net.Partition(ln)
	const batches, per = 3, 5
	var props []partition.Proposal
	for i := range batches {
		p, err := lr.Propose(testBatch(fmt.Sprint("lost", i), per, -1, 0, 0), AcksAll)
		if err != nil {
			t.Fatalf("the cut-off async leader refused a write before stepping down: %v", err)
		}
		props = append(props, p)
	}
	for _, p := range props {
		if ok, err := answeredWithin(p, 5*time.Second); ok && err == nil {
			t.Fatal("async acks=all acknowledged on the cut-off leader's own write, with other voters in its group")
		}
	}
	if lr.HighWatermark() != 1 {
		t.Fatalf("high watermark %d: records no other replica holds were exposed", lr.HighWatermark())
	}
	nn, nr := c.leader(ln)
	var after int64
	checkFor(t, 10*time.Second, func() error {
		p, err := nr.Propose(testBatch("new", 2, -1, 0, 0), AcksAll)
		if err != nil {
			return err
		}
		res, err := p.Wait(context.Background())
		after = res.LastOffset + 1
		return err
	})
	if before := c.hosts[ln].TruncatedRecords(); before != 0 {
		t.Fatalf("%d records counted truncated before the old leader returned", before)
	}
	c.net.Heal()
	c.converged(after, 10*time.Second)
	if got := c.hosts[ln].TruncatedRecords(); got != batches*per {
		t.Fatalf("old leader %d counted %d truncated records, it had acknowledged %d that leader %d never had", ln, got, batches*per, nn)
	}
	for _, n := range []NodeID{1, 2, 3} {
		if n != ln && c.hosts[n].TruncatedRecords() != 0 {
			t.Fatalf("node %d counted truncated records", n)
		}
	}
}

// TestRaftSemiSyncDuplicate: an idempotent producer's retry of a batch
// semi-sync still holds is not answered before the original could be:
// it waits for the commit, as in raft mode. So does async's while the
// group has other voters than its leader (before the move to the master's
// configuration): a retry answered at once would acknowledge a batch an
// election could still cut.
func TestRaftSemiSyncDuplicate(t *testing.T) {
	for _, mode := range []Mode{ModeSemiSync, ModeAsync} {
		t.Run(mode.String(), func(t *testing.T) { testDuplicateWaits(t, mode) })
	}
}

func testDuplicateWaits(t *testing.T, mode Mode) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: mode, SemiSyncTimeout: time.Hour}, slowElections)
	c.produce(c.idem("warm", 1), AcksAll)
	ln, lr := c.leader()
	var block atomic.Bool
	block.Store(true)
	c.net.OnSend(func(from, to NodeID, e Envelope) bool {
		return !(block.Load() && to == ln && e.Msg.GetType() == raftpb.MsgAppResp)
	})
	b := c.idem("retried", 1)
	var ps []partition.Proposal
	for range 2 {
		p, err := lr.Propose(append([]byte(nil), b...), AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for i, p := range ps {
		if ok, err := answeredWithin(p, 300*time.Millisecond); ok {
			t.Fatalf("proposal %d answered (%v) with no voter's acknowledgement", i, err)
		}
	}
	block.Store(false)
	for i, p := range ps {
		if ok, err := answeredWithin(p, 5*time.Second); !ok || err != nil {
			t.Fatalf("proposal %d after the acknowledgements: %v %v", i, ok, err)
		}
	}
	if !ps[1].(*Proposal).res.Duplicate || ps[1].(*Proposal).res.BaseOffset != ps[0].(*Proposal).res.BaseOffset {
		t.Fatalf("retry answered %+v, original %+v", ps[1].(*Proposal).res, ps[0].(*Proposal).res)
	}
	c.net.OnSend(nil)
}

// TestRaftSilentMemberLeavesISR: with MemberSilence set (the broker
// session), a follower the leader stops hearing from leaves the ISR once
// that long has passed, although its log was complete and
// replica.lag.time.max.ms (30 s here) has not passed: an idle partition's
// dead follower would otherwise count in sync for the whole lag, and an
// async master's last report would name it. Heard again, it returns.
func TestRaftSilentMemberLeavesISR(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft}, slowElections, func(cfg *HostConfig) {
		cfg.MaxFollowerLag = 30 * time.Second
		cfg.MemberSilence = 300 * time.Millisecond
	})
	c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
	ln, lr := c.leader()
	c.converged(lr.HighWatermark(), 10*time.Second)
	checkFor(t, 5*time.Second, func() error {
		if isr := lr.InSyncReplicas(); len(isr) != 4 {
			return fmt.Errorf("ISR %v before the cut", isr)
		}
		return nil
	})
	for _, out := range []NodeID{NodeID(1 + int(ln)%3), 4} {
		c.net.Cut(ln, out)
		cutAt := time.Now()
		checkFor(t, 5*time.Second, func() error {
			if isr := lr.InSyncReplicas(); slices.Contains(isr, out) {
				return fmt.Errorf("silent member %d still in the ISR %v", out, isr)
			}
			return nil
		})
		if took := time.Since(cutAt); took < 250*time.Millisecond { // last heard a heartbeat (20 ms) before the cut
			t.Fatalf("member %d left the ISR %v after the cut, before MemberSilence", out, took)
		}
		c.net.Heal()
		checkFor(t, 5*time.Second, func() error {
			if isr := lr.InSyncReplicas(); !slices.Contains(isr, out) {
				return fmt.Errorf("member %d heard again, not back in the ISR %v", out, isr)
			}
			return nil
		})
	}
}

// TestRaftAsyncNewLeaderConfirmsISR: in async mode a new leader counts a
// member in sync only once it replicates to it (no benefit of the doubt
// for the lag): a learner it cannot reach is out of its first ISR,
// whereas in raft mode a new leader counts every member for
// MaxFollowerLag (30 s here). Reached again, the learner comes back.
func TestRaftAsyncNewLeaderConfirmsISR(t *testing.T) {
	for _, mode := range []Mode{ModeAsync, ModeRaft} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: mode}, slowElections, func(cfg *HostConfig) {
				cfg.MaxFollowerLag = 30 * time.Second
			})
			c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
			ln, lr := c.leader()
			c.converged(lr.HighWatermark(), 10*time.Second)
			next := NodeID(1 + int(ln)%3)
			// The learner hears from nobody from now on; leadership moves.
			for _, n := range []NodeID{1, 2, 3} {
				c.net.Cut(n, 4)
			}
			checkFor(t, 10*time.Second, func() error {
				n, r := c.leader()
				if n == next {
					return nil
				}
				if err := r.TransferLeadership(next); err != nil {
					return err
				}
				return fmt.Errorf("leader %d", n)
			})
			_, nr := c.leader()
			c.produce(testBatch("after", 1, -1, 0, 0), AcksAll)
			time.Sleep(300 * time.Millisecond)
			isr := nr.InSyncReplicas()
			if got, want := slices.Contains(isr, 4), mode != ModeAsync; got != want {
				t.Fatalf("mode %v: the unreachable learner in the new leader's ISR %v: %v, want %v", mode, isr, got, want)
			}
			c.net.Heal()
			checkFor(t, 10*time.Second, func() error {
				if isr := nr.InSyncReplicas(); !slices.Contains(isr, 4) || len(isr) != 4 {
					return fmt.Errorf("ISR %v after healing", isr)
				}
				return nil
			})
		})
	}
}
