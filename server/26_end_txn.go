package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// EndTxn (key 26). Supported: v0-5.
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
// before); v3 flexible; v4 TRANSACTION_ABORTABLE known to the client (no
// change here); v5 transaction version 2 (KIP-890 part 2): every commit
// and abort bumps the producer's epoch (a new producer id at epoch 0 once
// it is exhausted), the markers carry the bumped epoch, and the answer
// carries the producer id and epoch to continue with; a retry comes with
// the epoch before the bump and is answered as the first; an abort with
// nothing in the transaction (no partition reached) bumps the epoch too.
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
		tv := int8(0)
		if req.Version >= 5 {
			tv = 2
		}
		r := s.txn.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, tv)
		resp.ErrorCode = fencedCode(r.Code, req.Version < 2)
		resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.Epoch
		return resp
	})
	return nil, nil
}
