package metastore

import "time"

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
// "mixed" and decides what Metadata answers on that listener.
type Endpoint struct {
	Name string
	View string
	Host string
	Port int32
}

// Broker is a registered broker.
type Broker struct {
	ID          int32
	Role        BrokerRole
	Rack        string
	Endpoints   []Endpoint
	Incarnation uint64
	LeaseExpiry time.Time
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// OffsetCommit is one committed consumer offset.
type OffsetCommit struct {
	TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitTime  time.Time
}
