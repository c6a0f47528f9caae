package metastore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

func TestClusterReplicatesAndForwards(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	lead := c.waitLeader()
	f := c.follower(lead)
	ctx := ctxT(t)

	// Writes through a follower's embedded client and through a remote
	// client connected to a follower only.
	fc := c.node(f).Client()
	if _, err := fc.RegisterBroker(ctx, Broker{ID: 1, Role: RoleWrite}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.RegisterBroker(ctx, Broker{ID: 2, Role: RoleWrite}); err != nil {
		t.Fatal(err)
	}
	top, err := fc.CreateTopic(ctx, TopicSpec{Name: "a", Partitions: 4, ReplicationFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Partitions[0].Voters) != 2 {
		t.Fatalf("placement %+v", top.Partitions[0])
	}
	rc := c.hub.HubClient(100, f)
	defer rc.Close()
	if err := rc.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := rc.TopicByName("a"); !ok {
		t.Fatal("remote cache missing topic after Sync")
	}
	if _, err := rc.CreateTopic(ctx, TopicSpec{Name: "b", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok := rc.TopicByName("b"); !ok {
		t.Fatal("remote write not visible in its cache")
	}
	if rc.ClusterID() == "" || rc.ClusterID() != fc.ClusterID() {
		t.Fatalf("cluster ids %q %q", rc.ClusterID(), fc.ClusterID())
	}
	if err := rc.CommitOffsets(ctx, Fence{}, "g", []OffsetCommit{{TopicPartition: TopicPartition{"a", 1}, Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	// Linearizable read on another node sees it.
	lc := c.node(lead).Client()
	if offs, err := lc.FetchOffsets(ctx, "g", nil); err != nil || len(offs) != 1 || offs[0].Offset != 5 {
		t.Fatalf("fetch on leader: %+v %v", offs, err)
	}
	// Heartbeat through a follower is forwarded to the leader.
	bs := rc.Brokers()
	if len(bs) != 2 {
		t.Fatalf("brokers %+v", bs)
	}
	if err := rc.Heartbeat(ctx, 1, bs[0].Incarnation); err != nil {
		t.Fatal(err)
	}
	if err := rc.Heartbeat(ctx, 1, bs[0].Incarnation+100); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale incarnation: %v", err)
	}
	c.waitConverged()
}

func TestClusterLeaderCrashAndRestart(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t)
	lead := c.waitLeader()
	cl := c.node(lead).Client()
	for i := 0; i < 10; i++ {
		if _, err := cl.CreateTopic(ctx, TopicSpec{Name: fmt.Sprintf("t%d", i), Partitions: 2}); err != nil {
			t.Fatal(err)
		}
	}
	c.stop(lead)
	lead2 := c.waitLeader()
	if lead2 == lead {
		t.Fatal("same leader")
	}
	cl2 := c.node(c.follower(lead2)).Client()
	for i := 10; i < 20; i++ {
		if _, err := cl2.CreateTopic(ctx, TopicSpec{Name: fmt.Sprintf("t%d", i), Partitions: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl2.CommitOffsets(ctx, Fence{}, "g", []OffsetCommit{{TopicPartition: TopicPartition{"t1", 0}, Offset: 99}}); err != nil {
		t.Fatal(err)
	}
	c.start(lead, false)
	c.waitLeader()
	c.waitConverged()
	old := c.node(lead)
	if n := len(old.Client().Topics()); n != 20 {
		t.Fatalf("restarted node has %d topics", n)
	}
	if got := offsetsOn(old, "g"); got[TopicPartition{"t1", 0}] != 99 {
		t.Fatalf("restarted node offsets %v", got)
	}
}

func TestClusterMinorityPartition(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t)
	lead := c.waitLeader()
	// Cut the leader away: the other two elect a new one and go on.
	c.hub.Partition(lead)
	var rest []uint64
	for _, id := range c.ids() {
		if id != lead {
			rest = append(rest, id)
		}
	}
	lead2 := c.waitLeader(rest...)
	if lead2 == lead {
		t.Fatal("leader did not change")
	}
	if _, err := c.node(lead2).Client().CreateTopic(ctx, TopicSpec{Name: "majority", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// The minority cannot write nor read linearizably.
	sctx, cancel := shortCtx(500 * time.Millisecond)
	_, err := c.node(lead).Client().CreateTopic(sctx, TopicSpec{Name: "minority", Partitions: 1})
	cancel()
	if err == nil {
		t.Fatal("minority write succeeded")
	}
	sctx, cancel = shortCtx(500 * time.Millisecond)
	_, err = c.node(lead).Client().FetchOffsets(sctx, "g", nil)
	cancel()
	if err == nil {
		t.Fatal("minority linearizable read succeeded")
	}
	c.hub.Heal()
	c.waitLeader()
	c.waitConverged()
	for _, id := range c.ids() {
		if _, ok := c.node(id).Client().TopicByName("majority"); !ok {
			t.Fatalf("node %d lacks the majority's write", id)
		}
	}
	// The minority's write timed out: its outcome is unknown (it was
	// proposed to a deposed leader). Whatever happened, all nodes agree,
	// which waitConverged checked.
}

func TestClusterSnapshotCatchUp(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotEntries = 40
		cfg.CompactionKeep = 5
	})
	ctx := ctxT(t)
	lead := c.waitLeader()
	behind := c.follower(lead)
	c.stop(behind)
	cl := c.node(lead).Client()
	if _, err := cl.CreateTopic(ctx, TopicSpec{Name: "s", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		if err := cl.CommitOffsets(ctx, Fence{}, "g", []OffsetCommit{{TopicPartition: TopicPartition{"s", int32(i % 3)}, Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.node(lead).Status(); st.FirstLog < 100 {
		t.Fatalf("leader log not compacted: %+v", st)
	}
	n := c.start(behind, false)
	c.waitConverged()
	want := offsetsOn(c.node(lead), "g")
	if got := offsetsOn(n, "g"); !reflect.DeepEqual(got, want) {
		t.Fatalf("caught-up follower offsets %v, want %v", got, want)
	}
	if st := n.Status(); st.Snapshot < 100 {
		t.Fatalf("follower did not install a snapshot: %+v", st)
	}
	// And it keeps following after the snapshot.
	if _, err := cl.CreateTopic(ctx, TopicSpec{Name: "after", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.waitConverged()
	// Restart the follower from its installed snapshot.
	c.stop(behind)
	n = c.start(behind, false)
	c.waitConverged()
	if got := offsetsOn(n, "g"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart %v, want %v", got, want)
	}
	// Honest members' messages, the snapshot included, pass the checks
	// before Step (guard.go).
	for _, id := range c.ids() {
		for why, v := range c.node(id).Refused() {
			if v != 0 {
				t.Errorf("node %d refused %d honest messages as %s", id, v, why)
			}
		}
	}
}

func TestClusterAddRemoveVoter(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotEntries = 20
		cfg.CompactionKeep = 5
	})
	ctx := ctxT(t)
	lead := c.waitLeader()
	cl := c.node(lead).Client()
	for i := 0; i < 30; i++ {
		if _, err := cl.CreateTopic(ctx, TopicSpec{Name: fmt.Sprintf("t%d", i), Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	c.peers[4] = "node-4"
	c.start(4, true)
	// AddVoter through a follower: forwarded to the leader.
	if err := c.node(c.follower(lead)).AddVoter(ctx, 4, "node-4"); err != nil {
		t.Fatal(err)
	}
	if err := c.node(lead).AddVoter(ctx, 4, "node-4"); !errors.Is(err, ErrMemberExists) {
		t.Fatalf("second add: %v", err)
	}
	c.waitConverged()
	if n := len(c.node(4).Client().Topics()); n != 30 {
		t.Fatalf("new voter has %d topics", n)
	}
	st := c.node(lead).Status()
	if len(st.Voters) != 4 || st.Members[4] != "node-4" {
		t.Fatalf("status after add: %+v", st)
	}
	// Remove the leader itself; the other three go on.
	if err := c.node(4).RemoveVoter(ctx, lead); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		select {
		case <-c.node(lead).stopc:
			return nil
		default:
			return errors.New("removed node still running")
		}
	})
	c.stop(lead)
	lead2 := c.waitLeader()
	if lead2 == lead {
		t.Fatal("removed node leads")
	}
	if _, err := c.node(4).Client().CreateTopic(ctx, TopicSpec{Name: "after-remove", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.waitConverged()
	if st := c.node(lead2).Status(); len(st.Voters) != 3 {
		t.Fatalf("voters after remove: %+v", st)
	}
	if err := c.node(lead2).RemoveVoter(ctx, 99); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("remove unknown: %v", err)
	}
}

func TestClusterLeases(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaseDuration = 300 * time.Millisecond })
	ctx := ctxT(t)
	lead := c.waitLeader()
	cl := c.hub.HubClient(100, c.follower(lead))
	defer cl.Close()
	inc, err := cl.RegisterBroker(ctx, Broker{ID: 7, Role: RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	// Heartbeats keep it alive well past the lease.
	for i := 0; i < 15; i++ {
		if err := cl.Heartbeat(ctx, 7, inc); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
		time.Sleep(60 * time.Millisecond)
	}
	if owner, err := cl.ClaimGroup(ctx, "grp", Fence{Broker: 7}); err != nil || owner != 7 {
		t.Fatalf("claim %d %v", owner, err)
	}
	// Silence: the leader expires it; the old incarnation is fenced.
	checkFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if len(cl.Brokers()) != 0 {
			return errors.New("broker still registered")
		}
		return nil
	})
	if err := cl.Heartbeat(ctx, 7, inc); !errors.Is(err, ErrFenced) {
		t.Fatalf("heartbeat after expiry: %v", err)
	}
	inc2, err := cl.RegisterBroker(ctx, Broker{ID: 7, Role: RoleRead})
	if err != nil || inc2 <= inc {
		t.Fatalf("re-register %d %v", inc2, err)
	}
	if err := cl.Heartbeat(ctx, 7, inc2); err != nil {
		t.Fatal(err)
	}
	// A new broker can claim the dead owner's group.
	if _, err := cl.RegisterBroker(ctx, Broker{ID: 8, Role: RoleRead}); err != nil {
		t.Fatal(err)
	}
	if owner, err := cl.ClaimGroup(ctx, "grp", Fence{Broker: 8}); err != nil || owner != 7 {
		t.Fatalf("group should stay with live re-registered 7: %d %v", owner, err)
	}
}

// A remote client cut off while more changes than the watch history holds
// happen gets a full image when it comes back: deleted topics disappear,
// new ones appear.
func TestWatchBehindHistoryGetsImage(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.WatchHistory = 5 })
	ctx := ctxT(t)
	lead := c.waitLeader()
	cl := c.node(lead).Client()
	old, err := cl.CreateTopic(ctx, TopicSpec{Name: "old", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	rc := c.hub.HubClient(100, lead)
	defer rc.Close()
	if err := rc.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := rc.TopicByName("old"); !ok {
		t.Fatal("no old topic")
	}
	c.hub.Partition(100)
	if err := cl.DeleteTopic(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := cl.CreateTopic(ctx, TopicSpec{Name: fmt.Sprintf("n%d", i), Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := rc.TopicByName("old"); !ok {
		t.Fatal("partitioned client should still hold its stale cache")
	}
	c.hub.Heal()
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if _, ok := rc.TopicByName("old"); ok {
			return errors.New("deleted topic still cached")
		}
		if len(rc.Topics()) != 20 {
			return fmt.Errorf("%d topics cached", len(rc.Topics()))
		}
		return nil
	})
}

// A broker that keeps heartbeating is not expired by a leader change: the
// new leader grants a full lease from its election.
func TestLeaseSurvivesLeaderChange(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaseDuration = time.Second })
	ctx := ctxT(t)
	lead := c.waitLeader()
	cl := c.hub.HubClient(100, 1, 2, 3)
	defer cl.Close()
	inc, err := cl.RegisterBroker(ctx, Broker{ID: 5, Role: RoleWrite})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			case <-time.After(150 * time.Millisecond):
			}
			hctx, cancel := shortCtx(400 * time.Millisecond)
			err := cl.Heartbeat(hctx, 5, inc)
			cancel()
			if errors.Is(err, ErrFenced) {
				done <- err
				return
			}
		}
	}()
	c.stop(lead)
	c.waitLeader()
	time.Sleep(2500 * time.Millisecond)
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("broker fenced across a leader change: %v", err)
	}
	if err := cl.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if bs := cl.Brokers(); len(bs) != 1 || bs[0].Incarnation != inc {
		t.Fatalf("brokers %+v", bs)
	}
}

// Kill -9 images of all three nodes taken while writes are in flight form
// a working cluster with every write acknowledged before the images.
func TestClusterCrashImages(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t)
	lead := c.waitLeader()
	cl := c.node(lead).Client()
	for i := 0; i < 10; i++ {
		if _, err := cl.CreateTopic(ctx, TopicSpec{Name: fmt.Sprintf("t%d", i), Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var acked []int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := cl.CommitOffsets(ctx, Fence{}, "g", []OffsetCommit{{TopicPartition: TopicPartition{"t0", 0}, Offset: i}}); err == nil {
				acked = append(acked, i)
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	// Stop the writer, then take the images while the nodes run (raft
	// traffic, heartbeats, apply continue): everything acknowledged must
	// be in them.
	close(stop)
	wg.Wait()
	lastBefore := int64(-1)
	if len(acked) > 0 {
		lastBefore = acked[len(acked)-1]
	}
	images := map[uint64]string{}
	var wg2 sync.WaitGroup
	for _, id := range c.ids() {
		dir := t.TempDir()
		images[id] = dir
		wg2.Add(1)
		go func(n *Node) {
			defer wg2.Done()
			crashCopy(t, n, dir)
		}(c.node(id))
	}
	wg2.Wait()
	c.closeAll()
	c.dirs = images
	c.hub = NewHub(2)
	for id := uint64(1); id <= 3; id++ {
		c.start(id, false)
	}
	c.waitLeader()
	c.waitConverged()
	l := c.node(c.waitLeader()).Client()
	offs, err := l.FetchOffsets(ctx, "g", nil)
	if err != nil || len(offs) != 1 || offs[0].Offset < lastBefore {
		t.Fatalf("after crash images: %+v %v (last acked %d)", offs, err, lastBefore)
	}
	if len(l.Topics()) != 10 {
		t.Fatalf("topics %d", len(l.Topics()))
	}
}

// Group writes carry the owner's fence: once the owner's lease lapsed and
// another broker claimed the group, the old owner's commits, saves and
// deletes are refused (ErrFenced) and change nothing, even after it
// registers again under a new incarnation.
func TestGroupWritesFencedByLease(t *testing.T) {
	// A lease long enough that broker 8, heartbeating between steps,
	// never lapses on a loaded machine, short enough for 7 to.
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaseDuration = time.Second })
	ctx := ctxT(t)
	lead := c.waitLeader()
	cl := c.hub.HubClient(100, c.follower(lead))
	defer cl.Close()
	inc7, err := cl.RegisterBroker(ctx, Broker{ID: 7, Role: RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	old := Fence{Broker: 7, Incarnation: inc7}
	if owner, err := cl.ClaimGroup(ctx, "grp", old); err != nil || owner != 7 {
		t.Fatalf("claim %d %v", owner, err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	if err := cl.CommitOffsets(ctx, old, "grp", []OffsetCommit{{TopicPartition: tp, Offset: 10}}); err != nil {
		t.Fatalf("owner's commit: %v", err)
	}
	// A broker that does not own the group cannot write it.
	inc8, err := cl.RegisterBroker(ctx, Broker{ID: 8, Role: RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	other := Fence{Broker: 8, Incarnation: inc8}
	if err := cl.CommitOffsets(ctx, other, "grp", []OffsetCommit{{TopicPartition: tp, Offset: 11}}); !errors.Is(err, ErrFenced) {
		t.Fatalf("non-owner's commit: %v, want ErrFenced", err)
	}
	// 7 goes silent (8 keeps heartbeating): its lease lapses and 8 takes
	// the group over.
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if err := cl.Heartbeat(ctx, 8, inc8); err != nil {
			return err
		}
		for _, b := range cl.Brokers() {
			if b.ID == 7 {
				return errors.New("broker 7 still registered")
			}
		}
		return nil
	})
	if err := cl.Heartbeat(ctx, 8, inc8); err != nil {
		t.Fatal(err)
	}
	if owner, err := cl.ClaimGroup(ctx, "grp", other); err != nil || owner != 8 {
		t.Fatalf("8 claiming the lapsed owner's group: %d %v", owner, err)
	}
	if err := cl.CommitOffsets(ctx, other, "grp", []OffsetCommit{{TopicPartition: tp, Offset: 20}}); err != nil {
		t.Fatalf("new owner's commit: %v", err)
	}
	// 7 comes back (a paused process resuming) and registers again: its
	// writes under the old incarnation and the new one are both refused.
	inc7b, err := cl.RegisterBroker(ctx, Broker{ID: 7, Role: RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Fence{old, {Broker: 7, Incarnation: inc7b}} {
		if err := cl.CommitOffsets(ctx, f, "grp", []OffsetCommit{{TopicPartition: tp, Offset: 99}}); !errors.Is(err, ErrFenced) {
			t.Errorf("commit by 7 (incarnation %d) after 8 took over: %v, want ErrFenced", f.Incarnation, err)
		}
		if err := cl.SaveGroup(ctx, f, "grp", []byte("stale")); !errors.Is(err, ErrFenced) {
			t.Errorf("save by 7 (incarnation %d): %v, want ErrFenced", f.Incarnation, err)
		}
		if err := cl.DeleteGroup(ctx, f, "grp"); !errors.Is(err, ErrFenced) {
			t.Errorf("delete by 7 (incarnation %d): %v, want ErrFenced", f.Incarnation, err)
		}
	}
	offs, err := cl.FetchOffsets(ctx, "grp", []TopicPartition{tp})
	if err != nil || len(offs) != 1 || offs[0].Offset != 20 {
		t.Fatalf("committed offsets after the fenced writes: %+v %v, want offset 20", offs, err)
	}
	// Claiming under a stale incarnation is refused too.
	if _, err := cl.ClaimGroup(ctx, "other", old); !errors.Is(err, ErrFenced) {
		t.Fatalf("claim under a lapsed incarnation: %v, want ErrFenced", err)
	}
}

// A write that reaches a follower right after the leader died, before the
// follower noticed, must not wait out the caller's timeout: the follower
// cannot forward it to the dead leader, and proposing it through raft would
// send it there too, where it is lost. It goes to the next leader.
func TestClusterWriteOnFollowerAfterLeaderDies(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.RequestTimeout = 10 * time.Second })
	lead := c.waitLeader()
	f := c.follower(lead)
	cl := c.node(f).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// Cut the leader off first (at once, unlike Close), then let it die:
	// the follower still follows it for an election timeout.
	c.hub.Partition(lead)
	c.stop(lead)
	if got := c.node(f).Leader(); got != lead {
		t.Fatalf("follower %d already follows %d, not the dead leader %d", f, got, lead)
	}
	t0 := time.Now()
	err := cl.CommitOffsets(ctx, Fence{}, "g", []OffsetCommit{{TopicPartition: TopicPartition{"t", 0}, Offset: 7}})
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("commit after the leader died: %v after %v", err, took)
	}
	// An election takes some ElectionTicks of 10 ms here; the caller's
	// timeout is 10 s.
	if took > 3*time.Second {
		t.Fatalf("commit after the leader died took %v", took)
	}
	// Read back through the client (a ReadIndex barrier): the answer may
	// have come from the new leader, before this follower applied it.
	tp := TopicPartition{"t", 0}
	if offs, err := cl.FetchOffsets(ctx, "g", []TopicPartition{tp}); err != nil || len(offs) != 1 || offs[0].Offset != 7 {
		t.Fatalf("committed offsets: %+v %v, want offset 7", offs, err)
	}
	t.Logf("commit through follower %d answered %v after leader %d died", f, took.Round(time.Millisecond), lead)
}

// TestClusterMemberChangeRightAfterElection: a membership change that
// reaches a leader elected a moment ago, before it applied an entry of its
// own term. raft takes every entry of its log at election for a possible
// configuration change and turns a change proposed before it applied that
// far into an empty entry, silently: the change was lost and its caller
// waited out its whole timeout. (The nemesis's meta-change fault showed
// it: a voter change right after a meta node was killed took 30 s and
// answered "outcome unknown".) The leader now waits until it applied an
// entry of its own term before proposing.
func TestClusterMemberChangeRightAfterElection(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	lead := c.waitLeader()
	// The leader's last entry reaches the followers but is never
	// acknowledged, so they hold it uncommitted: the next leader finds
	// an entry it has not applied in its log at election.
	c.hub.OnSend(func(_, _ uint64, m *pb.Message) bool { return m.GetType() != pb.MsgAppResp })
	// The client is taken here: the node is stopped below, maybe before
	// the goroutine runs.
	leadClient := c.node(lead).Client()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		leadClient.CreateTopic(ctx, TopicSpec{Name: "uncommitted", Partitions: 1})
	}()
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		for _, id := range c.ids() {
			if n := c.node(id); id != lead {
				if last, _ := n.ms.LastIndex(); last <= n.appliedIndex() {
					return fmt.Errorf("node %d: last index %d, applied %d", id, last, n.appliedIndex())
				}
			}
		}
		return nil
	})
	// And no appends from the next leader until the change is proposed.
	c.hub.OnSend(func(_, _ uint64, m *pb.Message) bool { return m.GetType() != pb.MsgApp })
	c.stop(lead)
	next := c.waitLeader()
	if next == lead {
		t.Fatalf("node %d, stopped, still leads", lead)
	}
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		errc <- c.node(next).RemoveVoter(ctx, lead)
	}()
	time.Sleep(300 * time.Millisecond)
	c.hub.OnSend(nil)
	start := time.Now()
	if err := <-errc; err != nil {
		t.Fatalf("removing node %d through the new leader %d: %v after %v", lead, next, err, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("node %d removed %v after the appends resumed", lead, time.Since(start).Round(time.Millisecond))
	if st := c.node(next).Status(); len(st.Voters) != 2 || slices.Contains(st.Voters, lead) {
		t.Fatalf("voters after the removal: %v", st.Voters)
	}
}

// TestClusterCommitOvertakenWhilePaused: a coordinator's offset commit
// reaches a meta node that then stops (SIGSTOP, a long stall) with the
// request unread in its socket buffer. The coordinator gives up ("request
// timed out, outcome unknown"), the consumer commits a later offset through
// the next leader and is acknowledged. When the node resumes, it reads the
// old request and runs it with the deadline it carried, counted from then:
// it was applied after the newer commit, and the group's committed offset
// went back (the nemesis: "committed offset 76085, below the commit of
// 76646 acknowledged earlier", after a meta node was paused 11.5 s). The
// metastore now refuses a coordinator's commit that a later one of the
// same coordinator (broker and incarnation) for the group overtook.
func TestClusterCommitOvertakenWhilePaused(t *testing.T) {
	s := newOvertake(t)
	if err := s.commit(s.ctx, s.cl, 10); err != nil {
		t.Fatal(err)
	}
	cl2 := s.late(func(ctx context.Context, cl *Client) error { return s.commit(ctx, cl, 20) })
	if err := s.commit(s.ctx, cl2, 30); err != nil {
		t.Fatalf("commit through the new leader: %v", err)
	}
	s.resume()
	if off := s.offset(cl2); off != 30 {
		t.Fatalf("committed offset %d after the paused node resumed, want 30: the commit of 20, whose caller gave up before 30 was committed, was applied after it", off)
	}
	// The coordinator's next commit is not refused.
	if err := s.commit(s.ctx, cl2, 40); err != nil {
		t.Fatalf("commit after the resume: %v", err)
	}
}

// The other fenced group writes can be overtaken the same way: each test
// below sends one to a leader that is then paused, gives up on it, makes a
// later write of the same coordinator through the next leader, resumes
// the old leader (which runs the held request then) and checks that the
// later write stands.

// TestClusterTxnOffsetsOvertakenWhilePaused: a transactional offset
// commit (TxnOffsetCommit) that timed out, then reached the log after a
// later one of the same transaction, would replace the later pending
// offset, and the transaction's commit would make the earlier offset the
// group's.
func TestClusterTxnOffsetsOvertakenWhilePaused(t *testing.T) {
	s := newOvertake(t)
	st := TxnState{TransactionalID: "tx", ProducerID: 5, Epoch: 0, LastProducerID: -1, LastEpoch: -1, Status: TxnOngoing}
	v, err := s.cl.PutTxn(s.ctx, st, 0, TxnKeepOffsets)
	if err != nil {
		t.Fatal(err)
	}
	txnCommit := func(ctx context.Context, cl *Client, off int64) error {
		return cl.TxnCommitOffsets(ctx, s.f, "tx", 5, 0, "grp", []OffsetCommit{{TopicPartition: s.tp, Offset: off}})
	}
	cl2 := s.late(func(ctx context.Context, cl *Client) error { return txnCommit(ctx, cl, 20) })
	if err := txnCommit(s.ctx, cl2, 30); err != nil {
		t.Fatalf("transactional commit through the new leader: %v", err)
	}
	s.resume()
	st.Status = TxnCompleteCommit
	if _, err := cl2.PutTxn(s.ctx, st, v, TxnCommitOffsets); err != nil {
		t.Fatalf("committing the transaction: %v", err)
	}
	if off := s.offset(cl2); off != 30 {
		t.Fatalf("committed offset %d after the transaction committed, want 30: the transactional commit of 20, given up before 30, replaced it", off)
	}
}

// TestClusterSaveGroupOvertakenWhilePaused: a group state save that
// reached the log after a later save would bring back an older generation
// and membership for the next coordinator to load.
func TestClusterSaveGroupOvertakenWhilePaused(t *testing.T) {
	s := newOvertake(t)
	cl2 := s.late(func(ctx context.Context, cl *Client) error {
		return cl.SaveGroup(ctx, s.f, "grp", []byte("generation 1"))
	})
	if err := cl2.SaveGroup(s.ctx, s.f, "grp", []byte("generation 2")); err != nil {
		t.Fatalf("save through the new leader: %v", err)
	}
	s.resume()
	got, err := cl2.LoadGroup(s.ctx, "grp")
	if err != nil || string(got) != "generation 2" {
		t.Fatalf("group state %q %v after the paused node resumed, want generation 2", got, err)
	}
	// Saves and commits are ordered apart (the coordinator sends them
	// concurrently): a commit numbered before the last save still counts.
	seq := commitSeq.Add(1)
	cmd := command{Op: opCommitOffsets, Group: "grp", BrokerID: s.f.Broker, Inc: s.f.Incarnation, WriteSeq: seq,
		Offsets: []OffsetCommit{{TopicPartition: s.tp, Offset: 7, CommitTime: time.Now()}}}
	if err := cl2.SaveGroup(s.ctx, s.f, "grp", []byte("generation 3")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl2.write(s.ctx, cmd); err != nil {
		t.Fatalf("a commit numbered before the last save: %v", err)
	}
}

// TestClusterDeleteOffsetsOvertakenWhilePaused: an offset delete
// (OffsetDelete, expiry) that reached the log after a later commit would
// drop that commit.
func TestClusterDeleteOffsetsOvertakenWhilePaused(t *testing.T) {
	s := newOvertake(t)
	if err := s.commit(s.ctx, s.cl, 10); err != nil {
		t.Fatal(err)
	}
	cl2 := s.late(func(ctx context.Context, cl *Client) error {
		return cl.DeleteOffsets(ctx, s.f, "grp", []TopicPartition{s.tp})
	})
	if err := s.commit(s.ctx, cl2, 30); err != nil {
		t.Fatalf("commit through the new leader: %v", err)
	}
	s.resume()
	if off := s.offset(cl2); off != 30 {
		t.Fatalf("committed offset %d after the paused node resumed, want 30: the delete given up before 30 was committed dropped it", off)
	}
}

// TestClusterDeleteGroupOvertakenWhilePaused: a group delete that
// reached the log after later writes of the group would drop them.
func TestClusterDeleteGroupOvertakenWhilePaused(t *testing.T) {
	s := newOvertake(t)
	if err := s.commit(s.ctx, s.cl, 10); err != nil {
		t.Fatal(err)
	}
	cl2 := s.late(func(ctx context.Context, cl *Client) error { return cl.DeleteGroup(ctx, s.f, "grp") })
	if err := s.commit(s.ctx, cl2, 30); err != nil {
		t.Fatalf("commit through the new leader: %v", err)
	}
	s.resume()
	if off := s.offset(cl2); off != 30 {
		t.Fatalf("committed offset %d after the paused node resumed, want 30: the group delete given up before 30 was committed dropped it", off)
	}
}

// TestClusterCommitOvertakenByGroupDelete: a commit that reached the log
// after the group was deleted and claimed again by the same coordinator
// would bring back an offset of the deleted group.
func TestClusterCommitOvertakenByGroupDelete(t *testing.T) {
	s := newOvertake(t)
	cl2 := s.late(func(ctx context.Context, cl *Client) error { return s.commit(ctx, cl, 20) })
	if err := cl2.DeleteGroup(s.ctx, s.f, "grp"); err != nil {
		t.Fatalf("delete through the new leader: %v", err)
	}
	if owner, err := cl2.ClaimGroup(s.ctx, "grp", s.f); err != nil || owner != s.f.Broker {
		t.Fatalf("claim again %d %v", owner, err)
	}
	s.resume()
	if off := s.offset(cl2); off != -1 {
		t.Fatalf("committed offset %d after the paused node resumed, want none: a commit sent before the group was deleted was applied after", off)
	}
}

// overtake is the set-up of the tests above: a three-node cluster, a
// client that reaches only the leader, and a read broker that claimed
// group "grp" (fence f).
type overtake struct {
	t      *testing.T
	c      *testCluster
	ctx    context.Context
	cl     *Client
	f      Fence
	tp     TopicPartition
	lead   uint64
	others []uint64
}

func newOvertake(t *testing.T) *overtake {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.LeaseDuration = time.Minute })
	s := &overtake{t: t, c: c, ctx: ctxT(t), tp: TopicPartition{Topic: "t", Partition: 0}}
	s.lead = c.waitLeader()
	for _, id := range c.ids() {
		if id != s.lead {
			s.others = append(s.others, id)
		}
	}
	s.cl = c.hub.HubClient(100, s.lead) // reaches the leader only
	t.Cleanup(func() { s.cl.Close() })
	inc, err := s.cl.RegisterBroker(s.ctx, Broker{ID: 7, Role: RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	s.f = Fence{Broker: 7, Incarnation: inc}
	if owner, err := s.cl.ClaimGroup(s.ctx, "grp", s.f); err != nil || owner != 7 {
		t.Fatalf("claim %d %v", owner, err)
	}
	return s
}

func (s *overtake) commit(ctx context.Context, cl *Client, off int64) error {
	return cl.CommitOffsets(ctx, s.f, "grp", []OffsetCommit{{TopicPartition: s.tp, Offset: off}})
}

// late pauses the leader, sends it write, which must time out (its caller
// gives up), and returns a client of the next leader.
func (s *overtake) late(write func(context.Context, *Client) error) *Client {
	s.t.Helper()
	s.c.hub.Pause(s.lead)
	sctx, cancel := shortCtx(time.Second)
	err := write(sctx, s.cl)
	cancel()
	if err == nil {
		s.t.Fatal("a write sent to the paused leader was answered")
	}
	s.c.waitLeader(s.others...)
	cl2 := s.c.hub.HubClient(101, s.others...)
	s.t.Cleanup(func() { cl2.Close() })
	return cl2
}

// resume resumes the old leader, which runs the held write, and waits
// until every node applied what the leader did.
func (s *overtake) resume() {
	s.c.hub.Resume(s.lead) // returns once the held write ran
	s.c.waitLeader()
	s.c.waitConverged()
}

// offset reads the group's committed offset of tp (-1: none).
func (s *overtake) offset(cl *Client) int64 {
	s.t.Helper()
	offs, err := cl.FetchOffsets(s.ctx, "grp", []TopicPartition{s.tp})
	if err != nil || len(offs) > 1 {
		s.t.Fatalf("fetch: %+v %v", offs, err)
	}
	if len(offs) == 0 {
		return -1
	}
	return offs[0].Offset
}

// TestClusterStaleAppendCutsNothing: a MsgApp of an older term (a deposed
// leader's, delivered late: the meta node paused 11.5 s in the nemesis
// sent its queued appends when it resumed) reaches the new leader, whose
// raft ignores it. The guard counted it as a possible cut of the log and
// lowered its floor of the last index to the message's last entry (or the
// commit index), so the next honest acknowledgement of an entry the
// leader has but has not committed was refused as "ack_past_log", a
// warning that reads like lost entries. A message of a term below the
// node's cuts nothing and no longer lowers the floor.
func TestClusterStaleAppendCutsNothing(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.ElectionTicks = 300 })
	lead := c.waitLeader()
	l := c.node(lead)
	var fs []uint64
	for _, id := range c.ids() {
		if id != lead {
			fs = append(fs, id)
		}
	}
	st := l.Status()
	if st.Term < 2 {
		t.Fatalf("term %d: no older term to forge", st.Term)
	}
	commit := st.Commit
	// The followers stop answering: the next entry stays uncommitted.
	for _, f := range fs {
		c.hub.Pause(f)
	}
	ctx, cancel := shortCtx(2 * time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = l.Client().CreateTopic(ctx, TopicSpec{Name: "uncommitted", Partitions: 1})
	}()
	var last uint64
	checkFor(t, 2*time.Second, 5*time.Millisecond, func() error {
		last, _ = l.ms.LastIndex()
		if last <= commit {
			return fmt.Errorf("last index %d, commit %d", last, commit)
		}
		return nil
	})
	msg := func(typ pb.MessageType, term uint64) *pb.Message {
		return &pb.Message{Type: new(typ), From: new(fs[0]), To: new(lead), Term: new(term)}
	}
	stale := msg(pb.MsgApp, st.Term-1)
	stale.Index, stale.LogTerm = new(uint64(1)), new(uint64(1))
	stale.Entries = []*pb.Entry{{Index: new(uint64(2)), Term: new(st.Term - 1)}}
	ack := msg(pb.MsgAppResp, st.Term)
	ack.Index = new(last)
	l.HandleRaft(stale)
	l.HandleRaft(ack)
	if n := l.Refused()["ack_past_log"]; n != 0 {
		t.Fatalf("an acknowledgement of index %d, which the leader has (commit %d), was refused as past its log after a stale append (%d refusals)", last, commit, n)
	}
	for _, f := range fs {
		c.hub.Resume(f)
	}
	<-done
}

// A member removed and added back under the same id with an empty data
// directory replays the group's log from the start, its own removal
// included, before the entry that adds it back. It must not stop at that
// old removal: it is a member again once it has applied what was
// committed (a stopped member answers "metastore: stopped" while the
// quorum runs one voter short).
func TestClusterRejoinSameIDReplaysOwnRemoval(t *testing.T) {
	c := newTestCluster(t, 3, nil) // no compaction: the removal stays in the log
	ctx := ctxT(t)
	lead := c.waitLeader()
	cl := c.node(lead).Client()
	if _, err := cl.CreateTopic(ctx, TopicSpec{Name: "before", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	f := c.follower(lead)
	if err := c.node(lead).RemoveVoter(ctx, f); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		select {
		case <-c.node(f).stopc:
			return nil
		default:
			return errors.New("removed node still running")
		}
	})
	c.stop(f)
	c.dirs[f] = t.TempDir() // a new, empty member under the old id
	c.start(f, true)
	if err := c.node(lead).AddVoter(ctx, f, c.peers[f]); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateTopic(ctx, TopicSpec{Name: "after", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		select {
		case <-c.node(f).stopc:
			return errors.New("the rejoined member stopped on replaying its own earlier removal")
		default:
		}
		if _, ok := c.node(f).Client().TopicByName("after"); !ok {
			return errors.New("the rejoined member has not caught up")
		}
		return nil
	})
	// And it still runs once caught up (the stop is not just late).
	time.Sleep(300 * time.Millisecond)
	select {
	case <-c.node(f).stopc:
		t.Fatal("the rejoined member stopped after catching up")
	default:
	}
}

// A broker that claims a group for the broker placement picked (a
// FindCoordinator answered by another broker) must not order that
// broker's writes with its own process's write sequence: each process
// numbers its writes from its own start, so the other broker's commits
// would be refused as overtaken until its counter caught up.
func TestClaimOnBehalfCarriesNoSequence(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	ctx := ctxT(t)
	cl := c.node(c.waitLeader()).Client()
	inc, err := cl.RegisterBroker(ctx, Broker{ID: 8, Role: RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	saved := commitSeq.Load()
	t.Cleanup(func() { commitSeq.Store(max(saved, commitSeq.Load())) })
	commitSeq.Store(1_000_000) // the claiming process has written a lot
	if owner, err := cl.ClaimGroup(ctx, "g", Fence{Broker: 8, Incarnation: inc, OnBehalf: true}); err != nil || owner != 8 {
		t.Fatalf("claim for 8: %d %v", owner, err)
	}
	commitSeq.Store(10) // broker 8's own process, which has written little
	f := Fence{Broker: 8, Incarnation: inc}
	offs := []OffsetCommit{{TopicPartition: TopicPartition{Topic: "t", Partition: 0}, Offset: 5}}
	if err := cl.CommitOffsets(ctx, f, "g", offs); err != nil {
		t.Fatalf("the owner's first commit: %v", err)
	}
	if err := cl.SaveGroup(ctx, f, "g", []byte("state")); err != nil {
		t.Fatalf("the owner's first save: %v", err)
	}
}
