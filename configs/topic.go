package configs

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ConfigType is a config's type as DescribeConfigs v3+ reports it.
type ConfigType int8

// Kafka's ConfigResource types (DescribeConfigsResponse ConfigType).
const (
	TypeBoolean  ConfigType = 1
	TypeString   ConfigType = 2
	TypeInt      ConfigType = 3
	TypeShort    ConfigType = 4
	TypeLong     ConfigType = 5
	TypeDouble   ConfigType = 6
	TypeList     ConfigType = 7
	TypeClass    ConfigType = 8
	TypePassword ConfigType = 9
)

// TopicConfig describes one topic-level config: its Kafka name, the broker
// config that supplies its default (its synonym), its type and how a value
// is validated. Only configs that Sluice honours are listed; setting any
// other name is INVALID_CONFIG, never silently ignored.
type TopicConfig struct {
	Name          string
	BrokerSynonym string
	Type          ConfigType
	Doc           string
	// ClusterWide: the broker synonym may be set only as the
	// cluster-wide dynamic default, never per broker nor in a broker's
	// file, because the metastore applies the value itself (learner
	// placement) and every meta node must read the same one.
	ClusterWide bool
	validate    func(string) error
}

// Validate checks a value for this config.
func (c TopicConfig) Validate(v string) error {
	if c.validate == nil {
		return nil
	}
	if err := c.validate(v); err != nil {
		return fmt.Errorf("invalid value %q for configuration %s: %w", v, c.Name, err)
	}
	return nil
}

func longAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("not a number")
		}
		if n < min {
			return fmt.Errorf("value must be at least %d", min)
		}
		return nil
	}
}

func intAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return fmt.Errorf("not a 32-bit integer")
		}
		if n < min {
			return fmt.Errorf("value must be at least %d", min)
		}
		return nil
	}
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
	}
}

// cleanupPolicy accepts Kafka's cleanup.policy lists: delete, compact,
// or both in either order.
func cleanupPolicy(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "delete" && p != "compact" {
			return fmt.Errorf("must be a list of delete and compact")
		}
	}
	return nil
}

// CleanupPolicy says what a cleanup.policy value asks for.
func CleanupPolicy(v string) (deleteOld, compact bool) {
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "delete":
			deleteOld = true
		case "compact":
			compact = true
		}
	}
	return deleteOld, compact
}

func ratio(v string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return fmt.Errorf("not a number")
	}
	if f < 0 || f > 1 {
		return fmt.Errorf("value must be in [0, 1]")
	}
	return nil
}

// topicConfigs lists every topic config Sluice accepts.
var topicConfigs = []TopicConfig{
	{Name: "cleanup.policy", BrokerSynonym: "log.cleanup.policy", Type: TypeList,
		Doc:      "delete: retention.ms and retention.bytes delete old segments; compact: the log cleaner keeps the latest record of each key; both: compact,delete.",
		validate: cleanupPolicy},
	{Name: "delete.retention.ms", BrokerSynonym: "log.cleaner.delete.retention.ms", Type: TypeLong,
		Doc: "How long a tombstone (null value) of a compacted topic stays after the cleaner first kept it.", validate: longAtLeast(0)},
	{Name: "min.cleanable.dirty.ratio", BrokerSynonym: "log.cleaner.min.cleanable.ratio", Type: TypeDouble,
		Doc: "Share of a compacted log not cleaned yet above which the cleaner cleans it.", validate: ratio},
	{Name: "min.compaction.lag.ms", BrokerSynonym: "log.cleaner.min.compaction.lag.ms", Type: TypeLong,
		Doc: "Records younger than this are not compacted.", validate: longAtLeast(0)},
	{Name: "max.compaction.lag.ms", BrokerSynonym: "log.cleaner.max.compaction.lag.ms", Type: TypeLong,
		Doc: "Records older than this are compacted whatever the dirty ratio; also rolls the active segment of a compacted topic.", validate: longAtLeast(1)},
	{Name: "compression.type", BrokerSynonym: "compression.type", Type: TypeString,
		Doc:      "Codec batches are stored with: producer keeps the producer's; uncompressed, gzip, snappy, lz4 or zstd recompress a batch whose codec differs.",
		validate: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")},
	{Name: "max.message.bytes", BrokerSynonym: "message.max.bytes", Type: TypeInt,
		Doc: "Largest record batch the topic accepts (MESSAGE_TOO_LARGE beyond).", validate: intAtLeast(0)},
	{Name: "message.timestamp.type", BrokerSynonym: "log.message.timestamp.type", Type: TypeString,
		Doc:      "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append.",
		validate: oneOf("CreateTime", "LogAppendTime")},
	{Name: "message.timestamp.before.max.ms", BrokerSynonym: "log.message.timestamp.before.max.ms", Type: TypeLong,
		Doc: "How far a CreateTime timestamp may lie in the past (INVALID_TIMESTAMP beyond).", validate: longAtLeast(0)},
	{Name: "message.timestamp.after.max.ms", BrokerSynonym: "log.message.timestamp.after.max.ms", Type: TypeLong,
		Doc: "How far a CreateTime timestamp may lie in the future (INVALID_TIMESTAMP beyond).", validate: longAtLeast(0)},
	{Name: "retention.ms", BrokerSynonym: "log.retention.ms", Type: TypeLong,
		Doc: "Segments older than this are deleted; -1 keeps them forever.", validate: longAtLeast(-1)},
	{Name: "retention.bytes", BrokerSynonym: "log.retention.bytes", Type: TypeLong,
		Doc: "Oldest segments are deleted while a partition is larger than this; -1 for no limit.", validate: longAtLeast(-1)},
	{Name: "segment.bytes", BrokerSynonym: "log.segment.bytes", Type: TypeInt,
		Doc: "A new segment is rolled once the active one reaches this size.", validate: intAtLeast(14)},
	{Name: "segment.ms", BrokerSynonym: "log.roll.ms", Type: TypeLong,
		Doc: "A new segment is rolled once the active one is this old.", validate: longAtLeast(1)},
	{Name: "segment.index.bytes", BrokerSynonym: "log.index.size.max.bytes", Type: TypeInt,
		Doc: "Maximum size of a segment's offset index.", validate: intAtLeast(4)},
	{Name: "index.interval.bytes", BrokerSynonym: "log.index.interval.bytes", Type: TypeInt,
		Doc: "Bytes between two offset index entries.", validate: intAtLeast(0)},
	{Name: "replication.mode", BrokerSynonym: "replication.mode", Type: TypeString,
		Doc:      "When acks=all is answered: raft (a majority of write-broker voters has the batch durably), semi-sync (the leader's durable write and semi.sync.wait.replicas other write brokers' durable acks, falling back to async after semi.sync.timeout.ms), async (the leader's durable write) or shared (the write leader's object or file is durable in shared storage and committed in the metastore; only on brokers with shared.storage.type set, and only when the topic is created).",
		validate: oneOf("raft", "semi-sync", "async", "shared")},
	{Name: "semi.sync.wait.replicas", BrokerSynonym: "semi.sync.wait.replicas", Type: TypeInt,
		Doc: "semi-sync: write brokers other than the leader that must hold a batch durably before acks=all is answered (at most the partition's other voters; read brokers do not count).", validate: intAtLeast(1)},
	{Name: "semi.sync.timeout.ms", BrokerSynonym: "semi.sync.timeout.ms", Type: TypeLong,
		Doc: "semi-sync: how long acks=all waits for those acknowledgements after the leader's durable write before the partition falls back to async answers, until a replica catches up.", validate: longAtLeast(1)},
	{Name: "min.insync.replicas", BrokerSynonym: "min.insync.replicas", Type: TypeInt,
		Doc: "Replicas that must have a write before acks=all is answered.", validate: intAtLeast(1)},
	{Name: "read.replicas", BrokerSynonym: "read.replicas", Type: TypeInt, ClusterWide: true,
		Doc:      "Read brokers holding each partition as raft learners: -1 every read broker, 0 none (only the write-broker voters hold it, and the read view has no replica to name), n that many, spread over the read brokers by the metastore. Its broker default is cluster-wide only.",
		validate: intAtLeast(-1)},
}

var topicConfigIndex = func() map[string]TopicConfig {
	m := make(map[string]TopicConfig, len(topicConfigs))
	for _, c := range topicConfigs {
		m[c.Name] = c
	}
	return m
}()

// LookupTopicConfig returns the definition of a topic config by name.
func LookupTopicConfig(name string) (TopicConfig, bool) {
	c, ok := topicConfigIndex[name]
	return c, ok
}

// TopicConfigNames returns every accepted topic config name, sorted.
func TopicConfigNames() []string {
	names := make([]string, 0, len(topicConfigs))
	for _, c := range topicConfigs {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return names
}

// ValidateTopicConfigs checks names and values of explicitly set topic
// configs. The error names the first offender.
func ValidateTopicConfigs(m map[string]string) error {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		c, ok := topicConfigIndex[k]
		if !ok {
			return fmt.Errorf("unknown or unsupported topic config %s", k)
		}
		if err := c.Validate(m[k]); err != nil {
			return err
		}
	}
	return nil
}
