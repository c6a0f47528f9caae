package metastore

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
)

// Config configures one metastore node (a voter of the metadata raft group).
// The mapstructure tags let cmd fill it from viper under the "meta" key:
//
//	meta:
//	  id: 1
//	  data_dir: ./data/meta
//	  listen: 127.0.0.1:9192
//	  peers: ["1=127.0.0.1:9192", "2=10.0.0.2:9192", "3=10.0.0.3:9192"]
//
// Default() is the only source of defaults; Validate() collects errors.
type Config struct {
	// ID is this node's raft id: non-zero and never reused for another node.
	ID uint64 `mapstructure:"id"`
	// DataDir holds the single bbolt file (meta.db). Created if missing.
	DataDir string `mapstructure:"data_dir"`
	// Listen is the internal TCP address for raft traffic and broker
	// requests. Empty for an embedded node with no peers (sluice dev).
	Listen string `mapstructure:"listen"`
	// PeerList is the initial voters as "id=host:port", this node included.
	// Used only on the first start of an empty DataDir; afterwards the
	// membership lives in the raft log. Empty means a single voter (ID).
	PeerList []string `mapstructure:"peers"`
	// Join starts an empty node that waits to be added with AddVoter
	// instead of bootstrapping a new cluster.
	Join bool `mapstructure:"join"`

	// TickInterval is one raft tick. Zero: 100ms.
	TickInterval time.Duration `mapstructure:"tick_interval"`
	// ElectionTicks and HeartbeatTicks are raft's timeouts in ticks.
	// Zero: 10 and 1.
	ElectionTicks  int `mapstructure:"election_ticks"`
	HeartbeatTicks int `mapstructure:"heartbeat_ticks"`
	// SnapshotEntries: take a snapshot and compact the log every this many
	// applied entries. Zero: 5000.
	SnapshotEntries uint64 `mapstructure:"snapshot_entries"`
	// CompactionKeep: entries kept in the log behind a snapshot so slow
	// followers catch up without one. Zero: 500. The snapshot image is the
	// whole bbolt file, log bucket included, so this bounds its overhead.
	CompactionKeep uint64 `mapstructure:"compaction_keep"`
	// LeaseDuration is a broker's lease; it must heartbeat within it.
	// Zero: 10s.
	LeaseDuration time.Duration `mapstructure:"lease_duration"`
	// LearnerGrace is how long a read broker may stay unregistered
	// (restart, lapsed lease) before its learner replicas are given up
	// (reassign.go). Zero: 15m.
	LearnerGrace time.Duration `mapstructure:"learner_grace"`
	// MaxBatchCommands caps the commands grouped into one proposal.
	// Zero: 1024.
	MaxBatchCommands int `mapstructure:"max_batch_commands"`
	// WatchHistory is how many cache events a node keeps for watchers; a
	// watcher further behind gets a full image. Zero: 10000.
	WatchHistory int `mapstructure:"watch_history"`
	// RequestTimeout bounds a forwarded or proposed request when the
	// caller's context has no deadline. Zero: 10s.
	RequestTimeout time.Duration `mapstructure:"request_timeout"`

	// Logger is the parent logger; the node derives component=metastore.
	Logger zerolog.Logger `mapstructure:"-"`
	// Peers is PeerList parsed (id -> address). If set it wins over
	// PeerList; tests fill it directly.
	Peers map[uint64]string `mapstructure:"-"`
	// TLS makes the TCP transport mutual TLS (tcp.go); nil: plaintext.
	TLS *tlsconfig.Loader `mapstructure:"-"`
	// Transport replaces the TCP transport (tests use the in-memory hub).
	// When nil and Listen is set, Open starts a TCP transport on Listen.
	Transport Transport `mapstructure:"-"`
	// Clock is time for commands' informational timestamps and leases.
	// Nil: the system clock.
	Clock func() time.Time `mapstructure:"-"`
}

// Default returns a Config with every default filled in.
func Default() Config {
	return Config{
		ID:               1,
		DataDir:          "data/meta",
		TickInterval:     100 * time.Millisecond,
		ElectionTicks:    10,
		HeartbeatTicks:   1,
		SnapshotEntries:  5000,
		CompactionKeep:   500,
		LeaseDuration:    10 * time.Second,
		LearnerGrace:     15 * time.Minute,
		MaxBatchCommands: 1024,
		RequestTimeout:   10 * time.Second,
		WatchHistory:     10000,
		Logger:           zerolog.Nop(),
	}
}

func (c *Config) fillDefaults() {
	d := Default()
	if c.TickInterval <= 0 {
		c.TickInterval = d.TickInterval
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = d.ElectionTicks
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = d.HeartbeatTicks
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = d.SnapshotEntries
	}
	if c.CompactionKeep == 0 {
		c.CompactionKeep = d.CompactionKeep
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = d.LeaseDuration
	}
	if c.LearnerGrace <= 0 {
		c.LearnerGrace = d.LearnerGrace
	}
	if c.MaxBatchCommands <= 0 {
		c.MaxBatchCommands = d.MaxBatchCommands
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = d.RequestTimeout
	}
	if c.WatchHistory <= 0 {
		c.WatchHistory = d.WatchHistory
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
}

// Validate checks the config and parses PeerList into Peers.
func (c *Config) Validate() error {
	var errs []error
	if c.ID == 0 {
		errs = append(errs, errors.New("meta.id must be non-zero"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("meta.data_dir is required"))
	}
	if c.Peers == nil && len(c.PeerList) > 0 {
		p, err := ParsePeers(c.PeerList)
		if err != nil {
			errs = append(errs, err)
		}
		c.Peers = p
	}
	if len(c.Peers) > 0 && !c.Join {
		if _, ok := c.Peers[c.ID]; !ok {
			errs = append(errs, fmt.Errorf("meta.peers does not list this node's id %d", c.ID))
		}
		if n := len(c.Peers); n%2 == 0 {
			errs = append(errs, fmt.Errorf("meta.peers lists %d voters; use 1, 3 or 5", n))
		}
	}
	return errors.Join(errs...)
}

// ParsePeers parses "id=host:port" items.
func ParsePeers(list []string) (map[uint64]string, error) {
	out := make(map[uint64]string, len(list))
	for _, item := range list {
		for _, s := range strings.Split(item, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			idStr, addr, ok := strings.Cut(s, "=")
			if !ok {
				return nil, fmt.Errorf("meta.peers: %q is not id=host:port", s)
			}
			id, err := strconv.ParseUint(strings.TrimSpace(idStr), 10, 64)
			if err != nil || id == 0 {
				return nil, fmt.Errorf("meta.peers: bad id in %q", s)
			}
			out[id] = strings.TrimSpace(addr)
		}
	}
	return out, nil
}

func sortedIDs(m map[uint64]string) []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
