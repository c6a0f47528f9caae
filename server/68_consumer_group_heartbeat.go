package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
// id on join is INVALID_REQUEST; v0 gets one generated).
// Roles: the group's coordinator (read brokers).
func init() { register(68, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	cl := groupClient(rc)
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.ConsumerGroupHeartbeat(ctx, cl, req) })
	return nil, nil
}
