package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// LeaveGroup (key 13). Supported: v0-5.
//
// Semantics: the member leaves and the group rebalances at once.
// Version notes: v1 throttle; v3 a batch of members, each by member id or
// instance id, with a per-member error; v4+ flexible; v5 reason.
// Roles: the group's coordinator (read brokers).
func init() { register(13, handleLeaveGroup) }

func handleLeaveGroup(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	if !s.authorizeGroup(rc, acl.OpRead, req.Group) { // Kafka: READ on the group
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.LeaveGroup(ctx, req) })
	return nil, nil
}
