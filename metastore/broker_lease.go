package metastore

import (
	"context"
	"time"
)

// The broker lease is one length for the whole cluster, recorded in the
// replicated state, not each process's own configuration.
//
// Two clocks decide a lease: the metastore leader expires a broker a lease
// after it *received* the broker's last heartbeat, and a broker treats its
// lease as held for a lease after it *sent* that heartbeat (server.Lease).
// A broker therefore stops acting as an owner (an async master stops
// acknowledging writes) before the metastore can hand what it owns to
// another broker, as long as the broker's length is not longer than the
// metastore's. With each process reading `broker.session.timeout.ms` from
// its own configuration that held only if every process was configured
// alike; a broker configured longer than the meta nodes could acknowledge
// a write after a learner had been promoted.
//
// So the length is recorded once, when the cluster is created (the first
// leader's configured length, with the cluster id), or, for a cluster
// created before it was recorded, by the first leader that finds it
// missing. It is never changed afterwards. The metastore expires brokers
// by the longer of the recorded length and its own configured one, and a
// broker holds its lease for the shorter of the recorded length and its
// own (Client.BrokerLease), so the broker's length never exceeds the
// metastore's whatever the configurations say. A process whose configured
// length differs from the recorded one logs it once.

// brokerLease is the length the leader expires brokers by.
func (n *Node) brokerLease() time.Duration {
	return max(n.cfg.LeaseDuration, n.view.BrokerLease())
}

// recordBrokerLease records this node's configured lease for a cluster
// that has none yet (created before it was recorded); the leader calls it.
func (n *Node) recordBrokerLease() {
	if n.view.ClusterID() == "" || n.view.BrokerLease() > 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
	defer cancel()
	_, _ = n.propose(ctx, command{Op: opSetBrokerLease, LeaseMs: n.cfg.LeaseDuration.Milliseconds()})
}

// checkBrokerLease logs, once, a configured length that differs from the
// recorded one.
func (n *Node) checkBrokerLease() {
	rec := n.view.BrokerLease()
	if rec == 0 || rec == n.cfg.LeaseDuration || !n.leaseWarned.CompareAndSwap(false, true) {
		return
	}
	n.lg.Warn().Dur("configured", n.cfg.LeaseDuration).Dur("recorded", rec).Dur("expiring_by", n.brokerLease()).
		Msg("broker.session.timeout.ms differs from the cluster's recorded broker lease; this node expires brokers by the longer of the two")
}
