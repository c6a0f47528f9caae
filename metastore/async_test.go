package metastore

import (
	"errors"
	"testing"
)

// TestAsyncMasterPromotion: the async master record and its replacement
// by compare-and-set. Only a write replica can be recorded master or
// claim; a claim or promotion against a master the partition no longer
// has is ErrStaleMaster; only the best claim (highest index, ties to the
// lowest id) is promoted, and it becomes the takeover, claims dropped; a
// second promotion against the replaced master loses; the record survives
// a restart; clearing the master drops everything but the last takeover.
func TestAsyncMasterPromotion(t *testing.T) {
	dir := t.TempDir()
	n := openSingle(t, dir)
	c := n.Client()
	ctx := ctxT(t)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "am", Partitions: 1, ReplicationFactor: -1, Assignment: [][]int32{{1, 2, 3, 4}}}); err != nil {
		t.Fatal(err)
	}
	part := func(c *Client) Partition {
		top, ok := c.TopicByName("am")
		if !ok {
			t.Fatal("topic gone")
		}
		return top.Partitions[0]
	}
	if err := c.SetAsyncMaster(ctx, "am", 0, 9); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a broker that is no write replica recorded master: %v", err)
	}
	if err := c.ClaimAsyncMaster(ctx, "am", 0, 1, 2, AsyncClaim{Term: 3, Index: 10}); !errors.Is(err, ErrStaleMaster) {
		t.Fatalf("claim with no master recorded: %v", err)
	}
	if err := c.SetAsyncMaster(ctx, "am", 0, 1); err != nil {
		t.Fatal(err)
	}
	if p := part(c); p.AsyncMaster == nil || *p.AsyncMaster != 1 {
		t.Fatalf("master %v", p.AsyncMaster)
	}
	claims := map[int32]AsyncClaim{2: {Term: 3, Index: 10, Offset: 100}, 3: {Term: 3, Index: 12, Offset: 120}, 4: {Term: 3, Index: 12, Offset: 120}}
	for _, id := range []int32{2, 3, 4} {
		if err := c.ClaimAsyncMaster(ctx, "am", 0, 1, id, claims[id]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ClaimAsyncMaster(ctx, "am", 0, 1, 1, claims[2]); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("the master claimed its own place: %v", err)
	}
	if err := c.ClaimAsyncMaster(ctx, "am", 0, 2, 3, claims[3]); !errors.Is(err, ErrStaleMaster) {
		t.Fatalf("claim against a broker that is not master: %v", err)
	}
	for _, id := range []int32{2, 4} {
		if err := c.PromoteAsyncMaster(ctx, "am", 0, 1, id); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("broker %d, without the best claim, promoted: %v", id, err)
		}
	}
	if err := c.PromoteAsyncMaster(ctx, "am", 0, 1, 3); err != nil {
		t.Fatal(err)
	}
	if p := part(c); p.AsyncMaster == nil || *p.AsyncMaster != 3 || p.AsyncTakeover == nil || *p.AsyncTakeover != claims[3] || p.AsyncClaims != nil {
		t.Fatalf("after the promotion: %+v", p)
	}
	if err := c.PromoteAsyncMaster(ctx, "am", 0, 1, 4); !errors.Is(err, ErrStaleMaster) {
		t.Fatalf("a second promotion against the replaced master: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openSingle(t, dir)
	c = n.Client()
	if p := part(c); p.AsyncMaster == nil || *p.AsyncMaster != 3 || p.AsyncTakeover == nil || *p.AsyncTakeover != claims[3] {
		t.Fatalf("after restart: %+v", p)
	}
	if err := c.SetAsyncMaster(ctx, "am", 0, -1); err != nil {
		t.Fatal(err)
	}
	if p := part(c); p.AsyncMaster != nil || p.AsyncTakeover == nil || *p.AsyncTakeover != claims[3] {
		t.Fatalf("after clearing the master: %+v", p)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAsyncClaimsNeedLapsedMaster: a master that is registered cannot be
// claimed or replaced (ErrMasterAlive), and its registering again drops
// the claims taken while it had lapsed, so a later lapse is decided on
// fresh claims, never on where a learner stood the time before.
func TestAsyncClaimsNeedLapsedMaster(t *testing.T) {
	n := openSingle(t, t.TempDir())
	defer n.Close()
	c := n.Client()
	ctx := ctxT(t)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "am", Partitions: 1, ReplicationFactor: -1, Assignment: [][]int32{{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	part := func() Partition {
		top, ok := c.TopicByName("am")
		if !ok {
			t.Fatal("topic gone")
		}
		return top.Partitions[0]
	}
	if err := c.SetAsyncMaster(ctx, "am", 0, 1); err != nil {
		t.Fatal(err)
	}
	inc, err := c.RegisterBroker(ctx, Broker{ID: 1, Role: RoleWrite})
	if err != nil {
		t.Fatal(err)
	}
	old := AsyncClaim{Term: 3, Index: 10, Offset: 100}
	if err := c.ClaimAsyncMaster(ctx, "am", 0, 1, 2, old); !errors.Is(err, ErrMasterAlive) {
		t.Fatalf("claim against a registered master: %v", err)
	}
	if err := c.UnregisterBroker(ctx, 1, inc); err != nil {
		t.Fatal(err)
	}
	if err := c.ClaimAsyncMaster(ctx, "am", 0, 1, 2, old); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterBroker(ctx, Broker{ID: 1, Role: RoleWrite}); err != nil {
		t.Fatal(err)
	}
	if p := part(); p.AsyncClaims != nil {
		t.Fatalf("claims kept after the master registered again: %v", p.AsyncClaims)
	}
	if err := c.PromoteAsyncMaster(ctx, "am", 0, 1, 2); !errors.Is(err, ErrMasterAlive) {
		t.Fatalf("promotion over a registered master: %v", err)
	}
	if p := part(); p.AsyncMaster == nil || *p.AsyncMaster != 1 {
		t.Fatalf("master replaced while registered: %+v", p)
	}
}

// TestAsyncHandover: a registered master hands its place to one write
// replica, which alone may then claim and be promoted while the master is
// still registered; the handover is fenced by the master's registration
// and target, and dropped when the master registers again.
func TestAsyncHandover(t *testing.T) {
	n := openSingle(t, t.TempDir())
	defer n.Close()
	c := n.Client()
	ctx := ctxT(t)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "ho", Partitions: 1, ReplicationFactor: -1, Assignment: [][]int32{{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	part := func() Partition {
		top, ok := c.TopicByName("ho")
		if !ok {
			t.Fatal("topic gone")
		}
		return top.Partitions[0]
	}
	if err := c.SetAsyncMaster(ctx, "ho", 0, 1); err != nil {
		t.Fatal(err)
	}
	inc, err := c.RegisterBroker(ctx, Broker{ID: 1, Role: RoleWrite})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{2, 3} {
		if _, err := c.RegisterBroker(ctx, Broker{ID: id, Role: RoleWrite}); err != nil {
			t.Fatal(err)
		}
	}
	claim := AsyncClaim{Term: 2, Index: 40, Offset: 400}
	for _, tc := range []struct {
		name         string
		master, to   int32
		inc          uint64
		want         error
		wantHandover bool
	}{
		{"another incarnation", 1, 2, inc + 100, ErrFenced, false},
		{"not the master", 2, 3, inc, ErrStaleMaster, false},
		{"to itself", 1, 1, inc, ErrInvalidRequest, false},
		{"to no replica", 1, 9, inc, ErrInvalidRequest, false},
		{"to replica 2", 1, 2, inc, nil, true},
	} {
		err := c.HandOverAsyncMaster(ctx, "ho", 0, tc.master, tc.inc, tc.to)
		if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if got := part().AsyncHandover != nil; got != tc.wantHandover {
			t.Fatalf("%s: handover recorded %v", tc.name, got)
		}
	}
	// Replica 3 was not handed the place: the master is alive to it.
	if err := c.ClaimAsyncMaster(ctx, "ho", 0, 1, 3, claim); !errors.Is(err, ErrMasterAlive) {
		t.Fatalf("claim by a replica the master did not hand over to: %v", err)
	}
	if err := c.ClaimAsyncMaster(ctx, "ho", 0, 1, 2, claim); err != nil {
		t.Fatal(err)
	}
	if err := c.PromoteAsyncMaster(ctx, "ho", 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	p := part()
	if p.AsyncMaster == nil || *p.AsyncMaster != 2 || p.AsyncTakeover == nil || *p.AsyncTakeover != claim || p.AsyncHandover != nil || p.AsyncClaims != nil {
		t.Fatalf("after the handover's promotion: %+v", p)
	}

	// A handover is dropped when its master registers again.
	inc2, err := c.RegisterBroker(ctx, Broker{ID: 2, Role: RoleWrite})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.HandOverAsyncMaster(ctx, "ho", 0, 2, inc2, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterBroker(ctx, Broker{ID: 2, Role: RoleWrite}); err != nil {
		t.Fatal(err)
	}
	if p := part(); p.AsyncHandover != nil {
		t.Fatalf("handover kept after its master registered again: %+v", p)
	}
	if err := c.ClaimAsyncMaster(ctx, "ho", 0, 2, 3, claim); !errors.Is(err, ErrMasterAlive) {
		t.Fatalf("claim on a dropped handover: %v", err)
	}
}

// TestAsyncClaimNeedsISR: only a write replica in the ISR the master last
// reported may claim its place (ErrNotInSync otherwise), as Kafka elects
// only from the ISR; a partition whose master never reported an ISR counts
// every replica in sync; the master's handover target claims whatever the
// ISR says (it holds the master's whole log).
func TestAsyncClaimNeedsISR(t *testing.T) {
	n := openSingle(t, t.TempDir())
	defer n.Close()
	c := n.Client()
	ctx := ctxT(t)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "am", Partitions: 2, ReplicationFactor: -1, Assignment: [][]int32{{1, 2, 3}, {1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	claim := AsyncClaim{Term: 3, Index: 10, Offset: 100}
	for p := int32(0); p < 2; p++ {
		if err := c.SetAsyncMaster(ctx, "am", p, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Partition 0: broker 2 had been down when the master last reported.
	if err := c.SetPartitionLeader(ctx, "am", 0, 1, 3, []int32{1, 3}); err != nil {
		t.Fatal(err)
	}
	if err := c.ClaimAsyncMaster(ctx, "am", 0, 1, 2, claim); !errors.Is(err, ErrNotInSync) {
		t.Fatalf("a replica out of the ISR claimed: %v", err)
	}
	if err := c.ClaimAsyncMaster(ctx, "am", 0, 1, 3, claim); err != nil {
		t.Fatalf("a replica in the ISR: %v", err)
	}
	if err := c.PromoteAsyncMaster(ctx, "am", 0, 1, 3); err != nil {
		t.Fatal(err)
	}
	// Partition 1: no ISR reported, every replica counts.
	if err := c.ClaimAsyncMaster(ctx, "am", 1, 1, 2, claim); err != nil {
		t.Fatalf("no ISR reported: %v", err)
	}
	// A handover goes to its target whatever the ISR.
	inc, err := c.RegisterBroker(ctx, Broker{ID: 1, Role: RoleWrite})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterBroker(ctx, Broker{ID: 2, Role: RoleWrite}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPartitionLeader(ctx, "am", 1, 1, 4, []int32{1, 3}); err != nil {
		t.Fatal(err)
	}
	if err := c.HandOverAsyncMaster(ctx, "am", 1, 1, inc, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.ClaimAsyncMaster(ctx, "am", 1, 1, 2, claim); err != nil {
		t.Fatalf("the handover's target, out of the ISR: %v", err)
	}
}

// TestAsyncMasterMovedOff: a reassignment that takes the async master off
// the partition clears the record once it finishes (the master is no
// longer a replica; the leader among the new voters records itself), and
// the claims with it; the last promotion's takeover point stays. A move
// that keeps the master keeps the record.
func TestAsyncMasterMovedOff(t *testing.T) {
	n := openSingle(t, t.TempDir())
	c := n.Client()
	ctx := ctxT(t)
	top, err := c.CreateTopic(ctx, TopicSpec{Name: "mv", Partitions: 1, ReplicationFactor: -1, Assignment: [][]int32{{1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	part := func() Partition {
		tp, ok := c.TopicByName("mv")
		if !ok {
			t.Fatal("topic gone")
		}
		return tp.Partitions[0]
	}
	if err := c.SetAsyncMaster(ctx, "mv", 0, 1); err != nil {
		t.Fatal(err)
	}
	claim := AsyncClaim{Term: 2, Index: 10, Offset: 100}
	if err := c.ClaimAsyncMaster(ctx, "mv", 0, 1, 2, claim); err != nil {
		t.Fatal(err)
	}
	if err := c.PromoteAsyncMaster(ctx, "mv", 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 2, 3} {
		if _, err := c.RegisterBroker(ctx, Broker{ID: id, Role: RoleWrite}); err != nil {
			t.Fatal(err)
		}
	}
	// The master (2) stays: the record stays.
	if err := c.AlterReassignment(ctx, "mv", 0, []int32{2, 3}, true); err != nil {
		t.Fatal(err)
	}
	if err := c.FinishReassignment(ctx, top.ID, "mv", 0, []int32{2, 3}); err != nil {
		t.Fatal(err)
	}
	if p := part(); p.AsyncMaster == nil || *p.AsyncMaster != 2 || p.AsyncTakeover == nil || *p.AsyncTakeover != claim {
		t.Fatalf("after a move that kept the master: %+v", p)
	}
	// The master leaves.
	if err := c.AlterReassignment(ctx, "mv", 0, []int32{3, 1}, true); err != nil {
		t.Fatal(err)
	}
	if p := part(); p.AsyncMaster == nil || *p.AsyncMaster != 2 {
		t.Fatalf("in the move, the master it leads until the new voters take over is still recorded: %+v", p)
	}
	if err := c.FinishReassignment(ctx, top.ID, "mv", 0, []int32{3, 1}); err != nil {
		t.Fatal(err)
	}
	if p := part(); p.AsyncMaster != nil || p.AsyncClaims != nil || p.AsyncHandover != nil || p.AsyncTakeover == nil || *p.AsyncTakeover != claim {
		t.Fatalf("after a move that took the master off: %+v", p)
	}
	if err := c.SetAsyncMaster(ctx, "mv", 0, 3); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}
