package server

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// ShareGroupHeartbeat (key 76). Supported: v1 (see shareServed).
//
// Semantics: KIP-932 membership (coordinator/share.go): epoch 0 joins
// with a client-generated member id and the subscribed topics, -1 leaves;
// every member is assigned every partition of the topics it subscribes
// to, so any number of members share a partition. A member silent for
// group.share.session.timeout.ms is removed and the records it held are
// released at once. A group of another type answers GROUP_ID_NOT_FOUND.
// Version notes: flexible; v0 was Kafka's early access version, not
// served; v1 TOPIC_AUTHORIZATION_FAILED.
// Roles: the group's coordinator.
func init() { register(76, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareGroupHeartbeatRequest)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp, nil
	}
	// Kafka: READ on the group, then DESCRIBE on every subscribed topic.
	if !s.shareServed(rc.conn.listener) {
		return fail(kerr.UnsupportedVersion.Code, "share groups are served by read brokers on listeners of the read view")
	}
	if !s.authorizeGroup(rc, acl.OpRead, req.GroupID) {
		return fail(kerr.GroupAuthorizationFailed.Code, "")
	}
	var refused []string
	for _, t := range req.SubscribedTopicNames {
		if !s.authorizeTopic(rc, acl.OpDescribe, t) {
			refused = append(refused, t)
		}
	}
	if len(refused) > 0 {
		return fail(kerr.TopicAuthorizationFailed.Code, "the group has subscribed to topics that it is not authorized to describe: "+strings.Join(refused, ", "))
	}
	cl := groupClient(rc)
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.ShareGroupHeartbeat(ctx, cl, req) })
	return nil, nil
}
