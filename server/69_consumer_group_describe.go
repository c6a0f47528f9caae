package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
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
	// Authorization, as Kafka: DESCRIBE on each group
	// (GROUP_AUTHORIZATION_FAILED for it); the authorized operations,
	// when asked for, come from the authorizer.
	allowed, refused := s.authorizedGroups(rc, acl.OpDescribe, req.Groups)
	if len(refused) > 0 {
		cp := *req
		cp.Groups = allowed
		req = &cp
	}
	finish := func(resp *kmsg.ConsumerGroupDescribeResponse) *kmsg.ConsumerGroupDescribeResponse {
		for i := range resp.Groups {
			if req.IncludeAuthorizedOperations {
				resp.Groups[i].AuthorizedOperations = s.authorizedOps(rc, acl.ResourceGroup, resp.Groups[i].Group, acl.GroupOps)
			}
		}
		for _, g := range refused {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			dg.AuthorizedOperations = -2147483648
			resp.Groups = append(resp.Groups, dg)
		}
		return resp
	}
	if len(req.Groups) == 0 {
		return finish(req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)), nil
	}
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, g := range req.Groups {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, dg)
		}
		return finish(resp), nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return finish(s.groups.ConsumerGroupDescribe(ctx, req)) })
	return nil, nil
}
