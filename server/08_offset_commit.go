package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// OffsetCommit (key 8). Supported: v0-10.
//
// Semantics: offsets go to the metastore (never a data log) after the
// coordinator's generation and member checks (coordinator/offsets.go).
// Version notes: v0 has no generation or member (accepted while the group
// is Empty); v1 generation, member id and a per-partition timestamp
// (ignored); v2-4 retention time (ignored: offsets do not expire); v6
// leader epoch; v7 instance id (FENCED_INSTANCE_ID); v8+ flexible; v9
// GROUP_ID_NOT_FOUND and KIP-848 member epochs; v10 topics by id.
// Roles: the group's coordinator (read brokers).
func init() { register(8, handleOffsetCommit) }

func handleOffsetCommit(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	failed := func(resp *kmsg.OffsetCommitResponse, topics []kmsg.OffsetCommitRequestTopic, code int16) *kmsg.OffsetCommitResponse {
		for _, t := range topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	// Authorization, as Kafka: READ on the group (every partition
	// GROUP_AUTHORIZATION_FAILED), then READ on each topic (its
	// partitions TOPIC_AUTHORIZATION_FAILED, the others committed).
	if !s.authorizeGroup(rc, acl.OpRead, req.Group) {
		return failed(req.ResponseKind().(*kmsg.OffsetCommitResponse), req.Topics, kerr.GroupAuthorizationFailed.Code), nil
	}
	var allowed, refused []kmsg.OffsetCommitRequestTopic
	for _, t := range req.Topics {
		if name, known := s.topicNameOf(t.Topic, t.TopicID, req.Version >= 10); known && !s.authorizeTopic(rc, acl.OpRead, name) {
			refused = append(refused, t)
		} else {
			allowed = append(allowed, t)
		}
	}
	if s.groups == nil {
		return failed(req.ResponseKind().(*kmsg.OffsetCommitResponse), req.Topics, kerr.CoordinatorNotAvailable.Code), nil
	}
	if len(refused) > 0 && len(allowed) == 0 {
		// Nothing left to commit: the group is not touched (a simple
		// commit would create it), as in Kafka.
		return failed(req.ResponseKind().(*kmsg.OffsetCommitResponse), refused, kerr.TopicAuthorizationFailed.Code), nil
	}
	if len(refused) > 0 {
		cp := *req
		cp.Topics = allowed
		req = &cp
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		return failed(s.groups.OffsetCommit(ctx, req), refused, kerr.TopicAuthorizationFailed.Code)
	})
	return nil, nil
}
