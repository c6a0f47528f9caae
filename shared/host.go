package shared

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/objstore"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

// Catalog is what a Host needs from the metastore (*metastore.Client).
type Catalog interface {
	TopicByID(id metastore.TopicID) (metastore.Topic, bool)
	Brokers() []metastore.Broker
	ClaimSharedLeader(ctx context.Context, f metastore.Fence, topic string, partition, current int32) (int32, error)
	CommitSharedChunks(ctx context.Context, f metastore.Fence, chunks []metastore.SharedChunk) ([]error, error)
	SharedChunks(ctx context.Context, topic metastore.TopicID, partition int32, from int64, max int) (metastore.SharedPartition, error)
	AdvanceSharedStart(ctx context.Context, f metastore.Fence, topic metastore.TopicID, partition, epoch int32, offset int64) (int64, []string, error)
	CondemnSharedObjects(ctx context.Context, keys []string) ([]string, error)
	UnreferencedSharedObjects(ctx context.Context, keys []string) ([]string, error)
	ReplaceSharedChunks(ctx context.Context, f metastore.Fence, old []metastore.SharedChunk, merged metastore.SharedChunk) error
}

// Config wires a Host.
type Config struct {
	// NodeID is this broker; Incarnation returns its current registration
	// in the metastore (the fence of its claims and commits, and part of
	// its object keys).
	NodeID      int32
	Incarnation func() uint64
	Store       objstore.Store
	Catalog     Catalog
	// UploadBytes and Linger bound the upload buffer
	// (shared.upload.bytes, shared.upload.linger.ms): an object is cut
	// when it holds UploadBytes or its oldest batch waited Linger, and
	// holds at most UploadBytes (or one larger batch).
	UploadBytes int64
	Linger      time.Duration
	// Parallel is how many objects may be in flight at once
	// (shared.upload.parallel; 0: 4): uploading, or uploaded and waiting
	// to commit. The buffer and the objects in flight hold at most
	// Parallel × UploadBytes of batches; Propose waits beyond it.
	Parallel int
	// CacheBytes bounds the in-memory chunk cache
	// (shared.cache.memory.bytes).
	CacheBytes int64
	// CacheDir and CacheDiskBytes are the disk tier of the chunk cache
	// (shared.cache.dir, shared.cache.disk.bytes; diskcache.go): chunks
	// read from shared storage, or pushed out of memory, are kept there
	// within CacheDiskBytes. CacheDir "" or CacheDiskBytes 0: no disk
	// tier.
	CacheDir       string
	CacheDiskBytes int64
	// Readahead is how many chunks after the one a read ended in are read
	// into the cache in the background (shared.readahead.chunks; 0:
	// none). At most readaheadMax such reads run at once per Host.
	Readahead int
	// OpTimeout bounds one upload, commit or metastore read; 0: 30 s.
	OpTimeout time.Duration
	// GCGrace is how old an object must be before garbage collection
	// deletes it when no chunk references it (shared.gc.grace.ms); 0: an
	// hour. The sweeping broker sweeps every quarter of it, from a second
	// to five minutes.
	GCGrace time.Duration
	// Compact bounds the compactor (compact.go).
	Compact CompactConfig
	Logger  zerolog.Logger
}

// Host is one broker's shared partitions and their upload buffer. It
// implements partition.SharedHost.
type Host struct {
	cfg   Config
	cache *cache
	disk  *diskCache // nil: no disk tier

	// loads are the ranged reads of chunks in flight, so that readers
	// of one chunk at once share one GET.
	loadMu sync.Mutex
	loads  map[cacheKey]*load

	mu     sync.Mutex
	parts  map[partition.Key]*Partition
	closed bool

	// bufMu guards the upload buffer and the byte budget: held is the
	// bytes of the batches accepted and not yet done with (in the buffer
	// or in an object in flight), at most Parallel × UploadBytes; room
	// is broadcast when it shrinks. bufClosed: the Host is closing, and
	// nothing is accepted any more.
	bufMu     sync.Mutex
	room      *sync.Cond
	held      int64
	buf       []*pending
	bufBytes  int64
	oldest    time.Time
	bufClosed bool
	kick      chan struct{}

	// slots holds a token per object in flight (at most Parallel);
	// objects carries them, in the order they were cut, from the
	// uploader to the committer.
	slots   chan struct{}
	objects chan *object

	seq  atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup

	// compactMu makes one compaction pass at a time; compactSeq numbers
	// the merged objects; compactFault, set by tests, runs between a
	// merged object's upload and its swap.
	compactMu    sync.Mutex
	compactSeq   atomic.Uint64
	compactFault func(key string) error

	// ahead holds a slot per read-ahead in flight; aheadKeys the chunks
	// being read ahead, each with a channel closed when its read ends (a
	// read of the same chunk waits for it rather than reading it twice).
	ahead     chan struct{}
	aheadMu   sync.Mutex
	aheadKeys map[cacheKey]chan struct{}

	// Counters, for tests and metrics.
	puts, commits, gets, putBytes, deletes, compactions, compactedChunks, readaheads atomic.Int64
	memHits, memMisses                                                               atomic.Int64
}

// load is one ranged read of a chunk in flight; done is closed when b
// and err are set.
type load struct {
	done chan struct{}
	b    []byte
	err  error
}

var _ partition.SharedHost = (*Host)(nil)

// pending is one accepted batch waiting for its object's commit.
type pending struct {
	p     *Partition
	gen   uint64 // the writer generation that accepted it
	epoch int32
	batch []byte // stamped with its offsets; owned; nil once cut
	size  int64  // len(batch), what it holds of the Host's budget
	base  int64
	last  int64
	maxTs int64
	prop  *proposal
	// hd is the batch's header, stamped; txn says it is transactional
	// (data or marker), for the chunk's transaction summary.
	hd  protocol.BatchHeader
	txn bool
	// queued is when it entered the upload buffer.
	queued time.Time
}

// NewHost starts a Host's uploader, committer and leadership check.
func NewHost(cfg Config) *Host {
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 30 * time.Second
	}
	if cfg.UploadBytes <= 0 {
		cfg.UploadBytes = 8 << 20
	}
	if cfg.Linger <= 0 {
		cfg.Linger = 250 * time.Millisecond
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 4
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = 64 << 20
	}
	if cfg.GCGrace <= 0 {
		cfg.GCGrace = time.Hour
	}
	cfg.Compact.defaults()
	h := &Host{
		cfg:   cfg,
		cache: newCache(cfg.CacheBytes),
		parts: map[partition.Key]*Partition{},
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),

		slots:   make(chan struct{}, cfg.Parallel),
		objects: make(chan *object, cfg.Parallel),

		ahead:     make(chan struct{}, readaheadMax),
		aheadKeys: map[cacheKey]chan struct{}{},
		loads:     map[cacheKey]*load{},
	}
	if cfg.CacheDir != "" && cfg.CacheDiskBytes > 0 {
		d, err := openDiskCache(cfg.CacheDir, cfg.CacheDiskBytes, cfg.Logger)
		if err != nil {
			cfg.Logger.Error().Err(err).Msg("the chunk cache's disk tier is off")
		} else {
			h.disk = d
			h.cache.onEvict = d.put
		}
	}
	h.room = sync.NewCond(&h.bufMu)
	h.wg.Add(5)
	go h.uploader()
	go h.committer()
	go h.leadership()
	go h.gc()
	go h.compactor()
	return h
}

// Close stops the uploader: the objects in flight are uploaded and
// committed (or fail) as usual, and the batches not yet cut into an
// object are answered NOT_LEADER_OR_FOLLOWER, as is a Propose waiting for
// room. It does not close the Store.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	parts := make([]*Partition, 0, len(h.parts))
	for _, p := range h.parts {
		parts = append(parts, p)
	}
	h.mu.Unlock()
	close(h.stop)
	h.bufMu.Lock()
	h.bufClosed = true
	h.room.Broadcast()
	h.bufMu.Unlock()
	h.wg.Wait()
	if h.disk != nil {
		h.disk.close()
	}
	for _, p := range parts {
		p.close()
	}
	h.bufMu.Lock()
	buf := h.buf
	h.buf, h.bufBytes = nil, 0
	h.bufMu.Unlock()
	for _, pd := range buf {
		pd.prop.finish(partition.ProduceResult{}, partition.ErrPartitionClosed)
	}
	return nil
}

// Open returns partition k of topic, opening it on first use. A broker
// the metastore names the partition's leader claims it at once, so the
// partition has an elected epoch soon after its topic is created.
func (h *Host) Open(topic string, k partition.Key) (partition.Partition, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, partition.ErrPartitionClosed
	}
	if p, ok := h.parts[k]; ok {
		return p, nil
	}
	p := newPartition(h, topic, k)
	h.parts[k] = p
	if h.shouldClaim(k) {
		go p.tryClaim()
	}
	return p, nil
}

// Remove closes k's partition. Its data stays in shared storage and in
// the metastore (deleting the topic drops the chunk index).
func (h *Host) Remove(k partition.Key) error {
	h.mu.Lock()
	p, ok := h.parts[k]
	delete(h.parts, k)
	h.mu.Unlock()
	if ok {
		p.close()
	}
	return nil
}

// Keys lists the open partitions.
func (h *Host) Keys() []partition.Key {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]partition.Key, 0, len(h.parts))
	for k := range h.parts {
		out = append(out, k)
	}
	return out
}

// Stats are the Host's counters since it started: objects written (one
// PUT each), metastore commits that applied, ranged reads of chunks
// (one GET each), the bytes uploaded and the objects deleted (retention,
// DeleteRecords, garbage collection), the merged objects the compactor
// swapped in and the chunks they replaced (its PUTs and GETs are in Puts
// and Gets); CacheBytes is what the in-memory chunk cache holds now.
type Stats struct {
	Puts, Commits, Gets, PutBytes, Deletes, Compactions, CompactedChunks, CacheBytes int64
	// Readaheads counts the chunks read ahead into the cache (their GETs
	// are in Gets too).
	Readaheads int64
	// MemoryHits and MemoryMisses count the chunk reads of Fetch and
	// the like that found their chunk in memory or not (read-aheads and
	// the compactor are not counted).
	MemoryHits, MemoryMisses int64
	// Disk is the disk tier's counters (zero without one); its misses
	// are looked for in shared storage (Gets), or wait for a read of the
	// chunk already in flight.
	Disk DiskStats
}

// Stats returns the Host's counters.
func (h *Host) Stats() Stats {
	s := Stats{Puts: h.puts.Load(), Commits: h.commits.Load(), Gets: h.gets.Load(),
		PutBytes: h.putBytes.Load(), Deletes: h.deletes.Load(), Compactions: h.compactions.Load(),
		CompactedChunks: h.compactedChunks.Load(), CacheBytes: h.cache.bytes(), Readaheads: h.readaheads.Load(),
		MemoryHits: h.memHits.Load(), MemoryMisses: h.memMisses.Load()}
	if h.disk != nil {
		s.Disk = h.disk.stats()
	}
	return s
}

func (h *Host) fence() metastore.Fence {
	return metastore.Fence{Broker: h.cfg.NodeID, Incarnation: h.cfg.Incarnation()}
}

func (h *Host) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), h.cfg.OpTimeout)
}

// shouldClaim says whether this broker may claim k: it is a voter and the
// metastore names it the leader, or names no leader or one that is not
// registered.
func (h *Host) shouldClaim(k partition.Key) bool {
	t, ok := h.cfg.Catalog.TopicByID(k.TopicID)
	if !ok || int(k.Index) >= len(t.Partitions) {
		return false
	}
	mp := t.Partitions[k.Index]
	if !slices.Contains(mp.Voters, h.cfg.NodeID) {
		return false
	}
	if mp.Leader == h.cfg.NodeID || mp.Leader < 0 {
		return true
	}
	for _, b := range h.cfg.Catalog.Brokers() {
		if b.ID == mp.Leader {
			return false
		}
	}
	return true
}

// leadership claims, every second, the open partitions whose leader is
// gone (not registered) and that this broker may lead, and steps down
// from those another broker claimed since.
func (h *Host) leadership() {
	defer h.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		parts := make([]*Partition, 0, len(h.parts))
		for _, p := range h.parts {
			parts = append(parts, p)
		}
		h.mu.Unlock()
		for _, p := range parts {
			p.checkLeadership()
		}
	}
}
