package replica

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// answeredWithin reports whether p is answered within d, and its error.
func answeredWithin(p *Proposal, d time.Duration) (bool, error) {
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
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft}, slowElections)
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
	propose := func(acks Acks) *Proposal {
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
		// The learner alone acknowledges: not a raft commit, but one
		// replica has it.
		setBlocked(followers[0], followers[1])
		if ok, err := answeredWithin(all, 5*time.Second); !ok || err != nil {
			t.Fatalf("semi-sync acks=all after one replica's ack: %v %v", ok, err)
		}
		if hw := lr.HighWatermark(); hw > all.res.LastOffset {
			t.Fatalf("high watermark %d covers an uncommitted entry at %d", hw, all.res.LastOffset)
		}
		setBlocked()
	})
	t.Run("async", func(t *testing.T) {
		setMode(ModeAsync)
		setBlocked(followers[0], followers[1], 4)
		all := propose(AcksAll)
		if ok, err := answeredWithin(all, 5*time.Second); !ok || err != nil {
			t.Fatalf("async acks=all after the leader's write: %v %v", ok, err)
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
