package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// AddPartitionsToTxn (key 24). Supported: v0-3 (the client form).
//
// Semantics: the partitions join the producer's transaction, which becomes
// Ongoing (txn.Coordinator.AddPartitions): INVALID_PRODUCER_ID_MAPPING
// for an unknown transactional id or another producer id, PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v2) for another epoch,
// CONCURRENT_TRANSACTIONS while the previous transaction completes,
// NOT_COORDINATOR at a broker that does not coordinate the id. As in
// Kafka, if any partition does not exist it answers
// UNKNOWN_TOPIC_OR_PARTITION, every other one OPERATION_NOT_ATTEMPTED,
// and nothing is added. Every partition gets the same code otherwise.
// Version notes: v1 no change; v2 PRODUCER_FENCED; v3 flexible; v4+
// (KIP-890 broker-to-broker batches) not served.
// Roles: write brokers (the transaction coordinator).
func init() { register(24, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	topics := map[string][]int32{}
	for _, rt := range req.Topics {
		topics[rt.Topic] = append(topics[rt.Topic], rt.Partitions...)
	}
	answer := func(code func(tp metastore.TopicPartition) int16) kmsg.Response {
		for _, rt := range req.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition = p
				sp.ErrorCode = code(metastore.TopicPartition{Topic: rt.Topic, Partition: p})
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	// Authorization, as Kafka: WRITE on the transactional id (else every
	// partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each
	// topic (TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED).
	if !s.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		return answer(func(metastore.TopicPartition) int16 { return kerr.TransactionalIDAuthorizationFailed.Code }), nil
	}
	if s.txn == nil {
		return answer(func(metastore.TopicPartition) int16 { return kerr.NotCoordinator.Code }), nil
	}
	tps, bad := s.txnTopicPartitions(topics)
	for _, tp := range tps {
		if !s.authorizeTopic(rc, acl.OpWrite, tp.Topic) {
			bad[tp] = kerr.TopicAuthorizationFailed.Code
		}
	}
	if len(bad) > 0 {
		return answer(func(tp metastore.TopicPartition) int16 {
			if c, ok := bad[tp]; ok {
				return c
			}
			return kerr.OperationNotAttempted.Code
		}), nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		code := fencedCode(s.txn.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps), req.Version < 2)
		return answer(func(metastore.TopicPartition) int16 { return code })
	})
	return nil, nil
}
