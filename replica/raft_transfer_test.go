package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/partition"
)

// A leader asked to hand leadership to a voter it cannot reach refuses
// at once and keeps taking writes; raft itself would drop every proposal
// for an election timeout first. Found by the cmd/sluice network
// partition test: the preferred-leader rebalance retried the transfer to
// a cut-off broker (its lease not yet lapsed) every check interval, and
// the partition took no writes for most of the cut.
func TestRaftTransferToCutOffVoterRefused(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft}, slowElections)
	c.produce(testBatch("x", 1, -1, 0, 0), AcksAll)
	ln, lr := c.leader()
	to := NodeID(1 + int(ln)%3)
	// Only the leader and to are cut apart: the third voter still hears
	// the leader, so (CheckQuorum, PreVote) the leader keeps its term.
	c.net.Cut(ln, to)
	// RecentActive is cleared at the leader's next quorum check, within
	// two election timeouts (1-2 s each with slowElections).
	checkFor(t, 10*time.Second, func() error {
		err := lr.TransferLeadership(to)
		if errors.Is(err, ErrTransferTargetInactive) {
			return nil
		}
		return fmt.Errorf("transfer to a cut-off voter: %v", err)
	})
	// Nothing was started: a proposal is taken at once, not dropped.
	p, err := lr.Propose(testBatch("y", 1, -1, 0, 0), AcksAll)
	if err != nil {
		t.Fatalf("proposal after a refused transfer: %v", err)
	}
	waitProposal(t, p)

	// Healed, the same voter takes the leadership.
	c.net.Heal()
	checkFor(t, 10*time.Second, func() error {
		if err := lr.TransferLeadership(to); err != nil && !errors.Is(err, ErrNotLeader) {
			return err
		}
		if !c.rep(to).IsLeader() {
			return fmt.Errorf("node %d not leader", to)
		}
		return nil
	})
	c.produce(testBatch("z", 1, -1, 0, 0), AcksAll)
	c.converged(3, 10*time.Second)
}

func waitProposal(t *testing.T, p partition.Proposal) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatalf("proposal not committed: %v", err)
	}
}
