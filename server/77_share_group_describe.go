package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// ShareGroupDescribe (key 77). Supported: v1 (see shareServed).
//
// Semantics: share groups with their epoch, the "simple" assignor and
// each member's subscription and assignment. A group of another type or
// an unknown one answers GROUP_ID_NOT_FOUND with a message.
// Version notes: flexible; v0 was Kafka's early access version, not
// served.
// Roles: the group's coordinator.
func init() { register(77, handleShareGroupDescribe) }

func handleShareGroupDescribe(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupDescribeRequest)
	// Authorization, as Kafka: DESCRIBE on each group.
	allowed, refused := s.authorizedGroups(rc, acl.OpDescribe, req.GroupIDs)
	if len(refused) > 0 {
		cp := *req
		cp.GroupIDs = allowed
		req = &cp
	}
	finish := func(resp *kmsg.ShareGroupDescribeResponse) *kmsg.ShareGroupDescribeResponse {
		for i := range resp.Groups {
			if req.IncludeAuthorizedOperations {
				resp.Groups[i].AuthorizedOperations = s.authorizedOps(rc, acl.ResourceGroup, resp.Groups[i].GroupID, acl.GroupOps)
			}
		}
		for _, g := range refused {
			dg := kmsg.NewShareGroupDescribeResponseGroup()
			dg.GroupID, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, dg)
		}
		return resp
	}
	if len(req.GroupIDs) == 0 {
		return finish(req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)), nil
	}
	if !s.shareServed(rc.conn.listener) {
		resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
		for _, g := range req.GroupIDs {
			dg := kmsg.NewShareGroupDescribeResponseGroup()
			dg.GroupID, dg.ErrorCode = g, kerr.UnsupportedVersion.Code
			resp.Groups = append(resp.Groups, dg)
		}
		return finish(resp), nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return finish(s.groups.ShareGroupDescribe(ctx, req)) })
	return nil, nil
}
