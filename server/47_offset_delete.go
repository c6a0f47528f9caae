package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// OffsetDelete (key 47). Supported: v0.
//
// Semantics: deletes a group's committed offsets for partitions of topics
// no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise).
// Roles: the group's coordinator (read brokers).
func init() { register(47, handleOffsetDelete) }

func handleOffsetDelete(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	// Authorization, as Kafka: DELETE on the group (top-level
	// GROUP_AUTHORIZATION_FAILED), READ on each topic (its partitions
	// TOPIC_AUTHORIZATION_FAILED, the others deleted).
	if !s.authorizeGroup(rc, acl.OpDelete, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	var refused []kmsg.OffsetDeleteRequestTopic
	allowed := req.Topics[:0:0]
	for _, t := range req.Topics {
		if s.authorizeTopic(rc, acl.OpRead, t.Topic) {
			allowed = append(allowed, t)
		} else {
			refused = append(refused, t)
		}
	}
	if len(refused) > 0 {
		cp := *req
		cp.Topics = allowed
		req = &cp
	}
	finish := func(resp *kmsg.OffsetDeleteResponse) *kmsg.OffsetDeleteResponse {
		for _, t := range refused {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return finish(s.groups.OffsetDelete(ctx, req)) })
	return nil, nil
}
