package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, g := range req.Groups {
			dg := kmsg.NewDeleteGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, dg)
		}
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.DeleteGroups(ctx, req) })
	return nil, nil
}
