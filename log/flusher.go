package log

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// FlushPolicy says when appended data is made durable.
type FlushPolicy int

const (
	// FlushGroup syncs as soon as there is dirty data: a round takes every
	// log appended to since the last round, syncs them concurrently, and
	// releases every waiter whose append was queued before the round began.
	// Appends that arrive during a round are synced by the next one, so
	// under load one fdatasync per log covers many producers' batches.
	FlushGroup FlushPolicy = iota
	// FlushInterval syncs dirty logs every Interval, like Kafka's flush.ms.
	FlushInterval
	// FlushNever leaves data in the page cache: WaitDurable returns at once.
	// Segments are still synced on roll and Close. For benchmarks only.
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
}

// Flusher is the broker-wide group-commit flusher shared by every Log opened
// with it. It owns one goroutine between Start and Close, plus up to
// MaxConcurrent short-lived ones during a round. A failed sync fails only
// the log it belongs to (see ErrFatal); the Flusher goes on with the others.
type Flusher struct {
	cfg FlusherConfig
	lg  zerolog.Logger

	mu    sync.Mutex
	dirty []*Log

	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	state  atomic.Int32 // 0 new, 1 running, 2 closed
	once   sync.Once
	rounds atomic.Int64
	syncs  atomic.Int64
}

// FlusherStats are cumulative counters.
type FlusherStats struct {
	Rounds int64 // flush rounds that synced at least one log
	Syncs  int64 // log syncs attempted
}

// NewFlusher returns a Flusher that does nothing until Start.
func NewFlusher(cfg FlusherConfig) *Flusher {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 64
	}
	return &Flusher{
		cfg:  cfg,
		lg:   cfg.Logger.With().Str("component", "log-flusher").Logger(),
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
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
	}
}

// Close runs a last round for everything dirty, stops the goroutine and
// waits for it. Waiters still blocked then sync their logs themselves.
func (f *Flusher) Close() error {
	f.once.Do(func() {
		if f.state.CompareAndSwap(0, 2) {
			close(f.done)
			return
		}
		close(f.stop)
		<-f.done
	})
	return nil
}

// Stats returns the counters so far.
func (f *Flusher) Stats() FlusherStats {
	return FlusherStats{Rounds: f.rounds.Load(), Syncs: f.syncs.Load()}
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
			// Stop taking work first: from now on waiters sync inline, and
			// this last round covers every log queued before.
			f.state.Store(2)
			f.round()
			return
		}
		f.round()
	}
}

// round syncs every log queued so far. Each log's queued flag is cleared
// before its sync reads the log end offset: an append that lands after that
// read finds the flag clear and queues the log for the next round, and one
// that lands before it is covered by this sync.
func (f *Flusher) round() {
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
	sem := make(chan struct{}, f.cfg.MaxConcurrent)
	var wg sync.WaitGroup
	for _, l := range logs {
		l.queued.Store(false)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			l.flush()
		}()
	}
	wg.Wait()
}
