package server

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
)

// DescribeShareGroupOffsets (key 90). Supported: v0-1 (see shareServed).
//
// Semantics: KIP-932. Each group's share-partition start offsets
// (StartOffset; -1 for a partition the group has no state for, and for a
// topic that does not exist, whose TopicId is then zero, as Kafka). Topics
// null asks for every partition the group has state for. v1 Lag: the
// partition's high watermark less the start offset less the records past
// it already acknowledged or archived (-1 without state, or when this
// broker does not host the partition). An empty group id is
// INVALID_GROUP_ID, a group that does not exist or is not a share group
// GROUP_ID_NOT_FOUND when all its topics are asked for.
// Authorization, as Kafka: DESCRIBE on the group (group-level
// GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic (its partitions
// TOPIC_AUTHORIZATION_FAILED; left out when all are asked for).
// Version notes: flexible; v1 Lag (KIP-1226).
// Roles: the group's coordinator.
func init() { register(90, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		for _, rg := range req.Groups {
			resp.Groups = append(resp.Groups, s.describeShareGroupOffsets(ctx, rc, req.Version, rg))
		}
		return resp
	})
	return nil, nil
}

func (s *Server) describeShareGroupOffsets(ctx context.Context, rc *reqCtx, version int16, rg kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	g.GroupID = rg.GroupID
	fail := func(code int16) kmsg.DescribeShareGroupOffsetsResponseGroup {
		g.ErrorCode = code
		if e := kerr.ErrorForCode(code); e != nil {
			g.ErrorMessage = kmsg.StringPtr(e.(*kerr.Error).Description)
		}
		return g
	}
	switch {
	case rg.GroupID == "":
		return fail(kerr.InvalidGroupID.Code)
	case !s.authorizeGroup(rc, acl.OpDescribe, rg.GroupID):
		return fail(kerr.GroupAuthorizationFailed.Code)
	case !s.shareServed(rc.conn.listener):
		return fail(kerr.UnsupportedVersion.Code)
	}
	states, code := s.groups.ShareGroupOffsets(ctx, rg.GroupID)
	if code == kerr.GroupIDNotFound.Code && rg.Topics != nil {
		states, code = nil, 0 // every partition asked for answers -1
	}
	if code != 0 {
		return fail(code)
	}
	partition := func(t metastore.Topic, idx int32) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
		rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
		rp.Partition, rp.StartOffset, rp.LeaderEpoch = idx, -1, -1
		st, ok := states[coordinator.ShareKey{Topic: t.ID, Partition: idx}]
		if p, pcode := s.readablePartition(t, true, idx, -1); pcode == 0 {
			rp.LeaderEpoch = p.LeaderEpoch()
			if ok && version >= 1 {
				rp.Lag = max(p.HighWatermark()-st.Start-st.Done, 0)
			}
		}
		if ok {
			rp.StartOffset = st.Start
		}
		return rp
	}
	if rg.Topics == nil {
		byTopic := map[metastore.TopicID][]int32{}
		for k := range states {
			byTopic[k.Topic] = append(byTopic[k.Topic], k.Partition)
		}
		for id, parts := range byTopic {
			t, ok := s.produceTopicByID(id)
			if !ok || !s.authorizeTopic(rc, acl.OpDescribe, t.Name) {
				continue
			}
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic, rt.TopicID = t.Name, t.ID
			slices.Sort(parts)
			for _, idx := range parts {
				rt.Partitions = append(rt.Partitions, partition(t, idx))
			}
			g.Topics = append(g.Topics, rt)
		}
		slices.SortFunc(g.Topics, func(a, b kmsg.DescribeShareGroupOffsetsResponseGroupTopic) int {
			return cmpString(a.Topic, b.Topic)
		})
		return g
	}
	for _, qt := range rg.Topics {
		rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		rt.Topic = qt.Topic
		t, known := s.topicByName(qt.Topic)
		authorized := s.authorizeTopic(rc, acl.OpDescribe, qt.Topic)
		if known && authorized {
			rt.TopicID = t.ID
		}
		for _, idx := range qt.Partitions {
			var rp kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition
			switch {
			case !authorized:
				rp = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch = idx, -1, -1
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known:
				rp = kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch = idx, -1, -1
			default:
				rp = partition(t, idx)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		g.Topics = append(g.Topics, rt)
	}
	return g
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
