package server

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/txn"
)

// TxnOffsetCommit (key 28). Supported: v0-5.
//
// Semantics: offsets held pending in the metastore with the producer's
// transaction, committed with it and discarded if it aborts
// (coordinator.Coordinator.TxnOffsetCommit).
// Version notes: v1 no change; v2 leader epoch; v3 flexible, group
// generation, member and instance id (KIP-447), PRODUCER_FENCED;
// v4 TRANSACTION_ABORTABLE known to the client (no change here); v5
// transaction version 2 (KIP-890 part 2): the client sent no
// AddOffsetsToTxn, so the group joins the producer's transaction here
// first (txn.AddImplicit; every partition gets its error otherwise).
// Authorization, as Kafka: WRITE on the transactional id, READ on the
// group, READ on each topic (TOPIC_AUTHORIZATION_FAILED for the others).
// Roles: the group's coordinator (read brokers).
func init() { register(28, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	answer := func(topics []kmsg.TxnOffsetCommitRequestTopic, code int16, resp *kmsg.TxnOffsetCommitResponse) *kmsg.TxnOffsetCommitResponse {
		for _, t := range topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	fresh := func() *kmsg.TxnOffsetCommitResponse { return req.ResponseKind().(*kmsg.TxnOffsetCommitResponse) }
	// Authorization, as Kafka: WRITE on the transactional id, READ on the
	// group (every partition refused otherwise), READ on each topic.
	switch {
	case !s.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		return answer(req.Topics, kerr.TransactionalIDAuthorizationFailed.Code, fresh()), nil
	case !s.authorizeGroup(rc, acl.OpRead, req.Group):
		return answer(req.Topics, kerr.GroupAuthorizationFailed.Code, fresh()), nil
	case s.groups == nil:
		return answer(req.Topics, kerr.CoordinatorNotAvailable.Code, fresh()), nil
	}
	var allowed, refused []kmsg.TxnOffsetCommitRequestTopic
	for _, t := range req.Topics {
		if s.authorizeTopic(rc, acl.OpRead, t.Topic) {
			allowed = append(allowed, t)
		} else {
			refused = append(refused, t)
		}
	}
	req.Topics = allowed
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		if req.Version >= 5 && len(req.Topics) > 0 {
			store, ok := s.catalog.(txn.Store)
			code := kerr.CoordinatorNotAvailable.Code
			if ok {
				code = txn.AddImplicit(ctx, store, req.TransactionalID, req.ProducerID, req.ProducerEpoch, nil, req.Group, time.Now().UnixMilli())
			}
			if code != 0 {
				return answer(refused, kerr.TopicAuthorizationFailed.Code, answer(req.Topics, code, fresh()))
			}
		}
		return answer(refused, kerr.TopicAuthorizationFailed.Code, s.groups.TxnOffsetCommit(ctx, req))
	})
	return nil, nil
}
