package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// EndTxn (key 26). Supported: v0-3.
//
// Semantics: commits or aborts the producer's transaction
// (txn.Coordinator.EndTxn): the decision and the group offsets the
// transaction commits are one metastore write, then COMMIT or ABORT
// markers go to every partition of the transaction through its leader,
// and the answer waits for them (up to 10 s; the decision stands past
// that, and the coordinator keeps writing them). A retry of a completed
// EndTxn succeeds; CONCURRENT_TRANSACTIONS while it completes;
// INVALID_TXN_STATE for a transaction that is not open or was decided
// the other way; the producer checks as AddPartitionsToTxn.
// Version notes: v1 no change; v2 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
// before); v3 flexible; v4-5 (KIP-890 part 2) not served.
// Roles: write brokers (the transaction coordinator).
func init() { register(26, handleEndTxn) }

func handleEndTxn(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	// Authorization, as Kafka: WRITE on the transactional id.
	if !s.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	if s.txn == nil {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		resp.ErrorCode = fencedCode(s.txn.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit), req.Version < 2)
		return resp
	})
	return nil, nil
}
