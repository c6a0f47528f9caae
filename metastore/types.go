package metastore

import (
	"slices"
	"time"
)

// TopicID is a topic's UUID as it travels on the Kafka wire (Metadata v10+,
// Fetch v13+, DeleteTopics v6+).
type TopicID [16]byte

// Topic is one topic as the quorum knows it. Partitions is indexed by
// partition id. Configs holds only the configs that were set explicitly
// (dynamic topic configs); defaults are resolved by the broker.
type Topic struct {
	ID         TopicID
	Name       string
	Partitions []Partition
	Configs    map[string]string
	// Revision is the metastore revision that last changed this topic.
	Revision uint64
}

// Partition is the assignment of one partition.
type Partition struct {
	ID          int32
	Voters      []int32 // write brokers, raft voters
	Learners    []int32 // read brokers, raft learners
	Leader      int32   // -1 when unknown
	LeaderEpoch int32
	// Target is the voter set of a reassignment in progress
	// (AlterPartitionReassignments), nil when none is. The partition's raft
	// leader moves the group to it and then records Voters = Target,
	// Target = nil. A Target equal to Voters as a set is a cancelled one
	// whose raft configuration is still being moved back. Absent from
	// topics stored before reassignments existed, which decode as nil.
	Target []int32 `json:",omitempty"`
	// InitVoters and InitLearners are the raft configuration the
	// partition's group was created with (the configuration before its
	// first log entry). A broker that joins later starts from it and
	// replays the configuration changes in the log, which are diffs
	// against it. Nil in topics stored before membership could change;
	// apply fills them in before the first change (see initial), so nil
	// means "never changed: the same as Voters and Learners".
	InitVoters   []int32 `json:",omitempty"`
	InitLearners []int32 `json:",omitempty"`
	// Departed lists the brokers of the initial configuration that have
	// since left the partition's voters and learners (apply records them
	// whenever it stores the partition: markDeparted). Such a broker's
	// replica was deleted, so even when it is placed on the partition
	// again it is no founder (see Founder): the group it would found is
	// gone. Nil in partitions stored before it existed, and in those
	// whose founders never left.
	Departed []int32 `json:",omitempty"`
	// ISR is the replicas, voters and learners, the partition's raft
	// leader counts in sync (caught up within replica.lag.time.max.ms),
	// as it last reported them with its leader and epoch. Nil until the
	// current leader reports, in partitions without a raft group, and in
	// topics stored before it existed: then every replica counts as in
	// sync (InSync).
	ISR []int32 `json:",omitempty"`
	// AsyncMaster is, for a partition in async mode's master/replica
	// configuration (async.go), the broker that is its raft group's sole
	// voter; nil otherwise. AsyncTakeover is the claim its last promotion
	// took over from (nil before any), AsyncClaims the write replicas'
	// claims while a lapsed master's replacement is being decided.
	// AsyncHandover is the write replica a master in its controlled
	// shutdown hands its place to (async.go), nil otherwise.
	AsyncMaster   *int32               `json:",omitempty"`
	AsyncTakeover *AsyncClaim          `json:",omitempty"`
	AsyncClaims   map[int32]AsyncClaim `json:",omitempty"`
	AsyncHandover *int32               `json:",omitempty"`
}

// InSync returns the replicas in sync: ISR, or every voter and learner
// when no leader reported one.
func (p Partition) InSync() []int32 {
	if p.ISR == nil {
		return append(slices.Clone(p.Voters), p.Learners...)
	}
	return p.ISR
}

// Initial returns the configuration the partition's raft group was
// created with (see InitVoters).
func (p Partition) Initial() (voters, learners []int32) {
	if p.InitVoters == nil {
		return p.Voters, p.Learners
	}
	return p.InitVoters, p.InitLearners
}

// Founder says whether broker id opens its replica of the partition as
// one of the raft group's founders: it is in the initial configuration
// (Initial) and has never left the partition since (Departed). A founder
// without state starts from the initial configuration and its first voter
// campaigns at once; anyone else joins the running group from the
// initial configuration and learns its role from the group's log.
func (p Partition) Founder(id int32) bool {
	if slices.Contains(p.Departed, id) {
		return false
	}
	iv, il := p.Initial()
	return slices.Contains(iv, id) || slices.Contains(il, id)
}

// Reassigning says whether an operator's reassignment is in progress (what
// ListPartitionReassignments shows): a Target that differs from Voters.
func (p Partition) Reassigning() bool {
	return p.Target != nil && !sameSet(p.Target, p.Voters)
}

// Adding and Removing are the voters a reassignment in progress adds and
// removes, as Kafka reports them.
func (p Partition) Adding() []int32   { return minus(p.Target, p.Voters) }
func (p Partition) Removing() []int32 { return minus(p.Voters, p.Target) }

// Replicas is the replica set Kafka shows during a reassignment: the
// target first, then the voters being removed.
func (p Partition) Replicas() []int32 {
	if p.Target == nil {
		return append([]int32(nil), p.Voters...)
	}
	return append(append([]int32(nil), p.Target...), p.Removing()...)
}

func minus(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !containsInt32(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !containsInt32(b, x) {
			return false
		}
	}
	return true
}

// TopicSpec asks for a new topic. Assignment, when non-nil, gives the voters
// of each partition explicitly (CreateTopics' ReplicaAssignment).
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
	Assignment        [][]int32
}

// BrokerRole says which Kafka traffic a broker serves.
type BrokerRole string

const (
	RoleWrite BrokerRole = "write"
	RoleRead  BrokerRole = "read"
	// RoleCombined is a broker that is both (sluice dev).
	RoleCombined BrokerRole = "combined"
)

// Endpoint is one Kafka listener of a broker. View is "write", "read" or
// "mixed" and decides what Metadata answers on that listener. Protocol is
// the listener's security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT,
// SASL_SSL), what another broker must speak to reach it; a registration
// made before brokers recorded it has none, and means PLAINTEXT
// (SecurityProtocol).
type Endpoint struct {
	Name     string
	View     string
	Host     string
	Port     int32
	Protocol string `json:",omitempty"`
}

// SecurityProtocol is e's security protocol, PLAINTEXT when unrecorded.
func (e Endpoint) SecurityProtocol() string {
	if e.Protocol == "" {
		return "PLAINTEXT"
	}
	return e.Protocol
}

// Broker is a registered broker.
type Broker struct {
	ID          int32
	Role        BrokerRole
	Rack        string
	Endpoints   []Endpoint
	Incarnation uint64
	LeaseExpiry time.Time
	// ShuttingDown: the broker is in its controlled shutdown (it is
	// handing its partitions' leadership to other voters): nothing is
	// handed to it meanwhile (preferred-leader elections, new groups).
	ShuttingDown bool `json:",omitempty"`
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// GroupOffsetCommit is a group's committed offset and the revision (raft
// index) that stored it: the revision orders commits across groups, for
// the __consumer_offsets view.
type GroupOffsetCommit struct {
	Group string
	OffsetCommit
	Rev uint64
}

// OffsetCommit is one committed consumer offset.
type OffsetCommit struct {
	TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  time.Time
}
