package replica

import (
	"errors"
	"fmt"

	"github.com/sluice-broker/sluice/partition"
)

// Errors of the replicated path; those a server maps to Kafka codes are
// partition's values under these names:
// ErrNotLeader NOT_LEADER_OR_FOLLOWER (6), ErrNotEnoughReplicas
// NOT_ENOUGH_REPLICAS (19), ErrProposalDropped and ErrBusy
// REQUEST_TIMED_OUT (7) (the client retries), ErrReplicaClosed
// and ErrDirInUse NOT_LEADER_OR_FOLLOWER (6). Idempotence errors are the log package's
// (log.ErrOutOfOrderSequence, log.ErrInvalidProducerEpoch).
var (
	// ErrNotLeader: this replica is not the raft leader, or stopped being
	// it before the write was answered; errors.As gives a *NotLeaderError
	// with the leader this replica knows of.
	ErrNotLeader = partition.ErrNotLeader
	// ErrNotEnoughReplicas: acks=all in raft mode while fewer voters than
	// min.insync.replicas are in sync (nothing was written).
	ErrNotEnoughReplicas = partition.ErrNotEnoughReplicas
	// ErrProposalDropped: raft refused the entry (a leadership transfer is
	// under way or too much is uncommitted); nothing was written.
	ErrProposalDropped = partition.ErrProposalDropped
	// ErrBusy: too many proposals are queued for this partition.
	ErrBusy = partition.ErrBusy
	// ErrReplicaClosed: the replica or its host was closed.
	ErrReplicaClosed = partition.ErrReplicaClosed
	// ErrDirInUse: the partition's directory (named by topic name and
	// index) still belongs to the replica of a deleted topic of the same
	// name, not removed yet; nothing was opened.
	ErrDirInUse = partition.ErrDirInUse
	// ErrReplicaFailed: the replica stopped for good after its storage
	// failed or raft panicked (the cause is in the message only); the
	// partition is offline on this broker (KAFKA_STORAGE_ERROR) until it
	// restarts.
	ErrReplicaFailed = partition.ErrReplicaFailed
	// ErrLostCommitted: Open found fewer entries than the persisted commit
	// index covers; the replica is not opened (it must not vote or lead) and
	// has to be re-seeded: its directory removed and the broker added back
	// by a membership change.
	ErrLostCommitted = partition.ErrLostCommitted
	// ErrOldFormat: Open found a partition directory written by an
	// earlier version, in which raft's own entries took Kafka offsets
	// (doc.go, "Offsets"); the replica is not opened.
	ErrOldFormat = partition.ErrOldFormat
	// ErrTransferTargetInactive: a leadership transfer was refused because
	// the leader has not heard from the target within the last election
	// timeout; nothing changed, and the caller may ask again later.
	ErrTransferTargetInactive = errors.New("replica: leadership transfer target is not active")
)

// NotLeaderError says who the leader is, as far as this replica knows.
type NotLeaderError struct {
	Leader NodeID // -1 when unknown
	Term   uint64
}

func (e *NotLeaderError) Error() string {
	if e.Leader < 0 {
		return fmt.Sprintf("replica: not the leader (term %d, leader unknown)", e.Term)
	}
	return fmt.Sprintf("replica: not the leader (term %d, leader %d)", e.Term, e.Leader)
}

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }
