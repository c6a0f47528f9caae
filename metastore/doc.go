// Package metastore is Sluice's metadata quorum: one etcd raft group of 1, 3
// or 5 voters whose log, hard state, applied state and snapshots live in one
// bbolt file per node, plus the Client brokers use (it implements
// server.Catalog).
//
// # Embedding
//
//	node, err := metastore.Open(metastore.Config{ID: 1, DataDir: "data/meta", Logger: lg})
//	cat := node.Client()       // *Client: server.Catalog and more
//	...
//	node.Close()
//
// A remote broker uses metastore.Dial(ClientConfig{Addrs: ...}) instead; the
// Client API is the same. `sluice dev` embeds a one-voter node through
// exactly the code path a 3-node quorum uses.
//
// # The Ready loop (raftnode.go)
//
// We follow etcd raft's doc.go contract; the step numbers below are its
// numbers:
//
//   - Step 1, persist: HardState, Entries (discarding persisted entries at
//     or after the first new index) and an incoming Snapshot (its image
//     replaces the state buckets) are written in one bbolt transaction,
//     committed (fsync) before anything that depends on them.
//   - Step 2, send: a leader sends its Messages before persisting (Raft
//     thesis 10.2.1, as etcd's raftNode.start does; raft counts the
//     leader's own entries only after Advance), a follower only after the
//     step-1 transaction committed. A MsgSnap gets its image (a consistent
//     bbolt copy, Tx.WriteTo) off the loop and the transport reports it
//     with ReportSnapshot.
//   - Step 3, apply: CommittedEntries are applied in the same bbolt
//     transaction as step 1, and meta/applied is written with them (etcd's
//     cindex), so a crash never applies an entry twice or skips one. Conf
//     changes are handed to ApplyConfChange in order after the commit.
//     raft.Config.Applied is the snapshot index: after a restart raft
//     redelivers entries after it; apply skips normal entries at or below
//     meta/applied but replays conf changes so raft's configuration is
//     rebuilt.
//   - Step 4: Advance, after results went to waiters and events to the
//     cache.
//
// Any persistence error is fatal (the process exits, as etcd does; so is
// raft's Fatal: internal/raftlog with ExitOnFatal), except
// a bbolt page write that finds the disk full: bbolt writes the meta page,
// which alone makes a transaction visible, only after the other pages are
// written and synced, and rolls its freelist back on failure, so the
// Ready's transaction is run again every second until it commits
// (persistReady). Meanwhile metadata writes and linearizable reads wait and
// time out; the broker keeps serving from its cache.
//
// # Commands
//
// Normal entries hold a format byte followed by a proposalBatch: proposer
// node id, a per-process random nonce, and commands each with a sequence
// number (command.go). Format 2 (codec.go), what is written, is binary with
// offset commits in a compact form and other commands as JSON inside it;
// format 1 (all JSON) is still read. Requests reaching a follower are
// forwarded to the leader, whose batcher groups every concurrent command
// into one entry (group commit: one entry and one bbolt transaction for many
// offset commits). The proposer waits until the entry is applied locally and
// gets each command's result (error or value). Commands are deterministic:
// ids, times and the cluster id are chosen by the proposer. A proposal whose
// application is not seen before the caller's deadline returns ErrTimeout:
// its outcome is unknown (it may still apply).
//
// # Reads
//
// Topics, brokers, broker configs and the cluster id are read from a cache
// (view.go) updated on apply (embedded) or by a long-poll watch from a
// revision (remote; revision = raft applied index; a watcher behind the
// event history gets a full image). Writes return once visible in the
// caller's cache. Offsets, group state and GetTopic are linearizable: a
// batched ReadIndex round, then a wait until applied >= the read index.
//
// # Leases
//
// See lease.go: the leader alone decides expiry on its monotonic clock, a
// new leader grants a full lease from its election, and everything is fenced
// by incarnation; no two nodes' clocks are ever compared.
//
// # Placement
//
// The metastore records where partitions should live; the brokers carry it
// out. CreateTopics places voters on write brokers; learners follow the
// read brokers by each topic's read.replicas (placement.go: rendezvous
// hashing, rack-aware), and a read broker unregistered longer than
// Config.LearnerGrace gives its slots up (reassign.go). A reassignment
// records a target; the partition's raft leader changes the raft
// configuration and records it finished. Both are decided in apply, so
// every meta node decides the same. An async partition's master (the sole
// voter of its raft group) is recorded too, and a lapsed master's
// replacement is decided by compare-and-set on it: the write replicas
// record claims, and only the best claim is promoted (async.go).
//
// # Membership
//
// Node.AddVoter and Node.RemoveVoter change the quorum at run time (`sluice
// meta add-voter`; a node started with Config.Join waits to be added).
// Changes are single-node (never joint), one at a time, proposed by the
// leader once it applied an entry of its own term (raft drops a change a
// new leader proposes before that).
//
// # Snapshots
//
// Every Config.SnapshotEntries applied entries the node records a raft
// snapshot (metadata only) and compacts the log, keeping
// Config.CompactionKeep entries. The snapshot's data is the bbolt file
// itself, copied when a follower needs it; the follower installs it in one
// transaction that replaces all state buckets.
package metastore
