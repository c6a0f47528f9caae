package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups (key 15). Supported: v0-6.
//
// Semantics: classic groups with their members; member metadata and
// assignments only while Stable. A group that does not exist, or is a
// KIP-848 group, is Dead (v6: GROUP_ID_NOT_FOUND with a message).
// Version notes: v1 throttle; v3 authorized operations; v4 instance id;
// v5+ flexible; v6 error message.
// Roles: the group's coordinator (read brokers).
func init() { register(15, handleDescribeGroups) }

func handleDescribeGroups(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, dg)
		}
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.DescribeGroups(ctx, req) })
	return nil, nil
}
