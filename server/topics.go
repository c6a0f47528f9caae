package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// Config sources as DescribeConfigs reports them.
const (
	sourceDynamicTopic         int8 = 1
	sourceDynamicBroker        int8 = 2
	sourceDynamicDefaultBroker int8 = 3
	sourceStaticBroker         int8 = 4
	sourceDefault              int8 = 5
	sourceDynamicGroup         int8 = 8 // GROUP_CONFIG
)

// configValue is one resolved config with where it came from.
type configValue struct {
	value  string
	source int8
}

// brokerTopicDefault resolves the broker-level default of a topic config
// (through its broker synonym): this broker's dynamic config, then the
// cluster-wide dynamic default, then the static file, then Sluice's default.
func (s *Server) brokerTopicDefault(def configs.TopicConfig) configValue {
	if v, ok := s.catalog.BrokerConfigs(s.cfg.NodeID)[def.BrokerSynonym]; ok {
		return configValue{v, sourceDynamicBroker}
	}
	if v, ok := s.catalog.BrokerConfigs(-1)[def.BrokerSynonym]; ok {
		return configValue{v, sourceDynamicDefaultBroker}
	}
	static := s.staticTopicDefaults[def.Name]
	if static != s.builtinTopicDefaults[def.Name] {
		return configValue{static, sourceStaticBroker}
	}
	return configValue{static, sourceDefault}
}

// topicConfig resolves one topic config for t.
func (s *Server) topicConfig(t metastore.Topic, name string) (configValue, bool) {
	def, ok := configs.LookupTopicConfig(name)
	if !ok {
		return configValue{}, false
	}
	if v, ok := t.Configs[name]; ok {
		return configValue{v, sourceDynamicTopic}, true
	}
	return s.brokerTopicDefault(def), true
}

func (s *Server) topicInt(t metastore.Topic, name string) int64 {
	v, _ := s.topicConfig(t, name)
	n, err := strconv.ParseInt(v.value, 10, 64)
	if err != nil {
		// Values are validated before they are stored.
		panic(fmt.Sprintf("server: config %s=%q is not a number", name, v.value))
	}
	return n
}

// logConfig is the storage view of t's effective configs.
func (s *Server) logConfig(t metastore.Topic) partition.LogConfig {
	c := partition.DefaultLogConfig()
	c.SegmentBytes = s.topicInt(t, "segment.bytes")
	c.SegmentMs = time.Duration(s.topicInt(t, "segment.ms")) * time.Millisecond
	c.RetentionMs = time.Duration(s.topicInt(t, "retention.ms")) * time.Millisecond
	if s.topicInt(t, "retention.ms") < 0 {
		c.RetentionMs = -1
	}
	c.RetentionBytes = s.topicInt(t, "retention.bytes")
	c.IndexIntervalBytes = int(s.topicInt(t, "index.interval.bytes"))
	c.SegmentIndexBytes = int(s.topicInt(t, "segment.index.bytes"))
	c.Delete, c.Compact = s.topicCleanupPolicy(t)
	c.DeleteRetentionMs = msDuration(s.topicInt(t, "delete.retention.ms"))
	c.MinCompactionLagMs = msDuration(s.topicInt(t, "min.compaction.lag.ms"))
	c.MaxCompactionLagMs = msDuration(s.topicInt(t, "max.compaction.lag.ms"))
	c.MaxMessageBytes = int(min(s.topicInt(t, "max.message.bytes"), math.MaxInt32))
	ratio, _ := s.topicConfig(t, "min.cleanable.dirty.ratio")
	if f, err := strconv.ParseFloat(strings.TrimSpace(ratio.value), 64); err == nil {
		c.MinCleanableDirtyRatio = f
	}
	return c
}

// topicCleanupPolicy is t's cleanup.policy: whether retention deletes old
// segments and whether the log cleaner compacts it.
func (s *Server) topicCleanupPolicy(t metastore.Topic) (deleteOld, compact bool) {
	v, _ := s.topicConfig(t, "cleanup.policy")
	return configs.CleanupPolicy(v.value)
}

// msDuration converts a config in milliseconds to a Duration, Kafka's
// Long.MAX_VALUE ("never") included, which saturates.
func msDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// validTopicName applies Kafka's topic name rules.
func validTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is empty")
	case name == "." || name == "..":
		return errors.New("topic name cannot be '.' or '..'")
	case len(name) > 249:
		return fmt.Errorf("topic name is %d characters long, the limit is 249", len(name))
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

// autoCreate creates name with the broker defaults when
// auto.create.topics.enable allows it. It returns the topic, or the Kafka
// error code to report.
func (s *Server) autoCreate(ctx context.Context, name string) (metastore.Topic, int16) {
	if t, ok := s.catalog.TopicByName(name); ok {
		return t, 0
	}
	if !s.autoCreateEnabled() {
		return metastore.Topic{}, kerr.UnknownTopicOrPartition.Code
	}
	if err := validTopicName(name); err != nil {
		return metastore.Topic{}, kerr.InvalidTopicException.Code
	}
	if code, msg := s.checkClusterPartitions(s.clusterPartitions(), int64(s.cfg.NumPartitions)); code != 0 {
		s.log.Warn().Str("topic", name).Msg("not auto-creating topic: " + msg)
		return metastore.Topic{}, code
	}
	spec := metastore.TopicSpec{
		Name:              name,
		Partitions:        s.cfg.NumPartitions,
		ReplicationFactor: s.cfg.DefaultReplicationFactor,
	}
	if err := s.pinSharedMode(&spec); err != nil {
		s.log.Warn().Err(err).Str("topic", name).Msg("not auto-creating topic")
		return metastore.Topic{}, kerr.InvalidConfig.Code
	}
	t, err := s.catalog.CreateTopic(ctx, spec)
	if errors.Is(err, metastore.ErrTopicExists) {
		if t, ok := s.catalog.TopicByName(name); ok {
			return t, 0
		}
	}
	if err != nil {
		s.log.Warn().Err(err).Str("topic", name).Msg("auto-creating topic")
		return metastore.Topic{}, errorCode(err)
	}
	s.log.Info().Str("topic", name).Int32("partitions", s.cfg.NumPartitions).Msg("auto-created topic")
	return t, 0
}

// pinSharedMode checks a new topic's replication.mode and pins a cluster
// default of shared in the topic's own configs: a topic is in shared mode
// for life, so a later change of the default never moves an existing
// topic between modes. Shared needs shared storage on this broker.
func (s *Server) pinSharedMode(spec *metastore.TopicSpec) error {
	if _, set := spec.Configs["replication.mode"]; !set {
		d, _ := configs.LookupTopicConfig("replication.mode")
		if !strings.EqualFold(s.brokerTopicDefault(d).value, "shared") {
			return nil
		}
		if spec.Configs == nil {
			spec.Configs = map[string]string{}
		}
		spec.Configs["replication.mode"] = "shared"
	}
	return s.cfg.CheckReplicationMode(spec.Configs["replication.mode"])
}

func (s *Server) autoCreateEnabled() bool {
	for _, id := range []int32{s.cfg.NodeID, -1} {
		if v, ok := s.catalog.BrokerConfigs(id)["auto.create.topics.enable"]; ok {
			return v == "true"
		}
	}
	return s.cfg.AutoCreateTopics
}
