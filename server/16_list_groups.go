package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups (key 16). Supported: v0-5.
//
// Semantics: the groups this broker coordinates (those with metadata or
// offsets in the metastore, and those loaded here).
// Version notes: v1 throttle; v3+ flexible; v4 state filter and state; v5
// type filter and type ("classic" or "consumer").
// Roles: read brokers (a broker without a coordinator lists nothing).
func init() { register(16, handleListGroups) }

func handleListGroups(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	if s.groups == nil {
		return req.ResponseKind(), nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.ListGroups(ctx, req) })
	return nil, nil
}
