package metastore

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// Async master/replica (docs/replication-modes.md): a partition in async
// mode whose raft group has one voter, the master, records it here, and a
// replacement of a master whose lease lapsed is decided here, once, by
// compare-and-set on the master it replaces: each live write replica in
// the ISR the master last reported records its claim (the last raft entry it holds durably, the offset after
// it, and a term at least the old master's), and the claim with the highest
// index (ties to the lowest broker id) is promoted. The brokers act on the
// record (package replica: Claim, Host.Promote, Host.Follow).
//
// A master in its controlled shutdown hands its place over instead of
// letting it lapse: once it has stopped acknowledging and a write replica
// holds its whole log, it records that replica as its handover
// (async_handover, fenced by the master's registration); that replica
// alone may then claim and be promoted while the master is still
// registered, and nothing is lost.

const (
	opSetAsyncMaster op = "set_async_master"
	opAsyncClaim     op = "async_claim"
	opAsyncPromote   op = "async_promote"
	opAsyncHandover  op = "async_handover"
)

// AsyncClaim is where a write replica's log would take over from the
// master it replaces: it holds the master's raft entries up to Index, Offset
// is the offset after them, and it would lead in a term above Term.
type AsyncClaim struct {
	Term   uint64
	Index  uint64
	Offset int64
}

// bestClaim is the claim a promotion must take: the highest index, ties to
// the lowest broker id; -1 when there is none.
func bestClaim(claims map[int32]AsyncClaim) int32 {
	best := int32(-1)
	for _, id := range slices.Sorted(maps.Keys(claims)) {
		if best < 0 || claims[id].Index > claims[best].Index {
			best = id
		}
	}
	return best
}

// BestAsyncClaim is the broker whose recorded claim a promotion must
// take, -1 when none is recorded.
func (p Partition) BestAsyncClaim() int32 { return bestClaim(p.AsyncClaims) }

func (a *applier) asyncPartition(c *command) (*Topic, *Partition, error) {
	t, ok := a.topicByName(c.Name)
	if !ok || c.Partition < 0 || int(c.Partition) >= len(t.Partitions) {
		return nil, nil, ErrUnknownTopic
	}
	return t, &t.Partitions[c.Partition], nil
}

// setAsyncMaster records (c.Leader >= 0) or clears (c.Leader < 0) the
// partition's master; pending claims are dropped.
func (a *applier) setAsyncMaster(c *command) error {
	t, p, err := a.asyncPartition(c)
	if err != nil {
		return err
	}
	if c.Leader >= 0 && !slices.Contains(p.Voters, c.Leader) {
		return fmt.Errorf("%w: broker %d is not a write replica of %s-%d", ErrInvalidRequest, c.Leader, c.Name, c.Partition)
	}
	p.AsyncMaster, p.AsyncClaims, p.AsyncHandover = nil, nil, nil
	if c.Leader >= 0 {
		p.AsyncMaster = new(c.Leader)
	}
	a.putTopic(t)
	return nil
}

// asyncClaim records broker c.BrokerID's claim to replace master c.Leader.
func (a *applier) asyncClaim(c *command) error {
	t, p, err := a.asyncPartition(c)
	if err != nil {
		return err
	}
	if p.AsyncMaster == nil || *p.AsyncMaster != c.Leader {
		return fmt.Errorf("%w: broker %d is not the master of %s-%d", ErrStaleMaster, c.Leader, c.Name, c.Partition)
	}
	if _, ok := a.broker(c.Leader); ok && !handedTo(p, c.BrokerID) {
		return fmt.Errorf("%w: broker %d, the master of %s-%d, is registered", ErrMasterAlive, c.Leader, c.Name, c.Partition)
	}
	if c.Claim == nil || c.BrokerID == c.Leader || !slices.Contains(p.Voters, c.BrokerID) {
		return fmt.Errorf("%w: broker %d cannot claim %s-%d", ErrInvalidRequest, c.BrokerID, c.Name, c.Partition)
	}
	if !handedTo(p, c.BrokerID) && !slices.Contains(p.InSync(), c.BrokerID) {
		// Kafka elects only a replica in the ISR (a clean election): one
		// the master last counted out of sync, or that was down when it
		// last reported, may miss what the master acknowledged since,
		// and a better replica may still come back.
		return fmt.Errorf("%w: broker %d is not in the ISR %v the master of %s-%d last reported", ErrNotInSync, c.BrokerID, p.ISR, c.Name, c.Partition)
	}
	if p.AsyncClaims == nil {
		p.AsyncClaims = map[int32]AsyncClaim{}
	}
	p.AsyncClaims[c.BrokerID] = *c.Claim
	a.putTopic(t)
	return nil
}

// asyncPromote makes broker c.BrokerID, whose claim is the best recorded,
// the master in place of c.Leader.
func (a *applier) asyncPromote(c *command) error {
	t, p, err := a.asyncPartition(c)
	if err != nil {
		return err
	}
	if p.AsyncMaster == nil || *p.AsyncMaster != c.Leader {
		return fmt.Errorf("%w: broker %d is not the master of %s-%d", ErrStaleMaster, c.Leader, c.Name, c.Partition)
	}
	if _, ok := a.broker(c.Leader); ok && !handedTo(p, c.BrokerID) {
		return fmt.Errorf("%w: broker %d, the master of %s-%d, is registered", ErrMasterAlive, c.Leader, c.Name, c.Partition)
	}
	claim, ok := p.AsyncClaims[c.BrokerID]
	if !ok || bestClaim(p.AsyncClaims) != c.BrokerID {
		return fmt.Errorf("%w: broker %d does not hold the best claim to %s-%d", ErrInvalidRequest, c.BrokerID, c.Name, c.Partition)
	}
	p.AsyncMaster, p.AsyncTakeover, p.AsyncClaims, p.AsyncHandover = new(c.BrokerID), &claim, nil, nil
	a.putTopic(t)
	return nil
}

// handedTo says whether p's master handed its place to broker.
func handedTo(p *Partition, broker int32) bool {
	return p.AsyncHandover != nil && *p.AsyncHandover == broker
}

// asyncHandover records master c.Leader (registered with incarnation
// c.Inc) handing its place to write replica c.BrokerID. Claims taken
// before are dropped: only the handover's target claims now.
func (a *applier) asyncHandover(c *command) error {
	t, p, err := a.asyncPartition(c)
	if err != nil {
		return err
	}
	if p.AsyncMaster == nil || *p.AsyncMaster != c.Leader {
		return fmt.Errorf("%w: broker %d is not the master of %s-%d", ErrStaleMaster, c.Leader, c.Name, c.Partition)
	}
	if b, ok := a.broker(c.Leader); !ok || b.Incarnation != c.Inc {
		return ErrFenced
	}
	if c.BrokerID == c.Leader || !slices.Contains(p.Voters, c.BrokerID) {
		return fmt.Errorf("%w: broker %d is not another write replica of %s-%d", ErrInvalidRequest, c.BrokerID, c.Name, c.Partition)
	}
	if _, ok := a.broker(c.BrokerID); !ok {
		return fmt.Errorf("%w: broker %d is not registered", ErrInvalidRequest, c.BrokerID)
	}
	p.AsyncHandover, p.AsyncClaims = new(c.BrokerID), nil
	a.putTopic(t)
	return nil
}

// dropAsyncClaims drops the claims to replace broker id on every
// partition it is the master of: it registered again, so its lease did not
// lapse for good, and a claim taken while it had lapsed is stale (its
// index is where a learner stood then). A handover it had begun is
// dropped too: the new process is the master until it hands over again.
func (a *applier) dropAsyncClaims(id int32) {
	for _, t := range a.topics() {
		changed := false
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.AsyncMaster != nil && *p.AsyncMaster == id && (p.AsyncClaims != nil || p.AsyncHandover != nil) {
				p.AsyncClaims, p.AsyncHandover = nil, nil
				changed = true
			}
		}
		if changed {
			a.putTopic(t)
		}
	}
}

// SetAsyncMaster records master as the sole voter of the partition's raft
// group (the leader calls it once its move to the async configuration is
// applied), or, with master < 0, that the group is back in raft's
// configuration. Pending claims are dropped.
func (c *Client) SetAsyncMaster(ctx context.Context, topic string, partition, master int32) error {
	_, err := c.write(ctx, command{Op: opSetAsyncMaster, Name: topic, Partition: partition, Leader: master})
	return err
}

// ClaimAsyncMaster records broker's claim to replace master, a master whose
// lease lapsed; ErrStaleMaster when master is no longer the partition's.
func (c *Client) ClaimAsyncMaster(ctx context.Context, topic string, partition, master, broker int32, claim AsyncClaim) error {
	_, err := c.write(ctx, command{Op: opAsyncClaim, Name: topic, Partition: partition, Leader: master, BrokerID: broker, Claim: &claim})
	return err
}

// PromoteAsyncMaster makes broker, which holds the best recorded claim, the
// master in place of master; ErrStaleMaster when master is no longer the
// partition's (another promotion won), ErrInvalidRequest when broker's
// claim is not the best.
func (c *Client) PromoteAsyncMaster(ctx context.Context, topic string, partition, master, broker int32) error {
	_, err := c.write(ctx, command{Op: opAsyncPromote, Name: topic, Partition: partition, Leader: master, BrokerID: broker})
	return err
}

// HandOverAsyncMaster records master, registered with incarnation inc and
// no longer acknowledging writes, handing its place to write replica to,
// which holds its whole log; to may then claim and be promoted while the
// master is still registered.
func (c *Client) HandOverAsyncMaster(ctx context.Context, topic string, partition, master int32, inc uint64, to int32) error {
	_, err := c.write(ctx, command{Op: opAsyncHandover, Name: topic, Partition: partition, Leader: master, Inc: inc, BrokerID: to})
	return err
}
