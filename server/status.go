package server

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// What this broker knows locally, for the admin status page: its replicas
// and the groups it coordinates. The values are the ones /metrics exports
// (metrics_collector.go), computed by the same functions.

// ReplicaStatus is this broker's replica of one partition.
type ReplicaStatus struct {
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64 // as consumers see it (the visible high watermark)
	Leader         bool
	LeaderID       int32 // the leader this replica knows, -1 for none
	Term           uint64
	// InSync and Lags are reported by the leader only: the replicas it
	// counts in sync (voters and learners) and each other member's lag
	// in entries, offsets and time (the sluice_partition_follower_lag_*
	// series).
	InSync []int32
	Lags   map[int32]partition.MemberLag
}

// LocalReplicas returns this broker's replicas by topic id and partition.
func (s *Server) LocalReplicas() map[metastore.TopicID]map[int32]ReplicaStatus {
	out := map[metastore.TopicID]map[int32]ReplicaStatus{}
	add := func(k partition.Key, st ReplicaStatus) {
		if out[k.TopicID] == nil {
			out[k.TopicID] = map[int32]ReplicaStatus{}
		}
		out[k.TopicID][k.Index] = st
	}
	for _, r := range s.raft.Replicas() {
		st := ReplicaStatus{LogStartOffset: r.LogStartOffset(), LogEndOffset: r.LogEndOffset(), HighWatermark: r.HighWatermark(),
			Leader: r.IsLeader(), LeaderID: int32(r.Leader()), Term: r.Term()}
		if st.Leader {
			for _, id := range r.InSyncReplicas() {
				st.InSync = append(st.InSync, int32(id))
			}
			st.Lags = map[int32]partition.MemberLag{}
			for id, lag := range r.MemberLags() {
				st.Lags[int32(id)] = lag
			}
		}
		add(r.Key(), st)
	}
	return out
}

// GroupStatus is one group this broker coordinates.
type GroupStatus struct {
	Name  string
	State string
	Type  string // classic or consumer
	// MemberCount counts the members; Members lists them for a classic
	// group (DescribeGroups' view).
	MemberCount int
	Members     []GroupMemberStatus
	// Offsets are the group's committed offsets; Err says why they are
	// missing (the metastore did not answer in time).
	Offsets []GroupOffset
	Err     string
}

// GroupMemberStatus is one member of a classic group.
type GroupMemberStatus struct {
	MemberID, ClientID, ClientHost string
}

// GroupOffset is a group's committed offset of one partition and its lag:
// the high watermark consumers see on this broker's replica minus the
// offset (sluice_group_lag); HasLag is false where this broker hosts no
// replica of the partition.
type GroupOffset struct {
	Topic     string
	Partition int32
	Committed int64
	Lag       int64
	HasLag    bool
}

// GroupsStatus returns the groups coordinated here, by name, with their
// offsets and lag (one metastore read per group, groupLagTimeout in all,
// as a scrape makes).
func (s *Server) GroupsStatus(ctx context.Context) []GroupStatus {
	if s.groups == nil {
		return nil
	}
	hw := map[partition.Key]int64{}
	for id, parts := range s.LocalReplicas() {
		for p, st := range parts {
			hw[partition.Key{TopicID: id, Index: p}] = st.HighWatermark
		}
	}
	ctx, cancel := context.WithTimeout(ctx, groupLagTimeout)
	defer cancel()
	var out []GroupStatus
	for _, g := range s.groups.Stats() {
		gs := GroupStatus{Name: g.Name, State: g.State, Type: g.Type, MemberCount: g.Members}
		if g.Type != "consumer" {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Version = 5
			req.Groups = []string{g.Name}
			for _, dg := range s.groups.DescribeGroups(ctx, req).Groups {
				for _, m := range dg.Members {
					gs.Members = append(gs.Members, GroupMemberStatus{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost})
				}
			}
		}
		offs, err := s.groupOffsets(ctx, g.Name, hw)
		if err != nil {
			gs.Err = err.Error()
		}
		gs.Offsets = offs
		out = append(out, gs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// groupOffsets reads a group's committed offsets and computes each one's
// lag from the high watermarks of the partitions hosted here (hw): the
// rule behind sluice_group_lag and the status page.
func (s *Server) groupOffsets(ctx context.Context, group string, hw map[partition.Key]int64) ([]GroupOffset, error) {
	offs, err := s.groups.CommittedOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	var out []GroupOffset
	for _, o := range offs {
		t, ok := s.catalog.TopicByName(o.Topic)
		if !ok {
			continue // a deleted topic's offsets linger until expiry
		}
		g := GroupOffset{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset}
		if h, ok := hw[partition.Key{TopicID: t.ID, Index: o.Partition}]; ok {
			g.Lag, g.HasLag = max(h-o.Offset, 0), true
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}
