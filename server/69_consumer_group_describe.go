package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe (key 69). Supported: v0-1.
//
// Semantics: KIP-848 groups with epochs, assignor, and each member's
// current and target assignment. A classic or unknown group answers
// GROUP_ID_NOT_FOUND with a message.
// Version notes: flexible from v0; v1 member type (always 1, consumer).
// Roles: the group's coordinator (read brokers).
func init() { register(69, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, g := range req.Groups {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, dg)
		}
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.ConsumerGroupDescribe(ctx, req) })
	return nil, nil
}
