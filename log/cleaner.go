package log

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/partition"
)

// CleanerConfig is the broker-wide configuration of the log cleaner, with
// Kafka's log.cleaner.* names.
type CleanerConfig struct {
	// Threads is log.cleaner.threads: passes that run at once, each on its
	// own log with its own offset map.
	Threads int
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size, the memory of
	// the offset maps of all threads together (24 bytes a key).
	DedupeBufferSize int64
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second, the
	// bytes read plus written by all threads together; <= 0 or +Inf is
	// unlimited.
	IOMaxBytesPerSecond float64
	// Backoff is log.cleaner.backoff.ms: how long a thread sleeps when no
	// log needs cleaning.
	Backoff time.Duration
	// Targets lists the logs to consider; called once per selection.
	Targets func() []CleanTarget
	Logger  zerolog.Logger
	// Now is the clock for lags and delete horizons; nil means time.Now.
	Now func() time.Time
}

// CleanTarget is one log the cleaner may clean.
type CleanTarget struct {
	Log *Log
	// Limit returns the first offset the cleaner must leave alone: the
	// high watermark, or for a raft partition the end of what it applied.
	// Only segments wholly below it are cleaned. Nil means the log end.
	Limit func() int64
	// RetainEmpty keeps every batch, as a header without records when no
	// record of it survives, so the batch's offsets and header stay (a
	// raft partition's batches are its raft entries).
	RetainEmpty bool
}

// CleanerTotals are the cleaner's counters since it started.
type CleanerTotals = partition.CleanerTotals

// Cleaner compacts the logs whose topic has cleanup.policy=compact, one
// log per thread at a time, the dirtiest first (Kafka's LogCleaner). Each
// pass is Log.clean.
type Cleaner struct {
	cfg      CleanerConfig
	throttle *throttler
	stop     chan struct{}
	wg       sync.WaitGroup

	mu   sync.Mutex
	busy map[*Log]bool

	passes, segments, errs        atomic.Int64
	bytesRead, bytesWritten, gone atomic.Int64
	lastPassMs, maxDirtyPct       atomic.Int64
	lastPassRead, lastPassWritten atomic.Int64
	started                       atomic.Bool
}

// NewCleaner returns a cleaner; Start runs it.
func NewCleaner(cfg CleanerConfig) *Cleaner {
	if cfg.Threads <= 0 {
		cfg.Threads = 1
	}
	if cfg.DedupeBufferSize <= 0 {
		cfg.DedupeBufferSize = 128 << 20
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 15 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Cleaner{
		cfg:      cfg,
		throttle: newThrottler(cfg.IOMaxBytesPerSecond),
		stop:     make(chan struct{}),
		busy:     map[*Log]bool{},
	}
}

// Start runs the cleaner threads until Close.
func (c *Cleaner) Start() {
	if c.started.Swap(true) {
		return
	}
	per := c.cfg.DedupeBufferSize / int64(c.cfg.Threads)
	for i := 0; i < c.cfg.Threads; i++ {
		c.wg.Add(1)
		go c.run(newOffsetMap(per))
	}
}

// Close stops the threads, cutting a running pass short (a pass stopped
// part-way leaves every segment either cleaned or as it was).
func (c *Cleaner) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
}

func (c *Cleaner) run(m *offsetMap) {
	defer c.wg.Done()
	for {
		worked := c.CleanOnce(m)
		if !worked {
			select {
			case <-c.stop:
				return
			case <-time.After(c.cfg.Backoff):
			}
		}
		select {
		case <-c.stop:
			return
		default:
		}
	}
}

// CleanOnce cleans the dirtiest log that needs it with m (a new map of
// the thread's share of the dedupe buffer if nil) and reports whether
// there was one.
func (c *Cleaner) CleanOnce(m *offsetMap) bool {
	if m == nil {
		m = newOffsetMap(c.cfg.DedupeBufferSize / int64(c.cfg.Threads))
	}
	now := c.cfg.Now()
	t, ok := c.grab(now)
	if !ok {
		return false
	}
	defer func() {
		c.mu.Lock()
		delete(c.busy, t.Log)
		c.mu.Unlock()
	}()
	start := time.Now()
	st, ok, err := t.Log.clean(cleanOptions{now: now, limit: limitOf(t), m: m, throttle: c.throttle, retainEmpty: t.RetainEmpty, stop: c.stop})
	c.bytesRead.Add(st.BytesRead)
	c.bytesWritten.Add(st.BytesWritten)
	c.gone.Add(st.RecordsGone)
	c.segments.Add(int64(st.Segments))
	c.lastPassRead.Store(st.BytesRead)
	c.lastPassWritten.Store(st.BytesWritten)
	switch {
	case errors.Is(err, errCleanAborted), errors.Is(err, ErrClosed):
	case err != nil:
		c.errs.Add(1)
		c.cfg.Logger.Error().Err(err).Str("log_dir", t.Log.dir).Msg("log cleaning failed")
	case ok:
		c.passes.Add(1)
		c.lastPassMs.Store(time.Since(start).Milliseconds())
		c.cfg.Logger.Info().Str("log_dir", t.Log.dir).Int("segments", st.Segments).
			Int64("first_dirty", st.FirstDirty).Int64("cleaned_to", st.CleanedTo).
			Float64("dirty_ratio", st.DirtyRatio).Bool("max_lag", st.MaxLagReached).
			Int64("bytes_read", st.BytesRead).Int64("bytes_written", st.BytesWritten).
			Int64("records_removed", st.RecordsGone).Dur("took", time.Since(start)).
			Msg("cleaned log")
	}
	return ok
}

func limitOf(t CleanTarget) int64 {
	if t.Limit == nil {
		return math.MaxInt64
	}
	return t.Limit()
}

// grab picks the log to clean: one past max.compaction.lag.ms first, else
// the one with the highest dirty ratio at or over its
// min.cleanable.dirty.ratio, skipping logs another thread is cleaning.
func (c *Cleaner) grab(now time.Time) (CleanTarget, bool) {
	if c.cfg.Targets == nil {
		return CleanTarget{}, false
	}
	targets := c.cfg.Targets()
	c.mu.Lock()
	defer c.mu.Unlock()
	var best CleanTarget
	bestRatio, bestMust, found := -1.0, false, false
	maxRatio := 0.0
	for _, t := range targets {
		if t.Log == nil || c.busy[t.Log] {
			continue
		}
		ratio, must, ok := t.Log.cleanable(now, limitOf(t))
		if !ok {
			continue
		}
		maxRatio = max(maxRatio, ratio)
		if (must && !bestMust) || (must == bestMust && ratio > bestRatio) {
			best, bestRatio, bestMust, found = t, ratio, must, true
		}
	}
	c.maxDirtyPct.Store(int64(maxRatio * 100))
	if found {
		c.busy[best.Log] = true
	}
	return best, found
}

// Totals returns the cleaner's counters.
func (c *Cleaner) Totals() CleanerTotals {
	return CleanerTotals{
		Passes: c.passes.Load(), Segments: c.segments.Load(), Errors: c.errs.Load(),
		BytesRead: c.bytesRead.Load(), BytesWritten: c.bytesWritten.Load(), RecordsGone: c.gone.Load(),
		LastPassMillis: c.lastPassMs.Load(), MaxDirtyRatioPercent: c.maxDirtyPct.Load(),
		BytesReadLastPass: c.lastPassRead.Load(), BytesWrittenLastPass: c.lastPassWritten.Load(),
	}
}

// throttler limits the cleaner's I/O to a rate shared by its threads
// (Kafka's Throttler): it sleeps whoever is ahead of the rate over the
// current one-second window.
type throttler struct {
	rate  float64 // bytes per second; 0 unlimited
	mu    sync.Mutex
	start time.Time
	bytes float64
}

func newThrottler(rate float64) *throttler {
	if rate <= 0 || math.IsInf(rate, 1) || rate >= math.MaxFloat64 {
		rate = 0
	}
	return &throttler{rate: rate}
}

// wait accounts n bytes and sleeps until the rate allows them, or stop.
func (t *throttler) wait(n int64, stop <-chan struct{}) {
	if t == nil || t.rate == 0 || n <= 0 {
		return
	}
	t.mu.Lock()
	now := time.Now()
	if t.start.IsZero() || now.Sub(t.start) > time.Second {
		t.start, t.bytes = now, 0
	}
	t.bytes += float64(n)
	due := t.start.Add(time.Duration(t.bytes / t.rate * float64(time.Second)))
	t.mu.Unlock()
	if d := due.Sub(now); d > 0 {
		select {
		case <-time.After(d):
		case <-stop:
		}
	}
}
