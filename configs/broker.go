package configs

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// BrokerConfig is one broker config as DescribeConfigs shows it.
type BrokerConfig struct {
	Name string
	// Value is the static value (file, environment or flag, else default).
	Value string
	// Default is Sluice's default.
	Default string
	Type    ConfigType
	// Dynamic configs may be changed at runtime with AlterConfigs and
	// IncrementalAlterConfigs, per broker or cluster-wide.
	Dynamic bool
	Doc     string
}

// BrokerConfigs lists the broker configs of c, sorted by name. The
// dynamic ones are the broker synonyms of topic configs (the cluster-wide
// defaults for topics) and auto.create.topics.enable.
func BrokerConfigs(c Config) []BrokerConfig {
	d := Default()
	out := []BrokerConfig{
		{Name: "node.id", Value: itoa(int64(c.NodeID)), Default: itoa(int64(d.NodeID)), Type: TypeInt},
		{Name: "process.roles", Value: strings.Join(c.Roles, ","), Default: strings.Join(d.Roles, ","), Type: TypeList},
		{Name: "log.dirs", Value: c.DataDir, Default: d.DataDir, Type: TypeString},
		{Name: "broker.rack", Value: c.Rack, Default: "", Type: TypeString},
		{Name: "socket.request.max.bytes", Value: itoa(int64(c.SocketRequestMaxBytes)), Default: itoa(int64(d.SocketRequestMaxBytes)), Type: TypeInt},
		{Name: "queued.max.request.bytes", Value: itoa(c.QueuedMaxRequestBytes), Default: itoa(d.QueuedMaxRequestBytes), Type: TypeLong,
			Doc: "Bytes of requests held at once before the broker stops reading sockets; -1: unbounded."},
		{Name: "queued.max.request.stall.ms", Value: itoa(c.QueuedMaxRequestStallMs), Default: itoa(d.QueuedMaxRequestStallMs), Type: TypeLong,
			Doc: "Time an incomplete request frame may receive nothing while queued.max.request.bytes is full and others wait, before its connection is closed; -1: never."},
		{Name: "queued.max.request.bytes.per.connection", Value: itoa(c.QueuedMaxRequestBytesPerConnection), Default: itoa(d.QueuedMaxRequestBytesPerConnection), Type: TypeLong,
			Doc: "Bytes of queued.max.request.bytes the frame one connection is reading may hold; past it the frame goes on only as the one frame past the bound. 0: a quarter of queued.max.request.bytes; -1: no cap."},
		{Name: "queued.min.request.bytes.per.second", Value: itoa(c.QueuedMinRequestBytesPerSecond), Default: itoa(d.QueuedMinRequestBytesPerSecond), Type: TypeLong,
			Doc: "Slowest rate an incomplete request frame holding part of queued.max.request.bytes may arrive at while others wait for room, before its connection is closed; -1: never."},
		{Name: "queued.max.response.bytes", Value: itoa(c.QueuedMaxResponseBytes), Default: itoa(d.QueuedMaxResponseBytes), Type: TypeLong,
			Doc: "Bytes of a connection's responses not yet written before the broker stops reading its requests; -1: unbounded."},
		{Name: "fetch.max.bytes", Value: itoa(int64(c.FetchMaxBytes)), Default: itoa(int64(d.FetchMaxBytes)), Type: TypeInt,
			Doc: "Largest Fetch response, whatever the client asks for (the first batch is always returned whole)."},
		{Name: "max.incremental.fetch.session.cache.slots", Value: itoa(int64(c.FetchSessionCacheSlots)), Default: itoa(int64(d.FetchSessionCacheSlots)), Type: TypeInt,
			Doc: "Most incremental fetch sessions (KIP-227) kept at once."},
		{Name: "min.incremental.fetch.session.eviction.ms", Value: itoa(int64(c.FetchSessionEvictionMs)), Default: itoa(int64(d.FetchSessionEvictionMs)), Type: TypeInt,
			Doc: "Time a fetch session must be unused before any new session may evict it."},
		{Name: "max.partitions.per.request", Value: itoa(int64(c.MaxPartitionsPerRequest)), Default: itoa(int64(d.MaxPartitionsPerRequest)), Type: TypeInt,
			Doc: "Most partitions one CreateTopics or CreatePartitions request may add (POLICY_VIOLATION beyond)."},
		{Name: "max.partitions", Value: itoa(int64(c.MaxPartitions)), Default: itoa(int64(d.MaxPartitions)), Type: TypeInt,
			Doc: "Most partitions in the cluster (POLICY_VIOLATION for a creation beyond)."},
		{Name: "config.value.max.bytes", Value: itoa(int64(c.ConfigValueMaxBytes)), Default: itoa(int64(d.ConfigValueMaxBytes)), Type: TypeInt,
			Doc: "Longest config name or value CreateTopics, AlterConfigs and IncrementalAlterConfigs accept (INVALID_CONFIG beyond)."},
		{Name: "group.max.size", Value: itoa(int64(c.GroupMaxSize)), Default: itoa(int64(d.GroupMaxSize)), Type: TypeInt,
			Doc: "Most members of a classic consumer group."},
		{Name: "group.consumer.max.size", Value: itoa(int64(c.GroupConsumerMaxSize)), Default: itoa(int64(d.GroupConsumerMaxSize)), Type: TypeInt,
			Doc: "Most members of a KIP-848 consumer group."},
		{Name: "offsets.topic.num.partitions", Value: itoa(int64(c.OffsetsTopicNumPartitions)), Default: itoa(int64(d.OffsetsTopicNumPartitions)), Type: TypeInt,
			Doc: "Partitions of the read-only __consumer_offsets view (abs(group.hashCode()) % this)."},
		{Name: "group.min.session.timeout.ms", Value: itoa(int64(c.GroupMinSessionTimeoutMs)), Default: itoa(int64(d.GroupMinSessionTimeoutMs)), Type: TypeInt,
			Doc: "Shortest session timeout a classic group member may ask for."},
		{Name: "group.max.session.timeout.ms", Value: itoa(int64(c.GroupMaxSessionTimeoutMs)), Default: itoa(int64(d.GroupMaxSessionTimeoutMs)), Type: TypeInt,
			Doc: "Longest session timeout a classic group member may ask for."},
		{Name: "group.consumer.session.timeout.ms", Value: itoa(int64(c.GroupConsumerSessionTimeoutMs)), Default: itoa(int64(d.GroupConsumerSessionTimeoutMs)), Type: TypeInt,
			Doc: "Session timeout of KIP-848 consumer group members."},
		{Name: "group.consumer.heartbeat.interval.ms", Value: itoa(int64(c.GroupConsumerHeartbeatIntervalMs)), Default: itoa(int64(d.GroupConsumerHeartbeatIntervalMs)), Type: TypeInt,
			Doc: "Heartbeat interval KIP-848 consumer group members are told to use."},
		{Name: "group.share.record.lock.duration.ms", Value: itoa(int64(c.GroupShareRecordLockDurationMs)), Default: itoa(int64(d.GroupShareRecordLockDurationMs)), Type: TypeInt,
			Doc: "How long a record a share group member acquired stays locked to it."},
		{Name: "group.share.delivery.count.limit", Value: itoa(int64(c.GroupShareDeliveryCountLimit)), Default: itoa(int64(d.GroupShareDeliveryCountLimit)), Type: TypeInt,
			Doc: "Deliveries of a record to a share group before it is archived."},
		{Name: "group.share.partition.max.record.locks", Value: itoa(int64(c.GroupSharePartitionMaxLocks)), Default: itoa(int64(d.GroupSharePartitionMaxLocks)), Type: TypeInt,
			Doc: "Most records of a partition in flight in one share group."},
		{Name: "group.share.session.timeout.ms", Value: itoa(int64(c.GroupShareSessionTimeoutMs)), Default: itoa(int64(d.GroupShareSessionTimeoutMs)), Type: TypeInt,
			Doc: "Session timeout of share group members."},
		{Name: "group.share.heartbeat.interval.ms", Value: itoa(int64(c.GroupShareHeartbeatIntervalMs)), Default: itoa(int64(d.GroupShareHeartbeatIntervalMs)), Type: TypeInt,
			Doc: "Heartbeat interval share group members are told to use."},
		{Name: "group.share.max.size", Value: itoa(int64(c.GroupShareMaxSize)), Default: itoa(int64(d.GroupShareMaxSize)), Type: TypeInt,
			Doc: "Most members of a share group."},
		{Name: "num.partitions", Value: itoa(int64(c.NumPartitions)), Default: itoa(int64(d.NumPartitions)), Type: TypeInt},
		{Name: "default.replication.factor", Value: itoa(int64(c.DefaultReplicationFactor)), Default: itoa(int64(d.DefaultReplicationFactor)), Type: TypeInt},
		{Name: "auto.create.topics.enable", Value: strconv.FormatBool(c.AutoCreateTopics), Default: strconv.FormatBool(d.AutoCreateTopics), Type: TypeBoolean, Dynamic: true,
			Doc: "Create a topic when a client asks Metadata for one that does not exist."},
		{Name: "auto.leader.rebalance.enable", Value: strconv.FormatBool(c.AutoLeaderRebalance), Default: strconv.FormatBool(d.AutoLeaderRebalance), Type: TypeBoolean},
		{Name: "leader.imbalance.check.interval.seconds", Value: itoa(c.LeaderImbalanceCheckSeconds), Default: itoa(d.LeaderImbalanceCheckSeconds), Type: TypeLong},
		{Name: "replica.lag.time.max.ms", Value: itoa(c.ReplicaLagTimeMaxMs), Default: itoa(d.ReplicaLagTimeMaxMs), Type: TypeLong,
			Doc: "A follower not caught up with its leader for this long leaves the ISR."},
		{Name: "offsets.retention.minutes", Value: itoa(int64(c.OffsetsRetentionMinutes)), Default: itoa(int64(d.OffsetsRetentionMinutes)), Type: TypeInt,
			Doc: "Committed offsets of a group that no longer uses them (Empty, unsubscribed topic, standalone commits) expire after this long."},
		{Name: "offsets.retention.check.interval.ms", Value: itoa(c.OffsetsRetentionCheckIntervalMs), Default: itoa(d.OffsetsRetentionCheckIntervalMs), Type: TypeLong},
		{Name: "producer.id.expiration.ms", Value: itoa(int64(c.ProducerIDExpirationMs)), Default: itoa(int64(d.ProducerIDExpirationMs)), Type: TypeInt,
			Doc: "A replica forgets an idempotent producer whose last batch in the partition is older, unless it has a transaction open there."},
		{Name: "producer.id.expiration.check.interval.ms", Value: itoa(int64(c.ProducerIDExpirationCheckIntervalMs)), Default: itoa(int64(d.ProducerIDExpirationCheckIntervalMs)), Type: TypeInt},
		{Name: "offsets.commit.timeout.ms", Value: itoa(int64(c.OffsetsCommitTimeoutMs)), Default: itoa(int64(d.OffsetsCommitTimeoutMs)), Type: TypeInt,
			Doc: "An offset commit whose metastore write takes longer is answered COORDINATOR_NOT_AVAILABLE; the client retries."},
		{Name: "log.retention.hours", Value: itoa(c.LogRetentionHours), Default: itoa(d.LogRetentionHours), Type: TypeInt,
			Doc: "Retention in hours, used when neither log.retention.ms nor log.retention.minutes is set."},
		{Name: "log.retention.minutes", Value: optItoa(c.LogRetentionMinutes), Default: "", Type: TypeInt,
			Doc: "Retention in minutes, used when log.retention.ms is not set; over log.retention.hours."},
		{Name: "log.retention.check.interval.ms", Value: itoa(c.LogRetentionCheckInterval), Default: itoa(d.LogRetentionCheckInterval), Type: TypeLong},
		{Name: "log.fsync", Value: c.LogFsync, Default: d.LogFsync, Type: TypeString,
			Doc: "group: acks=all waits for a shared fdatasync; interval: flush every log.flush.interval.ms; never: page cache only."},
		{Name: "log.flush.interval.ms", Value: itoa(c.LogFlushIntervalMs), Default: itoa(d.LogFlushIntervalMs), Type: TypeLong},
		{Name: "log.cache.tail.bytes", Value: itoa(c.LogCacheTailBytes), Default: itoa(d.LogCacheTailBytes), Type: TypeLong,
			Doc: "Bytes of each partition's synced active segment kept in the page cache; older synced bytes are dropped from it after each sync. 0 keeps everything cached."},
		{Name: "log.wal.enable", Value: strconv.FormatBool(c.LogWAL), Default: strconv.FormatBool(d.LogWAL), Type: TypeBoolean,
			Doc: "Make writes durable through one broker-wide write-ahead log rather than per-partition segment syncs."},
		{Name: "log.cleaner.enable", Value: strconv.FormatBool(c.LogCleanerEnable), Default: strconv.FormatBool(d.LogCleanerEnable), Type: TypeBoolean,
			Doc: "Run the log cleaner, which compacts topics with cleanup.policy=compact."},
		{Name: "log.cleaner.threads", Value: itoa(int64(c.LogCleanerThreads)), Default: itoa(int64(d.LogCleanerThreads)), Type: TypeInt,
			Doc: "Logs cleaned at once."},
		{Name: "log.cleaner.dedupe.buffer.size", Value: itoa(c.LogCleanerDedupeBufferSize), Default: itoa(d.LogCleanerDedupeBufferSize), Type: TypeLong,
			Doc: "Memory of the cleaner's offset maps, all threads together (24 bytes a key)."},
		{Name: "log.cleaner.io.max.bytes.per.second", Value: strconv.FormatFloat(c.LogCleanerIOMaxBytesPerSecond, 'g', -1, 64), Default: strconv.FormatFloat(d.LogCleanerIOMaxBytesPerSecond, 'g', -1, 64), Type: TypeDouble,
			Doc: "Bytes the cleaner reads and writes per second, all threads together."},
		{Name: "log.cleaner.backoff.ms", Value: itoa(c.LogCleanerBackoffMs), Default: itoa(d.LogCleanerBackoffMs), Type: TypeLong,
			Doc: "Sleep of a cleaner thread that found no log to clean."},
	}
	static := c.TopicDefaults()
	defaults := d.TopicDefaults()
	for _, tc := range topicConfigs {
		out = append(out, BrokerConfig{
			Name: tc.BrokerSynonym, Value: static[tc.Name], Default: defaults[tc.Name],
			Type: tc.Type, Dynamic: true, Doc: tc.Doc,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return dedupe(out)
}

// dedupe drops repeated names (compression.type is its own synonym).
func dedupe(in []BrokerConfig) []BrokerConfig {
	out := in[:0]
	for i, c := range in {
		if i > 0 && c.Name == in[i-1].Name {
			continue
		}
		out = append(out, c)
	}
	return out
}

// ValidateDynamicBrokerConfig checks a runtime change to a broker config;
// a nil value is a removal, which only needs a dynamic config's name.
func ValidateDynamicBrokerConfig(c Config, name string, value *string) error {
	for _, bc := range BrokerConfigs(c) {
		if bc.Name != name {
			continue
		}
		if !bc.Dynamic {
			return fmt.Errorf("broker config %s cannot be changed at runtime", name)
		}
		if value == nil {
			return nil
		}
		if name == "replication.mode" {
			if err := c.CheckReplicationMode(*value); err != nil {
				return err
			}
		}
		if name == "auto.create.topics.enable" {
			if *value != "true" && *value != "false" {
				return fmt.Errorf("invalid value %q for auto.create.topics.enable: must be true or false", *value)
			}
			return nil
		}
		for _, tc := range topicConfigs {
			if tc.BrokerSynonym == name {
				return tc.Validate(*value)
			}
		}
		return nil
	}
	return fmt.Errorf("unknown broker config %s", name)
}

// ClusterWideOnly reports whether broker config name may be set only as
// the cluster-wide dynamic default (the broker resource ""), not for one
// broker (see TopicConfig.ClusterWide).
func ClusterWideOnly(name string) bool {
	for _, tc := range topicConfigs {
		if tc.BrokerSynonym == name {
			return tc.ClusterWide
		}
	}
	return false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// optItoa formats an optional setting, "" when unset.
func optItoa(v *int64) string {
	if v == nil {
		return ""
	}
	return itoa(*v)
}
