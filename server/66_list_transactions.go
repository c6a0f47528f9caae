package server

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// ListTransactions (key 66). Supported: v0-1.
//
// Semantics: the transactional ids this broker coordinates (KIP-664),
// with their producer id and state, filtered by state names (unknown
// names are echoed in UnknownStateFilters and match nothing), producer
// ids and (v1, KIP-994) transactions running at least
// DurationFilterMillis. A broker without the write role coordinates none
// and answers an empty list.
// Version notes: v1 duration filter; v2 transactional id pattern not
// served.
// Roles: every broker.
func init() { register(66, handleListTransactions) }

var txnStates = []metastore.TxnStatus{metastore.TxnEmpty, metastore.TxnOngoing, metastore.TxnPrepareCommit,
	metastore.TxnPrepareAbort, metastore.TxnCompleteCommit, metastore.TxnCompleteAbort}

func handleListTransactions(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	states := map[metastore.TxnStatus]bool{}
	for _, f := range req.StateFilters {
		if !slices.Contains(txnStates, metastore.TxnStatus(f)) {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
			continue
		}
		states[metastore.TxnStatus(f)] = true
	}
	if s.txn == nil {
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		all, code := s.txn.List(ctx)
		if code != 0 {
			resp.ErrorCode = code
			return resp
		}
		if len(req.StateFilters) > 0 && len(states) == 0 {
			return resp // only unknown states asked for
		}
		now := time.Now().UnixMilli()
		for _, st := range all {
			if len(states) > 0 && !states[st.Status] {
				continue
			}
			if len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, st.ProducerID) {
				continue
			}
			if !s.authorize(rc, acl.OpDescribe, acl.ResourceTransactionalID, st.TransactionalID) {
				continue // as Kafka: only ids the caller may describe
			}
			if req.Version >= 1 && req.DurationFilterMillis >= 0 && now-st.StartMs < req.DurationFilterMillis {
				continue
			}
			ts := kmsg.NewListTransactionsResponseTransactionState()
			ts.TransactionalID, ts.ProducerID, ts.TransactionState = st.TransactionalID, st.ProducerID, string(st.Status)
			resp.TransactionStates = append(resp.TransactionStates, ts)
		}
		return resp
	})
	return nil, nil
}
