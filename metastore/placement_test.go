package metastore

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestPlaceLearnersByReadReplicas: placement at creation takes
// read.replicas learners per partition, never a voter, spread over the
// read brokers, one per rack first; -1 takes them all and 0 none. The
// result depends only on the inputs (apply runs it on every meta node).
func TestPlaceLearnersByReadReplicas(t *testing.T) {
	bs := []Broker{
		{ID: 1, Role: RoleWrite}, {ID: 2, Role: RoleWrite},
		{ID: 10, Role: RoleRead}, {ID: 11, Role: RoleRead}, {ID: 12, Role: RoleRead}, {ID: 13, Role: RoleRead},
	}
	id := TopicID{1, 2, 3}
	ps, err := placePartitions(bs, 0, 32, 2, nil, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	held := map[int32]int{}
	for _, p := range ps {
		if len(p.Learners) != 1 || p.Learners[0] < 10 {
			t.Fatalf("partition %+v", p)
		}
		if iv, il := p.Initial(); !reflect.DeepEqual(iv, p.Voters) || !reflect.DeepEqual(il, p.Learners) {
			t.Fatalf("initial configuration %v %v of %+v", iv, il, p)
		}
		held[p.Learners[0]]++
	}
	// 32 partitions over 4 brokers: each holds some, none most.
	for _, b := range []int32{10, 11, 12, 13} {
		if held[b] == 0 || held[b] > 16 {
			t.Fatalf("learners not spread: %v", held)
		}
	}
	again, _ := placePartitions(bs, 0, 32, 2, nil, id, 1)
	if !reflect.DeepEqual(again, ps) {
		t.Fatal("placement is not deterministic")
	}
	other, _ := placePartitions(bs, 0, 32, 2, nil, TopicID{9}, 1)
	if reflect.DeepEqual(other, ps) {
		t.Fatal("two topics got the same learner placement")
	}

	all, _ := placePartitions(bs, 0, 2, 2, nil, id, -1)
	none, _ := placePartitions(bs, 0, 2, 2, nil, id, 0)
	many, _ := placePartitions(bs, 0, 2, 2, nil, id, 9)
	for i := range all {
		if !reflect.DeepEqual(all[i].Learners, []int32{10, 11, 12, 13}) || len(none[i].Learners) != 0 ||
			!reflect.DeepEqual(many[i].Learners, all[i].Learners) {
			t.Fatalf("-1 %v, 0 %v, 9 %v", all[i].Learners, none[i].Learners, many[i].Learners)
		}
	}

	// Racks: two learners of three brokers on racks a, a, b always
	// cover both racks.
	racked := []Broker{{ID: 1, Role: RoleWrite}, {ID: 10, Role: RoleRead, Rack: "a"}, {ID: 11, Role: RoleRead, Rack: "a"}, {ID: 12, Role: RoleRead, Rack: "b"}}
	rps, _ := placePartitions(racked, 0, 16, 1, nil, id, 2)
	for _, p := range rps {
		if len(p.Learners) != 2 || !slices.Contains(p.Learners, 12) {
			t.Fatalf("learners on one rack: %+v", p)
		}
	}

	// A combined broker is never a learner of a partition it votes for.
	cs := []Broker{{ID: 1, Role: RoleCombined}, {ID: 2, Role: RoleCombined}}
	cps, _ := placePartitions(cs, 0, 4, 1, nil, id, 1)
	for _, p := range cps {
		if len(p.Learners) != 1 || slices.Contains(p.Voters, p.Learners[0]) {
			t.Fatalf("combined %+v", p)
		}
	}
}

// TestTrimLearners: shrinking drops learners whose broker is not
// registered before registered ones.
func TestTrimLearners(t *testing.T) {
	readers := []Broker{{ID: 10, Role: RoleRead}, {ID: 12, Role: RoleRead}}
	for part := int32(0); part < 16; part++ {
		p := Partition{ID: part, Voters: []int32{1}, Learners: []int32{10, 11, 12}}
		if !trimLearners(TopicID{4}, &p, readers, 2) || !reflect.DeepEqual(p.Learners, []int32{10, 12}) {
			t.Fatalf("partition %d kept %v", part, p.Learners)
		}
		if !trimLearners(TopicID{4}, &p, readers, 0) || len(p.Learners) != 0 {
			t.Fatalf("partition %d trimmed to 0 kept %v", part, p.Learners)
		}
	}
	p := Partition{Learners: []int32{10}}
	if trimLearners(TopicID{}, &p, readers, -1) || trimLearners(TopicID{}, &p, readers, 1) {
		t.Fatal("nothing to trim, but reported a change")
	}
}

// TestReadReplicasFollowBrokers: with read.replicas=1 and two read
// brokers, one that registers later takes no slot, one retired after the
// grace hands its slots to the other, and a topic with the default (-1)
// still gets every read broker; a topic with 0 never gets a learner.
func TestReadReplicasFollowBrokers(t *testing.T) {
	cfg := testConfig(t, 1, t.TempDir())
	cfg.LeaseDuration = time.Hour
	cfg.LearnerGrace = 300 * time.Millisecond
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := n.Client()
	ctx := ctxT(t)
	reg := func(b Broker) uint64 {
		inc, err := c.RegisterBroker(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return inc
	}
	learners := func(topic string) [][]int32 {
		tp, _ := c.TopicByName(topic)
		var out [][]int32
		for _, p := range tp.Partitions {
			out = append(out, p.Learners)
		}
		return out
	}
	each := func(l []int32, k int) [][]int32 {
		var out [][]int32
		for range k {
			out = append(out, l)
		}
		return out
	}
	reg(Broker{ID: 1, Role: RoleWrite})
	inc10 := reg(Broker{ID: 10, Role: RoleRead})
	for _, s := range []TopicSpec{
		{Name: "one", Partitions: 4, Configs: map[string]string{"read.replicas": "1"}},
		{Name: "zero", Partitions: 4, Configs: map[string]string{"read.replicas": "0"}},
		{Name: "all", Partitions: 4},
	} {
		if _, err := c.CreateTopic(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if got := learners("one"); !reflect.DeepEqual(got, each([]int32{10}, 4)) {
		t.Fatalf("one at creation: %v", got)
	}
	reg(Broker{ID: 11, Role: RoleRead})
	if got := learners("one"); !reflect.DeepEqual(got, each([]int32{10}, 4)) {
		t.Fatalf("one after 11 joined: %v", got)
	}
	if got := learners("all"); !reflect.DeepEqual(got, each([]int32{10, 11}, 4)) {
		t.Fatalf("all after 11 joined: %v", got)
	}
	if got := learners("zero"); !reflect.DeepEqual(got, each(nil, 4)) {
		t.Fatalf("zero: %v", got)
	}

	// 10 leaves for good: its slots go to 11.
	if err := c.UnregisterBroker(ctx, 10, inc10); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := learners("one"); !reflect.DeepEqual(got, each([]int32{11}, 4)) {
			return fmt.Errorf("one: %v", got)
		}
		return nil
	})
	if got := learners("all"); !reflect.DeepEqual(got, each([]int32{11}, 4)) {
		t.Fatalf("all after 10 retired: %v", got)
	}
	// 10 comes back: the read.replicas=1 topic is full, the -1 one is not.
	reg(Broker{ID: 10, Role: RoleRead})
	if got := learners("one"); !reflect.DeepEqual(got, each([]int32{11}, 4)) {
		t.Fatalf("one after 10 came back: %v", got)
	}
	if got := learners("all"); !reflect.DeepEqual(got, each([]int32{10, 11}, 4)) {
		t.Fatalf("all after 10 came back: %v", got)
	}
	if got := learners("zero"); !reflect.DeepEqual(got, each(nil, 4)) {
		t.Fatalf("zero: %v", got)
	}
}

// TestAlterReadReplicas: changing read.replicas grows and shrinks the
// learners of an existing topic (keeping the ones it has when growing,
// dropping unregistered ones first when shrinking), the cluster-wide
// default moves the topics without their own value, and it all survives
// a restart.
func TestAlterReadReplicas(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, dir)
	cfg.LeaseDuration = time.Hour
	cfg.LearnerGrace = time.Hour
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := n.Client()
	ctx := ctxT(t)
	incs := map[int32]uint64{}
	for _, b := range []Broker{{ID: 1, Role: RoleWrite}, {ID: 10, Role: RoleRead}, {ID: 11, Role: RoleRead}, {ID: 12, Role: RoleRead}} {
		inc, err := c.RegisterBroker(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		incs[b.ID] = inc
	}
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "a", Partitions: 8, Configs: map[string]string{"read.replicas": "1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "d", Partitions: 8}); err != nil {
		t.Fatal(err)
	}
	parts := func(topic string) []Partition {
		tp, _ := c.TopicByName(topic)
		return tp.Partitions
	}
	check := func(topic string, k int, prev []Partition, allow ...int32) []Partition {
		t.Helper()
		ps := parts(topic)
		for i, p := range ps {
			if len(p.Learners) != k {
				t.Fatalf("%s: want %d learners: %+v", topic, k, p)
			}
			for _, l := range p.Learners {
				if !slices.Contains(allow, l) {
					t.Fatalf("%s: learner %d not among %v: %+v", topic, l, allow, p)
				}
			}
			if prev != nil && k >= len(prev[i].Learners) {
				for _, l := range prev[i].Learners {
					if !slices.Contains(p.Learners, l) {
						t.Fatalf("%s: growing dropped learner %d: %v -> %v", topic, l, prev[i].Learners, p.Learners)
					}
				}
			}
		}
		return ps
	}
	one := check("a", 1, nil, 10, 11, 12)
	created := slices.Clone(one)
	if err := c.AlterTopicConfigs(ctx, "a", map[string]string{"read.replicas": "2"}, nil); err != nil {
		t.Fatal(err)
	}
	grown := check("a", 2, one, 10, 11, 12)
	if err := c.AlterTopicConfigs(ctx, "a", map[string]string{"read.replicas": "-1"}, nil); err != nil {
		t.Fatal(err)
	}
	check("a", 3, grown, 10, 11, 12)
	// 12 stops (within the grace, so it keeps its slots): shrinking to 2
	// drops it from every partition before a registered broker.
	if err := c.UnregisterBroker(ctx, 12, incs[12]); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterTopicConfigs(ctx, "a", map[string]string{"read.replicas": "2"}, nil); err != nil {
		t.Fatal(err)
	}
	check("a", 2, nil, 10, 11)
	if err := c.AlterTopicConfigs(ctx, "a", map[string]string{"read.replicas": "0"}, nil); err != nil {
		t.Fatal(err)
	}
	check("a", 0, nil)
	// Removing the topic's value falls back to the default, -1: every
	// registered read broker.
	if err := c.AlterTopicConfigs(ctx, "a", nil, []string{"read.replicas"}); err != nil {
		t.Fatal(err)
	}
	check("a", 2, nil, 10, 11)
	// The initial configuration stays the placement at creation.
	for i, p := range parts("a") {
		if _, il := p.Initial(); !reflect.DeepEqual(il, created[i].Learners) {
			t.Fatalf("initial learners %v, created with %v", il, created[i].Learners)
		}
	}

	// The cluster-wide default moves "d" (no value of its own; 12 is
	// still a learner there, in its grace) but not "a" once it has one.
	check("d", 3, nil, 10, 11, 12)
	if err := c.AlterTopicConfigs(ctx, "a", map[string]string{"read.replicas": "2"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterBrokerConfigs(ctx, -1, map[string]string{"read.replicas": "1"}, nil); err != nil {
		t.Fatal(err)
	}
	check("d", 1, nil, 10, 11)
	check("a", 2, nil, 10, 11)
	// A per-broker value is not the cluster default: nothing moves.
	if err := c.AlterBrokerConfigs(ctx, 10, map[string]string{"read.replicas": "-1"}, nil); err != nil {
		t.Fatal(err)
	}
	check("d", 1, nil, 10, 11)
	// New partitions follow the topic's effective value.
	if _, err := c.CreatePartitions(ctx, "d", 10); err != nil {
		t.Fatal(err)
	}
	dParts := check("d", 1, nil, 10, 11)
	if len(dParts) != 10 {
		t.Fatalf("%d partitions", len(dParts))
	}
	// Removing the cluster default brings "d" back to every registered
	// read broker.
	if err := c.AlterBrokerConfigs(ctx, -1, nil, []string{"read.replicas"}); err != nil {
		t.Fatal(err)
	}
	check("d", 2, nil, 10, 11)

	// Durable: a restart reads the same placement back.
	want := map[string][]Partition{"a": parts("a"), "d": parts("d")}
	n.Close()
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c = n.Client()
	for name, ps := range want {
		if got := parts(name); !reflect.DeepEqual(got, ps) {
			t.Fatalf("%s after restart %+v, want %+v", name, got, ps)
		}
	}
	// And placement goes on from the stored state: 12 registers again and
	// fills "d" (default -1) but not "a" (2, full).
	if _, err := c.RegisterBroker(ctx, Broker{ID: 12, Role: RoleRead}); err != nil {
		t.Fatal(err)
	}
	check("d", 3, nil, 10, 11, 12)
	check("a", 2, nil, 10, 11)
	if err := c.AlterTopicConfigs(ctx, "nope", map[string]string{"read.replicas": "1"}, nil); !errors.Is(err, ErrUnknownTopic) {
		t.Fatal(err)
	}
}
