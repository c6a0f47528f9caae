package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit (key 8). Supported: v0-10.
//
// Semantics: offsets go to the metastore (never a data log) after the
// coordinator's generation and member checks (coordinator/offsets.go).
// Version notes: v0 has no generation or member (accepted while the group
// is Empty); v1 generation, member id and a per-partition timestamp
// (ignored); v2-4 retention time (ignored: offsets do not expire); v6
// leader epoch; v7 instance id (FENCED_INSTANCE_ID); v8+ flexible; v9
// GROUP_ID_NOT_FOUND and KIP-848 member epochs; v10 topics by id.
// Roles: the group's coordinator (read brokers).
func init() { register(8, handleOffsetCommit) }

func handleOffsetCommit(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, kerr.CoordinatorNotAvailable.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.OffsetCommit(ctx, req) })
	return nil, nil
}
