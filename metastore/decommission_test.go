package metastore

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDecommission: decommissioning a write broker gives each of its voter
// replicas a target on another write broker (spread by load), a read
// broker's learner slots go to another read broker, placement leaves both
// out afterwards (new topics, reassignments, registering again), a move
// with nowhere to go is refused without changing anything, the mark
// survives a restart, and recommissioning undoes it.
func TestDecommission(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, dir)
	cfg.LeaseDuration = time.Hour
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := n.Client()
	ctx := ctxT(t)
	registerBrokers(t, c, []Broker{{ID: 1, Role: RoleWrite}, {ID: 2, Role: RoleWrite}, {ID: 3, Role: RoleWrite}, {ID: 4, Role: RoleWrite}, {ID: 10, Role: RoleRead}, {ID: 11, Role: RoleRead}, {ID: 12, Role: RoleRead}}...)
	// 8 partitions over 4 write brokers, 2 learners each.
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "d", Partitions: 8, ReplicationFactor: 3, Configs: map[string]string{ReadReplicasConfig: "2"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DecommissionBroker(ctx, 99); !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("unknown broker: %v", err)
	}
	if err := c.RecommissionBroker(ctx, 4); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("recommission of a broker in service: %v", err)
	}
	before := len(c.DecommissionProgress(4))
	if before == 0 {
		t.Fatal("broker 4 holds no replica")
	}
	if err := c.DecommissionBroker(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if got := c.Decommissioned(); !reflect.DeepEqual(got, []int32{4}) {
		t.Fatalf("decommissioned %v", got)
	}
	tp, _ := c.TopicByName("d")
	moved := map[int32]int{}
	for _, p := range tp.Partitions {
		if !slices.Contains(p.Voters, 4) {
			if p.Target != nil {
				t.Fatalf("partition %d without broker 4 got a target %v", p.ID, p.Target)
			}
			continue
		}
		if len(p.Target) != 3 || slices.Contains(p.Target, 4) {
			t.Fatalf("partition %d: voters %v target %v", p.ID, p.Voters, p.Target)
		}
		for _, id := range p.Target {
			if !slices.Contains(p.Voters, id) {
				moved[id]++
			}
		}
	}
	// Broker 4 held 6 of the 24 voter replicas; each of 1-3 held 6 too,
	// and a move goes to the one holding fewest: 2 each.
	if len(moved) != 3 || moved[1] != 2 || moved[2] != 2 || moved[3] != 2 {
		t.Fatalf("new replicas per broker %v", moved)
	}
	// Progress: every partition still names broker 4 as a voter until
	// its move finishes (what the partition leader records).
	for _, p := range tp.Partitions {
		if p.Target != nil {
			if err := c.FinishReassignment(ctx, tp.ID, "d", p.ID, p.Target); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r := c.DecommissionProgress(4); len(r) != 0 {
		t.Fatalf("still remaining %v", r)
	}

	// A read broker: its learner slots go to the others.
	if err := c.DecommissionBroker(ctx, 10); err != nil {
		t.Fatal(err)
	}
	tp, _ = c.TopicByName("d")
	for _, p := range tp.Partitions {
		if slices.Contains(p.Learners, 10) || len(p.Learners) != 2 || !reflect.DeepEqual(p.Learners, []int32{11, 12}) {
			t.Fatalf("partition %d learners %v", p.ID, p.Learners)
		}
	}
	// Placement leaves them out: a new topic, a reassignment, registering
	// again.
	nt, err := c.CreateTopic(ctx, TopicSpec{Name: "n", Partitions: 4, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range nt.Partitions {
		if slices.Contains(p.Voters, 4) || slices.Contains(p.Learners, 10) {
			t.Fatalf("new partition %d placed on a decommissioned broker: %+v", p.ID, p)
		}
	}
	if err := c.AlterReassignment(ctx, "n", 0, []int32{1, 2, 4}, false); !errors.Is(err, ErrInvalidReplicaAssignment) {
		t.Fatalf("reassignment onto a decommissioned broker: %v", err)
	}
	if _, err := c.RegisterBroker(ctx, Broker{ID: 10, Role: RoleRead}); err != nil {
		t.Fatal(err)
	}
	if r := c.DecommissionProgress(10); len(r) != 0 {
		t.Fatalf("a decommissioned read broker that registers again got slots: %v", r)
	}

	// Nowhere to go: without 4 and 3, two write brokers are left for
	// partitions of three replicas. Refused, and nothing changed.
	revBefore, _ := c.TopicByName("d")
	if err := c.DecommissionBroker(ctx, 3); err == nil || !strings.Contains(err.Error(), "no write broker can take broker 3's replica") {
		t.Fatalf("decommission with nowhere to move: %v", err)
	}
	if got := c.Decommissioned(); !reflect.DeepEqual(got, []int32{4, 10}) {
		t.Fatalf("a refused decommission left a mark: %v", got)
	}
	if after, _ := c.TopicByName("d"); after.Revision != revBefore.Revision {
		t.Fatal("a refused decommission changed the topic")
	}

	// The marks survive a restart (they are state, in the snapshot and
	// the image a remote client loads).
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c = n.Client()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.Decommissioned(); !reflect.DeepEqual(got, []int32{4, 10}) {
		t.Fatalf("after restart: decommissioned %v", got)
	}
	// Recommissioning the read broker gives it its slots back where some
	// are free: none with read.replicas 2 on topic d, all of them on n
	// (read.replicas -1).
	if err := c.RecommissionBroker(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if got := c.Decommissioned(); !reflect.DeepEqual(got, []int32{4}) {
		t.Fatalf("after recommission: %v", got)
	}
	nt, _ = c.TopicByName("n")
	for _, p := range nt.Partitions {
		if !slices.Contains(p.Learners, 10) {
			t.Fatalf("recommissioned read broker is no learner of n-%d: %v", p.ID, p.Learners)
		}
	}
	// The last read broker in service stays.
	for _, id := range []int32{11, 12} {
		if err := c.DecommissionBroker(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DecommissionBroker(ctx, 10); err == nil || !strings.Contains(err.Error(), "last read broker") {
		t.Fatalf("decommissioning the last read broker: %v", err)
	}
}
