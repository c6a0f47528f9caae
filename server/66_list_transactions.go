package server

import (
	"context"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// ListTransactions (key 66). Supported: v0-1.
//
// Semantics: the transactional ids this broker coordinates (KIP-664),
// with their producer id and state, filtered by state names (unknown
// names are echoed in UnknownStateFilters and match nothing), producer
// ids, (v1, KIP-994) transactions running longer than
// DurationFilterMillis (a transaction started exactly that long ago is
// left out, as Kafka's TransactionStateManager compares) and (v2,
// KIP-1152) a transactional id pattern: an RE2 regular expression that
// must match the whole id (Kafka compiles it with re2j and calls
// matches()); null or empty matches every id, one that does not compile
// answers INVALID_REGULAR_EXPRESSION. A broker without the write role
// coordinates none and answers an empty list (after checking the
// pattern).
// Version notes: v1 duration filter; v2 transactional id pattern.
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
	var idPattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		// Checked alone first: wrapped, "a)|(b" would compile.
		_, err := regexp.Compile(*req.TransactionalIDPattern)
		var re *regexp.Regexp
		if err == nil {
			re, err = regexp.Compile(`^(?:` + *req.TransactionalIDPattern + `)$`)
		}
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			resp.UnknownStateFilters = nil
			return resp, nil
		}
		idPattern = re
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
			if req.Version >= 1 && req.DurationFilterMillis >= 0 && now-st.StartMs <= req.DurationFilterMillis {
				continue
			}
			if idPattern != nil && !idPattern.MatchString(st.TransactionalID) {
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
