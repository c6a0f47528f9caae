// Package configs holds Sluice's typed configuration: one struct with
// Kafka-familiar names, one place for defaults (Default), validation, and
// the table of topic configs with their broker synonyms. Only cmd/ loads it
// (through viper); every other package takes plain values.
package configs

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
)

// Listener is one Kafka listener. View decides what Metadata and
// FindCoordinator answer on it: "write", "read" or "mixed".
type Listener struct {
	Name string `mapstructure:"name"`
	View string `mapstructure:"view"`
	// Address is host:port to bind.
	Address string `mapstructure:"address"`
	// Advertised is host:port given to clients; Address when empty.
	Advertised string `mapstructure:"advertised"`
	// Protocol is the security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT,
	// SASL_SSL), from listener.security.protocol.map (ResolveListeners).
	Protocol string `mapstructure:"-"`
}

// Config is the whole configuration of one sluice process. Keys are flat,
// with Kafka's names where Kafka has the setting.
type Config struct {
	NodeID  int32    `mapstructure:"node.id"`
	Roles   []string `mapstructure:"process.roles"`
	DataDir string   `mapstructure:"data.dir"`
	Rack    string   `mapstructure:"broker.rack"`

	// Listeners: the YAML list form (name, view, address, advertised), or
	// Kafka's string form "NAME://host:port,..." (from server.properties,
	// SLUICE_LISTENERS or --listeners). The keys below complete it, as in
	// Kafka; ResolveListeners applies them.
	Listeners []Listener `mapstructure:"listeners"`
	// AdvertisedListeners: "NAME://host:port,..." given to clients.
	AdvertisedListeners string `mapstructure:"advertised.listeners"`
	// ListenerSecurityProtocolMap: "NAME:PROTOCOL,..." (Kafka's default
	// maps each protocol name to itself).
	ListenerSecurityProtocolMap string `mapstructure:"listener.security.protocol.map"`
	// ListenerViews: "NAME:view,..." with view write, read or mixed
	// (Sluice's own key; mixed when a listener is not named).
	ListenerViews string `mapstructure:"listener.views"`
	AdminAddr     string `mapstructure:"admin.addr"`
	// LogDirs is Kafka's name for the data directory; when set it takes
	// the place of data.dir (one directory).
	LogDirs string `mapstructure:"log.dirs"`

	LogFormat string `mapstructure:"log.format"` // console or json; empty: console on a terminal
	LogLevel  string `mapstructure:"log.level"`

	SocketRequestMaxBytes int32 `mapstructure:"socket.request.max.bytes"`
	// QueuedMaxRequestBytes bounds the bytes of request frames the broker
	// holds at once over all connections (Kafka's setting of this name):
	// beyond it connections are not read until requests finish, so
	// clients with deep pipelines feel TCP backpressure instead of
	// growing the broker's memory. A produce request to a single-node
	// (sluice dev) partition stops counting once its batches are written,
	// before its acks=all wait; one to a raft partition, whose proposal
	// keeps the batches until raft has its copy, and every other request
	// count until answered. A frame up to 64 KiB counts whole once its size
	// prefix is read; a larger one counts window by window as its bytes
	// arrive, so a client that announces a large frame and stalls holds
	// about what it sent, not what it announced. Memory too: a frame
	// over an eighth of the bound, or one that would take the frames
	// still arriving with whole buffers past the bound, gets a buffer
	// that grows as its bytes arrive.
	// A frame is admitted while any room is left, and one partly read
	// frame at a time may go past the bound, so one larger than the
	// bound still passes. Frames over 64 KiB still arriving hold at most
	// seven eighths of the bound, each at most
	// queued.max.request.bytes.per.connection. The buffers compressed records inflate into
	// while a produce is validated count too (one inflation may always
	// proceed, so that requests holding frames cannot wait on each
	// other). Default 100 MiB; -1 (Kafka's default) or 0: unbounded.
	QueuedMaxRequestBytes int64 `mapstructure:"queued.max.request.bytes"`
	// QueuedMaxResponseBytes bounds, per connection, the bytes of
	// responses answered but not yet written to the socket (Sluice's own
	// key): past it the connection's next request is not read until the
	// client reads enough of them, so a client that pipelines requests
	// and never reads stalls only itself and holds this much (plus the
	// answers of the requests already read, at most 64) rather than
	// every answer it asked for. Kafka mutes a connection while any
	// response is pending; a pipelining client here keeps its pipeline
	// while it reads. Responses are held encoded (Fetch's records stay
	// in their files). Default 1 MiB; -1: unbounded.
	QueuedMaxResponseBytes int64 `mapstructure:"queued.max.response.bytes"`
	// SocketRequestTimeoutMs bounds the time a request frame's bytes may
	// take to arrive, from its size prefix to its last byte (time spent
	// waiting for room under queued.max.request.bytes not counted); a
	// connection whose frame is still incomplete then is closed and the
	// frame's bytes are given back at once, so a client that stops
	// mid-frame holds nothing for long. Kafka has no such setting (its
	// only bound is connections.max.idle.ms); the default, 30 s, is the
	// Kafka clients' request.timeout.ms: past it the client has given up
	// on the request anyway. -1: no bound.
	SocketRequestTimeoutMs int64 `mapstructure:"socket.request.timeout.ms"`
	// QueuedMaxRequestStallMs is how long a connection whose request frame
	// is incomplete may receive none of its bytes while
	// queued.max.request.bytes is full and other frames wait for room
	// (Sluice's own key; Kafka has none): then the broker closes such
	// connections, the largest reservation first, until the budget has
	// room, and their bytes are given back at once. Two clients that
	// send most of a 100 MiB frame each and stop would otherwise make
	// every other client wait until socket.request.timeout.ms. A frame
	// whose bytes keep arriving (queued.min.request.bytes.per.second
	// bounds how slowly) and a request read whole (being handled) are
	// never closed this way. Default 500;
	// -1: never (only socket.request.timeout.ms closes them).
	QueuedMaxRequestStallMs int64 `mapstructure:"queued.max.request.stall.ms"`
	// QueuedMaxRequestBytesPerConnection bounds what the frame one
	// connection is reading may hold of queued.max.request.bytes (Sluice's
	// own key; Kafka has none). Past it the frame goes on only as the one
	// frame at a time allowed past the bound, whose further bytes are
	// counted outside the budget, so that two or three clients that send
	// most of a 100 MiB frame each and then trickle cannot fill the budget
	// between them. Large frames together may also hold at most seven
	// eighths of the budget: the last eighth is kept for frames up to
	// 64 KiB and their decoding, so small requests of other clients
	// (Metadata, a Produce of a few records, a Fetch) are admitted while
	// large frames wait. Default 0: a quarter of queued.max.request.bytes
	// (25 MiB; at least 64 KiB), which lets a frame of 25 times a Kafka
	// producer's default max.request.size arrive without waiting for any
	// other; -1: no cap.
	QueuedMaxRequestBytesPerConnection int64 `mapstructure:"queued.max.request.bytes.per.connection"`
	// QueuedMinRequestBytesPerSecond is the slowest rate, averaged over
	// about the last second of its reading (time it waited for room
	// excluded), at which an incomplete request frame holding part of queued.max.request.bytes
	// may arrive while other frames wait for room (Sluice's own key):
	// slower ones are closed, the largest first, until there is room, and
	// their bytes are given back at once. A client that sends a byte now
	// and then makes progress, so queued.max.request.stall.ms never
	// closes it; this does. Default 1024 (8 kbit/s, below any link a
	// client would use); -1: never.
	QueuedMinRequestBytesPerSecond int64 `mapstructure:"queued.min.request.bytes.per.second"`
	// ConnectionsMaxIdleMs closes a connection that has read and written
	// nothing for this long while no request of it is being handled
	// (Kafka's setting of this name; -1: never). A response that takes
	// longer than this to write counts as idle too.
	ConnectionsMaxIdleMs int64 `mapstructure:"connections.max.idle.ms"`
	// MaxConnections bounds the open Kafka connections over all
	// listeners; at the bound the listeners stop accepting (clients wait
	// in the kernel's backlog) until a connection closes, as in Kafka.
	MaxConnections int32 `mapstructure:"max.connections"`
	// MaxConnectionsPerIP bounds the connections from one IP address; a
	// connection past it is closed at once (Kafka's behaviour). 0 is
	// allowed only with overrides: then only the listed hosts connect.
	MaxConnectionsPerIP int32 `mapstructure:"max.connections.per.ip"`
	// MaxConnectionsPerIPOverrides sets the per-IP bound for some hosts,
	// Kafka's format: "host:count,host:count" (a host name stands for
	// every address it resolves to when the broker starts).
	MaxConnectionsPerIPOverrides string `mapstructure:"max.connections.per.ip.overrides"`
	// MaxConnectionCreationRate bounds new connections per second over
	// all listeners; faster arrivals wait in the kernel's backlog while
	// the listeners pause accepting, as Kafka's acceptor throttles.
	MaxConnectionCreationRate int32 `mapstructure:"max.connection.creation.rate"`

	// Client quotas (set with AlterClientQuotas) are measured over
	// QuotaWindowNum windows of QuotaWindowSizeSeconds each, the
	// controller mutation quota over its own windows, as in Kafka.
	QuotaWindowNum                   int32 `mapstructure:"quota.window.num"`
	QuotaWindowSizeSeconds           int32 `mapstructure:"quota.window.size.seconds"`
	ControllerQuotaWindowNum         int32 `mapstructure:"controller.quota.window.num"`
	ControllerQuotaWindowSizeSeconds int32 `mapstructure:"controller.quota.window.size.seconds"`

	// MaxPartitionsPerRequest bounds the partitions one CreateTopics or
	// CreatePartitions request may add, counted over all its topics
	// before anything reaches the metastore: beyond it every topic is
	// answered POLICY_VIOLATION. Kafka has no setting but the same fixed
	// limit in its controller (10,000, MAX_PARTITIONS_PER_BATCH, also
	// POLICY_VIOLATION), set after requests of that kind exhausted its
	// memory; Sluice's default is Kafka's.
	MaxPartitionsPerRequest int32 `mapstructure:"max.partitions.per.request"`
	// MaxPartitions bounds the partitions of the whole cluster (the
	// name KIP-578 proposed for Kafka): a CreateTopics or
	// CreatePartitions that would pass it, and an auto-creation, is
	// refused with POLICY_VIOLATION. Every partition is a log (and in a
	// cluster a raft group) on its brokers; the default, 50,000, is a
	// quarter of what Kafka's KIP-578 names as the advised Kafka cluster
	// maximum, since a Sluice partition also costs a raft group.
	MaxPartitions int32 `mapstructure:"max.partitions"`
	// ConfigValueMaxBytes bounds the name and the value of each config
	// in CreateTopics, AlterConfigs and IncrementalAlterConfigs
	// (INVALID_CONFIG beyond it), checked before a value is parsed,
	// split into a list or echoed in an error message. Kafka has no such
	// setting; Sluice's configs are numbers, enums and short lists.
	ConfigValueMaxBytes int32 `mapstructure:"config.value.max.bytes"`
	// GroupMaxSize caps the members of a classic consumer group: a new
	// member's JoinGroup beyond it gets GROUP_MAX_SIZE_REACHED (Kafka's
	// setting of this name and its default, 2147483647: unbounded).
	GroupMaxSize int32 `mapstructure:"group.max.size"`
	// Transactions (Kafka's names and defaults): the longest timeout a
	// transactional producer may ask for (INVALID_TRANSACTION_TIMEOUT
	// beyond it), how long a transactional id's state outlives its last
	// use, and how often timed-out transactions are aborted
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms) and
	// expired ids removed
	// (transaction.remove.expired.transaction.cleanup.interval.ms).
	TransactionMaxTimeoutMs     int64 `mapstructure:"transaction.max.timeout.ms"`
	TransactionalIDExpirationMs int64 `mapstructure:"transactional.id.expiration.ms"`
	TxnAbortIntervalMs          int64 `mapstructure:"transaction.abort.timed.out.transaction.cleanup.interval.ms"`
	TxnExpireIntervalMs         int64 `mapstructure:"transaction.remove.expired.transaction.cleanup.interval.ms"`
	// TxnVerification is transaction.partition.verification.enable
	// (KIP-890 part 1): a partition leader takes a producer's first
	// transactional batch only once the transaction's state says the
	// partition is in its ongoing transaction, so a late batch cannot
	// open a transaction nobody will end. It governs Produce up to v11:
	// from v12 (transaction version 2) the leader adds the partition to
	// the transaction itself, whatever it says.
	TxnVerification bool `mapstructure:"transaction.partition.verification.enable"`
	// GroupConsumerMaxSize caps the members of a KIP-848 consumer group:
	// a new member's ConsumerGroupHeartbeat beyond it gets
	// GROUP_MAX_SIZE_REACHED (Kafka's setting and default, 2147483647).
	GroupConsumerMaxSize int32 `mapstructure:"group.consumer.max.size"`
	// OffsetsTopicNumPartitions is the partition count of the read-only
	// __consumer_offsets view, which places group g in partition
	// abs(g.hashCode()) % it (Kafka's setting and default, 50). Changing
	// it moves groups between partitions, as in Kafka.
	OffsetsTopicNumPartitions int32 `mapstructure:"offsets.topic.num.partitions"`
	// GroupMinSessionTimeoutMs and GroupMaxSessionTimeoutMs bound the
	// session timeout a classic group member may ask for in JoinGroup
	// (INVALID_SESSION_TIMEOUT outside); Kafka's names and defaults.
	GroupMinSessionTimeoutMs int32 `mapstructure:"group.min.session.timeout.ms"`
	GroupMaxSessionTimeoutMs int32 `mapstructure:"group.max.session.timeout.ms"`
	// GroupConsumerSessionTimeoutMs and GroupConsumerHeartbeatIntervalMs
	// are the session timeout and heartbeat interval of KIP-848 consumer
	// group members; Kafka's names and defaults.
	GroupConsumerSessionTimeoutMs    int32 `mapstructure:"group.consumer.session.timeout.ms"`
	GroupConsumerHeartbeatIntervalMs int32 `mapstructure:"group.consumer.heartbeat.interval.ms"`
	// Share groups (KIP-932), Kafka's names, defaults and bounds: how long
	// a record a member acquired stays locked to it
	// (group.share.record.lock.duration.ms, 1000-3600000), how often a
	// record is delivered before it is archived
	// (group.share.delivery.count.limit, 2-10), how many records of a
	// partition may be in flight at once
	// (group.share.partition.max.record.locks, 100-10000), a member's
	// session timeout and heartbeat interval, and the most members of a
	// share group (group.share.max.size).
	GroupShareRecordLockDurationMs int32 `mapstructure:"group.share.record.lock.duration.ms"`
	GroupShareDeliveryCountLimit   int32 `mapstructure:"group.share.delivery.count.limit"`
	GroupSharePartitionMaxLocks    int32 `mapstructure:"group.share.partition.max.record.locks"`
	GroupShareSessionTimeoutMs     int32 `mapstructure:"group.share.session.timeout.ms"`
	GroupShareHeartbeatIntervalMs  int32 `mapstructure:"group.share.heartbeat.interval.ms"`
	GroupShareMaxSize              int32 `mapstructure:"group.share.max.size"`
	// OffsetsRetentionMinutes: committed offsets of a group that no longer
	// uses them (an Empty classic group, an unsubscribed topic, a
	// standalone consumer's commits) expire after this long; Kafka's
	// offsets.retention.minutes. OffsetsRetentionCheckIntervalMs is how
	// often expiry runs (offsets.retention.check.interval.ms).
	OffsetsRetentionMinutes         int32 `mapstructure:"offsets.retention.minutes"`
	OffsetsRetentionCheckIntervalMs int64 `mapstructure:"offsets.retention.check.interval.ms"`
	// ProducerIDExpirationMs: a replica forgets an idempotent producer
	// whose last batch in the partition is older, unless it has a
	// transaction open there (Kafka's producer.id.expiration.ms);
	// ProducerIDExpirationCheckIntervalMs is how often each broker checks
	// (producer.id.expiration.check.interval.ms).
	ProducerIDExpirationMs              int32 `mapstructure:"producer.id.expiration.ms"`
	ProducerIDExpirationCheckIntervalMs int32 `mapstructure:"producer.id.expiration.check.interval.ms"`
	// OffsetsCommitTimeoutMs bounds an offset commit's metastore write;
	// past it the commit answers COORDINATOR_NOT_AVAILABLE and the client
	// retries (Kafka's offsets.commit.timeout.ms, default 5000).
	OffsetsCommitTimeoutMs int32 `mapstructure:"offsets.commit.timeout.ms"`
	// GroupInitialRebalanceDelayMs is how long the first rebalance of an
	// empty classic group waits for more members (Kafka's name and
	// default, 3000; `sluice dev` defaults to 0, as Kafka's quickstart
	// server.properties does).
	GroupInitialRebalanceDelayMs int32 `mapstructure:"group.initial.rebalance.delay.ms"`

	AutoCreateTopics         bool  `mapstructure:"auto.create.topics.enable"`
	NumPartitions            int32 `mapstructure:"num.partitions"`
	DefaultReplicationFactor int16 `mapstructure:"default.replication.factor"`
	MessageMaxBytes          int32 `mapstructure:"message.max.bytes"`
	// FetchMaxBytes caps one Fetch response whatever MaxBytes the client
	// asks for (Kafka's broker setting of this name). Records are sent
	// from the segment files, so it bounds the bytes one response sends,
	// not memory.
	FetchMaxBytes int32 `mapstructure:"fetch.max.bytes"`
	// FetchSessionCacheSlots bounds the incremental fetch sessions
	// (KIP-227) the broker keeps; 0 declines every session.
	FetchSessionCacheSlots int32 `mapstructure:"max.incremental.fetch.session.cache.slots"`
	// FetchSessionEvictionMs: a session unused this long may be evicted
	// by any new one, and a younger one only by a larger or privileged one.
	FetchSessionEvictionMs int32 `mapstructure:"min.incremental.fetch.session.eviction.ms"`

	LogSegmentBytes           int32  `mapstructure:"log.segment.bytes"`
	LogRollMs                 int64  `mapstructure:"log.roll.ms"`
	LogRetentionBytes         int64  `mapstructure:"log.retention.bytes"`
	LogIndexIntervalBytes     int32  `mapstructure:"log.index.interval.bytes"`
	LogIndexSizeMaxBytes      int32  `mapstructure:"log.index.size.max.bytes"`
	LogMessageTimestampType   string `mapstructure:"log.message.timestamp.type"`
	LogTimestampBeforeMaxMs   int64  `mapstructure:"log.message.timestamp.before.max.ms"`
	LogTimestampAfterMaxMs    int64  `mapstructure:"log.message.timestamp.after.max.ms"`
	LogRetentionCheckInterval int64  `mapstructure:"log.retention.check.interval.ms"`

	// Log compaction (cleanup.policy=compact): the broker default of the
	// policy and of the topic configs of compaction, and the cleaner's
	// resources (Kafka's log.cleaner.* with Kafka's defaults).
	LogCleanupPolicy              string  `mapstructure:"log.cleanup.policy"`
	LogCleanerEnable              bool    `mapstructure:"log.cleaner.enable"`
	LogCleanerThreads             int32   `mapstructure:"log.cleaner.threads"`
	LogCleanerDedupeBufferSize    int64   `mapstructure:"log.cleaner.dedupe.buffer.size"`
	LogCleanerIOMaxBytesPerSecond float64 `mapstructure:"log.cleaner.io.max.bytes.per.second"`
	LogCleanerBackoffMs           int64   `mapstructure:"log.cleaner.backoff.ms"`
	LogCleanerDeleteRetentionMs   int64   `mapstructure:"log.cleaner.delete.retention.ms"`
	LogCleanerMinCleanableRatio   float64 `mapstructure:"log.cleaner.min.cleanable.ratio"`
	LogCleanerMinCompactionLagMs  int64   `mapstructure:"log.cleaner.min.compaction.lag.ms"`
	LogCleanerMaxCompactionLagMs  int64   `mapstructure:"log.cleaner.max.compaction.lag.ms"`
	MinInsyncReplicas             int32   `mapstructure:"min.insync.replicas"`
	ReplicationMode               string  `mapstructure:"replication.mode"`
	// SemiSyncWaitReplicas and SemiSyncTimeoutMs: semi-sync's
	// semi.sync.wait.replicas (default 1) and semi.sync.timeout.ms
	// (default 10000, MySQL's rpl_semi_sync_source_timeout), the broker
	// defaults of the topic configs (docs/replication-modes.md).
	SemiSyncWaitReplicas int32 `mapstructure:"semi.sync.wait.replicas"`
	SemiSyncTimeoutMs    int64 `mapstructure:"semi.sync.timeout.ms"`
	// SharedStorage is where partitions in replication.mode=shared keep
	// their data (docs/shared-storage.md); without it that mode is refused.
	SharedStorage `mapstructure:",squash"`

	// LogRetentionMs, LogRetentionMinutes and LogRetentionHours: Kafka's
	// three spellings of one setting, ms over minutes over hours; nil is
	// unset (Kafka's null default). RetentionMs gives the result.
	LogRetentionMs      *int64 `mapstructure:"log.retention.ms"`
	LogRetentionMinutes *int64 `mapstructure:"log.retention.minutes"`
	LogRetentionHours   int64  `mapstructure:"log.retention.hours"`
	// CompressionType is the broker default of the topic config
	// compression.type: producer, uncompressed, gzip, snappy, lz4, zstd.
	CompressionType string `mapstructure:"compression.type"`

	// LogFsync decides when a write is durable: "group" (default: acks=all
	// waits for an fdatasync that many appends share), "interval" (every
	// log.flush.interval.ms), "never" (page cache only, like Kafka's default).
	LogFsync           string `mapstructure:"log.fsync"`
	LogFlushIntervalMs int64  `mapstructure:"log.flush.interval.ms"`
	// LogWAL routes durability through one broker-wide write-ahead log
	// (one fdatasync per group commit, whatever the partition count)
	// instead of syncing each partition's segment files concurrently.
	// Off by default: end-to-end runs with franz-go on this kind of
	// machine measured the per-partition path faster both for large
	// batches (8 partitions, max throughput: 240-380 vs 130-140 MB/s)
	// and for many small ones (100 partitions at 50k records/s: produce
	// p50 8 ms vs 25 ms), although the log package's micro-benchmarks
	// favour the WAL for small batches; see log/doc.go.
	LogWAL bool `mapstructure:"log.wal.enable"`
	// LogCacheTailBytes is how much of each partition's synced active
	// segment stays in the page cache; older synced bytes are dropped from
	// it after each sync (drop-behind). 0 keeps everything cached, as
	// Kafka does. See log.FlusherConfig.CacheTailBytes.
	LogCacheTailBytes int64 `mapstructure:"log.cache.tail.bytes"`

	// Metastore: this node's id in the metadata quorum and its peers
	// ("id=host:port"), and the internal listener for raft and brokers.
	MetaID     uint64   `mapstructure:"meta.id"`
	MetaListen string   `mapstructure:"meta.listen"`
	MetaPeers  []string `mapstructure:"meta.peers"`
	// MetaJoin starts an empty meta node that waits to be added as a
	// voter (sluice meta add-voter) instead of bootstrapping.
	MetaJoin bool `mapstructure:"meta.join"`
	// MetaAddrs are the metastore nodes' internal addresses, for a broker
	// that does not run the meta role itself.
	MetaAddrs []string `mapstructure:"meta.addrs"`
	// MetaLearnerGraceMs is how long a read broker may stay unregistered
	// (a restart, a lapsed lease) before the metastore gives its learner
	// replicas up; a long outage then costs a full copy on return, a
	// short one none.
	MetaLearnerGraceMs int64 `mapstructure:"meta.learner.grace.ms"`
	// BrokerSessionTimeoutMs is Kafka's broker.session.timeout.ms: a
	// broker's lease in the metastore, which it renews three times per
	// lease. A broker unheard of that long is unregistered (its groups
	// move; an async partition it was master of is taken over by its most
	// caught-up write replica). The cluster records the first metastore
	// leader's value when it is created; meta nodes expire by the longer
	// of that and their own, brokers hold their lease by the shorter.
	BrokerSessionTimeoutMs int64 `mapstructure:"broker.session.timeout.ms"`

	// ReplicaListen is the internal address raft traffic between brokers
	// arrives on (one connection per peer broker carries every partition).
	// A connection is kept only from a registered broker at its registered
	// IP (a broker dials from the IP it listens on), and every raft
	// message is checked before raft sees it (replica/doc.go, "Peers");
	// this is not authentication, so keep the port on a private network.
	ReplicaListen string `mapstructure:"replica.listen"`
	// ReplicaOneVoter is deprecated and ignored (a warning is logged when
	// it is true): every partition is a raft group, and a broker without
	// replica.listen (`sluice dev`) hosts each as a one-voter group over an
	// in-process transport. The key is still accepted so that a config
	// file that sets it keeps loading.
	ReplicaOneVoter bool `mapstructure:"replica.one.voter"`
	// InternalSecurity: mutual TLS on replica.listen (internal.ssl.*) and
	// internal.insecure (security.go).
	InternalSecurity `mapstructure:",squash"`
	// RaftEntryCacheMaxBytes bounds the raft entry caches of all the
	// partitions a broker hosts together: recent entries kept in memory
	// so that sending them to followers and applying them reads no file.
	// Entries every replica has are dropped at once, so this is what
	// lagging replicas may pin. Default 32 MiB.
	RaftEntryCacheMaxBytes int64 `mapstructure:"raft.entry.cache.max.bytes"`
	// ReplicaLagTimeMaxMs is Kafka's replica.lag.time.max.ms: a follower
	// (a write broker's voter or a read broker's learner) that has not
	// caught up with its partition leader's log end for this long leaves
	// the ISR that Metadata shows, and a voter no longer counts for
	// min.insync.replicas; it returns once caught up. Default 30000.
	ReplicaLagTimeMaxMs int64 `mapstructure:"replica.lag.time.max.ms"`
	// AutoLeaderRebalance moves a partition's leadership back to its
	// preferred (first) voter when that broker is alive again, checked
	// every LeaderImbalanceCheckSeconds, as Kafka's settings of these names.
	// ControlledShutdown: on SIGTERM or SIGINT a broker first marks
	// itself shutting down in the metastore, hands the leadership of
	// its partitions to other voters (up to ControlledShutdownMaxRetries
	// rounds, each waiting up to ControlledShutdownRetryBackoffMs), and
	// releases its lease, then closes; Kafka's settings of these names
	// and defaults. Off: it closes at once and its partitions wait for
	// an election.
	ControlledShutdown               bool  `mapstructure:"controlled.shutdown.enable"`
	ControlledShutdownMaxRetries     int32 `mapstructure:"controlled.shutdown.max.retries"`
	ControlledShutdownRetryBackoffMs int64 `mapstructure:"controlled.shutdown.retry.backoff.ms"`
	AutoLeaderRebalance              bool  `mapstructure:"auto.leader.rebalance.enable"`
	LeaderImbalanceCheckSeconds      int64 `mapstructure:"leader.imbalance.check.interval.seconds"`

	// Security: Kafka's ssl.* and sasl.* keys (security.go).
	Security `mapstructure:",squash"`
	// ListenerOverrides are Kafka's listener.name.<name>.<key> settings,
	// as the loader found them (security.go).
	ListenerOverrides map[string]string `mapstructure:"-"`
	// Authorization (docs/security.md). AuthorizerClassName is Kafka's
	// authorizer.class.name: empty (Kafka's default) leaves every request
	// allowed; Kafka's StandardAuthorizer (or the older AclAuthorizer)
	// class name turns Sluice's ACL authorizer on, as does
	// AuthorizerEnable, Sluice's own key. SuperUsers is Kafka's
	// super.users ("User:a;User:b"); AllowEveryoneIfNoACL is Kafka's
	// allow.everyone.if.no.acl.found (default false: a resource no ACL
	// names is refused to everyone but super users).
	AuthorizerClassName  string `mapstructure:"authorizer.class.name"`
	AuthorizerEnable     bool   `mapstructure:"authorizer.enable"`
	SuperUsers           string `mapstructure:"super.users"`
	AllowEveryoneIfNoACL bool   `mapstructure:"allow.everyone.if.no.acl.found"`
	// AdminHTTPToken (or the first line of AdminHTTPTokenFile) is the
	// bearer token the admin HTTP port's mutating endpoints require
	// (Authorization: Bearer <token>). Without one they are served only
	// when admin.addr is a loopback address. PprofListen serves
	// /debug/pprof on its own address; empty (the default): no pprof.
	AdminHTTPToken     string `mapstructure:"admin.http.token"`
	AdminHTTPTokenFile string `mapstructure:"admin.http.token.file"`
	PprofListen        string `mapstructure:"pprof.listen"`
	// AdminHTTPRequireAuth (Redpanda's admin_api_require_auth): the
	// admin port's guarded endpoints and pprof.listen take only
	// authenticated requests, the bearer token or HTTP basic credentials
	// of a SCRAM user who is a super user, also on a loopback address.
	// `sluice dev --secure` turns it on.
	AdminHTTPRequireAuth bool `mapstructure:"admin.http.require.auth"`
	// The admin port's own TLS (Redpanda's admin_api_tls): a PEM key
	// store turns it (and pprof.listen) into HTTPS; with a trust store and
	// admin.http.ssl.client.auth requested or required, a client
	// certificate whose subject names a super user authenticates as the
	// basic credentials do.
	AdminHTTPSSLKeystoreLocation   string `mapstructure:"admin.http.ssl.keystore.location"`
	AdminHTTPSSLKeyPassword        string `mapstructure:"admin.http.ssl.key.password"`
	AdminHTTPSSLTruststoreLocation string `mapstructure:"admin.http.ssl.truststore.location"`
	AdminHTTPSSLClientAuth         string `mapstructure:"admin.http.ssl.client.auth"`
}

// AdminTLS returns the admin port's TLS options, and false when
// admin.http.ssl.keystore.location is not set (plain HTTP).
func (c Config) AdminTLS() (tlsconfig.Options, bool) {
	if c.AdminHTTPSSLKeystoreLocation == "" {
		return tlsconfig.Options{}, false
	}
	auth := c.AdminHTTPSSLClientAuth
	if auth == "" {
		auth = "none"
	}
	return tlsconfig.Options{KeystoreType: "PEM", KeystoreLocation: c.AdminHTTPSSLKeystoreLocation,
		KeyPassword: c.AdminHTTPSSLKeyPassword, TruststoreType: "PEM", TruststoreLocation: c.AdminHTTPSSLTruststoreLocation,
		ClientAuth: auth, EnabledProtocols: []string{"TLSv1.2", "TLSv1.3"}}, true
}

// Kafka's authorizer class names that turn the ACL authorizer on.
var authorizerClassNames = map[string]bool{
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer": true,
	"kafka.security.authorizer.AclAuthorizer":                 true,
}

// AuthorizerEnabled reports whether requests are checked against ACLs.
func (c Config) AuthorizerEnabled() bool {
	return c.AuthorizerEnable || authorizerClassNames[strings.TrimSpace(c.AuthorizerClassName)]
}

// Default returns the single source of defaults: one node with every role,
// a mixed listener on 127.0.0.1:9092 and data in ./data.
func Default() Config {
	return Config{
		NodeID:  1,
		Roles:   []string{"meta", "write", "read"},
		DataDir: "./data",
		Listeners: []Listener{
			{Name: "PLAINTEXT", View: "mixed", Address: "127.0.0.1:9092"},
		},
		ListenerSecurityProtocolMap:      "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
		AdminAddr:                        "127.0.0.1:9644",
		LogLevel:                         "info",
		SocketRequestMaxBytes:            100 << 20,
		QueuedMaxRequestBytes:            100 << 20,
		QueuedMaxResponseBytes:           1 << 20,
		MaxPartitionsPerRequest:          10000,
		MaxPartitions:                    50000,
		ConfigValueMaxBytes:              32 << 10,
		GroupMaxSize:                     math.MaxInt32,
		TransactionMaxTimeoutMs:          900000,
		TransactionalIDExpirationMs:      604800000,
		TxnAbortIntervalMs:               10000,
		TxnExpireIntervalMs:              3600000,
		TxnVerification:                  true,
		GroupMinSessionTimeoutMs:         6000,
		GroupMaxSessionTimeoutMs:         1800000,
		GroupConsumerSessionTimeoutMs:    45000,
		GroupConsumerHeartbeatIntervalMs: 5000,
		GroupShareRecordLockDurationMs:   30000,
		GroupShareDeliveryCountLimit:     5,
		GroupSharePartitionMaxLocks:      2000,
		GroupShareSessionTimeoutMs:       45000,
		GroupShareHeartbeatIntervalMs:    5000,
		GroupShareMaxSize:                200,
		OffsetsRetentionMinutes:          10080,
		OffsetsRetentionCheckIntervalMs:  600000,
		OffsetsCommitTimeoutMs:           5000,
		GroupInitialRebalanceDelayMs:     3000,
		GroupConsumerMaxSize:             math.MaxInt32,
		OffsetsTopicNumPartitions:        50,
		SocketRequestTimeoutMs:           30000,
		QueuedMaxRequestStallMs:          500,
		QueuedMinRequestBytesPerSecond:   1024,
		ConnectionsMaxIdleMs:             600000,
		MaxConnections:                   math.MaxInt32,
		MaxConnectionsPerIP:              math.MaxInt32,
		MaxConnectionCreationRate:        math.MaxInt32,
		QuotaWindowNum:                   11,
		QuotaWindowSizeSeconds:           1,
		ControllerQuotaWindowNum:         11,
		ControllerQuotaWindowSizeSeconds: 1,
		AutoCreateTopics:                 true,
		NumPartitions:                    1,
		DefaultReplicationFactor:         1,
		MessageMaxBytes:                  1048588,
		FetchMaxBytes:                    8 << 20,
		FetchSessionCacheSlots:           1000,
		FetchSessionEvictionMs:           120000,
		LogSegmentBytes:                  1 << 30,
		LogRollMs:                        int64(7 * 24 * time.Hour / time.Millisecond),
		LogRetentionHours:                168,
		CompressionType:                  "producer",
		LogRetentionBytes:                -1,
		LogIndexIntervalBytes:            4096,
		LogIndexSizeMaxBytes:             10 << 20,
		LogMessageTimestampType:          "CreateTime",
		LogTimestampBeforeMaxMs:          9223372036854775807,
		LogTimestampAfterMaxMs:           3600000,
		LogRetentionCheckInterval:        300000,
		LogCleanupPolicy:                 "delete",
		LogCleanerEnable:                 true,
		LogCleanerThreads:                1,
		LogCleanerDedupeBufferSize:       128 << 20,
		LogCleanerIOMaxBytesPerSecond:    math.MaxFloat64,
		LogCleanerBackoffMs:              15000,
		LogCleanerDeleteRetentionMs:      86400000,
		LogCleanerMinCleanableRatio:      0.5,
		LogCleanerMinCompactionLagMs:     0,
		LogCleanerMaxCompactionLagMs:     math.MaxInt64,
		MinInsyncReplicas:                1,
		ReplicationMode:                  "raft",
		SemiSyncWaitReplicas:             1,
		SemiSyncTimeoutMs:                10000,
		SharedStorage:                    DefaultSharedStorage(),
		AutoLeaderRebalance:              true,
		ControlledShutdown:               true,
		ControlledShutdownMaxRetries:     3,
		ControlledShutdownRetryBackoffMs: 5000,
		LeaderImbalanceCheckSeconds:      300,
		LogFsync:                         "group",
		LogFlushIntervalMs:               1000,
		LogCacheTailBytes:                16 << 20,
		MetaID:                           1,
		MetaLearnerGraceMs:               int64(15 * time.Minute / time.Millisecond),
		BrokerSessionTimeoutMs:           10000,
		RaftEntryCacheMaxBytes:           32 << 20,
		ReplicaLagTimeMaxMs:              30000,
		Security:                         DefaultSecurity(),

		ProducerIDExpirationMs:              86400000,
		ProducerIDExpirationCheckIntervalMs: 600000,
	}
}

// HasRole reports whether the process runs role.
func (c Config) HasRole(role string) bool {
	for _, r := range c.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// Validate collects every problem in c.
func (c Config) Validate() error {
	var errs []error
	if c.NodeID < 0 {
		errs = append(errs, fmt.Errorf("node.id must not be negative"))
	}
	if len(c.Roles) == 0 {
		errs = append(errs, fmt.Errorf("process.roles is empty"))
	}
	for _, r := range c.Roles {
		if r != "meta" && r != "write" && r != "read" {
			errs = append(errs, fmt.Errorf("process.roles: unknown role %q", r))
		}
	}
	if !c.HasRole("meta") && len(c.MetaAddrs) == 0 {
		errs = append(errs, fmt.Errorf("a process without the meta role needs meta.addrs"))
	}
	if c.HasRole("meta") && len(c.MetaPeers) > 1 && c.MetaListen == "" {
		errs = append(errs, fmt.Errorf("a meta node with peers needs meta.listen"))
	}
	if c.DataDir == "" {
		errs = append(errs, fmt.Errorf("data.dir is empty"))
	}
	if c.BrokerSessionTimeoutMs < 300 {
		errs = append(errs, fmt.Errorf("broker.session.timeout.ms must be at least 300"))
	}
	if (c.HasRole("write") || c.HasRole("read")) && len(c.Listeners) == 0 {
		errs = append(errs, fmt.Errorf("a broker needs at least one listener"))
	}
	for i, l := range c.Listeners {
		if l.View != "write" && l.View != "read" && l.View != "mixed" {
			errs = append(errs, fmt.Errorf("listeners[%d]: view %q is not write, read or mixed", i, l.View))
		}
		if _, _, err := net.SplitHostPort(l.Address); err != nil {
			errs = append(errs, fmt.Errorf("listeners[%d]: address: %v", i, err))
		}
		if l.Advertised != "" {
			if _, _, err := net.SplitHostPort(l.Advertised); err != nil {
				errs = append(errs, fmt.Errorf("listeners[%d]: advertised: %v", i, err))
			}
		}
	}
	if c.SocketRequestMaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("socket.request.max.bytes must be positive"))
	}
	if c.FetchMaxBytes < 1024 {
		errs = append(errs, fmt.Errorf("fetch.max.bytes must be at least 1024"))
	}
	// A response may pass fetch.max.bytes by one batch (Kafka's
	// minOneMessage); its size prefix is an int32.
	if int64(c.FetchMaxBytes)+int64(c.MessageMaxBytes)+1<<20 > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("fetch.max.bytes plus message.max.bytes must stay 1 MiB below 2 GiB"))
	}
	if c.ControlledShutdownMaxRetries < 0 || c.ControlledShutdownRetryBackoffMs < 0 {
		errs = append(errs, fmt.Errorf("controlled.shutdown.max.retries and controlled.shutdown.retry.backoff.ms must not be negative"))
	}
	if c.ReplicaListen != "" {
		// The bound address is what other brokers are told to dial
		// (there is no advertised replication address): a wildcard
		// would send them to their own loopback, and raft groups would
		// never form while every broker said it was ready.
		if host, _, err := net.SplitHostPort(c.ReplicaListen); err != nil {
			errs = append(errs, fmt.Errorf("replica.listen: %v", err))
		} else if unspecifiedHost(host) {
			errs = append(errs, fmt.Errorf("replica.listen %s binds every interface, but its address is what other brokers dial: bind an address they can reach (this host's IP or name)", c.ReplicaListen))
		}
	}
	if err := c.SharedStorage.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.CheckReplicationMode(c.ReplicationMode); err != nil {
		errs = append(errs, err)
	}
	if c.ReplicaLagTimeMaxMs < 1 {
		errs = append(errs, fmt.Errorf("replica.lag.time.max.ms must be at least 1"))
	}
	if c.RaftEntryCacheMaxBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("raft.entry.cache.max.bytes must be at least 1 MiB"))
	}
	if c.QueuedMaxRequestBytes < -1 {
		errs = append(errs, fmt.Errorf("queued.max.request.bytes must be -1 (unbounded) or at least 0"))
	}
	if c.QueuedMaxResponseBytes < -1 || c.QueuedMaxResponseBytes == 0 {
		errs = append(errs, fmt.Errorf("queued.max.response.bytes must be -1 (unbounded) or positive"))
	}
	if c.MaxPartitionsPerRequest <= 0 {
		errs = append(errs, fmt.Errorf("max.partitions.per.request must be positive"))
	}
	if c.MaxPartitions <= 0 {
		errs = append(errs, fmt.Errorf("max.partitions must be positive"))
	}
	if c.ConfigValueMaxBytes < 256 {
		errs = append(errs, fmt.Errorf("config.value.max.bytes must be at least 256"))
	}
	if c.GroupMinSessionTimeoutMs <= 0 || c.GroupMaxSessionTimeoutMs < c.GroupMinSessionTimeoutMs {
		errs = append(errs, fmt.Errorf("group.min.session.timeout.ms must be positive and at most group.max.session.timeout.ms"))
	}
	if c.GroupInitialRebalanceDelayMs < 0 {
		errs = append(errs, fmt.Errorf("group.initial.rebalance.delay.ms must not be negative"))
	}
	if c.GroupConsumerHeartbeatIntervalMs <= 0 || c.GroupConsumerSessionTimeoutMs <= c.GroupConsumerHeartbeatIntervalMs {
		errs = append(errs, fmt.Errorf("group.consumer.heartbeat.interval.ms must be positive and below group.consumer.session.timeout.ms"))
	}
	if c.GroupShareRecordLockDurationMs < 1000 || c.GroupShareRecordLockDurationMs > 3600000 {
		errs = append(errs, fmt.Errorf("group.share.record.lock.duration.ms must be between 1000 and 3600000"))
	}
	if c.GroupShareDeliveryCountLimit < 2 || c.GroupShareDeliveryCountLimit > 10 {
		errs = append(errs, fmt.Errorf("group.share.delivery.count.limit must be between 2 and 10"))
	}
	if c.GroupSharePartitionMaxLocks < 100 || c.GroupSharePartitionMaxLocks > 10000 {
		errs = append(errs, fmt.Errorf("group.share.partition.max.record.locks must be between 100 and 10000"))
	}
	if c.GroupShareHeartbeatIntervalMs <= 0 || c.GroupShareSessionTimeoutMs <= c.GroupShareHeartbeatIntervalMs {
		errs = append(errs, fmt.Errorf("group.share.heartbeat.interval.ms must be positive and below group.share.session.timeout.ms"))
	}
	if c.GroupShareMaxSize < 1 || c.GroupShareMaxSize > 1000 {
		errs = append(errs, fmt.Errorf("group.share.max.size must be between 1 and 1000"))
	}
	if c.OffsetsRetentionMinutes < 1 {
		errs = append(errs, fmt.Errorf("offsets.retention.minutes must be at least 1"))
	}
	if c.OffsetsRetentionCheckIntervalMs < 1 {
		errs = append(errs, fmt.Errorf("offsets.retention.check.interval.ms must be at least 1"))
	}
	if c.ProducerIDExpirationMs < 1 {
		errs = append(errs, fmt.Errorf("producer.id.expiration.ms must be at least 1"))
	}
	if c.ProducerIDExpirationCheckIntervalMs < 1 {
		errs = append(errs, fmt.Errorf("producer.id.expiration.check.interval.ms must be at least 1"))
	}
	if c.OffsetsCommitTimeoutMs < 1 {
		errs = append(errs, fmt.Errorf("offsets.commit.timeout.ms must be at least 1"))
	}
	if c.GroupMaxSize < 1 {
		errs = append(errs, fmt.Errorf("group.max.size must be at least 1"))
	}
	if c.TransactionMaxTimeoutMs < 1 || c.TransactionalIDExpirationMs < 1 || c.TxnAbortIntervalMs < 1 || c.TxnExpireIntervalMs < 1 {
		errs = append(errs, fmt.Errorf("transaction.max.timeout.ms, transactional.id.expiration.ms and the transaction cleanup intervals must be positive"))
	}
	if c.GroupConsumerMaxSize < 1 {
		errs = append(errs, fmt.Errorf("group.consumer.max.size must be at least 1"))
	}
	if c.OffsetsTopicNumPartitions < 1 {
		errs = append(errs, fmt.Errorf("offsets.topic.num.partitions must be at least 1"))
	}
	if c.SocketRequestTimeoutMs < -1 || c.SocketRequestTimeoutMs == 0 {
		errs = append(errs, fmt.Errorf("socket.request.timeout.ms must be -1 (unbounded) or positive"))
	}
	if c.QueuedMaxRequestStallMs < -1 || c.QueuedMaxRequestStallMs == 0 {
		errs = append(errs, fmt.Errorf("queued.max.request.stall.ms must be -1 (never) or positive"))
	}
	if c.QueuedMaxRequestBytesPerConnection < -1 {
		errs = append(errs, fmt.Errorf("queued.max.request.bytes.per.connection must be -1 (no cap), 0 (a quarter of queued.max.request.bytes) or positive"))
	}
	if c.QueuedMinRequestBytesPerSecond < -1 || c.QueuedMinRequestBytesPerSecond == 0 {
		errs = append(errs, fmt.Errorf("queued.min.request.bytes.per.second must be -1 (never) or positive"))
	}
	if c.ConnectionsMaxIdleMs < -1 || c.ConnectionsMaxIdleMs == 0 {
		errs = append(errs, fmt.Errorf("connections.max.idle.ms must be -1 (never) or positive"))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("max.connections must not be negative"))
	}
	if c.MaxConnectionsPerIP < 0 {
		errs = append(errs, fmt.Errorf("max.connections.per.ip must not be negative"))
	}
	if c.MaxConnectionCreationRate < 0 {
		errs = append(errs, fmt.Errorf("max.connection.creation.rate must not be negative"))
	}
	if c.QuotaWindowNum < 2 || c.ControllerQuotaWindowNum < 2 {
		errs = append(errs, fmt.Errorf("quota.window.num and controller.quota.window.num must be at least 2"))
	}
	if c.QuotaWindowSizeSeconds < 1 || c.ControllerQuotaWindowSizeSeconds < 1 {
		errs = append(errs, fmt.Errorf("quota.window.size.seconds and controller.quota.window.size.seconds must be at least 1"))
	}
	if overrides, err := ParseConnectionOverrides(c.MaxConnectionsPerIPOverrides); err != nil {
		errs = append(errs, err)
	} else if c.MaxConnectionsPerIP == 0 && len(overrides) == 0 {
		errs = append(errs, fmt.Errorf("max.connections.per.ip may be 0 only with max.connections.per.ip.overrides"))
	}
	if c.FetchSessionCacheSlots < 0 {
		errs = append(errs, fmt.Errorf("max.incremental.fetch.session.cache.slots must not be negative"))
	}
	if c.FetchSessionEvictionMs < 0 {
		errs = append(errs, fmt.Errorf("min.incremental.fetch.session.eviction.ms must not be negative"))
	}
	if c.NumPartitions <= 0 {
		errs = append(errs, fmt.Errorf("num.partitions must be positive"))
	}
	if c.DefaultReplicationFactor <= 0 {
		errs = append(errs, fmt.Errorf("default.replication.factor must be positive"))
	}
	if c.LogCleanerThreads < 1 {
		errs = append(errs, fmt.Errorf("log.cleaner.threads must be at least 1"))
	}
	if c.LogCleanerDedupeBufferSize < 24*int64(max(c.LogCleanerThreads, 1)) {
		errs = append(errs, fmt.Errorf("log.cleaner.dedupe.buffer.size must hold at least one 24-byte entry per cleaner thread"))
	}
	if c.LogCleanerIOMaxBytesPerSecond <= 0 {
		errs = append(errs, fmt.Errorf("log.cleaner.io.max.bytes.per.second must be positive"))
	}
	if c.LogCleanerBackoffMs < 0 {
		errs = append(errs, fmt.Errorf("log.cleaner.backoff.ms must not be negative"))
	}
	switch c.LogFsync {
	case "group", "interval", "never":
	default:
		errs = append(errs, fmt.Errorf("log.fsync %q is not group, interval or never", c.LogFsync))
	}
	if c.LogCacheTailBytes < 0 {
		errs = append(errs, fmt.Errorf("log.cache.tail.bytes %d must not be negative", c.LogCacheTailBytes))
	}
	if err := c.validateSecurity(); err != nil {
		errs = append(errs, err)
	}
	if err := c.validateInternal(); err != nil {
		errs = append(errs, err)
	}
	if n := strings.TrimSpace(c.AuthorizerClassName); n != "" && !authorizerClassNames[n] {
		errs = append(errs, fmt.Errorf("authorizer.class.name %q: Sluice's authorizer answers to org.apache.kafka.metadata.authorizer.StandardAuthorizer (or authorizer.enable=true); no other class can be loaded", n))
	}
	if o, ok := c.AdminTLS(); ok {
		if err := o.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("admin.http.ssl.*: %w", err))
		}
	} else if c.AdminHTTPSSLTruststoreLocation != "" || c.AdminHTTPSSLClientAuth != "" || c.AdminHTTPSSLKeyPassword != "" {
		errs = append(errs, errors.New("admin.http.ssl.*: admin.http.ssl.keystore.location is required with the other admin.http.ssl keys"))
	}
	if c.PprofListen != "" {
		if _, _, err := net.SplitHostPort(c.PprofListen); err != nil {
			errs = append(errs, fmt.Errorf("pprof.listen: %v", err))
		}
	}
	for _, u := range c.SuperUserList() {
		if strings.IndexByte(u, ':') <= 0 {
			errs = append(errs, fmt.Errorf("super.users: %q is not a principal of the form Type:name (User:alice)", u))
		}
	}
	for name, v := range c.TopicDefaults() {
		if def, ok := LookupTopicConfig(name); ok {
			if err := def.Validate(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", def.BrokerSynonym, err))
			}
		}
	}
	return errors.Join(errs...)
}

// RetentionMs is the broker's log retention in milliseconds, as Kafka's
// KafkaConfig.logRetentionTimeMillis computes it: log.retention.ms if set,
// else log.retention.minutes if set, else log.retention.hours; any negative
// result is -1 (no limit).
func (c Config) RetentionMs() int64 {
	ms := c.LogRetentionHours * int64(time.Hour/time.Millisecond)
	switch {
	case c.LogRetentionMs != nil:
		ms = *c.LogRetentionMs
	case c.LogRetentionMinutes != nil:
		ms = *c.LogRetentionMinutes * int64(time.Minute/time.Millisecond)
	}
	if ms < 0 {
		return -1
	}
	return ms
}

// SuperUserList is super.users, Kafka's semicolon-separated list of
// principals, as the authorizer and the admin port read it (spaces around
// a name and empty entries dropped).
func (c Config) SuperUserList() []string {
	var out []string
	for _, u := range strings.Split(c.SuperUsers, ";") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// TopicDefaults gives, per topic config name, the value this broker's
// static configuration supplies through the topic config's broker synonym.
func (c Config) TopicDefaults() map[string]string {
	return map[string]string{
		"cleanup.policy":                  c.LogCleanupPolicy,
		"delete.retention.ms":             strconv.FormatInt(c.LogCleanerDeleteRetentionMs, 10),
		"min.cleanable.dirty.ratio":       strconv.FormatFloat(c.LogCleanerMinCleanableRatio, 'g', -1, 64),
		"min.compaction.lag.ms":           strconv.FormatInt(c.LogCleanerMinCompactionLagMs, 10),
		"max.compaction.lag.ms":           strconv.FormatInt(c.LogCleanerMaxCompactionLagMs, 10),
		"compression.type":                c.CompressionType,
		"max.message.bytes":               strconv.Itoa(int(c.MessageMaxBytes)),
		"message.timestamp.type":          c.LogMessageTimestampType,
		"message.timestamp.before.max.ms": strconv.FormatInt(c.LogTimestampBeforeMaxMs, 10),
		"message.timestamp.after.max.ms":  strconv.FormatInt(c.LogTimestampAfterMaxMs, 10),
		"retention.ms":                    strconv.FormatInt(c.RetentionMs(), 10),
		"retention.bytes":                 strconv.FormatInt(c.LogRetentionBytes, 10),
		"segment.bytes":                   strconv.Itoa(int(c.LogSegmentBytes)),
		"segment.ms":                      strconv.FormatInt(c.LogRollMs, 10),
		"segment.index.bytes":             strconv.Itoa(int(c.LogIndexSizeMaxBytes)),
		"index.interval.bytes":            strconv.Itoa(int(c.LogIndexIntervalBytes)),
		"min.insync.replicas":             strconv.Itoa(int(c.MinInsyncReplicas)),
		"replication.mode":                c.ReplicationMode,
		"semi.sync.wait.replicas":         strconv.Itoa(int(c.SemiSyncWaitReplicas)),
		"semi.sync.timeout.ms":            strconv.FormatInt(c.SemiSyncTimeoutMs, 10),
		// Not a file setting (TopicConfig.ClusterWide): the metastore
		// places learners, so only the cluster-wide dynamic default
		// may change it.
		"read.replicas": "-1",
	}
}

// ParseConnectionOverrides parses max.connections.per.ip.overrides, Kafka's
// "host:count,host:count" (split at each entry's last colon, so an IPv6
// address needs no brackets; spaces around entries are ignored). Hosts are
// not resolved here.
func ParseConnectionOverrides(s string) (map[string]int32, error) {
	out := map[string]int32{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, entry := range strings.Split(strings.TrimRight(s, ", \t"), ",") {
		entry = strings.TrimSpace(entry)
		i := strings.LastIndexByte(entry, ':')
		if i <= 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %q is not host:count", entry)
		}
		host := strings.TrimSpace(entry[:i])
		n, err := strconv.ParseInt(strings.TrimSpace(entry[i+1:]), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %q: count is not a non-negative int32", entry)
		}
		out[strings.Trim(host, "[]")] = int32(n)
	}
	return out, nil
}
