package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
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
	// Authorization, as Kafka: DESCRIBE on each group
	// (GROUP_AUTHORIZATION_FAILED for it); the authorized operations,
	// when asked for, come from the authorizer.
	allowed, refused := s.authorizedGroups(rc, acl.OpDescribe, req.Groups)
	if len(refused) > 0 {
		cp := *req
		cp.Groups = allowed
		req = &cp
	}
	finish := func(resp *kmsg.DescribeGroupsResponse) *kmsg.DescribeGroupsResponse {
		for i := range resp.Groups {
			if req.IncludeAuthorizedOperations {
				resp.Groups[i].AuthorizedOperations = s.authorizedOps(rc, acl.ResourceGroup, resp.Groups[i].Group, acl.GroupOps)
			}
		}
		for _, g := range refused {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			dg.AuthorizedOperations = -2147483648
			resp.Groups = append(resp.Groups, dg)
		}
		return resp
	}
	if len(req.Groups) == 0 {
		return finish(req.ResponseKind().(*kmsg.DescribeGroupsResponse)), nil
	}
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, dg)
		}
		return finish(resp), nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return finish(s.groups.DescribeGroups(ctx, req)) })
	return nil, nil
}
