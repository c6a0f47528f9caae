package server

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// InitProducerId (key 22). Supported: v0-5.
//
// Semantics: an idempotent producer (no transactional id) gets a fresh
// producer id with epoch 0, as Kafka gives it, also when it sends its old
// id and epoch (v3+, KIP-360): the log's per-partition sequence checks
// start over for the new id. Ids come from blocks reserved in the
// metastore, so they are unique across brokers and restarts. With a
// transactional id the transaction coordinator answers (txn.Coordinator.
// InitProducerID): the id's producer id with its epoch bumped (a new id
// once the epoch is exhausted), an open transaction of the old epoch
// aborted first (CONCURRENT_TRANSACTIONS until that is done),
// INVALID_TRANSACTION_TIMEOUT past transaction.max.timeout.ms,
// NOT_COORDINATOR at a broker that does not coordinate the id.
// Version notes: v1 throttle; v2+ flexible; v3 producer id and epoch
// (KIP-360: a producer that sends other than the id's current ones is
// fenced); v4 PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v5 KIP-890
// (no change here).
// Roles: write brokers.
func init() { register(22, handleInitProducerID) }

func handleInitProducerID(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		// Authorization, as Kafka: WRITE on the transactional id.
		if !s.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp, nil
		}
		if s.txn == nil {
			resp.ErrorCode = kerr.NotCoordinator.Code
			return resp, nil
		}
		groupCall(rc, func(ctx context.Context) kmsg.Response {
			expectID, expectEpoch := int64(-1), int16(-1)
			if req.Version >= 3 {
				expectID, expectEpoch = req.ProducerID, req.ProducerEpoch
			}
			var code int16
			resp.ProducerID, resp.ProducerEpoch, code = s.txn.InitProducerID(ctx, *req.TransactionalID, req.TransactionTimeoutMillis, expectID, expectEpoch)
			resp.ErrorCode = fencedCode(code, req.Version < 4)
			return resp
		})
		return nil, nil
	}
	// Authorization, as Kafka (KIP-679): IDEMPOTENT_WRITE on the
	// cluster, or WRITE on at least one topic; CLUSTER_AUTHORIZATION_FAILED
	// otherwise.
	if !s.authorizeCluster(rc, acl.OpIdempotentWrite) && s.authz != nil && !s.authz.AuthorizeAny(rc.who(), acl.OpWrite, acl.ResourceTopic) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	id, err := s.producers.next(rc.ctx())
	if err != nil {
		s.log.Warn().Err(err).Msg("allocating producer ids")
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

// producerIDBlock is how many ids one metastore round trip reserves.
const producerIDBlock = 1000

// producerIDs hands out producer ids from blocks reserved in the metastore.
type producerIDs struct {
	catalog Catalog
	mu      sync.Mutex
	next_   int64
	end     int64
}

func newProducerIDs(c Catalog) *producerIDs { return &producerIDs{catalog: c} }

func (p *producerIDs) next(ctx context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next_ >= p.end {
		first, err := p.catalog.AllocateProducerIDs(ctx, producerIDBlock)
		if err != nil {
			return 0, err
		}
		p.next_, p.end = first, first+producerIDBlock
	}
	id := p.next_
	p.next_++
	return id, nil
}
