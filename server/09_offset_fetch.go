package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch (key 9). Supported: v0-10.
//
// Semantics: committed offsets read linearizably from the metastore; a
// partition with no commit answers -1. require_stable (v7) never waits:
// without transactions no offset is pending.
// Version notes: v0 reads the same offsets as v1 (there is no ZooKeeper
// store); v2 null topics = all, top-level error; v3 throttle; v5 leader
// epoch; v6+ flexible; v7 require_stable; v8 several groups; v9 member id
// and epoch (KIP-848 groups: STALE_MEMBER_EPOCH); v10 topics by id.
// Roles: the group's coordinator (read brokers).
func init() { register(9, handleOffsetFetch) }

func handleOffsetFetch(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.OffsetFetch(ctx, req) })
	return nil, nil
}
