package replica

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/partition"
)

// Key names a partition by topic id, which survives renames and tells a
// re-created topic from its deleted namesake.
type Key = partition.Key

// Manager opens and deletes plain local logs (Partition), each in
// dir/<topic>-<partition> as in Kafka, with a partition.metadata file naming
// its topic id. It keeps the __consumer_offsets view's logs; no Kafka
// partition is served from it (each is a raft group, Host).
type Manager struct {
	dir     string
	flusher *log.Flusher
	logger  zerolog.Logger

	mu    sync.RWMutex
	parts map[Key]*Partition
}

// NewManager manages partitions under dir; flusher groups their fsyncs.
func NewManager(dir string, flusher *log.Flusher, logger zerolog.Logger) (*Manager, error) {
	if err := fsutil.MkdirAllSync(dir, 0o755); err != nil {
		return nil, err
	}
	return &Manager{dir: dir, flusher: flusher, logger: logger, parts: make(map[Key]*Partition)}, nil
}

// Dir is the directory the partition directories live in (the log dir,
// as DescribeLogDirs reports it).
func (m *Manager) Dir() string { return m.dir }

// Open opens (creating if needed) the partition k of topic. It is
// idempotent; cfg applies to a partition that is already open too.
func (m *Manager) Open(topic string, k Key, cfg log.Config) (*Partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.parts[k]; ok {
		if err := p.log.SetConfig(cfg); err != nil {
			return nil, fmt.Errorf("config of %s-%d: %w", topic, k.Index, err)
		}
		return p, nil
	}
	dir := filepath.Join(m.dir, topic+"-"+strconv.Itoa(int(k.Index)))
	if id, err := readTopicID(dir); err == nil && id != k.TopicID {
		// A directory left by a deleted topic of the same name.
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	if err := fsutil.MkdirAllSync(dir, 0o755); err != nil {
		return nil, err
	}
	if err := writeTopicID(dir, k.TopicID); err != nil {
		return nil, err
	}
	lg := m.logger.With().Str("topic", topic).Int32("partition", k.Index).Logger()
	l, err := log.Open(dir, cfg, log.Options{Logger: lg, Flusher: m.flusher})
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", topic, k.Index, err)
	}
	p := newPartition(l, topic, k.TopicID, k.Index, lg)
	p.dir = dir
	m.parts[k] = p
	return p, nil
}

// Remove closes and deletes the partition's data.
func (m *Manager) Remove(k Key) error {
	m.mu.Lock()
	p, ok := m.parts[k]
	delete(m.parts, k)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	if err := p.close(); err != nil && !errors.Is(err, log.ErrClosed) {
		return err
	}
	return os.RemoveAll(p.dir)
}

// Close closes every partition.
func (m *Manager) Close() error {
	m.mu.Lock()
	parts := m.parts
	m.parts = make(map[Key]*Partition)
	m.mu.Unlock()
	var errs []error
	for _, p := range parts {
		if err := p.close(); err != nil && !errors.Is(err, log.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

const metadataFile = "partition.metadata"

func readTopicID(dir string) ([16]byte, error) {
	var id [16]byte
	b, err := os.ReadFile(filepath.Join(dir, metadataFile))
	if err != nil {
		return id, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "topic_id: "); ok {
			raw, err := hex.DecodeString(strings.TrimSpace(v))
			if err != nil || len(raw) != 16 {
				return id, fmt.Errorf("bad topic id in %s", dir)
			}
			copy(id[:], raw)
			return id, nil
		}
	}
	return id, fmt.Errorf("no topic id in %s", dir)
}

func writeTopicID(dir string, id [16]byte) error {
	path := filepath.Join(dir, metadataFile)
	want := "version: 0\ntopic_id: " + hex.EncodeToString(id[:]) + "\n"
	if b, err := os.ReadFile(path); err == nil && string(b) == want {
		return nil
	}
	// Durably: RemoveStale and the stale-topic check read it, and a
	// partition directory without it is not recognised as one.
	return fsutil.WriteFileSync(dir, metadataFile, []byte(want))
}
