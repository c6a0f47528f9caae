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
// metastore, so they are unique across brokers and restarts. A
// transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// until the transaction coordinator exists (Sluice advertises no
// transaction APIs, so well-behaved clients never send one).
// Version notes: v1 throttle; v2+ flexible; v3 producer id and epoch;
// v4 PRODUCER_FENCED; v5 KIP-890.
// Roles: write brokers.
func init() { register(22, handleInitProducerID) }

func handleInitProducerID(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
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
