package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// DeleteShareGroupOffsets (key 92). Supported: v0 (see shareServed).
//
// Semantics: KIP-932. Drops the share group's state of every partition
// of each topic given (kafka-share-groups --delete-offsets): the next
// fetch starts the partition at share.auto.offset.reset. A group that
// does not exist or is not a share group is GROUP_ID_NOT_FOUND, one with
// members NON_EMPTY_GROUP (group-level); a topic that does not exist, or
// that the group has no state for ("There is no offset information to
// delete."), is UNKNOWN_TOPIC_OR_PARTITION for the topic, as Kafka.
// Authorization, as Kafka: DELETE on the group
// (GROUP_AUTHORIZATION_FAILED), READ on each topic (the topic's
// TOPIC_AUTHORIZATION_FAILED, the others deleted).
// Version notes: flexible.
// Roles: the group's coordinator.
func init() { register(92, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	fail := func(code int16) (kmsg.Response, error) {
		resp.ErrorCode = code
		if e := kerr.ErrorForCode(code); e != nil {
			resp.ErrorMessage = kmsg.StringPtr(e.(*kerr.Error).Description)
		}
		return resp, nil
	}
	switch {
	case req.GroupID == "":
		return fail(kerr.InvalidGroupID.Code)
	case !s.authorizeGroup(rc, acl.OpDelete, req.GroupID):
		return fail(kerr.GroupAuthorizationFailed.Code)
	case !s.shareServed(rc.conn.listener):
		return fail(kerr.UnsupportedVersion.Code)
	}
	var ids []metastore.TopicID
	for _, qt := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = qt.Topic
		t, known := s.topicByName(qt.Topic)
		switch {
		case !s.authorizeTopic(rc, acl.OpRead, qt.Topic):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case !known:
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			rt.TopicID = t.ID
			ids = append(ids, t.ID)
		}
		if rt.ErrorCode != 0 {
			rt.ErrorMessage = kmsg.StringPtr(kerr.ErrorForCode(rt.ErrorCode).(*kerr.Error).Description)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		had, code := s.groups.ShareDeleteOffsets(ctx, req.GroupID, ids)
		if code != 0 {
			resp.Topics = nil
			r, _ := fail(code)
			return r
		}
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			if rt.ErrorCode == 0 && !had[rt.TopicID] {
				rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rt.ErrorMessage = kmsg.StringPtr("There is no offset information to delete.")
			}
		}
		return resp
	})
	return nil, nil
}
