package server

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// ConsumerGroupHeartbeat (key 68). Supported: v0-1.
//
// Semantics: KIP-848's consumer protocol (coordinator/consumer.go): the
// broker assigns partitions with its uniform (default) or range assignor
// and each member reconciles towards its target over its heartbeats,
// revoking before it receives. Epoch 0 joins, -1 leaves, -2 is a static
// member's temporary leave.
// Version notes: flexible from v0; v1 regex subscriptions
// (SubscribedTopicRegex) and client-generated member ids (an empty member
// id on join is INVALID_REQUEST; v0 gets one generated). A regex reaches
// only the topics the member's principal may DESCRIBE: the coordinator
// asks the authorizer (installed in New) for each topic it matches.
// Roles: the group's coordinator (read brokers).
func init() { register(68, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	// Kafka: READ on the group, then DESCRIBE on every subscribed topic
	// (TOPIC_AUTHORIZATION_FAILED naming the others).
	if !s.authorizeGroup(rc, acl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	var refused []string
	for _, t := range req.SubscribedTopicNames {
		if !s.authorizeTopic(rc, acl.OpDescribe, t) {
			refused = append(refused, t)
		}
	}
	if len(refused) > 0 {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("the group has subscribed to topics that it is not authorized to describe: " + strings.Join(refused, ", "))
		return resp, nil
	}
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	cl := groupClient(rc)
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.ConsumerGroupHeartbeat(ctx, cl, req) })
	return nil, nil
}
