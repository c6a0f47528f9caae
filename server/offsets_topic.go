package server

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/partition"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
)

// The __consumer_offsets view (docs/architecture.md, "__consumer_offsets").
// Committed offsets live in the metastore, not in a topic; lag exporters
// (Burrow, kminion) and tools read Kafka's __consumer_offsets instead. So
// every broker keeps a read-only materialisation of it: one local log per
// partition under the data directory, to which a poller appends, in the
// metastore's commit order, an OffsetCommitKey v1 / OffsetCommitValue v3
// record for every offset committed since its last poll. A group's records
// go to partition abs(group.hashCode()) % offsets.topic.num.partitions, as
// in Kafka.
//
// Semantics: offsets are dense and monotonic per broker and survive its
// restarts (the logs and the last revision applied are on disk); the
// content is at least the latest value of every key, like a compacted
// topic before compaction: a key committed again appears again. Different
// brokers number the same records differently, so every Metadata answer
// names the same leader for a partition (rendezvous hashing over the
// brokers of the view) and a consumer reads one broker's log while the
// brokers do not change. Not materialised: tombstones for deleted offsets
// and groups, and group metadata records (GroupMetadataKey/Value).

// OffsetsSource is where the view reads commits: the metastore client.
type OffsetsSource interface {
	// OffsetsSince lists the commits stored after revision since, in
	// revision order, at most about max, and the revision read at.
	OffsetsSince(ctx context.Context, since uint64, max int) ([]metastore.GroupOffsetCommit, uint64, error)
}

const (
	// offsetsPollInterval is how often the view asks the metastore for
	// new commits: a commit appears in __consumer_offsets within about
	// this long.
	offsetsPollInterval = time.Second
	// offsetsIdlePolls: before the topic exists, one poll in this many.
	offsetsIdlePolls = 10
	// offsetsPollMax bounds the commits one poll reads.
	offsetsPollMax = 20000
	// offsetsBatchRecords bounds the records of one appended batch.
	offsetsBatchRecords = 500
	offsetsStateFile    = "view.state"
)

// offsetsTopicID is the view's topic id: fixed, so that its logs keep
// their directory; derived from the name, so no random topic has it.
var offsetsTopicID = func() metastore.TopicID {
	sum := sha256.Sum256([]byte("sluice internal topic " + coordinator.OffsetsTopic))
	var id metastore.TopicID
	copy(id[:], sum[:16])
	return id
}()

// offsetsView is one broker's materialisation of __consumer_offsets.
type offsetsView struct {
	logs partition.LocalLogs
	src  OffsetsSource
	dir  string
	n    int32
	lg   zerolog.Logger

	// created: some group was looked up (FindCoordinator) or has
	// offsets; Kafka creates the topic then, and Metadata lists it from
	// then on.
	created atomic.Bool
	ready   atomic.Bool // the logs are open
	mu      sync.Mutex  // one poll at a time
	parts   []partition.LocalLog
	rev     uint64 // the last metastore revision applied
	kick    chan struct{}
}

func newOffsetsView(logs partition.LocalLogs, src OffsetsSource, n int32, lg zerolog.Logger) *offsetsView {
	return &offsetsView{logs: logs, src: src, n: n, dir: logs.Dir(), lg: lg.With().Str("topic", coordinator.OffsetsTopic).Logger(), kick: make(chan struct{}, 1)}
}

// open opens the logs and reads the state file; a different partition
// count starts the view over (groups map to other partitions).
func (v *offsetsView) open() error {
	state, err := os.ReadFile(filepath.Join(v.dir, offsetsStateFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var rev uint64
	var n int64 = -1
	if len(state) > 0 {
		f := strings.Fields(string(state))
		if len(f) != 2 {
			return fmt.Errorf("offsets view: bad state file %q", state)
		}
		if rev, err = strconv.ParseUint(f[0], 10, 64); err != nil {
			return fmt.Errorf("offsets view: bad state file: %w", err)
		}
		if n, err = strconv.ParseInt(f[1], 10, 32); err != nil {
			return fmt.Errorf("offsets view: bad state file: %w", err)
		}
	}
	if n >= 0 && n != int64(v.n) {
		// Remove the old partitions: open and remove each.
		for i := int32(0); i < int32(n); i++ {
			k := partition.Key{TopicID: offsetsTopicID, Index: i}
			if _, err := v.logs.Open(coordinator.OffsetsTopic, k, offsetsLogConfig()); err != nil {
				return err
			}
			if err := v.logs.Remove(k); err != nil {
				return err
			}
		}
		rev = 0
	}
	v.parts = make([]partition.LocalLog, v.n)
	for i := range v.parts {
		p, err := v.logs.Open(coordinator.OffsetsTopic, partition.Key{TopicID: offsetsTopicID, Index: int32(i)}, offsetsLogConfig())
		if err != nil {
			return err
		}
		v.parts[i] = p
		if p.LogEndOffset() > 0 {
			v.created.Store(true)
		}
	}
	v.rev = rev
	if err := v.saveState(); err != nil {
		return err
	}
	v.ready.Store(true)
	return nil
}

// offsetsLogConfig is Kafka's for its offsets topic: compacted (the log
// cleaner keeps the latest commit of every key, so the logs grow with
// the keys, not the commit rate) in segments of offsets.topic.segment.bytes
// (100 MiB), nothing removed by time or size.
func offsetsLogConfig() partition.LogConfig {
	c := partition.DefaultLogConfig()
	c.RetentionMs, c.RetentionBytes = -1, -1
	c.Compact, c.Delete = true, false
	c.SegmentBytes = 100 << 20
	return c
}

func (v *offsetsView) saveState() error {
	return fsutil.WriteFileSync(v.dir, offsetsStateFile, []byte(fmt.Sprintf("%d %d\n", v.rev, v.n)))
}

// run polls the metastore until ctx ends.
func (v *offsetsView) run(ctx context.Context) {
	t := time.NewTicker(offsetsPollInterval)
	defer t.Stop()
	for n := 0; ; n++ {
		// Until the topic exists (no group looked up here, no commit
		// seen), a poll every offsetsIdlePolls ticks notices commits
		// made through other brokers.
		if v.created.Load() || n%offsetsIdlePolls == 0 {
			if err := v.poll(ctx); err != nil && ctx.Err() == nil {
				v.lg.Warn().Err(err).Msg("offsets view: poll failed")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-v.kick:
		}
	}
}

// touch marks the topic created (a group was looked up) and polls soon.
func (v *offsetsView) touch() {
	if v.created.CompareAndSwap(false, true) {
		select {
		case v.kick <- struct{}{}:
		default:
		}
	}
}

// poll appends the commits stored since the last poll.
func (v *offsetsView) poll(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		commits, rev, err := v.src.OffsetsSince(rctx, v.rev, offsetsPollMax)
		cancel()
		if err != nil {
			return err
		}
		if len(commits) > 0 {
			v.created.Store(true)
		}
		byPart := make([][]metastore.GroupOffsetCommit, v.n)
		for _, c := range commits {
			p := coordinator.OffsetsPartition(c.Group, v.n)
			byPart[p] = append(byPart[p], c)
		}
		for p, cs := range byPart {
			for len(cs) > 0 {
				k := min(len(cs), offsetsBatchRecords)
				if _, err := v.parts[p].Append(offsetCommitBatch(cs[:k])); err != nil {
					return fmt.Errorf("append to partition %d: %w", p, err)
				}
				cs = cs[k:]
			}
		}
		next := rev
		if len(commits) >= offsetsPollMax {
			next = commits[len(commits)-1].Rev // more to read
		}
		if next == v.rev {
			return nil
		}
		v.rev = next
		if err := v.saveState(); err != nil {
			return err
		}
		if len(commits) < offsetsPollMax {
			return nil
		}
	}
}

// offsetCommitBatch encodes commits as one uncompressed v2 batch of
// OffsetCommitKey v1 / OffsetCommitValue v3 records, timestamped with
// their commit times; the log assigns its offsets.
func offsetCommitBatch(cs []metastore.GroupOffsetCommit) []byte {
	var recs []byte
	first, maxTS := cs[0].CommitTime.UnixMilli(), cs[0].CommitTime.UnixMilli()
	for _, c := range cs {
		first = min(first, c.CommitTime.UnixMilli())
		maxTS = max(maxTS, c.CommitTime.UnixMilli())
	}
	for i, c := range cs {
		key := kmsg.NewOffsetCommitKey()
		key.Version = 1
		key.Group, key.Topic, key.Partition = c.Group, c.Topic, c.Partition
		val := kmsg.NewOffsetCommitValue()
		val.Version = 3
		val.Offset, val.LeaderEpoch, val.Metadata = c.Offset, c.LeaderEpoch, c.Metadata
		val.CommitTimestamp = c.CommitTime.UnixMilli()
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.TimestampDelta64 = val.CommitTimestamp - first
		r.Key = key.AppendTo(nil)
		r.Value = val.AppendTo(nil)
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the body after a 1-byte zero length
		recs = r.AppendTo(recs)
	}
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.LastOffsetDelta = int32(len(cs) - 1)
	b.FirstTimestamp, b.MaxTimestamp = first, maxTS
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	b.NumRecords = int32(len(cs))
	b.Records = recs
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// offsetsTopic is the view as a catalog topic, for the lookups of Fetch,
// ListOffsets and OffsetForLeaderEpoch; ok is false until it is created.
func (s *Server) offsetsTopic() (metastore.Topic, bool) {
	v := s.offsets
	if v == nil || !v.ready.Load() || !v.created.Load() {
		return metastore.Topic{}, false
	}
	t := metastore.Topic{Name: coordinator.OffsetsTopic, ID: offsetsTopicID, Partitions: make([]metastore.Partition, v.n)}
	for i := range t.Partitions {
		t.Partitions[i] = metastore.Partition{ID: int32(i), Leader: -1}
	}
	return t, true
}

// offsetsPartition is partition idx of the view, if t is the view.
func (s *Server) offsetsPartition(t metastore.Topic, idx int32) (hostedPartition, bool) {
	v := s.offsets
	if v == nil || t.ID != offsetsTopicID || !v.ready.Load() || idx < 0 || idx >= v.n {
		return nil, false
	}
	return v.parts[idx], true
}

// offsetsMetadataTopic answers Metadata for the view: internal, each
// partition led by the broker of the view that rendezvous hashing picks
// for it (every broker answers the same while the brokers do not change),
// which is its only replica, since each broker has its own numbering.
func (s *Server) offsetsMetadataTopic(view brokerView, t metastore.Topic, authOps int32) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.IsInternal = true
	mt.AuthorizedOperations = authOps
	ids := make([]int32, 0, len(view.brokers))
	for _, b := range view.brokers {
		ids = append(ids, b.NodeID)
	}
	for i := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = offsetsLeader(ids, int32(i))
		mp.LeaderEpoch = 0
		mp.Replicas, mp.ISR, mp.OfflineReplicas = []int32{mp.Leader}, []int32{mp.Leader}, []int32{}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// offsetsLeader picks partition p's broker among ids by rendezvous
// hashing, so a change of brokers moves only the partitions it must.
func offsetsLeader(ids []int32, p int32) int32 {
	best, bestH := int32(-1), uint64(0)
	for _, id := range ids {
		// splitmix64's finaliser: FNV over these few similar bytes
		// leaves its high bits too alike for a fair spread.
		h := uint64(uint32(id))<<32 | uint64(uint32(p))
		h += 0x9e3779b97f4a7c15
		h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
		h = (h ^ h>>27) * 0x94d049bb133111eb
		h ^= h >> 31
		if best < 0 || h > bestH || (h == bestH && id < best) {
			best, bestH = id, h
		}
	}
	return best
}

// topicByName is the catalog's topic, or the __consumer_offsets view once
// created: the lookup of the APIs that read partitions.
func (s *Server) topicByName(name string) (metastore.Topic, bool) {
	if name == coordinator.OffsetsTopic {
		return s.offsetsTopic()
	}
	return s.catalog.TopicByName(name)
}
