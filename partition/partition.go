package partition

import (
	"context"
	"time"
)

// Proposal is one batch on its way to the log: Wait answers as the
// producer's acks asked.
type Proposal interface {
	// Wait blocks until the batch is answered or ctx ends.
	Wait(ctx context.Context) (ProduceResult, error)
	// Done is closed once the batch is answered.
	Done() <-chan struct{}
	// BatchReleased is closed once the partition no longer reads the
	// batch's bytes, so the caller may reuse them.
	BatchReleased() <-chan struct{}
}

// Writer appends batches to a partition.
type Writer interface {
	// Propose appends (or, in a cluster, proposes) one validated batch.
	// It returns at once; the proposal's Wait answers as acks asks.
	Propose(batch []byte, acks Acks) (Proposal, error)
	// ProposeMarker is Propose for a transaction marker sent with
	// transaction version txnVersion: the producer's epoch and last
	// coordinator epoch there are checked first.
	ProposeMarker(batch []byte, txnVersion int8, acks Acks) (Proposal, error)
	// DeleteRecords moves the log start of every replica to offset (at
	// most the high watermark) and returns the new log start; on the
	// leader only.
	DeleteRecords(ctx context.Context, offset int64) (int64, error)
}

// Reader reads a partition's committed batches and offsets.
type Reader interface {
	HighWatermark() int64
	LastStableOffset() int64
	LogStartOffset() int64
	LogEndOffset() int64
	LeaderEpoch() int32
	// Read returns whole committed batches from offset.
	Read(offset int64, maxBytes int) (ReadResult, error)
	// ReadRange returns committed batches from offset below upTo as a
	// file range.
	ReadRange(offset int64, maxBytes int, upTo int64) (RangeResult, error)
	// Watch signals ch when the high watermark moves.
	Watch(ch chan<- struct{}) (stop func())
	OffsetForLeaderEpoch(epoch int32) (int64, int32)
	// IsLeader tells the raft leader from a follower or learner.
	IsLeader() bool
	// Storage serves lookups that need no commit bound.
	Storage() Storage
}

// Partition is what the Kafka front end needs from a partition this broker
// hosts.
type Partition interface {
	Writer
	Reader
}

// Storage is the part of a partition's log that answers without a commit
// bound: timestamps, transactions, producers, size.
type Storage interface {
	// MaxTimestamp returns the offset and timestamp of the record with the
	// largest timestamp, -1 and -1 in an empty log.
	MaxTimestamp() (offset int64, timestamp int64, err error)
	// OffsetForTimestamp returns the first offset whose timestamp is at
	// least ts, and that timestamp; found is false past the last.
	OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error)
	// AbortedTxns lists the aborted transactions overlapping [from, upTo).
	// An error means the list could not be read whole: a read_committed
	// fetch must then not return the records of that range.
	AbortedTxns(from, upTo int64) ([]AbortedTxn, error)
	// InOpenTxn says whether the producer has an open transaction here.
	InOpenTxn(producerID int64) bool
	// ProducerState is what the log holds for one idempotent producer.
	ProducerState(producerID int64) (ProducerState, bool)
	// ActiveProducers lists every producer the log holds state for.
	ActiveProducers() ([]ActiveProducer, error)
	// Size is the bytes and segments of the log on disk.
	Size() (bytes int64, segments int)
}

// Replica is one broker's member of a partition's raft group: a
// Partition and the group's membership and leadership.
type Replica interface {
	Partition
	Key() Key
	Topic() string
	// Failed is the error that stopped the replica for good, nil while
	// it runs.
	Failed() error
	SetOptions(o Options) error
	Leader() NodeID
	Term() uint64
	Members() Members
	// MembershipSettled returns the configuration and whether no change
	// of it is under way.
	MembershipSettled() (Members, bool)
	ChangeMembership(ctx context.Context, m Members) error
	TransferLeadership(to NodeID) error
	CaughtUp(id NodeID) bool
	InSyncVoters() int
	InSyncReplicas() []NodeID
	// MemberLags returns, on the leader, each other member's lag by node.
	MemberLags() map[NodeID]MemberLag
	RaftIndexes() (last, commit, applied uint64)
	SemiSyncFallback() bool
	// ApplyRetention deletes the segments retention.ms and
	// retention.bytes let go and returns how many.
	ApplyRetention(now time.Time) (int, error)
	// ExpireProducers forgets the idempotent producers idle longer than
	// producer.id.expiration.ms by now, without a transaction open here,
	// and returns how many.
	ExpireProducers(now time.Time) int

	// Async master/replica (replication.mode=async).

	// Claim is what a promotion of this replica would keep: the last
	// entry it holds durably, in a term at least minTerm.
	Claim(minTerm uint64) Takeover
	// HeardFrom is when this replica last heard from node n over
	// replication (the zero time: never since it opened).
	HeardFrom(n NodeID) time.Time
	// LeaveAsync makes voters the group's voters again once a majority of
	// them holds the master's log.
	LeaveAsync(ctx context.Context, voters []NodeID) error
}

// Host is the broker's set of raft replicas.
type Host interface {
	// Get returns the open replica of k.
	Get(k Key) (Replica, bool)
	// Open opens (creating if need be) this broker's replica of k, a
	// founder of the group initial.
	Open(topic string, k Key, initial Members, o Options) (Replica, error)
	// OpenJoining is Open for a broker that joins a running group.
	OpenJoining(topic string, k Key, initial Members, o Options) (Replica, error)
	// Replicas lists the open replicas.
	Replicas() []Replica
	// Remove closes k's replica and, with deleteData, deletes its files.
	Remove(k Key, deleteData bool) error
	// RemoveStale deletes the partition directories live says no.
	RemoveStale(live func(id [16]byte, index int32) bool) error
	// Dir is the directory the replicas live in.
	Dir() string
	// Promote makes this broker's replica of k, which holds the claim t,
	// its group's sole voter (an async failover).
	Promote(k Key, t Takeover) error
	// Follow opens this broker's replica of k as a learner of the async
	// master, cutting what it holds past t; it returns the replica and
	// how many records were cut.
	Follow(topic string, k Key, m Members, o Options, master NodeID, t Takeover) (Replica, int64, error)
	// FollowJoining is Follow for a broker outside the group's initial
	// configuration (as OpenJoining is Open); m is the current assignment.
	FollowJoining(topic string, k Key, m Members, o Options, master NodeID, t Takeover) (Replica, int64, error)
}

// LocalLog is a plain partition log of this broker alone (no raft), as
// the __consumer_offsets view keeps.
type LocalLog interface {
	Partition
	Append(batch []byte) (AppendResult, error)
}

// LocalLogs opens and deletes LocalLogs.
type LocalLogs interface {
	Open(topic string, k Key, cfg LogConfig) (LocalLog, error)
	Remove(k Key) error
	Dir() string
}

// SharedHost is the broker's set of shared-storage partitions
// (replication.mode=shared): no raft group and no log here, their data in
// shared storage and their chunk index in the metastore.
type SharedHost interface {
	// Open returns partition k of topic, opening it on first use.
	Open(topic string, k Key) (Partition, error)
	// Remove closes k's partition; its data stays in shared storage.
	Remove(k Key) error
	// Keys lists the open partitions.
	Keys() []Key
	// ApplyRetention applies cfg's retention.ms and retention.bytes to
	// partition k if this broker writes it; it returns how many chunks
	// went.
	ApplyRetention(k Key, cfg LogConfig, now time.Time) (int, error)
}
