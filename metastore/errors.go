package metastore

import "errors"

// Errors returned by the client API. The broker maps them to Kafka error
// codes in protocol.ErrorCode; nothing here knows Kafka's codes.
var (
	// ErrTopicExists: CreateTopic for a name that is taken.
	ErrTopicExists = errors.New("metastore: topic already exists")
	// ErrUnknownTopic: the named topic (or id) does not exist.
	ErrUnknownTopic = errors.New("metastore: unknown topic")
	// ErrInvalidPartitions: a partition count that is not positive, or a
	// CreatePartitions that does not increase the count.
	ErrInvalidPartitions = errors.New("metastore: invalid partition count")
	// ErrInvalidReplicationFactor: more replicas asked than brokers exist.
	ErrInvalidReplicationFactor = errors.New("metastore: invalid replication factor")
	// ErrFenced: a broker heartbeat with a stale incarnation or a lapsed lease.
	ErrFenced = errors.New("metastore: broker fenced")
	// ErrNotLeader: internal; a follower could not reach the leader in time.
	ErrNotLeader = errors.New("metastore: no leader")
	// ErrStopped: the node or client was closed.
	ErrStopped = errors.New("metastore: stopped")
)
