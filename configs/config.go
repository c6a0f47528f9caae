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
	"time"
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
}

// Config is the whole configuration of one sluice process. Keys are flat,
// with Kafka's names where Kafka has the setting.
type Config struct {
	NodeID  int32    `mapstructure:"node.id"`
	Roles   []string `mapstructure:"process.roles"`
	DataDir string   `mapstructure:"data.dir"`
	Rack    string   `mapstructure:"broker.rack"`

	Listeners []Listener `mapstructure:"listeners"`
	AdminAddr string     `mapstructure:"admin.addr"`

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
	// keeps the batches until they commit, and every other request count
	// until answered. A frame is admitted while any room is left, so one
	// larger than the bound still passes. Default 100 MiB; -1 (Kafka's
	// default) or 0: unbounded.
	QueuedMaxRequestBytes int64 `mapstructure:"queued.max.request.bytes"`

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
	LogRetentionMs            int64  `mapstructure:"log.retention.ms"`
	LogRetentionBytes         int64  `mapstructure:"log.retention.bytes"`
	LogIndexIntervalBytes     int32  `mapstructure:"log.index.interval.bytes"`
	LogIndexSizeMaxBytes      int32  `mapstructure:"log.index.size.max.bytes"`
	LogMessageTimestampType   string `mapstructure:"log.message.timestamp.type"`
	LogTimestampBeforeMaxMs   int64  `mapstructure:"log.message.timestamp.before.max.ms"`
	LogTimestampAfterMaxMs    int64  `mapstructure:"log.message.timestamp.after.max.ms"`
	LogRetentionCheckInterval int64  `mapstructure:"log.retention.check.interval.ms"`
	MinInsyncReplicas         int32  `mapstructure:"min.insync.replicas"`
	ReplicationMode           string `mapstructure:"replication.mode"`

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

	// ReplicaListen is the internal address raft traffic between brokers
	// arrives on (one connection per peer broker carries every partition).
	// A connection is kept only from a registered broker at its registered
	// IP (a broker dials from the IP it listens on), and every raft
	// message is checked before raft sees it (replica/doc.go, "Peers");
	// this is not authentication, so keep the port on a private network.
	ReplicaListen string `mapstructure:"replica.listen"`
	// AutoLeaderRebalance moves a partition's leadership back to its
	// preferred (first) voter when that broker is alive again, checked
	// every LeaderImbalanceCheckSeconds, as Kafka's settings of these names.
	AutoLeaderRebalance         bool  `mapstructure:"auto.leader.rebalance.enable"`
	LeaderImbalanceCheckSeconds int64 `mapstructure:"leader.imbalance.check.interval.seconds"`
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
		AdminAddr:                   "127.0.0.1:9644",
		LogLevel:                    "info",
		SocketRequestMaxBytes:       100 << 20,
		QueuedMaxRequestBytes:       100 << 20,
		AutoCreateTopics:            true,
		NumPartitions:               1,
		DefaultReplicationFactor:    1,
		MessageMaxBytes:             1048588,
		FetchMaxBytes:               8 << 20,
		FetchSessionCacheSlots:      1000,
		FetchSessionEvictionMs:      120000,
		LogSegmentBytes:             1 << 30,
		LogRollMs:                   int64(7 * 24 * time.Hour / time.Millisecond),
		LogRetentionMs:              int64(7 * 24 * time.Hour / time.Millisecond),
		LogRetentionBytes:           -1,
		LogIndexIntervalBytes:       4096,
		LogIndexSizeMaxBytes:        10 << 20,
		LogMessageTimestampType:     "CreateTime",
		LogTimestampBeforeMaxMs:     9223372036854775807,
		LogTimestampAfterMaxMs:      3600000,
		LogRetentionCheckInterval:   300000,
		MinInsyncReplicas:           1,
		ReplicationMode:             "raft",
		AutoLeaderRebalance:         true,
		LeaderImbalanceCheckSeconds: 300,
		LogFsync:                    "group",
		LogFlushIntervalMs:          1000,
		MetaID:                      1,
		MetaLearnerGraceMs:          int64(15 * time.Minute / time.Millisecond),
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
	if c.QueuedMaxRequestBytes < -1 {
		errs = append(errs, fmt.Errorf("queued.max.request.bytes must be -1 (unbounded) or at least 0"))
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
	switch c.LogFsync {
	case "group", "interval", "never":
	default:
		errs = append(errs, fmt.Errorf("log.fsync %q is not group, interval or never", c.LogFsync))
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

// TopicDefaults gives, per topic config name, the value this broker's
// static configuration supplies through the topic config's broker synonym.
func (c Config) TopicDefaults() map[string]string {
	return map[string]string{
		"cleanup.policy":                  "delete",
		"compression.type":                "producer",
		"max.message.bytes":               strconv.Itoa(int(c.MessageMaxBytes)),
		"message.timestamp.type":          c.LogMessageTimestampType,
		"message.timestamp.before.max.ms": strconv.FormatInt(c.LogTimestampBeforeMaxMs, 10),
		"message.timestamp.after.max.ms":  strconv.FormatInt(c.LogTimestampAfterMaxMs, 10),
		"retention.ms":                    strconv.FormatInt(c.LogRetentionMs, 10),
		"retention.bytes":                 strconv.FormatInt(c.LogRetentionBytes, 10),
		"segment.bytes":                   strconv.Itoa(int(c.LogSegmentBytes)),
		"segment.ms":                      strconv.FormatInt(c.LogRollMs, 10),
		"segment.index.bytes":             strconv.Itoa(int(c.LogIndexSizeMaxBytes)),
		"index.interval.bytes":            strconv.Itoa(int(c.LogIndexIntervalBytes)),
		"min.insync.replicas":             strconv.Itoa(int(c.MinInsyncReplicas)),
		"replication.mode":                c.ReplicationMode,
		// Not a file setting (TopicConfig.ClusterWide): the metastore
		// places learners, so only the cluster-wide dynamic default
		// may change it.
		"read.replicas": "-1",
	}
}
