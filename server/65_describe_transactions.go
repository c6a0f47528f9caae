package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// DescribeTransactions (key 65). Supported: v0.
//
// Semantics: the state of each transactional id this broker coordinates
// (KIP-664): its state name as Kafka's (Empty, Ongoing, PrepareCommit,
// PrepareAbort, CompleteCommit, CompleteAbort), timeout, start time (-1
// unless Ongoing or preparing), producer id and epoch, and partitions.
// NOT_COORDINATOR for an id another broker coordinates,
// TRANSACTIONAL_ID_NOT_FOUND for one without state. Authorization, as
// Kafka: DESCRIBE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and topics without DESCRIBE are
// left out of its partitions.
// Roles: write brokers (the transaction coordinator).
func init() { register(65, handleDescribeTransactions) }

func handleDescribeTransactions(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		for _, id := range req.TransactionalIDs {
			ts := kmsg.NewDescribeTransactionsResponseTransactionState()
			ts.TransactionalID = id
			ts.ProducerID, ts.ProducerEpoch, ts.StartTimestamp = -1, -1, -1
			if !s.authorize(rc, acl.OpDescribe, acl.ResourceTransactionalID, id) {
				ts.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				resp.TransactionStates = append(resp.TransactionStates, ts)
				continue
			}
			if s.txn == nil {
				ts.ErrorCode = kerr.NotCoordinator.Code
				resp.TransactionStates = append(resp.TransactionStates, ts)
				continue
			}
			st, found, code := s.txn.Describe(ctx, id)
			switch {
			case code != 0:
				ts.ErrorCode = code
			case !found:
				ts.ErrorCode = kerr.TransactionalIDNotFound.Code
			default:
				ts.State, ts.TimeoutMillis = string(st.Status), st.TimeoutMs
				ts.ProducerID, ts.ProducerEpoch = st.ProducerID, st.Epoch
				if st.StartMs > 0 && len(st.Partitions)+len(st.Groups) > 0 {
					ts.StartTimestamp = st.StartMs
				}
				index := map[string]int{}
				for _, tp := range st.Partitions {
					if !s.authorizeTopic(rc, acl.OpDescribe, tp.Topic) {
						continue // as Kafka: topics the caller may not describe are left out
					}
					i, ok := index[tp.Topic]
					if !ok {
						i = len(ts.Topics)
						index[tp.Topic] = i
						t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
						t.Topic = tp.Topic
						ts.Topics = append(ts.Topics, t)
					}
					ts.Topics[i].Partitions = append(ts.Topics[i].Partitions, tp.Partition)
				}
			}
			resp.TransactionStates = append(resp.TransactionStates, ts)
		}
		return resp
	})
	return nil, nil
}
