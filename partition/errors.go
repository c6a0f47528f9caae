package partition

import "errors"

// Errors a partition returns. The messages keep the name of the package
// that returns them (log or replica, which alias them); server maps them to
// Kafka error codes (server/errors.go).

// Storage errors (package log).
var (
	// ErrOutOfOrderSequence: an idempotent producer's batch does not follow
	// the last sequence the log holds for it (Kafka OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = errors.New("log: out of order sequence number")
	// ErrInvalidProducerEpoch: the batch's producer epoch is older than the
	// one the log holds, so the producer has been fenced
	// (Kafka INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = errors.New("log: invalid (stale) producer epoch")
	// ErrCoordinatorFenced: a transaction marker's coordinator epoch is
	// below the last one the producer's markers carried in this log (a
	// zombie coordinator's marker, Kafka's
	// TransactionCoordinatorFencedException).
	ErrCoordinatorFenced = errors.New("log: transaction marker from a fenced coordinator")
	// ErrCorrupt: the bytes are not one well-formed v2 record batch (length,
	// magic or field bounds). Append does not check the CRC; the caller does.
	ErrCorrupt = errors.New("log: corrupt record batch")
	// ErrBatchTooLarge: the batch cannot fit in one segment (larger than
	// segment.bytes or than a 32-bit file position allows).
	ErrBatchTooLarge = errors.New("log: record batch too large for a segment")
	// ErrNoSpace: the file system is full (ENOSPC, or EDQUOT for a
	// quota). Unlike ErrFatal it rejects this call only: whatever the
	// failed write left behind was cut back to the last whole batch
	// (segment, indexes, WAL) before it was returned, so the log keeps
	// serving reads and takes appends again once space is freed. A
	// failed fsync is ErrFatal whatever its errno.
	ErrNoSpace = errors.New("log: no space left on device")
	// ErrOffsetOutOfRange: the offset is below the log start offset or above
	// the log end offset (Kafka OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrClosed: the log was closed or deleted.
	ErrClosed = errors.New("log: closed")
	// ErrFatal wraps the first failed write, sync or file operation. Once a
	// log has failed, every later call returns an error wrapping ErrFatal and
	// the original cause; the process is expected to exit. Nothing is retried
	// because after a failed fsync the page cache state is unknown.
	ErrFatal = errors.New("log: fatal storage failure")
)

// Replication errors (package replica).
var (
	// ErrPartitionClosed: a plain local partition was closed or its topic
	// deleted.
	ErrPartitionClosed = errors.New("replica: partition closed")
	// ErrNotLeader: this replica is not the raft leader, or stopped being
	// it before the write was answered; replica's NotLeaderError says
	// which broker leads, when known.
	ErrNotLeader = errors.New("replica: not the leader")
	// ErrNotEnoughReplicas: acks=all in raft mode while fewer voters than
	// min.insync.replicas are in sync (nothing was written).
	ErrNotEnoughReplicas = errors.New("replica: not enough in-sync replicas")
	// ErrProposalDropped: raft refused the entry (a leadership transfer is
	// under way or too much is uncommitted); nothing was written.
	ErrProposalDropped = errors.New("replica: proposal dropped by raft")
	// ErrBusy: too many proposals are queued for this partition.
	ErrBusy = errors.New("replica: too many pending proposals")
	// ErrReplicaClosed: the replica or its host was closed.
	ErrReplicaClosed = errors.New("replica: raft replica closed")
	// ErrDirInUse: the partition's directory still belongs to another
	// replica: a deleted topic of the same name whose replica is not
	// removed yet. Retriable (NOT_LEADER_OR_FOLLOWER): the removal
	// follows.
	ErrDirInUse = errors.New("replica: partition directory still held by a deleted topic of the same name")
	// ErrReplicaFailed: the replica stopped for good after its storage
	// failed or raft panicked (the cause is in the message only); the
	// partition is offline on this broker (KAFKA_STORAGE_ERROR) until it
	// restarts.
	ErrReplicaFailed = errors.New("replica: raft replica failed")
	// ErrLostCommitted: Open found fewer entries than the persisted commit
	// index covers; the replica is not opened (it must not vote or lead) and
	// has to be re-seeded: its directory removed and the broker added back
	// by a membership change.
	ErrLostCommitted = errors.New("replica: log lost committed raft entries")
	// ErrOldFormat: Open found a partition directory written by an
	// earlier version, in which raft's own entries took Kafka offsets; the
	// replica is not opened.
	ErrOldFormat = errors.New("replica: partition directory in a format this version does not read")
)

// Shared-storage errors (package shared).
var (
	// ErrSharedUnsupported: the request needs what shared-mode partitions
	// do not do yet (transactions).
	ErrSharedUnsupported = errors.New("shared: not supported on a shared-storage partition yet")
)
