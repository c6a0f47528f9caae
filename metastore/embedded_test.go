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
)

// catalog mirrors server.Catalog (metastore must not import server); the
// assignment below fails to compile if *Client stops satisfying it.
type catalog interface {
	ClusterID() string
	Brokers() []Broker
	Topics() []Topic
	TopicByName(name string) (Topic, bool)
	TopicByID(id TopicID) (Topic, bool)
	CreateTopic(ctx context.Context, spec TopicSpec) (Topic, error)
	DeleteTopic(ctx context.Context, id TopicID) error
	CreatePartitions(ctx context.Context, name string, total int32) (Topic, error)
	SetPartitionLimit(n int64)
	AlterTopicConfigs(ctx context.Context, name string, set map[string]string, del []string) error
	BrokerConfigs(broker int32) map[string]string
	AlterBrokerConfigs(ctx context.Context, broker int32, set map[string]string, del []string) error
	AllocateProducerIDs(ctx context.Context, count int64) (int64, error)
	ClientQuotas() (uint64, []ClientQuota)
	AlterClientQuotas(ctx context.Context, changes []QuotaChange) error
}

var _ catalog = (*Client)(nil)

// registrar mirrors server.Registrar.
type registrar interface {
	RegisterBroker(ctx context.Context, b Broker) (uint64, error)
	Heartbeat(ctx context.Context, brokerID int32, incarnation uint64) error
}

var _ registrar = (*Client)(nil)

func TestEmbeddedTopicsAndOffsets(t *testing.T) {
	dir := t.TempDir()
	n := openSingle(t, dir)
	c := n.Client()
	ctx := ctxT(t)

	cid := c.ClusterID()
	if len(cid) != 36 {
		t.Fatalf("cluster id %q", cid)
	}
	inc, err := c.RegisterBroker(ctx, Broker{ID: 0, Role: RoleCombined, Endpoints: []Endpoint{{Name: "PLAINTEXT", View: "mixed", Host: "127.0.0.1", Port: 9092}}})
	if err != nil || inc != 1 {
		t.Fatalf("register: %d %v", inc, err)
	}
	if bs := c.Brokers(); len(bs) != 1 || bs[0].Incarnation != 1 || bs[0].Endpoints[0].Port != 9092 {
		t.Fatalf("brokers: %+v", bs)
	}
	ch := c.Changed()
	top, err := c.CreateTopic(ctx, TopicSpec{Name: "orders", Partitions: 3, ReplicationFactor: -1, Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Partitions) != 3 || top.Partitions[2].Leader != 0 || len(top.Partitions[2].Voters) != 1 || top.ID == (TopicID{}) {
		t.Fatalf("topic: %+v", top)
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed not signalled by a topic creation")
	}
	ch = c.Changed()
	if err := c.CommitOffsets(ctx, Fence{}, "g0", []OffsetCommit{{TopicPartition: TopicPartition{"orders", 0}, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("Changed signalled by an offset commit")
	default:
	}
	// Visible in the cache as soon as CreateTopic returns.
	if got, ok := c.TopicByName("orders"); !ok || got.ID != top.ID {
		t.Fatalf("cache: %+v %v", got, ok)
	}
	if _, ok := c.TopicByID(top.ID); !ok {
		t.Fatal("by id")
	}
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "orders", Partitions: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("dup: %v", err)
	}
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "bad", Partitions: 0}); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("zero partitions: %v", err)
	}
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "rf", Partitions: 1, ReplicationFactor: 3}); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("rf: %v", err)
	}
	if _, err := c.CreatePartitions(ctx, "orders", 2); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("shrink: %v", err)
	}
	if top2, err := c.CreatePartitions(ctx, "orders", 5); err != nil || len(top2.Partitions) != 5 || top2.Partitions[4].ID != 4 {
		t.Fatalf("grow: %+v %v", top2, err)
	}
	if err := c.AlterTopicConfigs(ctx, "orders", map[string]string{"cleanup.policy": "compact"}, []string{"retention.ms"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.TopicByName("orders"); got.Configs["cleanup.policy"] != "compact" || got.Configs["retention.ms"] != "" || len(got.Partitions) != 5 {
		t.Fatalf("configs: %+v", got)
	}
	if err := c.AlterTopicConfigs(ctx, "nope", nil, nil); !errors.Is(err, ErrUnknownTopic) {
		t.Fatal(err)
	}
	if err := c.AlterBrokerConfigs(ctx, -1, map[string]string{"log.retention.ms": "5"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := c.BrokerConfigs(-1); got["log.retention.ms"] != "5" {
		t.Fatalf("broker configs %v", got)
	}
	p1, err := c.AllocateProducerIDs(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := c.AllocateProducerIDs(ctx, 10)
	if p2 != p1+1000 {
		t.Fatalf("pids %d %d", p1, p2)
	}

	// Offsets.
	if err := c.CommitOffsets(ctx, Fence{}, "g1", []OffsetCommit{
		{TopicPartition: TopicPartition{"orders", 0}, Offset: 10, LeaderEpoch: 1, Metadata: "m"},
		{TopicPartition: TopicPartition{"orders", 1}, Offset: 20},
	}); err != nil {
		t.Fatal(err)
	}
	offs, err := c.FetchOffsets(ctx, "g1", nil)
	if err != nil || len(offs) != 2 || offs[0].Offset != 10 || offs[0].Metadata != "m" || offs[0].LeaderEpoch != 1 || offs[0].CommitTime.IsZero() {
		t.Fatalf("fetch all: %+v %v", offs, err)
	}
	offs, _ = c.FetchOffsets(ctx, "g1", []TopicPartition{{"orders", 1}, {"orders", 7}})
	if len(offs) != 1 || offs[0].Offset != 20 {
		t.Fatalf("fetch some: %+v", offs)
	}
	if err := c.DeleteOffsets(ctx, Fence{}, "g1", []TopicPartition{{"orders", 1}}); err != nil {
		t.Fatal(err)
	}
	if offs, _ = c.FetchOffsets(ctx, "g1", nil); len(offs) != 1 {
		t.Fatalf("after delete: %+v", offs)
	}

	// Groups.
	if _, err := c.LoadGroup(ctx, "g1"); !errors.Is(err, ErrUnknownGroup) {
		t.Fatal(err)
	}
	if err := c.SaveGroup(ctx, Fence{}, "g1", []byte("state-1")); err != nil {
		t.Fatal(err)
	}
	if st, err := c.LoadGroup(ctx, "g1"); err != nil || string(st) != "state-1" {
		t.Fatalf("load: %q %v", st, err)
	}
	if p := c.PreferredGroupOwner("g1"); p != 0 {
		t.Fatalf("preferred owner %d", p)
	}
	if owner, err := c.ClaimGroup(ctx, "g1", Fence{Broker: 0}); err != nil || owner != 0 {
		t.Fatalf("claim: %d %v", owner, err)
	}
	if _, err := c.ClaimGroup(ctx, "g2", Fence{Broker: 7}); !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("claim unknown broker: %v", err)
	}
	if gs, _ := c.ListGroups(ctx); len(gs) != 2 || gs[0] != "g0" || gs[1] != "g1" {
		t.Fatalf("groups: %v", gs)
	}

	// Delete a topic.
	tmp, _ := c.CreateTopic(ctx, TopicSpec{Name: "tmp", Partitions: 1})
	if err := c.DeleteTopic(ctx, tmp.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.TopicByName("tmp"); ok {
		t.Fatal("deleted topic still cached")
	}
	if err := c.DeleteTopic(ctx, tmp.ID); !errors.Is(err, ErrUnknownTopic) {
		t.Fatal(err)
	}

	// Restart: everything intact.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "x", Partitions: 1}); !errors.Is(err, ErrStopped) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := Open(testConfig(t, 2, dir)); err == nil {
		t.Fatal("opened node 1's data dir as node 2")
	}
	n = openSingle(t, dir)
	defer n.Close()
	c = n.Client()
	if c.ClusterID() != cid {
		t.Fatalf("cluster id changed: %s -> %s", cid, c.ClusterID())
	}
	got, ok := c.TopicByName("orders")
	if !ok || got.ID != top.ID || len(got.Partitions) != 5 || got.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("after restart: %+v", got)
	}
	if _, ok := c.TopicByName("tmp"); ok {
		t.Fatal("deleted topic back")
	}
	if offs, _ = c.FetchOffsets(ctx, "g1", nil); len(offs) != 1 || offs[0].Offset != 10 {
		t.Fatalf("offsets after restart: %+v", offs)
	}
	if st, _ := c.LoadGroup(ctx, "g1"); string(st) != "state-1" {
		t.Fatal("group lost")
	}
	if p3, _ := c.AllocateProducerIDs(ctx, 1); p3 != p2+10 {
		t.Fatalf("pid cursor lost: %d", p3)
	}
	if c.BrokerConfigs(-1)["log.retention.ms"] != "5" {
		t.Fatal("broker config lost")
	}
	if inc, _ := c.RegisterBroker(ctx, Broker{ID: 0, Role: RoleCombined}); inc != 2 {
		t.Fatalf("incarnation after restart %d", inc)
	}
}

// TestEmbeddedCrashCopy copies the data dir while writes are in flight (a
// kill -9 image) and opens the copy: whatever was acknowledged before the
// copy started is there, and the node works.
func TestEmbeddedCrashCopy(t *testing.T) {
	dir := t.TempDir()
	n := openSingle(t, dir)
	defer n.Close()
	c := n.Client()
	ctx := ctxT(t)
	for i := 0; i < 20; i++ {
		if _, err := c.CreateTopic(ctx, TopicSpec{Name: fmt.Sprintf("t%d", i), Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CommitOffsets(ctx, Fence{}, "g", []OffsetCommit{{TopicPartition: TopicPartition{"t0", 0}, Offset: 42}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_ = c.CommitOffsets(ctx, Fence{}, "busy", []OffsetCommit{{TopicPartition: TopicPartition{"t1", int32(w)}, Offset: int64(i)}})
			}
		}(w)
	}
	time.Sleep(50 * time.Millisecond)
	crash := t.TempDir()
	crashCopy(t, n, crash)
	close(stop)
	wg.Wait()

	n2 := openSingle(t, crash)
	defer n2.Close()
	c2 := n2.Client()
	if len(c2.Topics()) != 20 {
		t.Fatalf("topics after crash: %d", len(c2.Topics()))
	}
	if offs, err := c2.FetchOffsets(ctx, "g", nil); err != nil || len(offs) != 1 || offs[0].Offset != 42 {
		t.Fatalf("offsets after crash: %+v %v", offs, err)
	}
	if _, err := c2.CreateTopic(ctx, TopicSpec{Name: "after", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedSnapshotAndRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, dir)
	cfg.SnapshotEntries = 50
	cfg.CompactionKeep = 10
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := n.Client()
	ctx := ctxT(t)
	for i := 0; i < 200; i++ {
		if err := c.CommitOffsets(ctx, Fence{}, "g", []OffsetCommit{{TopicPartition: TopicPartition{"t", int32(i % 7)}, Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 7}); err != nil {
		t.Fatal(err)
	}
	st := n.Status()
	if st.FirstLog <= 1 {
		t.Fatalf("log not compacted: %+v", st)
	}
	n.Close()
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c = n.Client()
	offs, err := c.FetchOffsets(ctx, "g", nil)
	if err != nil || len(offs) != 7 {
		t.Fatalf("%+v %v", offs, err)
	}
	for _, o := range offs {
		if o.Offset < 193 {
			t.Fatalf("stale offset %+v", o)
		}
	}
	if _, ok := c.TopicByName("t"); !ok {
		t.Fatal("topic lost")
	}
}

func TestPlacement(t *testing.T) {
	bs := []Broker{
		{ID: 1, Role: RoleWrite, Rack: "a"}, {ID: 2, Role: RoleWrite, Rack: "a"},
		{ID: 3, Role: RoleWrite, Rack: "b"}, {ID: 4, Role: RoleWrite, Rack: "c"},
		{ID: 10, Role: RoleRead}, {ID: 11, Role: RoleRead},
	}
	parts, err := placePartitions(bs, 0, 8, 3, nil, TopicID{}, -1)
	if err != nil {
		t.Fatal(err)
	}
	rack := map[int32]string{1: "a", 2: "a", 3: "b", 4: "c"}
	lead := map[int32]int{}
	for _, p := range parts {
		if len(p.Voters) != 3 || p.Leader != p.Voters[0] || len(p.Learners) != 2 {
			t.Fatalf("partition %+v", p)
		}
		racks := map[string]bool{}
		for _, v := range p.Voters {
			racks[rack[v]] = true
		}
		if len(racks) < 2 {
			t.Fatalf("voters on one rack: %+v", p)
		}
		lead[p.Leader]++
	}
	if len(lead) != 4 {
		t.Fatalf("leaders not spread: %v", lead)
	}
	// Combined brokers are voters, and learners where they are not voters.
	cs := []Broker{{ID: 1, Role: RoleCombined}, {ID: 2, Role: RoleCombined}, {ID: 3, Role: RoleRead}}
	ps, err := placePartitions(cs, 0, 2, 1, nil, TopicID{}, -1)
	if err != nil || !reflect.DeepEqual(ps[0].Voters, []int32{1}) || !reflect.DeepEqual(ps[0].Learners, []int32{2, 3}) ||
		!reflect.DeepEqual(ps[1].Learners, []int32{1, 3}) {
		t.Fatalf("combined placement %+v %v", ps, err)
	}
	if _, err := placePartitions(bs, 0, 1, 5, nil, TopicID{}, -1); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatal(err)
	}
	if ps, _ := placePartitions(nil, 0, 2, 1, nil, TopicID{}, -1); ps[0].Leader != -1 || len(ps[0].Voters) != 0 {
		t.Fatalf("no brokers: %+v", ps)
	}
}

// TestPartitionISR: set_partition_leader records the leader's ISR; a new
// leader or epoch without one clears it (every replica counts in sync
// until that leader reports), a stale epoch is refused, and the ISR
// survives a restart.
func TestPartitionISR(t *testing.T) {
	dir := t.TempDir()
	n := openSingle(t, dir)
	c := n.Client()
	ctx := ctxT(t)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "isr", Partitions: 1, ReplicationFactor: -1, Assignment: [][]int32{{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	part := func(c *Client) Partition {
		top, ok := c.TopicByName("isr")
		if !ok {
			t.Fatal("topic gone")
		}
		return top.Partitions[0]
	}
	if p := part(c); p.ISR != nil || !slices.Equal(p.InSync(), []int32{1, 2, 3}) {
		t.Fatalf("new partition: ISR %v, in sync %v", p.ISR, p.InSync())
	}
	steps := []struct {
		leader, epoch int32
		isr, want     []int32
		err           bool
	}{
		{leader: 1, epoch: 2, isr: []int32{1, 2, 3}, want: []int32{1, 2, 3}},
		{leader: 1, epoch: 2, isr: []int32{1, 3}, want: []int32{1, 3}},
		{leader: 1, epoch: 2, isr: nil, want: []int32{1, 3}},                   // same leader: kept
		{leader: 2, epoch: 1, isr: []int32{2}, want: []int32{1, 3}, err: true}, // stale
		{leader: 2, epoch: 3, isr: nil, want: []int32{1, 2, 3}},                // new leader: unknown
		{leader: 2, epoch: 3, isr: []int32{2, 3}, want: []int32{2, 3}},
	}
	for i, s := range steps {
		err := c.SetPartitionLeader(ctx, "isr", 0, s.leader, s.epoch, s.isr)
		if (err != nil) != s.err {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := part(c).InSync(); !slices.Equal(got, s.want) {
			t.Fatalf("step %d: in sync %v, want %v", i, got, s.want)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openSingle(t, dir)
	if p := part(n.Client()); !slices.Equal(p.ISR, []int32{2, 3}) || p.Leader != 2 {
		t.Fatalf("after restart: %+v", p)
	}
}

// TestSetPartitionLeaders: set_partition_leaders applies many partitions'
// leader changes as one write that stores the topic once and leaves one
// watch event, with set_partition_leader's rules per partition (a stale
// epoch is skipped, a new leader without an ISR clears it); a partition
// out of range refuses the whole command.
func TestSetPartitionLeaders(t *testing.T) {
	n := openSingle(t, t.TempDir())
	defer n.Close()
	c := n.Client()
	ctx := ctxT(t)
	const parts = 1000
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "many", Partitions: parts, ReplicationFactor: -1, Assignment: slices.Repeat([][]int32{{1}}, parts)}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPartitionLeader(ctx, "many", 7, 1, 9, []int32{1}); err != nil {
		t.Fatal(err)
	}
	var changes []LeaderChange
	for p := int32(0); p < parts; p++ {
		changes = append(changes, LeaderChange{Partition: p, Leader: 1, Epoch: 5})
	}
	changes[3].ISR = []int32{1}
	n.histMu.Lock()
	before := len(n.hist)
	n.histMu.Unlock()
	if err := c.SetPartitionLeaders(ctx, "many", changes); err != nil {
		t.Fatal(err)
	}
	n.histMu.Lock()
	evs := slices.Clone(n.hist[before:])
	n.histMu.Unlock()
	if len(evs) != 1 || evs[0].Kind != "topic" {
		t.Fatalf("%d leader changes left %d watch events, want 1: %+v", parts, len(evs), evs)
	}
	top, _ := c.TopicByName("many")
	for _, p := range top.Partitions {
		switch {
		case p.ID == 7:
			if p.LeaderEpoch != 9 || !slices.Equal(p.ISR, []int32{1}) {
				t.Fatalf("stale change applied: %+v", p)
			}
		case p.ID == 3:
			if p.LeaderEpoch != 5 || !slices.Equal(p.ISR, []int32{1}) {
				t.Fatalf("partition 3: %+v", p)
			}
		case p.Leader != 1 || p.LeaderEpoch != 5 || p.ISR != nil:
			t.Fatalf("partition %d: %+v", p.ID, p)
		}
	}
	bad := []LeaderChange{{Partition: 0, Leader: 1, Epoch: 6}, {Partition: parts, Leader: 1, Epoch: 6}}
	if err := c.SetPartitionLeaders(ctx, "many", bad); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("out of range: %v", err)
	}
	if top, _ := c.TopicByName("many"); top.Partitions[0].LeaderEpoch != 5 {
		t.Fatalf("refused command changed partition 0: %+v", top.Partitions[0])
	}
	if err := c.SetPartitionLeaders(ctx, "gone", changes[:1]); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}

	// One write per partition (the old publisher, or replayed
	// set_partition_leader entries) leaves a topic copy each: the
	// history keeps at most histMaxWeight partitions of them, and a
	// watcher behind what it dropped gets an image.
	from := c.Revision()
	for i := 0; i < 2*histMaxWeight/parts; i++ {
		if err := c.SetPartitionLeader(ctx, "many", int32(i%parts), 1, 10, nil); err != nil {
			t.Fatal(err)
		}
	}
	n.histMu.Lock()
	held, weight, floor := 0, n.histWeight, n.histFloor
	for i := range n.hist {
		held += n.hist[i].weight()
	}
	n.histMu.Unlock()
	if held != weight || weight > histMaxWeight || weight < histMaxWeight-parts-1 {
		t.Fatalf("history holds %d partitions (counted %d), want at most %d", held, weight, histMaxWeight)
	}
	if floor <= from {
		t.Fatalf("history floor %d not past %d", floor, from)
	}
	resp := n.watch(ctx, from, 0)
	if resp.Image == nil || resp.Image.Rev < floor {
		t.Fatalf("watcher behind the history: %+v", resp)
	}
}

// TestRegisterPlacesVoterless: a topic created while no write broker is
// registered (a sole broker between its lease's expiry and its
// registration again) has partitions on no voter; the next write broker
// to register becomes their voter and leader, so they get a leader.
func TestRegisterPlacesVoterless(t *testing.T) {
	n := openSingle(t, t.TempDir())
	defer n.Close()
	c := n.Client()
	ctx := ctxT(t)
	top, err := c.CreateTopic(ctx, TopicSpec{Name: "gap", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range top.Partitions {
		if len(p.Voters) != 0 || p.Leader != -1 {
			t.Fatalf("created with no broker: %+v", p)
		}
	}
	if _, err := c.RegisterBroker(ctx, Broker{ID: 7, Role: RoleCombined}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := c.TopicByName("gap")
		ok := len(got.Partitions) == 2
		for _, p := range got.Partitions {
			v, _ := p.Initial()
			ok = ok && slices.Equal(p.Voters, []int32{7}) && p.Leader == 7 && slices.Equal(v, []int32{7}) && !slices.Contains(p.Learners, 7)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after registering broker 7: %+v", got.Partitions)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
