package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/coordinator"
)

// AlterShareGroupOffsets (key 91). Supported: v0 (see shareServed).
//
// Semantics: KIP-932. Sets the share group's start offset on each
// partition given: the partition starts afresh there, nothing in flight
// and no delivery counts (kafka-share-groups --reset-offsets). The group
// is created if it does not exist; one of another type is
// GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP (group-level). A
// topic or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION
// for the partition, as Kafka; a negative offset INVALID_REQUEST.
// Authorization, as Kafka: READ on the group (GROUP_AUTHORIZATION_FAILED),
// READ on each topic (its partitions TOPIC_AUTHORIZATION_FAILED, the
// others altered).
// Version notes: flexible.
// Roles: the group's coordinator.
func init() { register(91, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
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
	case !s.authorizeGroup(rc, acl.OpRead, req.GroupID):
		return fail(kerr.GroupAuthorizationFailed.Code)
	case !s.shareServed(rc.conn.listener):
		return fail(kerr.UnsupportedVersion.Code)
	}
	offsets := map[coordinator.ShareKey]int64{}
	for _, qt := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = qt.Topic
		t, known := s.topicByName(qt.Topic)
		authorized := s.authorizeTopic(rc, acl.OpRead, qt.Topic)
		if known && authorized {
			rt.TopicID = t.ID
		}
		for _, qp := range qt.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = qp.Partition
			switch {
			case !authorized:
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known || qp.Partition < 0 || int(qp.Partition) >= len(t.Partitions):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case qp.StartOffset < 0:
				rp.ErrorCode = kerr.InvalidRequest.Code
			default:
				offsets[coordinator.ShareKey{Topic: t.ID, Partition: qp.Partition}] = qp.StartOffset
			}
			if rp.ErrorCode != 0 {
				rp.ErrorMessage = kmsg.StringPtr(kerr.ErrorForCode(rp.ErrorCode).(*kerr.Error).Description)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		if code := s.groups.ShareAlterOffsets(ctx, req.GroupID, offsets); code != 0 {
			resp.Topics = nil
			r, _ := fail(code)
			return r
		}
		return resp
	})
	return nil, nil
}
