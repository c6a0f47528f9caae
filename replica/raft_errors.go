package replica

import (
	"errors"
	"fmt"
)

// Errors of the replicated path. protocol/ maps them to Kafka codes:
// ErrNotLeader NOT_LEADER_OR_FOLLOWER (6), ErrNotEnoughReplicas
// NOT_ENOUGH_REPLICAS (19), ErrProposalDropped and ErrBusy
// REQUEST_TIMED_OUT (7) (the client retries), ErrReplicaClosed
// NOT_LEADER_OR_FOLLOWER (6). Idempotence errors are the log package's
// (log.ErrOutOfOrderSequence, log.ErrInvalidProducerEpoch).
var (
	// ErrNotLeader: this replica is not the raft leader, or stopped being
	// it before the write was answered; errors.As gives a *NotLeaderError
	// with the leader this replica knows of.
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
	// earlier version, in which raft's own entries took Kafka offsets
	// (doc.go, "Offsets"); the replica is not opened.
	ErrOldFormat = errors.New("replica: partition directory in a format this version does not read")
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
