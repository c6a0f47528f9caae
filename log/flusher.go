package log

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// FlushPolicy says when appended data is made durable.
type FlushPolicy int

const (
	// FlushGroup syncs as soon as there is dirty data and releases every
	// waiter whose append was queued before the round began; appends that
	// arrive during a round are synced by the next one. With a WAL
	// (FlusherConfig.Dir) a round is one fdatasync of the WAL for every
	// log's appends; without, it syncs each dirty log's segment,
	// concurrently, so one fdatasync per log covers many producers' batches.
	FlushGroup FlushPolicy = iota
	// FlushInterval syncs dirty logs every Interval, like Kafka's flush.ms.
	FlushInterval
	// FlushNever leaves data in the page cache: WaitDurable returns at once.
	// Segments are still synced on roll and Close. No WAL is written (a
	// WAL directory left by an earlier run is still replayed at Open).
	FlushNever
)

func (p FlushPolicy) String() string {
	switch p {
	case FlushGroup:
		return "group"
	case FlushInterval:
		return "interval"
	case FlushNever:
		return "never"
	}
	return "unknown"
}

// FlusherConfig configures the broker-wide Flusher.
type FlusherConfig struct {
	Policy FlushPolicy
	// Interval between rounds under FlushInterval (default 1s).
	Interval time.Duration
	// MaxConcurrent bounds the fdatasyncs in flight in one round (default
	// 64). Concurrent syncs of different files let the filesystem journal
	// commit them together; see the package documentation.
	MaxConcurrent int
	Logger        zerolog.Logger
	// Dir, when set, holds the broker-wide write-ahead log: every append
	// also goes to one shared WAL file, which is what a round syncs, and
	// segments are synced in the background (see the package
	// documentation). Empty keeps the per-partition segment syncs. Use a
	// directory of its own, outside every partition directory, and the same
	// one on every start: records not yet checkpointed are replayed from it
	// when their Log opens.
	Dir string
	// WALFileBytes is the size at which the WAL file is rotated (default
	// 64 MiB); rotated files are deleted once checkpointed.
	WALFileBytes int64
	// CacheTailBytes, when positive, is how much of each log's synced
	// active segment stays in the page cache: after a sync, the segment's
	// bytes further than that behind the synced end are dropped from the
	// cache (drop-behind, POSIX_FADV_DONTNEED), so appends reuse the pages
	// just freed instead of growing the cache with data nobody reads soon.
	// Readers within the tail (consumers keeping up, followers) still read
	// from memory; older data is read from disk. Zero keeps everything
	// cached. It takes effect only where logs are synced (not FlushNever).
	CacheTailBytes int64
}

// Flusher is the broker-wide group-commit flusher shared by every Log opened
// with it. It owns two goroutines between Start and Close (rounds, and WAL
// checkpoints), plus up to MaxConcurrent short-lived ones during a round or
// a checkpoint. A failed segment sync fails only the log it belongs to (see
// ErrFatal); the Flusher goes on with the others. A failed WAL write or sync
// fails every log that uses the WAL.
type Flusher struct {
	cfg FlusherConfig
	lg  zerolog.Logger

	mu    sync.Mutex
	dirty []*Log

	wal *wal  // nil without Dir
	err error // opening the WAL failed; Open of every Log fails with it

	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	ckpt     chan struct{}
	ckptDone chan struct{}
	state    atomic.Int32 // 0 new, 1 running, 2 closed, 3 abandoned (tests)
	once     sync.Once
	rounds   atomic.Int64
	syncs    atomic.Int64
}

// FlusherStats are cumulative counters.
type FlusherStats struct {
	Rounds int64 // flush rounds that synced at least one log (or the WAL)
	Syncs  int64 // log syncs attempted, WAL fdatasyncs included
	// With a WAL: segment syncs done to checkpoint rotated WAL files, WAL
	// files deleted, and record bytes written to the WAL.
	Checkpoints int64
	WALDeleted  int64
	WALBytes    int64
}

// NewFlusher returns a Flusher that does nothing until Start. With
// cfg.Dir it also opens the write-ahead log there, scanning the files an
// earlier process left for replay; if that fails, Err returns the error and
// so does every Open of a Log with this Flusher.
func NewFlusher(cfg FlusherConfig) *Flusher {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 64
	}
	f := &Flusher{
		cfg:      cfg,
		lg:       cfg.Logger.With().Str("component", "log-flusher").Logger(),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		ckpt:     make(chan struct{}, 1),
		ckptDone: make(chan struct{}),
	}
	if cfg.Dir != "" {
		w, err := openWAL(cfg.Dir, cfg.Policy != FlushNever, cfg.WALFileBytes, cfg.MaxConcurrent,
			cfg.Logger.With().Str("component", "log-wal").Logger())
		if err != nil {
			f.err = fmt.Errorf("log: opening the write-ahead log: %w", err)
		} else {
			f.wal = w
			w.running = f.running
			w.kick = f.kickNow
			w.ckptKick = func() {
				select {
				case f.ckpt <- struct{}{}:
				default:
				}
			}
		}
	}
	return f
}

// OpenFlusher is NewFlusher that returns the error of opening the WAL.
func OpenFlusher(cfg FlusherConfig) (*Flusher, error) {
	f := NewFlusher(cfg)
	return f, f.err
}

// Err is the error of opening the WAL, nil if there was none.
func (f *Flusher) Err() error { return f.err }

// ForgetUnopened drops the WAL records, left by an earlier process, of every
// log not opened since this Flusher was created, so that the WAL files kept
// for them can be deleted. Call it once every partition this broker hosts is
// open and the directories of deleted topics are removed: a log opened
// later gets no replay. It returns how many logs' records were dropped.
func (f *Flusher) ForgetUnopened() int {
	if f.wal == nil {
		return 0
	}
	return f.wal.forgetUnopened()
}

func (f *Flusher) kickNow() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Policy returns the configured policy.
func (f *Flusher) Policy() FlushPolicy { return f.cfg.Policy }

// Start launches the flusher goroutine. Until it runs, and after Close, logs
// that use this Flusher sync inline in WaitDurable. Start after Close does
// nothing.
func (f *Flusher) Start() {
	if f.state.CompareAndSwap(0, 1) {
		go f.run()
		go f.checkpointer()
	}
}

// Close runs a last round for everything dirty, stops the goroutine and
// waits for it. Waiters still blocked then sync their logs themselves.
//
// With a WAL, Close then stops taking WAL records: logs still open make
// their later appends durable by syncing their own segments. WAL files that
// hold nothing needed are deleted (all of them when every log was closed
// first), and the directory lock is released.
func (f *Flusher) Close() error {
	var err error
	f.once.Do(func() {
		if f.state.CompareAndSwap(0, 2) {
			close(f.done)
			close(f.ckptDone)
		} else {
			close(f.stop)
			<-f.done
			<-f.ckptDone
		}
		if f.wal != nil {
			err = f.wal.close()
			f.wal.release()
		}
	})
	return err
}

// abandon stops the goroutines and closes the WAL's files without a final
// round or deleting anything: what a killed process leaves. For tests.
func (f *Flusher) abandon() {
	f.once.Do(func() {
		if f.state.CompareAndSwap(0, 2) {
			close(f.done)
			close(f.ckptDone)
		} else {
			f.state.Store(3) // run returns without a last round
			close(f.stop)
			<-f.done
			<-f.ckptDone
		}
		if f.wal != nil {
			f.wal.mu.Lock()
			f.wal.closed = true
			f.wal.buf = nil
			f.wal.bufLen.Store(0)
			f.wal.mu.Unlock()
			f.wal.release()
		}
	})
}

// Stats returns the counters so far.
func (f *Flusher) Stats() FlusherStats {
	s := FlusherStats{Rounds: f.rounds.Load(), Syncs: f.syncs.Load()}
	if w := f.wal; w != nil {
		w.mu.Lock()
		s.Rounds += w.stats.rounds
		s.Syncs += w.stats.syncs
		s.Checkpoints = w.stats.checkpoints
		s.WALDeleted = w.stats.deleted
		s.WALBytes = w.stats.bytes
		w.mu.Unlock()
	}
	return s
}

func (f *Flusher) running() bool { return f.state.Load() == 1 }

func (f *Flusher) add(l *Log) {
	f.mu.Lock()
	f.dirty = append(f.dirty, l)
	f.mu.Unlock()
	if f.cfg.Policy == FlushGroup {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

func (f *Flusher) run() {
	defer close(f.done)
	var tick <-chan time.Time
	if f.cfg.Policy == FlushInterval {
		t := time.NewTicker(f.cfg.Interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-f.kick:
		case <-tick:
		case <-f.stop:
			if f.state.Load() == 3 {
				return
			}
			// Stop taking work first: from now on waiters sync inline, and
			// this last round covers every log queued before.
			f.state.Store(2)
			f.round()
			return
		}
		f.round()
	}
}

// checkpointer syncs the segments of logs with records in rotated WAL files
// when a rotation asks for it, so those files can be deleted.
func (f *Flusher) checkpointer() {
	defer close(f.ckptDone)
	for {
		select {
		case <-f.ckpt:
			if f.wal != nil {
				f.wal.checkpoint()
			}
		case <-f.stop:
			return
		}
	}
}

// round syncs every log queued so far. Each log's queued flag is cleared
// before its sync reads the log end offset: an append that lands after that
// read finds the flag clear and queues the log for the next round, and one
// that lands before it is covered by this sync.
func (f *Flusher) round() {
	if f.wal != nil {
		f.wal.sync()
	}
	f.mu.Lock()
	logs := f.dirty
	f.dirty = nil
	f.mu.Unlock()
	if len(logs) == 0 {
		return
	}
	f.rounds.Add(1)
	f.syncs.Add(int64(len(logs)))
	if len(logs) == 1 {
		logs[0].queued.Store(false)
		logs[0].flush()
		return
	}
	for _, l := range logs {
		l.queued.Store(false)
	}
	flushAll(logs, f.cfg.MaxConcurrent)
}
