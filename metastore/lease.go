package metastore

import (
	"context"
	"sync"
	"time"
)

// Broker leases.
//
// RegisterBroker is a raft command: applying it hands out the next
// incarnation (a counter in the replicated state) and stores the broker.
// Heartbeats are not raft writes: they go to the leader (forwarded by any
// node), which checks, after a ReadIndex barrier, that the broker is
// registered with exactly that incarnation, and records the time of the
// heartbeat on its own monotonic clock. The leader alone decides expiry:
// when a broker's last heartbeat (or, for a new leader, the moment it became
// leader, or the first moment it saw that incarnation) is older than the
// lease, it proposes expire_broker{id, incarnation}. Applying it removes the
// broker only if the incarnation still matches.
//
// No decision compares clocks of two nodes: durations are measured on one
// node's monotonic clock, a new leader grants every broker a full lease from
// its own election, and everything is fenced by incarnation: a heartbeat
// or an expiry for an older incarnation fails (ErrFenced), so a broker that
// was expired must register again and gets a new incarnation, and a late
// expiry can never remove its new registration. LeaseExpiry in Broker is the
// proposer's wall clock plus the lease at registration, for operators only.

type leaseTracker struct {
	mu          sync.Mutex
	leaderSince time.Time
	seen        map[int32]leaseSeen
	// absent is when the leader first saw each unregistered learner
	// broker missing (reassign.go, retireLearners).
	absent map[int32]time.Time
}

type leaseSeen struct {
	inc      uint64
	at       time.Time
	expiring time.Time // when an expiry was last proposed
}

func (l *leaseTracker) init() { l.seen = map[int32]leaseSeen{} }

func (l *leaseTracker) reset() {
	l.mu.Lock()
	l.seen = map[int32]leaseSeen{}
	l.leaderSince = time.Time{}
	l.mu.Unlock()
}

func (n *Node) becameLeader() {
	n.leases.mu.Lock()
	n.leases.seen = map[int32]leaseSeen{}
	n.leases.leaderSince = time.Now()
	n.leases.mu.Unlock()
	if n.view.ClusterID() == "" {
		go n.initCluster()
	} else if n.view.BrokerLease() == 0 {
		go n.recordBrokerLease()
	}
}

func (n *Node) initCluster() {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
	defer cancel()
	_, _ = n.propose(ctx, command{Op: opInitCluster, ClusterID: newUUID(), LeaseMs: n.cfg.LeaseDuration.Milliseconds()})
}

// heartbeat runs on the leader.
func (n *Node) heartbeat(ctx context.Context, broker int32, inc uint64) error {
	if err := n.linearizableRead(ctx); err != nil {
		return err
	}
	found := false
	for _, b := range n.view.Brokers() {
		if b.ID == broker {
			found = b.Incarnation == inc
			break
		}
	}
	if !found {
		return ErrFenced
	}
	n.leases.mu.Lock()
	defer n.leases.mu.Unlock()
	if n.leases.leaderSince.IsZero() {
		return ErrNotLeader
	}
	n.leases.seen[broker] = leaseSeen{inc: inc, at: time.Now()}
	return nil
}

func (n *Node) leaseLoop() {
	defer n.wg.Done()
	// The same loop retires learners (reassign.go), so it ticks often
	// enough for the shorter of the two periods.
	// The recorded lease is never shorter than the configured one (see
	// brokerLease), so ticking by the configured one is often enough.
	every := max(min(n.cfg.LeaseDuration, n.cfg.LearnerGrace)/4, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-n.stopc:
			return
		}
		var expire []Broker
		now := time.Now()
		lease := n.brokerLease()
		n.checkBrokerLease()
		n.leases.mu.Lock()
		if !n.leases.leaderSince.IsZero() && n.view.ClusterID() == "" && now.Sub(n.leases.leaderSince) > time.Second {
			// The first leader's init_cluster was lost: propose again
			// (apply keeps the first one that lands).
			go n.initCluster()
		}
		if !n.leases.leaderSince.IsZero() {
			for _, b := range n.view.Brokers() {
				s, ok := n.leases.seen[b.ID]
				if !ok || s.inc != b.Incarnation {
					s = leaseSeen{inc: b.Incarnation, at: now}
					n.leases.seen[b.ID] = s
				}
				base := s.at
				if n.leases.leaderSince.After(base) {
					base = n.leases.leaderSince
				}
				if now.Sub(base) > lease && now.Sub(s.expiring) > lease {
					s.expiring = now // once per lease period, not every tick
					n.leases.seen[b.ID] = s
					expire = append(expire, b)
				}
			}
		}
		leading := !n.leases.leaderSince.IsZero()
		n.leases.mu.Unlock()
		n.retireLearners(now, leading)
		for _, b := range expire {
			n.lg.Info().Int32("broker", b.ID).Uint64("incarnation", b.Incarnation).Msg("broker lease expired")
			go func(b Broker) {
				ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
				defer cancel()
				if _, err := n.propose(ctx, command{Op: opExpireBroker, BrokerID: b.ID, Inc: b.Incarnation}); err == nil {
					n.stats.leasesExpired.Add(1)
				}
			}(b)
		}
	}
}
