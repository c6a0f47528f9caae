package server

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// ListPartitionReassignments (key 46). Supported: v0.
//
// Semantics: the partitions whose reassignment (AlterPartitionReassignments)
// is in progress, with Replicas (the target, then the voters being
// removed), AddingReplicas and RemovingReplicas, as Kafka reports them.
// Null Topics lists every topic; named topics or partitions that do not
// exist, or are not being reassigned, are left out, as Kafka does. A
// cancelled reassignment is not listed, even while its raft configuration
// is still being moved back.
// Version notes: v0 flexible.
// Roles: every broker (from the metastore cache).
func init() { register(46, handleListPartitionReassignments) }

func handleListPartitionReassignments(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	// Kafka: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED,
	// the named partitions echoed without replicas (the request's error
	// response).
	if !s.authorizeCluster(rc, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("DESCRIBE on the cluster is required")
		for _, rt := range req.Topics {
			st := kmsg.NewListPartitionReassignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, idx := range rt.Partitions {
				sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
				sp.Partition = idx
				sp.Replicas, sp.AddingReplicas, sp.RemovingReplicas = []int32{}, []int32{}, []int32{}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	add := func(t metastore.Topic, ids []int32) {
		st := kmsg.NewListPartitionReassignmentsResponseTopic()
		st.Topic = t.Name
		for _, p := range t.Partitions {
			if !p.Reassigning() || (ids != nil && !slices.Contains(ids, p.ID)) {
				continue
			}
			sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			sp.Partition = p.ID
			sp.Replicas = p.Replicas()
			sp.AddingReplicas = nonNil(p.Adding())
			sp.RemovingReplicas = nonNil(p.Removing())
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			resp.Topics = append(resp.Topics, st)
		}
	}
	if req.Topics == nil {
		topics := s.catalog.Topics()
		slices.SortFunc(topics, func(a, b metastore.Topic) int {
			if a.Name < b.Name {
				return -1
			}
			if a.Name > b.Name {
				return 1
			}
			return 0
		})
		for _, t := range topics {
			add(t, nil)
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		if t, ok := s.catalog.TopicByName(rt.Topic); ok {
			add(t, nonNil(rt.Partitions))
		}
	}
	return resp, nil
}

// nonNil: an empty array on the wire, never a null one.
func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
