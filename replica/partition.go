package replica

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/partition"
)

// Partition is one hosted partition.
type Partition struct {
	Topic   string
	TopicID [16]byte
	Index   int32

	log    *log.Log
	dir    string
	logger zerolog.Logger

	// appendMu serialises appends so dedupe, offset assignment and the
	// write happen as one step per partition.
	appendMu sync.Mutex

	hw       atomic.Int64
	mu       sync.Mutex
	notify   chan struct{} // closed and replaced when hw moves or the partition closes
	watchers map[chan<- struct{}]struct{}

	leaderEpoch int32

	kick   chan struct{} // wakes the watermark follower
	done   chan struct{}
	closed atomic.Bool
	wg     sync.WaitGroup
}

// ErrPartitionClosed: the partition was closed or its topic deleted.
var ErrPartitionClosed = partition.ErrPartitionClosed

func newPartition(l *log.Log, topic string, id [16]byte, index int32, logger zerolog.Logger) *Partition {
	p := &Partition{
		Topic: topic, TopicID: id, Index: index,
		log:    l,
		logger: logger,
		notify: make(chan struct{}),
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	// Everything that survived recovery was durable or is about to be
	// made so; the follower below confirms it before exposing it.
	p.hw.Store(l.LogStartOffset())
	p.wg.Add(1)
	go p.followDurability()
	p.kickFollower()
	return p
}

// Append validates idempotence, assigns offsets and writes one batch
// (already checked by protocol.ParseBatch). It returns once the batch is
// written, not once it is committed; see WaitCommitted.
func (p *Partition) Append(batch []byte) (log.AppendResult, error) {
	return p.appendWith(func() (log.AppendResult, error) { return p.log.Append(batch) })
}

func (p *Partition) appendWith(appendFn func() (log.AppendResult, error)) (log.AppendResult, error) {
	if p.closed.Load() {
		return log.AppendResult{}, ErrPartitionClosed
	}
	p.appendMu.Lock()
	res, err := appendFn()
	p.appendMu.Unlock()
	if err == nil {
		p.kickFollower()
	}
	return res, err
}

func (p *Partition) kickFollower() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// followDurability advances the high watermark to the durable end of the
// log. One goroutine per partition: with group commit, every WaitDurable
// issued while a flush is running is released by the next one.
func (p *Partition) followDurability() {
	defer p.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-p.done
		cancel()
	}()
	for {
		select {
		case <-p.done:
			return
		case <-p.kick:
		}
		for {
			end := p.log.LogEndOffset()
			if end <= p.hw.Load() {
				break
			}
			if err := p.log.WaitDurable(ctx, end); err != nil {
				if ctx.Err() == nil {
					p.logger.Error().Err(err).Msg("waiting for durability failed")
				}
				return
			}
			p.setHW(end)
		}
	}
}

func (p *Partition) setHW(o int64) {
	p.mu.Lock()
	if o > p.hw.Load() {
		p.hw.Store(o)
		close(p.notify)
		p.notify = make(chan struct{})
		p.signalWatchersLocked()
	}
	p.mu.Unlock()
}

func (p *Partition) signalWatchersLocked() {
	for ch := range p.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Watch sends on ch (without blocking; give it a buffer of one) whenever
// the high watermark moves or the partition closes, until the returned
// function is called. One channel can watch many partitions, which is how
// a Fetch long-poll waits on all of its partitions at once.
func (p *Partition) Watch(ch chan<- struct{}) (stop func()) {
	p.mu.Lock()
	if p.watchers == nil {
		p.watchers = make(map[chan<- struct{}]struct{})
	}
	p.watchers[ch] = struct{}{}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.watchers, ch)
		p.mu.Unlock()
	}
}

// Changed returns a channel closed at the next high watermark move (or
// when the partition closes). Take it before checking the state it guards.
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.notify
}

// WaitCommitted blocks until every offset below end is committed.
func (p *Partition) WaitCommitted(ctx context.Context, end int64) error {
	for {
		ch := p.Changed()
		if p.hw.Load() >= end {
			return nil
		}
		if p.closed.Load() {
			return ErrPartitionClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// HighWatermark is the end of the committed prefix.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// LastStableOffset is the high watermark or, if lower, the first offset
// of the earliest open transaction (KIP-98): read_committed consumers
// read below it.
func (p *Partition) LastStableOffset() int64 { return lastStable(p.hw.Load(), p.log) }

// lastStable bounds hw by the log's first unstable offset. The watermark
// is loaded first: the log may only have moved on since.
func lastStable(hw int64, l *log.Log) int64 {
	if f := l.FirstUnstableOffset(); f >= 0 && f < hw {
		return f
	}
	return hw
}

// LogStartOffset is the first offset still stored.
func (p *Partition) LogStartOffset() int64 { return p.log.LogStartOffset() }

// LogEndOffset is the next offset to be assigned.
func (p *Partition) LogEndOffset() int64 { return p.log.LogEndOffset() }

// LeaderEpoch is the partition's current leader epoch (0 until raft
// terms arrive).
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch }

// ReadRange returns committed batches from offset below upTo (at most the
// high watermark) as a file range (log.Log.ReadRange).
func (p *Partition) ReadRange(offset int64, maxBytes int, upTo int64) (log.RangeResult, error) {
	return p.log.ReadRange(offset, maxBytes, min(upTo, p.hw.Load()))
}

// Read returns whole committed batches from offset (see log.Log.Read).
func (p *Partition) Read(offset int64, maxBytes int) (log.ReadResult, error) {
	return p.log.Read(offset, maxBytes, p.hw.Load())
}

// Log exposes the underlying log for lookups that need no commit bound
// (timestamps, leader epochs, producer state).
func (p *Partition) Log() *log.Log { return p.log }

// Storage is the partition's log as partition.Storage.
func (p *Partition) Storage() partition.Storage { return p.log }

func (p *Partition) close() error {
	if p.closed.Swap(true) {
		return nil
	}
	close(p.done)
	p.wg.Wait()
	p.mu.Lock()
	close(p.notify)
	p.notify = make(chan struct{})
	p.signalWatchersLocked()
	p.mu.Unlock()
	return p.log.Close()
}

// Propose appends batch and returns a proposal that is answered as acks
// asks: at once for acks 0 and 1 (the batch is written), once it is
// committed for acks=all. The same shape as Replica.Propose, so the broker
// produces to both the same way.
func (p *Partition) Propose(batch []byte, acks Acks) (partition.Proposal, error) {
	res, err := p.Append(batch)
	if err != nil {
		return nil, err
	}
	return p.proposal(res, acks), nil
}

// ProposeMarker is Propose for a transaction marker a coordinator sent
// with transaction version txnVersion (log.Log.AppendMarker's checks).
func (p *Partition) ProposeMarker(batch []byte, txnVersion int8, acks Acks) (partition.Proposal, error) {
	res, err := p.appendWith(func() (log.AppendResult, error) { return p.log.AppendMarker(batch, txnVersion) })
	if err != nil {
		return nil, err
	}
	return p.proposal(res, acks), nil
}

func (p *Partition) proposal(res log.AppendResult, acks Acks) *Proposal {
	prop := &Proposal{res: ProduceResult{BaseOffset: res.BaseOffset, LastOffset: res.LastOffset, Duplicate: res.Duplicate}}
	end := res.LastOffset + 1
	prop.wait = func(ctx context.Context) error {
		if acks != AcksAll {
			return nil
		}
		return p.WaitCommitted(ctx, end)
	}
	return prop
}

// OffsetForLeaderEpoch is the end offset of a leader epoch (KIP-320).
func (p *Partition) OffsetForLeaderEpoch(epoch int32) (int64, int32) {
	return p.log.OffsetForLeaderEpoch(epoch)
}

// ApplyRetention deletes segments past the partition's retention.
func (p *Partition) ApplyRetention(now time.Time) (int, error) { return p.log.ApplyRetention(now) }

// IsLeader is always true: a local partition is its only replica.
func (p *Partition) IsLeader() bool { return true }

// DeleteRecords moves the log start to offset (DeleteRecords on the only
// replica): offset must be at most the high watermark
// (log.ErrOffsetOutOfRange otherwise). It returns the new log start. The
// same shape as Replica.DeleteRecords.
func (p *Partition) DeleteRecords(_ context.Context, offset int64) (int64, error) {
	if p.closed.Load() {
		return 0, ErrPartitionClosed
	}
	if hw := p.hw.Load(); offset > hw || offset < 0 {
		return 0, fmt.Errorf("%w: offset %d, high watermark %d", log.ErrOffsetOutOfRange, offset, hw)
	}
	// appendMu: the log start never moves under an append's dedupe check.
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.log.DeleteRecordsBefore(offset); err != nil {
		return 0, err
	}
	return p.log.LogStartOffset(), nil
}
