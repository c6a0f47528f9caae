package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// AddOffsetsToTxn (key 25). Supported: v0-3.
//
// Semantics: the group's offsets (TxnOffsetCommit at its coordinator)
// commit or abort with the producer's transaction, which becomes Ongoing
// (txn.Coordinator.AddOffsets). Errors as AddPartitionsToTxn;
// INVALID_GROUP_ID for an empty group.
// Version notes: v1 no change; v2 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
// before); v3 flexible; v4 (KIP-890 part 2) not served.
// Roles: write brokers (the transaction coordinator).
func init() { register(25, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	// Authorization, as Kafka: WRITE on the transactional id, READ on the
	// group.
	if !s.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	if !s.authorizeGroup(rc, acl.OpRead, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if s.txn == nil {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp, nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		resp.ErrorCode = fencedCode(s.txn.AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group), req.Version < 2)
		return resp
	})
	return nil, nil
}
