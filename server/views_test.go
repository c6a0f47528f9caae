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
		leader, epoch, replicas, _ := v.partitionRoute("t", p)
		if !slices.Contains(tc.leaderIn, leader) || epoch != 5 || !slices.Equal(replicas, tc.replicas) {
			t.Errorf("%s: leader %d epoch %d replicas %v", tc.view, leader, epoch, replicas)
		}
	}
	// The read view spreads leaders over both read brokers.
	v := clusterView("read")
	seen := map[int32]bool{}
	for i := int32(0); i < 8; i++ {
		p.ID = i
		l, _, _, _ := v.partitionRoute("t", p)
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
		if got := v.preferredReadReplica("t", p, "b", racks); got != 12 {
			t.Fatalf("rack b: got %d, want 12", got)
		}
	}
	if got := v.preferredReadReplica("t", p, "", racks); got != 11 && got != 12 {
		t.Fatalf("no rack: got %d", got)
	}
	if got := v.preferredReadReplica("t", metastore.Partition{Voters: []int32{1}}, "", racks); got != -1 {
		t.Fatalf("no learners: got %d", got)
	}
}

// TestRouteWithFewReadReplicas: a partition with one learner (read.replicas
// = 1) is routed to that read broker in the read view, never to the other;
// one with none (read.replicas=0, or its only learner not registered)
// has no leader in the read view (LEADER_NOT_AVAILABLE: write brokers have
// no read endpoint to name) and is fetched from its raft leader in the
// mixed view (no preferred read replica).
func TestRouteWithFewReadReplicas(t *testing.T) {
	read, mixed := clusterView("read"), clusterView("mixed")
	for i := int32(0); i < 8; i++ {
		p := metastore.Partition{ID: i, Voters: []int32{1, 2}, Learners: []int32{12}, Leader: 1}
		if l, _, replicas, isr := read.partitionRoute("t", p); l != 12 || !slices.Equal(replicas, []int32{12}) || !slices.Equal(isr, []int32{12}) {
			t.Fatalf("one learner: leader %d replicas %v isr %v", l, replicas, isr)
		}
		if got := mixed.preferredReadReplica("t", p, "", nil); got != 12 {
			t.Fatalf("one learner: preferred %d", got)
		}
	}
	for _, learners := range [][]int32{nil, {13}} { // 13: not registered
		p := metastore.Partition{ID: 0, Voters: []int32{1, 2}, Learners: learners, Leader: 1}
		if l, _, replicas, _ := read.partitionRoute("t", p); l != -1 || len(replicas) != 0 {
			t.Fatalf("learners %v: read leader %d replicas %v", learners, l, replicas)
		}
		if l, _, _, _ := mixed.partitionRoute("t", p); l != 1 {
			t.Fatalf("learners %v: mixed leader %d", learners, l)
		}
		if got := mixed.preferredReadReplica("t", p, "", nil); got != -1 {
			t.Fatalf("learners %v: preferred %d", learners, got)
		}
	}
}
