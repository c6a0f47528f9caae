package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete (key 47). Supported: v0.
//
// Semantics: deletes a group's committed offsets for partitions of topics
// no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise).
// Roles: the group's coordinator (read brokers).
func init() { register(47, handleOffsetDelete) }

func handleOffsetDelete(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.OffsetDelete(ctx, req) })
	return nil, nil
}
