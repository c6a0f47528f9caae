package replica

import "sync/atomic"

// LocalTransport is the transport of a broker that has no replication
// port (no replica.listen, as `sluice dev`): every group it hosts is a
// one-voter group of this broker alone, whose raft sends nothing to other
// brokers, so nothing goes over a network. A message addressed to another
// broker (a group assigned to brokers this one cannot reach) is dropped
// and counted; raft then treats that peer as unreachable, as it does any
// peer the TCP transport cannot reach.
type LocalTransport struct {
	dropped atomic.Int64
}

// NewLocalTransport returns the transport of a broker without peers.
func NewLocalTransport() *LocalTransport { return &LocalTransport{} }

// Send drops msgs: there is no other broker to send them to.
func (t *LocalTransport) Send(_ NodeID, msgs []Envelope) { t.dropped.Add(int64(len(msgs))) }

// Handle does nothing: no peer sends to this broker.
func (t *LocalTransport) Handle(func(from NodeID, msgs []Envelope)) {}

// Close does nothing.
func (t *LocalTransport) Close() error { return nil }

// Dropped is the number of messages Send dropped.
func (t *LocalTransport) Dropped() int64 { return t.dropped.Load() }
