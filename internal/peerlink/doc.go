// Package peerlink is the connection layer under Sluice's two internal
// transports: the metastore quorum's (raft messages and requests between
// meta nodes and from brokers) and the partitions' raft transport
// between brokers. Each transport keeps its own protocol on top (what a
// frame holds, who may send what); everything below that is here, once:
//
//   - frames: a u32 big-endian length, then that many bytes, with a size
//     limit a reader enforces before it allocates (ReadFrame);
//   - dialling a peer from the IP this node listens on, with a timeout and
//     Nagle off (Dial, LocalIP), and the rule that a peer without a
//     certificate must connect from the host it is registered at
//     (FromHost);
//   - backoff with jitter between attempts to reach a peer (Backoff);
//   - an accept loop that survives resource errors (EMFILE and the like:
//     it backs off and keeps listening), bounds the connections still in
//     their handshake, and tracks every connection so Close ends them all
//     (Listener);
//   - per-peer batching: a bounded queue per peer that never blocks the
//     sender (full means dropped and counted, as etcd's rafthttp does:
//     raft retries), drained by one writer that coalesces everything
//     queued into one write and redials with backoff (Stream), and the
//     same coalescing for a connection many goroutines write frames to
//     (Writer);
//   - refusals counted by reason and logged at most once per interval
//     (Refusals).
//
// TLS stays with the callers' dial and handshake functions (the names a
// peer's certificate must carry differ between the two transports), built
// on internal/tlsconfig.
package peerlink
