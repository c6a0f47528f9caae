package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// JoinGroup (key 11). Supported: v0-9.
//
// Semantics: the classic protocol's join (coordinator/group.go). The
// answer waits until the rebalance completes: every member rejoined, or the
// rebalance timeout passed. Any protocol type is accepted; the group's
// protocol is the one all members support that most of them prefer.
// Version notes: v1 rebalance timeout (v0 uses the session timeout); v2
// throttle; v4 MEMBER_ID_REQUIRED for a new dynamic member (KIP-394, never
// below v4); v5 instance id (static membership, FENCED_INSTANCE_ID); v6+
// flexible; v7 protocol type and name in the answer; v8 reason; v9
// SkipAssignment for a static leader that rejoins unchanged.
// Roles: the group's coordinator (read brokers).
func init() { register(11, handleJoinGroup) }

func handleJoinGroup(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	if !s.authorizeGroup(rc, acl.OpRead, req.Group) { // Kafka: READ on the group
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	cl := groupClient(rc)
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.JoinGroup(ctx, cl, req) })
	return nil, nil
}
