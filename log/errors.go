package log

import (
	"errors"

	"github.com/sluice-broker/sluice/partition"
)

// The errors a log returns to its callers are partition's (the values are
// shared, so errors.Is finds them by either name); server maps them to
// Kafka error codes: ErrOutOfOrderSequence OUT_OF_ORDER_SEQUENCE_NUMBER
// (45), ErrInvalidProducerEpoch INVALID_PRODUCER_EPOCH (47),
// ErrCoordinatorFenced TRANSACTION_COORDINATOR_FENCED (52), ErrCorrupt
// CORRUPT_MESSAGE (2), ErrBatchTooLarge RECORD_LIST_TOO_LARGE (18),
// ErrOffsetOutOfRange OFFSET_OUT_OF_RANGE (1), ErrFatal KAFKA_STORAGE_ERROR
// (56, then exit), ErrClosed NOT_LEADER_OR_FOLLOWER (6).

// Append and AppendReplicated.
var (
	// ErrOutOfOrderSequence: an idempotent producer's batch does not follow
	// the last sequence the log holds for it (Kafka OUT_OF_ORDER_SEQUENCE_NUMBER).
	ErrOutOfOrderSequence = partition.ErrOutOfOrderSequence
	// ErrInvalidProducerEpoch: the batch's producer epoch is older than the
	// one the log holds, so the producer has been fenced
	// (Kafka INVALID_PRODUCER_EPOCH).
	ErrInvalidProducerEpoch = partition.ErrInvalidProducerEpoch
	// ErrCoordinatorFenced: a transaction marker's coordinator epoch is
	// below the last one the producer's markers carried in this log (a
	// zombie coordinator's marker, Kafka's
	// TransactionCoordinatorFencedException).
	ErrCoordinatorFenced = partition.ErrCoordinatorFenced
	// ErrCorrupt: the bytes are not one well-formed v2 record batch (length,
	// magic or field bounds). Append does not check the CRC; the caller does.
	ErrCorrupt = partition.ErrCorrupt
	// ErrBatchTooLarge: the batch cannot fit in one segment (larger than
	// segment.bytes or than a 32-bit file position allows).
	ErrBatchTooLarge = partition.ErrBatchTooLarge
	// ErrOffsetMismatch: a replicated batch's base offset is not the log end
	// offset.
	ErrOffsetMismatch = errors.New("log: replicated batch does not start at the log end offset")
	// ErrNoSpace: the file system is full (ENOSPC, or EDQUOT for a
	// quota). Unlike ErrFatal it rejects this call only: whatever the
	// failed write left behind was cut back to the last whole batch
	// (segment, indexes, WAL) before it was returned, so the log keeps
	// serving reads and takes appends again once space is freed. A
	// failed fsync is ErrFatal whatever its errno.
	ErrNoSpace = partition.ErrNoSpace
)

// Read and offset lookups.
var (
	// ErrOffsetOutOfRange: the offset is below the log start offset or above
	// the log end offset (Kafka OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = partition.ErrOffsetOutOfRange
)

// Lifecycle.
var (
	// ErrClosed: the log was closed or deleted.
	ErrClosed = partition.ErrClosed
	// ErrLocked: Open found the directory held by another open Log.
	ErrLocked = errors.New("log: directory is locked by another open log")
	// ErrFatal wraps the first failed write, sync or file operation. Once a
	// log has failed, every later call returns an error wrapping ErrFatal and
	// the original cause; the process is expected to exit. Nothing is retried
	// because after a failed fsync the page cache state is unknown.
	ErrFatal = partition.ErrFatal
)
