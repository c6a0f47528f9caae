package server

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// AlterPartitionReassignments (key 45). Supported: v0-1.
//
// Semantics: moves each named partition to the given replicas, or cancels
// its reassignment when Replicas is null, as Kafka's controller does. In
// Sluice the replicas are the partition's raft voters, i.e. write brokers
// (the replica list Metadata shows in the write view); read brokers follow
// every partition as learners by themselves and cannot be named.
// The answer comes once the target is recorded in the metastore; the
// partition's raft leader then carries the move out (server/reassign.go)
// and ListPartitionReassignments shows it until it completes. A partition
// of a shared-mode topic has no raft group and no data on its replicas:
// the metastore completes its move when it records it, naming a new write
// leader if the current one is moved out (docs/shared-storage.md).
// Errors per partition: UNKNOWN_TOPIC_OR_PARTITION; INVALID_REPLICA_ASSIGNMENT
// for an empty list, a broker named twice, or one that is not a registered
// write broker; NO_REASSIGNMENT_IN_PROGRESS when cancelling a partition that
// is not being reassigned; INVALID_REPLICATION_FACTOR (v1) when the count
// of replicas changes and AllowReplicationFactorChange is false (KIP-860).
// A list with the current replicas in another order completes at once
// (it changes the preferred leader).
// Version notes: v0+ flexible; v1 AllowReplicationFactorChange.
// Roles: every broker (forwarded to the metastore).
func init() { register(45, handleAlterPartitionReassignments) }

func handleAlterPartitionReassignments(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.Version < 1 || req.AllowReplicationFactorChange
	fixedRF := !resp.AllowReplicationFactorChange
	// Kafka: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at
	// the top and for every partition named (the request's error
	// response).
	if !s.authorizeCluster(rc, acl.OpAlter) {
		msg := kmsg.StringPtr("ALTER on the cluster is required")
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, msg
		for _, rt := range req.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.ErrorMessage = rp.Partition, kerr.ClusterAuthorizationFailed.Code, msg
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	ra, ok := s.catalog.(reassigner)
	changed := false
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		t, known := s.catalog.TopicByName(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			fail := func(code int16, msg string) {
				sp.ErrorCode = code
				sp.ErrorMessage = kmsg.StringPtr(msg)
			}
			switch {
			case !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				fail(kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("partition %s-%d does not exist", rt.Topic, rp.Partition))
			case !ok:
				fail(kerr.UnknownServerError.Code, "this broker's catalog cannot record reassignments")
			default:
				if rp.Replicas != nil {
					if msg := s.checkReplicaList(rp.Replicas); msg != "" {
						fail(kerr.InvalidReplicaAssignment.Code, msg)
						break
					}
				}
				err := ra.AlterReassignment(rc.ctx(), rt.Topic, rp.Partition, rp.Replicas, fixedRF)
				if err != nil {
					fail(reassignCode(err), err.Error())
					break
				}
				changed = true
				s.log.Info().Str("topic", rt.Topic).Int32("partition", rp.Partition).Ints32("replicas", rp.Replicas).
					Bool("cancel", rp.Replicas == nil).Msg("partition reassignment")
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if changed {
		// Open the replica here at once if this broker is added.
		s.refreshPartitions()
	}
	return resp, nil
}

// checkReplicaList gives Kafka's messages for a bad replica list before it
// goes to the metastore (which checks it again, atomically): not empty, no
// longer than there are brokers, each a registered write broker, once. It
// is the one rule for the replica lists of reassignments, CreateTopics
// assignments and CreatePartitions assignments (INVALID_REPLICA_ASSIGNMENT).
func (s *Server) checkReplicaList(ids []int32) string {
	if len(ids) == 0 {
		return "the replica list is empty"
	}
	brokers := s.catalog.Brokers()
	if len(ids) > len(brokers) {
		// Before anything else, so that an absurd list costs nothing.
		return fmt.Sprintf("the replica list names %d brokers, more than the %d registered", len(ids), len(brokers))
	}
	role := map[int32]metastore.BrokerRole{}
	for _, b := range brokers {
		role[b.ID] = b.Role
	}
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return fmt.Sprintf("broker %d is listed more than once", id)
		}
		r, ok := role[id]
		if !ok {
			return fmt.Sprintf("broker %d is not registered", id)
		}
		if r == metastore.RoleRead {
			return fmt.Sprintf("broker %d is a read broker; replicas are write brokers (read brokers follow every partition as learners)", id)
		}
	}
	return ""
}

func reassignCode(err error) int16 {
	switch {
	case errors.Is(err, metastore.ErrNoReassignment):
		return kerr.NoReassignmentInProgress.Code
	case errors.Is(err, metastore.ErrInvalidReplicaAssignment):
		return kerr.InvalidReplicaAssignment.Code
	}
	return errorCode(err)
}
