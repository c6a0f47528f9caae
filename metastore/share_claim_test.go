package metastore

import (
	"errors"
	"testing"
	"time"
)

// A share-partition's state writes carry its holder's claim: another live
// broker cannot claim it nor write it, the holder can release it for the
// next, a lapsed holder's claim is taken over and its writes are refused,
// and a state write of the group's coordinator (the offsets admin) or the
// group's deletion ends the claim.
func TestShareClaimFencesStateWrites(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaseDuration = time.Second })
	ctx := ctxT(t)
	lead := c.waitLeader()
	cl := c.hub.HubClient(100, c.follower(lead))
	defer cl.Close()
	var tid TopicID
	tid[0] = 9
	inc4, err := cl.RegisterBroker(ctx, Broker{ID: 4, Role: RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	inc5, err := cl.RegisterBroker(ctx, Broker{ID: 5, Role: RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	f4, f5 := Fence{Broker: 4, Incarnation: inc4}, Fence{Broker: 5, Incarnation: inc5}
	state := func() string {
		t.Helper()
		sts, err := cl.LoadShareStates(ctx, "sg")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sts {
			if s.Topic == tid && s.Partition == 1 {
				return string(s.State)
			}
		}
		return ""
	}
	if owner, err := cl.ClaimSharePartition(ctx, "sg", tid, 1, f4); err != nil || owner != 4 {
		t.Fatalf("first claim: %d %v", owner, err)
	}
	if owner, err := cl.ClaimSharePartition(ctx, "sg", tid, 1, f5); err != nil || owner != 4 {
		t.Fatalf("claim of a held pair: %d %v, want holder 4", owner, err)
	}
	if f, ok, err := cl.SharePartitionHolder(ctx, "sg", tid, 1); err != nil || !ok || f != f4 {
		t.Fatalf("holder %+v %v %v, want %+v", f, ok, err, f4)
	}
	// Another partition of the group is a separate claim.
	if owner, err := cl.ClaimSharePartition(ctx, "sg", tid, 2, f5); err != nil || owner != 5 {
		t.Fatalf("claim of partition 2: %d %v", owner, err)
	}
	if err := cl.SaveClaimedShareState(ctx, f4, "sg", tid, 1, []byte("a")); err != nil {
		t.Fatalf("holder's write: %v", err)
	}
	if err := cl.SaveClaimedShareState(ctx, f5, "sg", tid, 1, []byte("x")); !errors.Is(err, ErrFenced) {
		t.Fatalf("non-holder's write: %v, want ErrFenced", err)
	}
	// Released, the pair goes to the next claimant.
	if err := cl.ReleaseSharePartition(ctx, "sg", tid, 1, f5); err != nil {
		t.Fatal(err) // not the holder: nothing happens
	}
	if owner, _ := cl.ClaimSharePartition(ctx, "sg", tid, 1, f5); owner != 4 {
		t.Fatalf("a non-holder's release ended the claim (holder now %d)", owner)
	}
	if err := cl.ReleaseSharePartition(ctx, "sg", tid, 1, f4); err != nil {
		t.Fatal(err)
	}
	if owner, err := cl.ClaimSharePartition(ctx, "sg", tid, 1, f5); err != nil || owner != 5 {
		t.Fatalf("claim after release: %d %v", owner, err)
	}
	if err := cl.SaveClaimedShareState(ctx, f4, "sg", tid, 1, []byte("x")); !errors.Is(err, ErrFenced) {
		t.Fatalf("released holder's write: %v, want ErrFenced", err)
	}
	if err := cl.SaveClaimedShareState(ctx, f5, "sg", tid, 1, []byte("b")); err != nil {
		t.Fatal(err)
	}
	// 5 goes silent: its lease lapses and 4 takes the pair over; 5's
	// writes are refused.
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if err := cl.Heartbeat(ctx, 4, inc4); err != nil {
			return err
		}
		for _, b := range cl.Brokers() {
			if b.ID == 5 {
				return errors.New("broker 5 still registered")
			}
		}
		return nil
	})
	if err := cl.Heartbeat(ctx, 4, inc4); err != nil {
		t.Fatal(err)
	}
	if owner, err := cl.ClaimSharePartition(ctx, "sg", tid, 1, f4); err != nil || owner != 4 {
		t.Fatalf("claim of a lapsed holder's pair: %d %v", owner, err)
	}
	if err := cl.SaveClaimedShareState(ctx, f5, "sg", tid, 1, []byte("x")); !errors.Is(err, ErrFenced) {
		t.Fatalf("lapsed holder's write: %v, want ErrFenced", err)
	}
	if got := state(); got != "b" {
		t.Fatalf("state %q, want b", got)
	}
	// The group's coordinator (4 claims the group) rewrites the state:
	// the claim ends, so the holder's next write is refused.
	if owner, err := cl.ClaimGroup(ctx, "sg", f4); err != nil || owner != 4 {
		t.Fatalf("group claim: %d %v", owner, err)
	}
	if err := cl.SaveShareState(ctx, f4, "sg", tid, 1, []byte("admin")); err != nil {
		t.Fatal(err)
	}
	if err := cl.SaveClaimedShareState(ctx, f4, "sg", tid, 1, []byte("x")); !errors.Is(err, ErrFenced) {
		t.Fatalf("holder's write after the admin's: %v, want ErrFenced", err)
	}
	if got := state(); got != "admin" {
		t.Fatalf("state %q, want admin", got)
	}
	if f, ok, err := cl.SharePartitionHolder(ctx, "sg", tid, 1); err != nil || ok {
		t.Fatalf("holder after the admin's write: %+v %v %v, want none", f, ok, err)
	}
	// Deleting the group ends every claim of it.
	if owner, err := cl.ClaimSharePartition(ctx, "sg", tid, 1, f4); err != nil || owner != 4 {
		t.Fatalf("claim again: %d %v", owner, err)
	}
	if err := cl.DeleteGroup(ctx, f4, "sg"); err != nil {
		t.Fatal(err)
	}
	if err := cl.SaveClaimedShareState(ctx, f4, "sg", tid, 1, []byte("x")); !errors.Is(err, ErrFenced) {
		t.Fatalf("holder's write after the group's deletion: %v, want ErrFenced", err)
	}
}
