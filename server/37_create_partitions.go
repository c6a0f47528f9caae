package server

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// CreatePartitions (key 37). Supported: v0-3.
//
// Semantics: grows a topic to Count partitions. The topic is looked up
// after a barrier that makes this broker's cache current (catalogSync;
// REQUEST_TIMED_OUT when the metastore cannot be reached for it). Unknown topic:
// UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one:
// INVALID_PARTITIONS; a topic named twice: INVALID_REQUEST; an explicit
// assignment must give one list per new partition, naming distinct write
// brokers (INVALID_REPLICA_ASSIGNMENT). A request
// adding more than max.partitions.per.request partitions in all fails
// whole, and a topic that would take the cluster past max.partitions
// fails, with POLICY_VIOLATION (admin_limits.go). validate_only stops
// after the checks.
// Version notes: v2+ flexible.
// Roles: every broker (forwarded to the metastore).
func init() { register(37, handleCreatePartitions) }

func handleCreatePartitions(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := make(map[string]int)
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	// The partitions the request adds in all: past
	// max.partitions.per.request it fails whole (Kafka's controller
	// answers POLICY_VIOLATION past its fixed 10,000 records).
	var added int64
	synced := s.catalogSync(rc, req.TimeoutMillis)
	syncErr := error(nil)
	if len(req.Topics) > 0 {
		syncErr = synced()
	}
	for _, rt := range req.Topics {
		if t, ok := s.catalog.TopicByName(rt.Topic); ok && rt.Count > int32(len(t.Partitions)) {
			added += int64(rt.Count) - int64(len(t.Partitions))
		}
	}
	var reqCode int16
	var reqMsg string
	var clusterPartitions int64
	if added > int64(s.cfg.MaxPartitionsPerRequest) {
		reqCode, reqMsg = s.tooManyPerRequest(added)
	} else {
		clusterPartitions = s.clusterPartitions()
	}
	var grown []string
	// controller_mutation_rate: strict (THROTTLING_QUOTA_EXCEEDED) from v3.
	mq := s.quotas.mutations(rc, req.Version >= 3)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			st.ErrorMessage = kmsg.StringPtr(msg)
		}
		t, ok := s.catalog.TopicByName(rt.Topic)
		var limitCode int16
		var limitMsg string
		if ok && reqCode == 0 && rt.Count > int32(len(t.Partitions)) {
			limitCode, limitMsg = s.checkClusterPartitions(clusterPartitions, int64(rt.Count)-int64(len(t.Partitions)))
		}
		switch {
		case reqCode != 0:
			fail(reqCode, reqMsg)
		case seen[rt.Topic] > 1:
			fail(kerr.InvalidRequest.Code, "topic listed more than once")
		case !s.authorizeTopic(rc, acl.OpAlter, rt.Topic):
			// Kafka: ALTER on the topic, checked before existence.
			fail(kerr.TopicAuthorizationFailed.Code, "ALTER on the topic is required")
		case syncErr != nil:
			fail(kerr.RequestTimedOut.Code, catalogSyncMessage)
		case !ok:
			fail(kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %s does not exist", rt.Topic))
		case rt.Count <= int32(len(t.Partitions)):
			fail(kerr.InvalidPartitions.Code, fmt.Sprintf("topic currently has %d partitions, %d would not be an increase", len(t.Partitions), rt.Count))
		case rt.Assignment != nil && len(rt.Assignment) != int(rt.Count)-len(t.Partitions):
			fail(kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("%d new partitions but %d assignments", int(rt.Count)-len(t.Partitions), len(rt.Assignment)))
		case limitCode != 0:
			fail(limitCode, limitMsg)
		default:
			if msg := s.checkAssignment(rt.Assignment); msg != "" {
				fail(kerr.InvalidReplicaAssignment.Code, msg)
				break
			}
			if req.ValidateOnly {
				break
			}
			if !mq.spend(int(rt.Count) - len(t.Partitions)) {
				fail(kerr.ThrottlingQuotaExceeded.Code, throttlingMessage)
				break
			}
			if _, err := s.catalog.CreatePartitions(rc.ctx(), rt.Topic, rt.Count); err != nil {
				fail(errorCode(err), err.Error())
				break
			}
			grown = append(grown, rt.Topic)
			clusterPartitions += int64(rt.Count) - int64(len(t.Partitions))
			s.log.Info().Str("topic", rt.Topic).Int32("partitions", rt.Count).Msg("added partitions")
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(grown) > 0 {
		s.refreshPartitionsWithin(req.TimeoutMillis, grown)
	}
	return resp, nil
}

// checkAssignment checks the replica list of each new partition
// (checkReplicaList: the one rule for replica lists).
func (s *Server) checkAssignment(as []kmsg.CreatePartitionsRequestTopicAssignment) string {
	for i, a := range as {
		if msg := s.checkReplicaList(a.Replicas); msg != "" {
			return fmt.Sprintf("assignment %d: %s", i, msg)
		}
	}
	return ""
}
