package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// SyncGroup (key 14). Supported: v0-5.
//
// Semantics: the leader hands in the assignment; every member gets its
// own. A follower that syncs first waits for the leader. When the leader's
// assignment arrives the group is saved to the metastore and Stable.
// Version notes: v1 throttle; v3 instance id; v4+ flexible; v5 protocol
// type and name, checked against the group's (INCONSISTENT_GROUP_PROTOCOL).
// Roles: the group's coordinator (read brokers).
func init() { register(14, handleSyncGroup) }

func handleSyncGroup(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	if !s.authorizeGroup(rc, acl.OpRead, req.Group) { // Kafka: READ on the group
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	cl := groupClient(rc)
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.SyncGroup(ctx, cl, req) })
	return nil, nil
}
