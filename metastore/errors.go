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
	// ErrPartitionLimit: CreateTopic or CreatePartitions would make the
	// cluster hold more partitions than the proposer's limit
	// (Client.SetPartitionLimit).
	ErrPartitionLimit = errors.New("metastore: the cluster's partitions would pass max.partitions")
	// ErrInvalidReplicationFactor: more replicas asked than brokers exist.
	ErrInvalidReplicationFactor = errors.New("metastore: invalid replication factor")
	// ErrFenced: a broker heartbeat with a stale incarnation or a lapsed lease.
	ErrFenced = errors.New("metastore: broker fenced")
	// ErrNotLeader: internal; a follower could not reach the leader in time.
	ErrNotLeader = errors.New("metastore: no leader")
	// ErrStopped: the node or client was closed.
	ErrStopped = errors.New("metastore: stopped")
)

// Errors added with the quorum.
var (
	// ErrUnknownGroup: LoadGroup for a group with no saved state.
	ErrUnknownGroup = errors.New("metastore: unknown group")
	// ErrUnknownBroker: an operation names a broker that is not registered.
	ErrUnknownBroker = errors.New("metastore: unknown broker")
	// ErrInvalidRequest: a malformed request (empty name, bad argument).
	ErrInvalidRequest = errors.New("metastore: invalid request")
	// ErrMemberExists: AddVoter for an id that is already a member.
	ErrMemberExists = errors.New("metastore: raft member exists")
	// ErrUnknownMember: RemoveVoter for an id that is not a member.
	ErrUnknownMember = errors.New("metastore: unknown raft member")
	// ErrTimeout: the request's outcome is unknown; it was proposed but its
	// application was not seen before the deadline (leader change,
	// partition). It may or may not have taken effect.
	ErrTimeout = errors.New("metastore: request timed out, outcome unknown")
	// ErrUnreachable: the transport could not reach the peer.
	ErrUnreachable = errors.New("metastore: peer unreachable")
	// ErrNoReassignment: cancelling the reassignment of a partition that
	// is not being reassigned.
	ErrNoReassignment = errors.New("metastore: no reassignment in progress")
	// ErrInvalidReplicaAssignment: a replica list that is empty, names a
	// broker twice, or names a broker that is not a registered write broker.
	ErrInvalidReplicaAssignment = errors.New("metastore: invalid replica assignment")
	// ErrStaleMaster: an async claim or promotion names a master the
	// partition no longer has (another promotion won).
	ErrStaleMaster = errors.New("metastore: not the partition's async master")
	// ErrMasterAlive: an async claim or promotion to replace a master
	// that is registered (its lease holds, or it registered again).
	ErrMasterAlive = errors.New("metastore: the partition's async master is registered")
	// ErrNotInSync: an async claim by a write replica that is not in the
	// ISR the partition's master last reported (only a clean election).
	ErrNotInSync = errors.New("metastore: not in the partition's ISR")
	// ErrOvertaken: a group coordinator's offset commit that reached the
	// log after a later commit of the same coordinator (broker and
	// incarnation) for the group, and is refused: applying it would take
	// the group's offsets back. Its caller had given up on it (the
	// coordinator sends a group's commits one at a time), so it normally
	// reaches no one.
	ErrOvertaken = errors.New("metastore: a later commit of the same coordinator for the group was applied first")
)
