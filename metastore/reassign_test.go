package metastore

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestReassignment: start, reorder, change, cancel and finish a partition's
// reassignment, with the errors Kafka's controller gives for each bad case;
// the state survives a restart.
func TestReassignment(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, dir)
	cfg.LeaseDuration = time.Hour
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := n.Client()
	ctx := ctxT(t)
	registerBrokers(t, c, []Broker{{ID: 1, Role: RoleWrite}, {ID: 2, Role: RoleWrite}, {ID: 3, Role: RoleWrite}, {ID: 10, Role: RoleRead}}...)
	top, err := c.CreateTopic(ctx, TopicSpec{Name: "r", Partitions: 2, ReplicationFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	part := func() Partition {
		tp, _ := c.TopicByName("r")
		return tp.Partitions[0]
	}
	orig := part().Voters // [1 2]
	if !reflect.DeepEqual(orig, []int32{1, 2}) || !reflect.DeepEqual(part().Learners, []int32{10}) {
		t.Fatalf("placement %+v", part())
	}

	bad := []struct {
		target []int32
		fixed  bool
		want   error
	}{
		{[]int32{}, false, ErrInvalidReplicaAssignment},
		{[]int32{1, 1}, false, ErrInvalidReplicaAssignment},
		{[]int32{1, 9}, false, ErrInvalidReplicaAssignment},  // not registered
		{[]int32{1, 10}, false, ErrInvalidReplicaAssignment}, // a read broker
		{[]int32{1, 2, 3}, true, ErrInvalidReplicationFactor},
	}
	for _, b := range bad {
		if err := c.AlterReassignment(ctx, "r", 0, b.target, b.fixed); !errors.Is(err, b.want) {
			t.Fatalf("target %v: %v, want %v", b.target, err, b.want)
		}
	}
	if err := c.AlterReassignment(ctx, "nope", 0, []int32{1}, false); !errors.Is(err, ErrUnknownTopic) {
		t.Fatal(err)
	}
	if err := c.AlterReassignment(ctx, "r", 5, []int32{1}, false); !errors.Is(err, ErrUnknownTopic) {
		t.Fatal(err)
	}
	if err := c.AlterReassignment(ctx, "r", 0, nil, false); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("cancel with nothing in progress: %v", err)
	}

	// The same brokers in another order: done at once (preferred leader).
	if err := c.AlterReassignment(ctx, "r", 0, []int32{2, 1}, true); err != nil {
		t.Fatal(err)
	}
	if p := part(); !reflect.DeepEqual(p.Voters, []int32{2, 1}) || p.Target != nil || p.Reassigning() {
		t.Fatalf("reorder %+v", p)
	}

	// A move: 1 leaves, 3 joins.
	if err := c.AlterReassignment(ctx, "r", 0, []int32{2, 3}, true); err != nil {
		t.Fatal(err)
	}
	p := part()
	if !p.Reassigning() || !reflect.DeepEqual(p.Adding(), []int32{3}) || !reflect.DeepEqual(p.Removing(), []int32{1}) ||
		!reflect.DeepEqual(p.Replicas(), []int32{2, 3, 1}) {
		t.Fatalf("in progress %+v adding %v removing %v replicas %v", p, p.Adding(), p.Removing(), p.Replicas())
	}
	// A finish for another target is refused.
	if err := c.FinishReassignment(ctx, top.ID, "r", 0, []int32{2, 1}); err == nil {
		t.Fatal("finish of a stale target accepted")
	}
	// Cancel: the target goes back to the voters and is no longer shown
	// as a reassignment, but stays until the raft group is back.
	if err := c.AlterReassignment(ctx, "r", 0, nil, false); err != nil {
		t.Fatal(err)
	}
	if p := part(); p.Reassigning() || !reflect.DeepEqual(p.Target, []int32{2, 1}) {
		t.Fatalf("cancelled %+v", p)
	}
	if err := c.AlterReassignment(ctx, "r", 0, nil, false); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("second cancel: %v", err)
	}
	if err := c.FinishReassignment(ctx, top.ID, "r", 0, []int32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if p := part(); p.Target != nil || !reflect.DeepEqual(p.Voters, []int32{2, 1}) {
		t.Fatalf("after revert %+v", p)
	}

	// Move again and finish: the new voters, nothing in progress.
	if err := c.AlterReassignment(ctx, "r", 0, []int32{3, 2}, false); err != nil {
		t.Fatal(err)
	}
	if err := c.FinishReassignment(ctx, top.ID, "r", 0, []int32{2, 3}); err != nil {
		t.Fatal(err)
	}
	if p := part(); p.Target != nil || !reflect.DeepEqual(p.Voters, []int32{3, 2}) || !reflect.DeepEqual(p.Learners, []int32{10}) {
		t.Fatalf("finished %+v", p)
	}
	// The initial configuration stays what the partition was created with.
	if iv, il := part().Initial(); !reflect.DeepEqual(iv, []int32{1, 2}) || !reflect.DeepEqual(il, []int32{10}) {
		t.Fatalf("initial configuration %v %v", iv, il)
	}
	// A wrong topic id (the topic was recreated) is refused.
	if err := c.FinishReassignment(ctx, TopicID{9}, "r", 1, []int32{2, 3}); !errors.Is(err, ErrUnknownTopic) {
		t.Fatal(err)
	}

	// Durable: a restart reads it back.
	if err := c.AlterReassignment(ctx, "r", 1, []int32{1, 3}, false); err != nil {
		t.Fatal(err)
	}
	want, _ := c.TopicByName("r")
	n.Close()
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	got, _ := n.Client().TopicByName("r")
	if !reflect.DeepEqual(got.Partitions, want.Partitions) {
		t.Fatalf("after restart %+v, want %+v", got.Partitions, want.Partitions)
	}
}

// TestLearnersFollowReadBrokers: a read broker that registers after a
// topic exists becomes a learner of its partitions; one that stays away
// longer than LearnerGrace loses them, one that comes back in time keeps
// them.
func TestLearnersFollowReadBrokers(t *testing.T) {
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
	reg(Broker{ID: 1, Role: RoleWrite})
	inc10 := reg(Broker{ID: 10, Role: RoleRead})
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "l", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	learners := func() [][]int32 {
		tp, _ := c.TopicByName("l")
		var out [][]int32
		for _, p := range tp.Partitions {
			out = append(out, p.Learners)
		}
		return out
	}
	inc11 := reg(Broker{ID: 11, Role: RoleRead})
	if got := learners(); !reflect.DeepEqual(got, [][]int32{{10, 11}, {10, 11}}) {
		t.Fatalf("after 11 joined: %v", got)
	}
	// Registering again (a restart) changes nothing.
	inc11 = reg(Broker{ID: 11, Role: RoleRead})
	if got := learners(); !reflect.DeepEqual(got, [][]int32{{10, 11}, {10, 11}}) {
		t.Fatalf("after 11 re-registered: %v", got)
	}

	// 11 leaves and comes back within the grace: kept.
	if err := c.UnregisterBroker(ctx, 11, inc11); err != nil {
		t.Fatal(err)
	}
	time.Sleep(cfg.LearnerGrace / 3)
	reg(Broker{ID: 11, Role: RoleRead})
	time.Sleep(cfg.LearnerGrace + 200*time.Millisecond)
	if got := learners(); !reflect.DeepEqual(got, [][]int32{{10, 11}, {10, 11}}) {
		t.Fatalf("11 came back in time: %v", got)
	}

	// 10 leaves for good.
	if err := c.UnregisterBroker(ctx, 10, inc10); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if got := learners(); !reflect.DeepEqual(got, [][]int32{{11}, {11}}) {
			return errors.New("learners still include 10")
		}
		return nil
	})
	// remove_learner is refused for a registered broker.
	if _, err := c.write(ctx, command{Op: opRemoveLearner, BrokerID: 11}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("remove a registered learner: %v", err)
	}
	// And 10 is added back when it registers again.
	reg(Broker{ID: 10, Role: RoleRead})
	if got := learners(); !reflect.DeepEqual(got, [][]int32{{10, 11}, {10, 11}}) {
		t.Fatalf("10 came back: %v", got)
	}
}

// TestReassignmentCodecCompat: the new commands round-trip through the
// entry codec, and a topic stored before Target existed still decodes.
func TestReassignmentCodecCompat(t *testing.T) {
	id := TopicID{7}
	b := &proposalBatch{Node: 1, Nonce: 2, Cmds: []command{
		{Seq: 1, Op: opAlterReassignment, Name: "t", Partition: 3, Target: []int32{4, 5}, FixedRF: true},
		{Seq: 2, Op: opAlterReassignment, Name: "t", Cancel: true},
		{Seq: 3, Op: opFinishReassignment, TopicID: &id, Name: "t", Target: []int32{5, 4}},
		{Seq: 4, Op: opRemoveLearner, BrokerID: 11},
	}}
	got, err := decodeBatch(encodeBatch(b))
	if err != nil || !reflect.DeepEqual(got, b) {
		t.Fatalf("round trip %+v %v", got, err)
	}
	old := []byte(`{"ID":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"Name":"o","Partitions":[{"ID":0,"Voters":[1,2],"Learners":[10],"Leader":1,"LeaderEpoch":4}],"Configs":null,"Revision":9}`)
	var tp Topic
	if err := json.Unmarshal(old, &tp); err != nil {
		t.Fatal(err)
	}
	if p := tp.Partitions[0]; p.Target != nil || p.Reassigning() || !reflect.DeepEqual(p.Replicas(), []int32{1, 2}) {
		t.Fatalf("old topic %+v", p)
	}
	// A partition with nothing in progress stores no Target key.
	js, _ := json.Marshal(tp)
	var m map[string][]map[string]any
	_ = json.Unmarshal(js, &m)
	if _, ok := m["Partitions"][0]["Target"]; ok {
		t.Fatalf("Target stored when nil: %s", js)
	}
}

// TestKeepInitial: a partition stored before InitVoters existed had never
// changed, so its first change records its placement then as the initial
// one, and later changes keep it.
func TestKeepInitial(t *testing.T) {
	p := Partition{Voters: []int32{1, 2}, Learners: []int32{10}}
	if iv, il := p.Initial(); !reflect.DeepEqual(iv, p.Voters) || !reflect.DeepEqual(il, p.Learners) {
		t.Fatalf("unrecorded initial %v %v", iv, il)
	}
	keepInitial(&p)
	p.Voters, p.Learners = []int32{2, 3}, []int32{10, 11}
	keepInitial(&p)
	if iv, il := p.Initial(); !reflect.DeepEqual(iv, []int32{1, 2}) || !reflect.DeepEqual(il, []int32{10}) {
		t.Fatalf("initial after changes %v %v", iv, il)
	}
	js, _ := json.Marshal(p)
	var back Partition
	if err := json.Unmarshal(js, &back); err != nil || !reflect.DeepEqual(back, p) {
		t.Fatalf("round trip %+v %v", back, err)
	}
}

// TestFounderDeparted: a broker of a partition's initial configuration
// that a completed reassignment removed is no founder any more, also once
// it is placed on the partition again; the brokers that never left are.
// A partition stored before Departed existed decodes with its initial
// brokers as founders.
func TestFounderDeparted(t *testing.T) {
	cfg := testConfig(t, 1, t.TempDir())
	cfg.LeaseDuration = time.Hour
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := n.Client()
	ctx := ctxT(t)
	registerBrokers(t, c, []Broker{{ID: 1, Role: RoleWrite}, {ID: 2, Role: RoleWrite}, {ID: 3, Role: RoleWrite}, {ID: 10, Role: RoleRead}}...)
	top, err := c.CreateTopic(ctx, TopicSpec{Name: "f", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	part := func() Partition {
		tp, _ := c.TopicByName("f")
		return tp.Partitions[0]
	}
	first := part().Voters[0]
	other := first%3 + 1
	if p := part(); !p.Founder(first) || !p.Founder(10) || p.Founder(other) || p.Departed != nil {
		t.Fatalf("new partition %+v", p)
	}
	move := func(to int32) {
		t.Helper()
		if err := c.AlterReassignment(ctx, "f", 0, []int32{to}, true); err != nil {
			t.Fatal(err)
		}
		if err := c.FinishReassignment(ctx, top.ID, "f", 0, []int32{to}); err != nil {
			t.Fatal(err)
		}
	}
	move(other)
	if p := part(); p.Founder(first) || p.Founder(other) || !p.Founder(10) || !reflect.DeepEqual(p.Departed, []int32{first}) {
		t.Fatalf("moved away %+v", p)
	}
	// Placed again (in Target, then a voter): still no founder.
	if err := c.AlterReassignment(ctx, "f", 0, []int32{first}, true); err != nil {
		t.Fatal(err)
	}
	if p := part(); p.Founder(first) {
		t.Fatalf("moving back %+v", p)
	}
	if err := c.FinishReassignment(ctx, top.ID, "f", 0, []int32{first}); err != nil {
		t.Fatal(err)
	}
	if p := part(); p.Founder(first) || !reflect.DeepEqual(p.Voters, []int32{first}) || !reflect.DeepEqual(p.Departed, []int32{first}) {
		t.Fatalf("moved back %+v", p)
	}

	var old Partition
	if err := json.Unmarshal([]byte(`{"ID":0,"Voters":[2],"Learners":[10],"Leader":2,"InitVoters":[1],"InitLearners":[10]}`), &old); err != nil {
		t.Fatal(err)
	}
	if !old.Founder(1) || !old.Founder(10) || old.Founder(2) {
		t.Fatalf("old encoding %+v", old)
	}
}
