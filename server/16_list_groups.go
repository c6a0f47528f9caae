package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
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
	// Authorization, as Kafka: DESCRIBE on the cluster lists every
	// group; without it only the groups the client may DESCRIBE.
	all := s.authorizeCluster(rc, acl.OpDescribe)
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		resp := s.groups.ListGroups(ctx, req)
		if !all {
			kept := resp.Groups[:0]
			for _, g := range resp.Groups {
				if s.authorizeGroup(rc, acl.OpDescribe, g.Group) {
					kept = append(kept, g)
				}
			}
			resp.Groups = kept
		}
		return resp
	})
	return nil, nil
}
