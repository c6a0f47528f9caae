package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// AddPartitionsToTxn (key 24). Supported: v0-5: v0-3 the client form,
// v4-5 the broker form (handleAddPartitionsToTxnBrokers).
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
// Version notes: v1 no change; v2 PRODUCER_FENCED; v3 flexible; v4
// batches of transactions from brokers, each add or VerifyOnly (KIP-890);
// v5 TRANSACTION_ABORTABLE (INVALID_TXN_STATE in its place for v4).
// Roles: write brokers (the transaction coordinator).
func init() { register(24, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	if req.Version >= 4 {
		return handleAddPartitionsToTxnBrokers(s, rc, req)
	}
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

// handleAddPartitionsToTxnBrokers is the broker form (v4+, KIP-890), as
// Kafka's KafkaApis serves it: CLUSTER_ACTION on the cluster (else the
// top-level CLUSTER_AUTHORIZATION_FAILED and no result), then for each
// transaction of the batch either the check of VerifyOnly (each partition
// 0 if it is in the producer's transaction, TRANSACTION_ABORTABLE if not,
// txn.Coordinator.VerifyEach) or the add of the client form. Unknown
// partitions are answered as in the client form. Sluice's own partition
// leaders and group coordinators do not send it: they add to a
// transaction through the metastore (txn.AddImplicit).
func handleAddPartitionsToTxnBrokers(s *Server, rc *reqCtx, req *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if !s.authorizeCluster(rc, acl.OpClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	answer := func(t kmsg.AddPartitionsToTxnRequestTransaction, code func(tp metastore.TopicPartition) int16) kmsg.AddPartitionsToTxnResponseTransaction {
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = t.TransactionalID
		for _, tt := range t.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			st.Topic = tt.Topic
			for _, p := range tt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition = p
				sp.ErrorCode = code(metastore.TopicPartition{Topic: tt.Topic, Partition: p})
				if req.Version < 5 && sp.ErrorCode == kerr.TransactionAbortable.Code {
					sp.ErrorCode = kerr.InvalidTxnState.Code
				}
				st.Partitions = append(st.Partitions, sp)
			}
			rt.Topics = append(rt.Topics, st)
		}
		return rt
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		for _, t := range req.Transactions {
			topics := map[string][]int32{}
			for _, tt := range t.Topics {
				topics[tt.Topic] = append(topics[tt.Topic], tt.Partitions...)
			}
			if s.txn == nil {
				resp.Transactions = append(resp.Transactions, answer(t, func(metastore.TopicPartition) int16 { return kerr.NotCoordinator.Code }))
				continue
			}
			tps, bad := s.txnTopicPartitions(topics)
			if len(bad) > 0 {
				resp.Transactions = append(resp.Transactions, answer(t, func(tp metastore.TopicPartition) int16 {
					if c, ok := bad[tp]; ok {
						return c
					}
					return kerr.OperationNotAttempted.Code
				}))
				continue
			}
			if t.VerifyOnly {
				codes := s.txn.VerifyEach(ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps)
				resp.Transactions = append(resp.Transactions, answer(t, func(tp metastore.TopicPartition) int16 { return codes[tp] }))
				continue
			}
			code := s.txn.AddPartitions(ctx, t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps)
			resp.Transactions = append(resp.Transactions, answer(t, func(metastore.TopicPartition) int16 { return code }))
		}
		return resp
	})
	return nil, nil
}
