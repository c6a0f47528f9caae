package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit (key 28). Supported: v0-3.
//
// Semantics: offsets held pending in the metastore with the producer's
// transaction, committed with it and discarded if it aborts
// (coordinator.Coordinator.TxnOffsetCommit).
// Version notes: v1 no change; v2 leader epoch; v3 flexible, group
// generation, member and instance id (KIP-447), PRODUCER_FENCED;
// v4-5 (KIP-890 part 2) not served.
// Roles: the group's coordinator (read brokers).
func init() { register(28, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, kerr.CoordinatorNotAvailable.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response { return s.groups.TxnOffsetCommit(ctx, req) })
	return nil, nil
}
