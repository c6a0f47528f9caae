package partition

import (
	"fmt"
	"strings"
	"time"
)

// Key names a partition by topic id, which survives renames and tells a
// re-created topic from its deleted namesake.
type Key struct {
	TopicID [16]byte
	Index   int32
}

// NodeID is a broker id.
type NodeID int32

// Members are a partition's replicas: voters are write brokers, learners
// read brokers.
type Members struct {
	Voters   []NodeID
	Learners []NodeID
}

// MemberLag is how far one member of a partition's raft group is behind
// its leader, as the leader sees it.
type MemberLag struct {
	// Entries is raft entries (batches) behind the leader's last entry.
	Entries uint64
	// Offsets is Kafka offsets (records) behind the leader's log end:
	// from the end of the last entry the member has to the leader's.
	Offsets int64
	// Time is how long ago the member last had the leader's whole log
	// (0 when it has it now): the measure replica.lag.time.max.ms bounds
	// for the ISR.
	Time time.Duration
}

// Mode is a topic's replication.mode: when acks=all is answered.
type Mode int8

const (
	// ModeRaft answers acks=all at raft commit: a majority of the voters
	// (write brokers) hold the batch durably.
	ModeRaft Mode = iota
	// ModeSemiSync answers acks=all once the leader's write is durable and
	// SemiSyncWaitReplicas other voters (write brokers) have acknowledged
	// it durably, or, when they have not within SemiSyncTimeout, falls
	// back to ModeAsync's answer until they catch up.
	ModeSemiSync
	// ModeAsync answers acks=all once the leader's write is durable. A
	// failover can lose it.
	ModeAsync
	// ModeShared keeps the partition in shared storage, not in raft
	// replicas: acks=1 and acks=all are answered once the write leader's
	// object is durable there and committed in the metastore
	// (docs/shared-storage.md). A raft replica never runs in it.
	ModeShared
)

// ParseMode reads a replication.mode config value.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "raft", "":
		return ModeRaft, nil
	case "semi-sync":
		return ModeSemiSync, nil
	case "async":
		return ModeAsync, nil
	case "shared":
		return ModeShared, nil
	}
	return 0, fmt.Errorf("replica: unknown replication.mode %q", s)
}

func (m Mode) String() string {
	switch m {
	case ModeRaft:
		return "raft"
	case ModeSemiSync:
		return "semi-sync"
	case ModeAsync:
		return "async"
	case ModeShared:
		return "shared"
	}
	return "unknown"
}

// Acks is the producer's acks setting.
type Acks int8

const (
	AcksNone   Acks = 0  // nobody waits; the write is still replicated
	AcksLeader Acks = 1  // answered after the leader's own append
	AcksAll    Acks = -1 // answered as the topic's Mode says
)

// Options are the topic settings a replica obeys.
type Options struct {
	Mode Mode
	// MinInsyncReplicas is min.insync.replicas for acks=all in ModeRaft:
	// voters (the leader included) heard from within the follower lag
	// bound and replicating normally. Zero means 1.
	MinInsyncReplicas int
	// SemiSyncWaitReplicas is semi.sync.wait.replicas for ModeSemiSync:
	// how many voters other than the leader must hold a batch durably
	// before acks=all is answered (at most the other voters there are).
	// Zero means 1.
	SemiSyncWaitReplicas int
	// SemiSyncTimeout is semi.sync.timeout.ms for ModeSemiSync: how long
	// acks=all waits for them after the leader's own durable write before
	// the partition falls back to asynchronous answers. Zero means the
	// replica's default.
	SemiSyncTimeout time.Duration
	// Log is the partition log's config.
	Log LogConfig
}

// ProduceResult is where an acknowledged batch went.
type ProduceResult struct {
	BaseOffset, LastOffset int64
	// Duplicate: a retry of a batch the log already has; the offsets are
	// the original ones and nothing new was written.
	Duplicate bool
}

// Takeover is where a promoted async master's log took over its
// predecessor's: the new master holds the old one's entries up to Index
// (Offset is the offset after them) and writes its own after it, in terms
// above Term.
type Takeover struct {
	Term   uint64
	Index  uint64
	Offset int64
}
