package server

import (
	"slices"
	"testing"

	"github.com/sluice-broker/sluice/metastore"
)

// A 3 write + 2 read cluster: 1-3 write, 11-12 read.
func clusterView(name string) brokerView {
	v := brokerView{name: name, listed: map[int32]bool{}, writers: map[int32]bool{}, readers: map[int32]bool{}}
	for _, id := range []int32{1, 2, 3} {
		v.writers[id] = true
	}
	for _, id := range []int32{11, 12} {
		v.readers[id] = true
	}
	for id := range v.writers {
		if v.wants(id) {
			v.listed[id] = true
		}
	}
	for id := range v.readers {
		if v.wants(id) {
			v.listed[id] = true
		}
	}
	return v
}

func TestPartitionRoute(t *testing.T) {
	p := metastore.Partition{ID: 0, Voters: []int32{2, 3, 1}, Learners: []int32{11, 12}, Leader: 2, LeaderEpoch: 5}
	for _, tc := range []struct {
		view     string
		leaderIn []int32
		replicas []int32
	}{
		{"write", []int32{2}, []int32{2, 3, 1}},
		{"read", []int32{11, 12}, []int32{11, 12}},
		{"mixed", []int32{2}, []int32{2, 3, 1, 11, 12}},
	} {
		v := clusterView(tc.view)
		leader, epoch, replicas, _, _ := v.partitionRoute("t", p, false)
		if !slices.Contains(tc.leaderIn, leader) || epoch != 5 || !slices.Equal(replicas, tc.replicas) {
			t.Errorf("%s: leader %d epoch %d replicas %v", tc.view, leader, epoch, replicas)
		}
	}
	// The read view spreads leaders over both read brokers.
	v := clusterView("read")
	seen := map[int32]bool{}
	for i := int32(0); i < 8; i++ {
		p.ID = i
		l, _, _, _, _ := v.partitionRoute("t", p, false)
		seen[l] = true
	}
	if !seen[11] || !seen[12] {
		t.Errorf("read leaders not spread: %v", seen)
	}
}

func TestPreferredReadReplica(t *testing.T) {
	v := clusterView("mixed")
	p := metastore.Partition{ID: 3, Voters: []int32{1}, Learners: []int32{11, 12}, Leader: 1}
	racks := map[int32]string{11: "a", 12: "b"}
	for i := 0; i < 4; i++ {
		if got := v.preferredReadReplica("t", p, false, "b", racks); got != 12 {
			t.Fatalf("rack b: got %d, want 12", got)
		}
	}
	if got := v.preferredReadReplica("t", p, false, "", racks); got != 11 && got != 12 {
		t.Fatalf("no rack: got %d", got)
	}
	if got := v.preferredReadReplica("t", metastore.Partition{Voters: []int32{1}}, false, "", racks); got != -1 {
		t.Fatalf("no learners: got %d", got)
	}
}

// TestRouteWithFewReadReplicas: a partition with one learner (read.replicas
// = 1) is routed to that read broker in the read view, never to the other;
// one with none (read.replicas=0, or its only learner not registered, then
// listed offline) has no leader in the read view (LEADER_NOT_AVAILABLE: write brokers have
// no read endpoint to name) and is fetched from its raft leader in the
// mixed view (no preferred read replica).
func TestRouteWithFewReadReplicas(t *testing.T) {
	read, mixed := clusterView("read"), clusterView("mixed")
	for i := int32(0); i < 8; i++ {
		p := metastore.Partition{ID: i, Voters: []int32{1, 2}, Learners: []int32{12}, Leader: 1}
		if l, _, replicas, isr, _ := read.partitionRoute("t", p, false); l != 12 || !slices.Equal(replicas, []int32{12}) || !slices.Equal(isr, []int32{12}) {
			t.Fatalf("one learner: leader %d replicas %v isr %v", l, replicas, isr)
		}
		if got := mixed.preferredReadReplica("t", p, false, "", nil); got != 12 {
			t.Fatalf("one learner: preferred %d", got)
		}
	}
	for _, learners := range [][]int32{nil, {13}} { // 13: not registered
		p := metastore.Partition{ID: 0, Voters: []int32{1, 2}, Learners: learners, Leader: 1}
		if l, _, replicas, _, offline := read.partitionRoute("t", p, false); l != -1 || !slices.Equal(replicas, learners) || !slices.Equal(offline, learners) {
			t.Fatalf("learners %v: read leader %d replicas %v offline %v", learners, l, replicas, offline)
		}
		if l, _, _, _, _ := mixed.partitionRoute("t", p, false); l != 1 {
			t.Fatalf("learners %v: mixed leader %d", learners, l)
		}
		if got := mixed.preferredReadReplica("t", p, false, "", nil); got != -1 {
			t.Fatalf("learners %v: preferred %d", learners, got)
		}
	}
}

// TestPartitionISR: each view's ISR is the leader's reported ISR among the
// replicas it shows; a broker that is not registered is shown offline and
// out of the ISR; with no ISR reported every replica counts in sync, so a
// healthy 3+2 partition is fully replicated in every view.
func TestPartitionISR(t *testing.T) {
	down := func(v brokerView, ids ...int32) brokerView {
		for _, id := range ids {
			delete(v.writers, id)
			delete(v.readers, id)
			delete(v.listed, id)
		}
		return v
	}
	for _, tc := range []struct {
		name                   string
		view                   brokerView
		reported               []int32
		replicas, isr, offline []int32
	}{
		{"write, healthy", clusterView("write"), nil, []int32{2, 3, 1}, []int32{2, 3, 1}, []int32{}},
		{"read, healthy", clusterView("read"), nil, []int32{11, 12}, []int32{11, 12}, []int32{}},
		{"mixed, healthy", clusterView("mixed"), nil, []int32{2, 3, 1, 11, 12}, []int32{2, 3, 1, 11, 12}, []int32{}},
		{"mixed, reported", clusterView("mixed"), []int32{2, 1, 3, 12, 11}, []int32{2, 3, 1, 11, 12}, []int32{2, 3, 1, 11, 12}, []int32{}},
		{"write, voter lagging", clusterView("write"), []int32{2, 1, 11, 12}, []int32{2, 3, 1}, []int32{2, 1}, []int32{}},
		{"mixed, learner lagging", clusterView("mixed"), []int32{2, 3, 1, 12}, []int32{2, 3, 1, 11, 12}, []int32{2, 3, 1, 12}, []int32{}},
		{"read, learner lagging", clusterView("read"), []int32{2, 3, 1, 12}, []int32{11, 12}, []int32{12}, []int32{}},
		{"write, voter down", down(clusterView("write"), 3), []int32{2, 3, 1}, []int32{2, 3, 1}, []int32{2, 1}, []int32{3}},
		{"mixed, voter down", down(clusterView("mixed"), 3), nil, []int32{2, 3, 1, 11, 12}, []int32{2, 1, 11, 12}, []int32{3}},
		{"read, voter down", down(clusterView("read"), 3), nil, []int32{11, 12}, []int32{11, 12}, []int32{}},
		{"read, learner down", down(clusterView("read"), 11), nil, []int32{12, 11}, []int32{12}, []int32{11}},
		{"mixed, learner down", down(clusterView("mixed"), 11), nil, []int32{2, 3, 1, 11, 12}, []int32{2, 3, 1, 12}, []int32{11}},
	} {
		p := metastore.Partition{ID: 0, Voters: []int32{2, 3, 1}, Learners: []int32{11, 12}, Leader: 2, LeaderEpoch: 5, ISR: tc.reported}
		_, _, replicas, isr, offline := tc.view.partitionRoute("t", p, false)
		if !slices.Equal(replicas, tc.replicas) || !slices.Equal(isr, tc.isr) || !slices.Equal(offline, tc.offline) {
			t.Errorf("%s: replicas %v isr %v offline %v, want %v %v %v", tc.name, replicas, isr, offline, tc.replicas, tc.isr, tc.offline)
		}
	}
	// A lagging read broker is not offered as a preferred read replica.
	v := clusterView("mixed")
	for i := int32(0); i < 8; i++ {
		p := metastore.Partition{ID: i, Voters: []int32{1}, Learners: []int32{11, 12}, Leader: 1, ISR: []int32{1, 12}}
		if got := v.preferredReadReplica("t", p, false, "", nil); got != 12 {
			t.Fatalf("partition %d: preferred %d with 11 lagging", i, got)
		}
	}
}

// TestSharedPartitionRoute: a shared partition is served by every read
// broker from the shared storage, so the read view spreads shared
// partitions over all the read brokers it lists (all replicas, all in
// sync) whatever learners were placed, none included (read.replicas=0),
// and the mixed view offers any read broker as the preferred read
// replica; a raft partition with no learner has no read route.
func TestSharedPartitionRoute(t *testing.T) {
	read, mixed := clusterView("read"), clusterView("mixed")
	led := map[int32]bool{}
	for i := int32(0); i < 8; i++ {
		p := metastore.Partition{ID: i, Voters: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 2}
		l, epoch, replicas, isr, offline := read.partitionRoute("s", p, true)
		if (l != 11 && l != 12) || epoch != 2 || !slices.Equal(replicas, []int32{11, 12}) || !slices.Equal(isr, []int32{11, 12}) || len(offline) != 0 {
			t.Fatalf("shared partition %d in the read view: leader %d epoch %d replicas %v isr %v offline %v", i, l, epoch, replicas, isr, offline)
		}
		led[l] = true
		if got := mixed.preferredReadReplica("s", p, true, "", nil); got != 11 && got != 12 {
			t.Fatalf("shared partition %d: preferred read replica %d", i, got)
		}
		if l, _, _, _, _ := read.partitionRoute("s", p, false); l != -1 {
			t.Fatalf("raft partition %d without learners routed to %d in the read view", i, l)
		}
	}
	if len(led) != 2 {
		t.Fatalf("8 shared partitions on read brokers %v: not spread over both", led)
	}
}
