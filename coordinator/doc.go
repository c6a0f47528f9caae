// Package coordinator is Sluice's group coordinator: the classic consumer
// group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), the KIP-848
// consumer protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe) with
// server-side uniform and range assignors, and committed offsets.
//
// # Storage
//
// Nothing here lives in a data log. Offsets are written with
// Store.CommitOffsets, one metastore key per group and partition, and read
// back linearizably; a group's membership is one opaque blob per group
// (Store.SaveGroup, format in persist.go). A coordinator that restarts, or
// that takes over a group from another broker, loads the blob on the
// group's first request and carries on from it.
//
// # Ownership
//
// Exactly one broker coordinates a group: the one recorded by
// Store.ClaimGroup, which a live owner keeps. FindCoordinator claims (and
// so names) the owner; a group request at any other broker answers
// NOT_COORDINATOR.
//
// Ownership is fenced by the owner's lease (Config.Incarnation): a claim
// records the incarnation, and every group write (commits, saves,
// deletes) carries it, so the metastore refuses the writes of a broker
// whose lease lapsed once another broker may have taken the group
// (metastore.ErrFenced; the group is dropped and the client told
// NOT_COORDINATOR). A broker also serves no group while its lease is not
// certainly valid (Config.LeaseValid: paused or cut off past it), and drops
// them all when it learns the lease lapsed (DropAll).
//
// # Concurrency
//
// Coordinator.mu guards the map of loaded groups and the set of owned
// names; it is never held across a metastore round trip: a group's claim
// and first load run without it, while later requests for that group wait
// for the load (Coordinator.mu.loading) and other groups go on. Each
// group has its own mutex, group.mu, that guards all of the group's state;
// every request and every timer callback for a group runs under it, so a
// group's state machine is sequential. Lock order: Coordinator.mu, then
// group.mu; nothing takes Coordinator.mu while holding a group's lock.
//
// Group saves are made while holding group.mu, so they apply in the order
// the state machine decided them; other groups are not held up. Offset
// writes (OffsetCommit, OffsetDelete, DeleteGroups, expiry) are not: a
// group's offset writes take its group.commitSem (one slot) first, then
// group.mu only to check the request, and make the metastore write with
// group.mu released, so a write caught by a metastore leader change never
// holds up the group's heartbeats and session timers, while commitSem keeps
// the writes in the order they were checked. Lock order: commitSem, then
// Coordinator.mu, then group.mu. An offset commit's write is bounded by
// Config.CommitTimeout (offsets.commit.timeout.ms) and answers
// COORDINATOR_NOT_AVAILABLE when it runs out, as Kafka maps its append's
// REQUEST_TIMED_OUT.
//
// A request that must wait (JoinGroup until the rebalance completes,
// SyncGroup until the leader's assignment) registers a channel with room
// for exactly one answer on its member and waits on it outside the lock,
// together with its context; the state machine never blocks sending an
// answer. A member has at most one waiting join and one waiting sync, so
// the waiting is bounded by the group's members (MaxGroupSize).
//
// Timers (session expiry, rebalance timeout, pending SyncGroup, KIP-848
// session and revocation deadlines) come from the injected Clock and run
// their callback under group.mu. A timer that already fired cannot be
// retracted, so each callback re-checks that what it expires is still
// current (the same member object, the same generation) before acting.
// Tests use FakeClock, which fires callbacks inside Advance.
package coordinator
