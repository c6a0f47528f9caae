package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// Heartbeat (key 12). Supported: v0-4.
//
// Semantics: keeps a classic member's session alive; REBALANCE_IN_PROGRESS
// tells it to rejoin, ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID that it
// fell out of the group.
// Version notes: v1 throttle; v3 instance id; v4+ flexible.
// Roles: the group's coordinator (read brokers).
func init() { register(12, handleHeartbeat) }

func handleHeartbeat(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	if !s.authorizeGroup(rc, acl.OpRead, req.Group) { // Kafka: READ on the group
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.Heartbeat(ctx, req) })
	return nil, nil
}
