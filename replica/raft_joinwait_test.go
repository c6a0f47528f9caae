package replica

import (
	"testing"
	"time"
)

// TestJoiningFounderDoesNotCampaign: a replica opened with OpenJoining
// and no state on disk, whose initial configuration lists it as the only
// voter (a founder of a partition with one replica, moved away and back:
// the group now lives on other brokers), neither campaigns at open nor
// after election timeouts: elected, it would lead an empty log alone and
// acknowledge writes the real group never sees. It waits for the group's
// leader to send it the log (TestClusterFounderMovedBack in cmd/sluice
// shows the whole move).
func TestJoiningFounderDoesNotCampaign(t *testing.T) {
	c := newTestCluster(t, nil, nil, ReplicaOptions{})
	c.members = Members{Voters: []NodeID{1}}
	c.joining = map[NodeID]bool{1: true}
	r := c.start(1)
	// 10 election timeouts (150-300 ms each here).
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r.IsLeader() || r.Term() > 0 {
			t.Fatalf("the joining replica campaigned: leader %v, term %d", r.IsLeader(), r.Term())
		}
	}
}

// TestJoiningFounderRestartsWaiting: the same returning founder, stopped
// and started again before it applied a configuration change naming it
// (its raft state now exists, from the entries it was sent), still waits:
// the wait is kept on disk, not inferred from an empty directory. Without
// that it reopened as the sole voter of its initial configuration and
// elected itself over a part of the group's log.
func TestJoiningFounderRestartsWaiting(t *testing.T) {
	c := newTestCluster(t, nil, nil, ReplicaOptions{})
	c.members = Members{Voters: []NodeID{1}}
	c.joining = map[NodeID]bool{1: true}
	c.start(1)
	c.stop(1)
	r := c.start(1)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r.IsLeader() || r.Term() > 0 {
			t.Fatalf("the joining replica campaigned after a restart: leader %v, term %d", r.IsLeader(), r.Term())
		}
	}
}
