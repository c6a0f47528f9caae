package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// DeleteGroups (key 42). Supported: v0-2.
//
// Semantics: deletes empty groups (NON_EMPTY_GROUP otherwise,
// GROUP_ID_NOT_FOUND if unknown): metadata, offsets and ownership leave
// the metastore together.
// Version notes: v1 no change; v2+ flexible.
// Roles: the group's coordinator (read brokers).
func init() { register(42, handleDeleteGroups) }

func handleDeleteGroups(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	// Authorization, as Kafka: DELETE on each group
	// (GROUP_AUTHORIZATION_FAILED for it, the others deleted).
	allowed, refused := s.authorizedGroups(rc, acl.OpDelete, req.Groups)
	if len(refused) > 0 {
		cp := *req
		cp.Groups = allowed
		req = &cp
	}
	finish := func(resp *kmsg.DeleteGroupsResponse) *kmsg.DeleteGroupsResponse {
		for _, g := range refused {
			dg := kmsg.NewDeleteGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, dg)
		}
		return resp
	}
	if len(req.Groups) == 0 {
		return finish(req.ResponseKind().(*kmsg.DeleteGroupsResponse)), nil
	}
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, g := range req.Groups {
			dg := kmsg.NewDeleteGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, dg)
		}
		return finish(resp), nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return finish(s.groups.DeleteGroups(ctx, req)) })
	return nil, nil
}
