package shared

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/objstore"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

const (
	// refreshEvery is how stale a reader's view of the high watermark may
	// get before a read asks the metastore again, and how often a reader
	// with waiting fetches polls it.
	refreshEvery = 100 * time.Millisecond
	// rebuildOffsets and rebuildBytes bound the tail a new writer reads
	// to rebuild the idempotent producer table.
	rebuildOffsets = 1 << 20
	rebuildBytes   = 64 << 20
	// lookupChunks is how many chunks one metastore lookup fetches.
	lookupChunks = 64
)

// maxKnownChunks bounds the chunk entries a partition keeps after looking
// them up (some 100 bytes each): a reader walking a long history keeps a
// window around where it reads, and looks up again what fell out of it.
// A variable for tests.
var maxKnownChunks = 4096

// Partition is one shared-mode partition on this broker: its writer when
// this broker holds the partition's claim, a reader otherwise. It
// implements partition.Partition and partition.Storage.
type Partition struct {
	h     *Host
	topic string
	key   partition.Key

	// wmu guards the writer state; taken before mu and before the
	// host's bufMu.
	wmu       sync.Mutex
	writer    bool
	gen       uint64 // bumped by every claim and reset
	epoch     int32
	next      int64 // the next offset to assign
	producers map[int64]*log.ProducerEntry
	inflight  []*pending // accepted, not committed, in offset order
	// txns tracks the transactions of every accepted batch, cutTxns
	// those of the batches cut into objects so far (txn.go).
	txns, cutTxns *log.TxnTracker
	dups          []dupWait // retries answered once their original commits
	// compactFrom is where the compactor's next pass starts, for writer
	// generation compactGen (compact.go).
	compactGen  uint64
	compactFrom int64

	// mu guards the read state.
	mu         sync.Mutex
	start      int64
	end        int64 // the committed end offset (high watermark) as last seen
	refreshed  time.Time
	chunks     []metastore.SharedChunk // known chunks, sorted by base offset
	lso, lsoAt int64                   // the last stable offset last read, at high watermark lsoAt
	watchers   map[chan<- struct{}]struct{}
	polling    bool
	closed     bool
}

type dupWait struct {
	last int64
	res  partition.ProduceResult
	prop *proposal
}

var (
	_ partition.Partition = (*Partition)(nil)
	_ partition.Storage   = (*Partition)(nil)
)

func newPartition(h *Host, topic string, k partition.Key) *Partition {
	return &Partition{h: h, topic: topic, key: k, watchers: map[chan<- struct{}]struct{}{}}
}

// ---- proposals ----

type proposal struct {
	done chan struct{}
	once sync.Once
	res  partition.ProduceResult
	err  error
}

func newProposal() *proposal { return &proposal{done: make(chan struct{})} }

func (p *proposal) finish(res partition.ProduceResult, err error) {
	p.once.Do(func() {
		p.res, p.err = res, err
		close(p.done)
	})
}

func (p *proposal) Wait(ctx context.Context) (partition.ProduceResult, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return partition.ProduceResult{}, ctx.Err()
	}
}

func (p *proposal) Done() <-chan struct{} { return p.done }

var released = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// BatchReleased is closed at once: Propose copies the batch.
func (p *proposal) BatchReleased() <-chan struct{} { return released }

// ---- Writer ----

// Propose accepts one validated batch: it claims the partition first if
// this broker is not its writer yet (and may be), checks the idempotent
// producer's sequence, assigns the batch its offsets and queues it for
// upload. The proposal is answered once the batch's object is committed
// in the metastore, whatever acks asks.
func (p *Partition) Propose(batch []byte, acks partition.Acks) (partition.Proposal, error) {
	return p.propose(batch, 0)
}

// ProposeMarker is Propose for a transaction marker a coordinator sent
// with transaction version txnVersion: the producer's epoch and last
// coordinator epoch are checked by the log's rules
// (log.ProducerEntry.CheckMarker).
func (p *Partition) ProposeMarker(batch []byte, txnVersion int8, acks partition.Acks) (partition.Proposal, error) {
	return p.propose(batch, txnVersion)
}

func (p *Partition) propose(batch []byte, txnVersion int8) (partition.Proposal, error) {
	var hd protocol.BatchHeader
	if err := hd.Decode(batch); err != nil {
		return nil, fmt.Errorf("%w: %v", partition.ErrCorrupt, err)
	}
	if int64(len(batch)) != hd.Size {
		return nil, fmt.Errorf("%w: batch length %d, %d bytes", partition.ErrCorrupt, hd.Size, len(batch))
	}
	// Room in the upload budget is reserved before the writer lock is
	// taken (the committer that makes room needs it), and given back
	// unless the batch is queued.
	size := int64(len(batch))
	if err := p.h.admit(size); err != nil {
		return nil, err
	}
	queued := false
	defer func() {
		if !queued {
			p.h.release(size)
		}
	}()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if !p.writer {
		if err := p.claimLocked(); err != nil {
			return nil, err
		}
	}
	coordEpoch := int32(-1)
	if hd.ProducerID >= 0 {
		e := p.producers[hd.ProducerID]
		if hd.IsControl() {
			coordEpoch = log.MarkerCoordEpoch(batch, &hd)
			if err := e.CheckMarker(&hd, coordEpoch, txnVersion); err != nil {
				return nil, err
			}
		} else {
			dup, isDup, err := e.Check(&hd)
			if err != nil {
				return nil, err
			}
			if isDup {
				res := partition.ProduceResult{BaseOffset: dup.FirstOffset, LastOffset: dup.LastOffset, Duplicate: true}
				prop := newProposal()
				p.mu.Lock()
				committed := dup.LastOffset < p.end
				p.mu.Unlock()
				if committed {
					prop.finish(res, nil)
				} else {
					p.dups = append(p.dups, dupWait{last: dup.LastOffset, res: res, prop: prop})
				}
				return prop, nil
			}
		}
	}
	b := slices.Clone(batch)
	base := p.next
	protocol.Batch(b).SetBaseOffset(base)
	protocol.Batch(b).SetLeaderEpoch(p.epoch)
	hd.BaseOffset, hd.LeaderEpoch = base, p.epoch
	if hd.ProducerID >= 0 {
		p.producers[hd.ProducerID] = p.producers[hd.ProducerID].Update(&hd, coordEpoch)
	}
	txn := hd.ProducerID >= 0 && hd.IsTransactional()
	if txn {
		p.txns.Apply(b, &hd)
	}
	pd := &pending{p: p, gen: p.gen, epoch: p.epoch, batch: b, size: size, base: base, last: hd.LastOffset(),
		maxTs: hd.MaxTimestamp, prop: newProposal(), hd: hd, txn: txn}
	p.next = pd.last + 1
	p.inflight = append(p.inflight, pd)
	queued = p.h.enqueue(pd)
	return pd.prop, nil
}

// tryClaim claims the partition if it is not written here yet (Open, and
// the leadership check).
func (p *Partition) tryClaim() {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if !p.writer {
		if err := p.claimLocked(); err != nil && !errors.Is(err, partition.ErrNotLeader) {
			p.h.cfg.Logger.Warn().Err(err).Str("topic", p.topic).Int32("partition", p.key.Index).Msg("claiming shared partition")
		}
	}
}

// checkLeadership claims the partition when its leader is gone and steps
// down when another broker claimed it.
func (p *Partition) checkLeadership() {
	t, ok := p.h.cfg.Catalog.TopicByID(p.key.TopicID)
	if !ok || int(p.key.Index) >= len(t.Partitions) {
		return
	}
	mp := t.Partitions[p.key.Index]
	p.wmu.Lock()
	writer, epoch, gen := p.writer, p.epoch, p.gen
	p.wmu.Unlock()
	if writer && mp.LeaderEpoch > epoch {
		p.reset(gen, fmt.Errorf("%w: broker %d claimed the partition in epoch %d", partition.ErrNotLeader, mp.Leader, mp.LeaderEpoch))
		return
	}
	if !writer && p.h.shouldClaim(p.key) {
		p.tryClaim()
	}
}

// claimLocked makes this broker the partition's writer: a claim in the
// metastore (refused unless this broker may lead it), then the committed
// end offset, read after the claim fenced every earlier writer, and the
// producer table rebuilt from the partition's tail.
func (p *Partition) claimLocked() error {
	h := p.h
	if !h.shouldClaim(p.key) {
		return fmt.Errorf("%w: another broker leads the shared partition", partition.ErrNotLeader)
	}
	t, _ := h.cfg.Catalog.TopicByID(p.key.TopicID)
	cur := t.Partitions[p.key.Index].LeaderEpoch
	ctx, cancel := h.ctx()
	defer cancel()
	epoch, err := h.cfg.Catalog.ClaimSharedLeader(ctx, h.fence(), t.Name, p.key.Index, cur)
	if err != nil {
		return fmt.Errorf("%w: claiming the shared partition: %v", partition.ErrNotLeader, err)
	}
	sp, err := h.cfg.Catalog.SharedChunks(ctx, p.key.TopicID, p.key.Index, 0, 1)
	if err != nil {
		return fmt.Errorf("%w: reading the shared partition's end: %v", partition.ErrNotLeader, err)
	}
	producers, err := p.rebuildProducers(ctx, sp)
	if err != nil {
		return fmt.Errorf("%w: rebuilding producer state: %v", partition.ErrNotLeader, err)
	}
	open, err := p.openAtEnd(ctx, sp)
	if err != nil {
		return fmt.Errorf("%w: reading open transactions: %v", partition.ErrNotLeader, err)
	}
	p.gen++
	p.writer, p.epoch, p.next, p.producers = true, epoch, sp.EndOffset, producers
	p.txns, p.cutTxns = log.NewTxnTracker(open), log.NewTxnTracker(open)
	p.mu.Lock()
	p.end, p.refreshed = sp.EndOffset, time.Now()
	p.setStartLocked(sp.StartOffset)
	p.mu.Unlock()
	h.cfg.Logger.Info().Str("topic", p.topic).Int32("partition", p.key.Index).Int32("epoch", epoch).
		Int64("end_offset", sp.EndOffset).Msg("leading shared partition")
	return nil
}

// rebuildProducers replays the batch headers of the partition's tail
// (at most rebuildOffsets offsets and rebuildBytes bytes before the end)
// through the log's producer rules.
func (p *Partition) rebuildProducers(ctx context.Context, sp metastore.SharedPartition) (map[int64]*log.ProducerEntry, error) {
	out := map[int64]*log.ProducerEntry{}
	from := max(sp.StartOffset, sp.EndOffset-rebuildOffsets)
	read := int64(0)
	for from < sp.EndOffset && read < rebuildBytes {
		page, err := p.h.cfg.Catalog.SharedChunks(ctx, p.key.TopicID, p.key.Index, from, lookupChunks)
		if err != nil {
			return nil, err
		}
		if len(page.Chunks) == 0 {
			break
		}
		for _, ch := range page.Chunks {
			data, err := p.h.chunkBytes(ctx, ch)
			if err != nil {
				return nil, err
			}
			read += int64(len(data))
			if err := walkBatches(data, func(hd *protocol.BatchHeader, b []byte) bool {
				if hd.ProducerID >= 0 && hd.LastOffset() >= from {
					out[hd.ProducerID] = out[hd.ProducerID].Update(hd, log.MarkerCoordEpoch(b, hd))
				}
				return true
			}); err != nil {
				return nil, err
			}
			from = ch.LastOffset + 1
		}
	}
	return out, nil
}

// writing says whether writer generation gen is still this partition's.
func (p *Partition) writing(gen uint64) bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.writer && p.gen == gen
}

// reset ends writer generation gen (a failed upload or commit, a lost
// claim): every batch it accepted and not yet committed, and every retry
// waiting on one, is answered with err.
func (p *Partition) reset(gen uint64, err error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if gen != p.gen || !p.writer {
		return
	}
	p.gen++
	p.writer, p.producers, p.txns, p.cutTxns = false, nil, nil, nil
	for _, pd := range p.inflight {
		pd.prop.finish(partition.ProduceResult{}, err)
	}
	for _, d := range p.dups {
		d.prop.finish(partition.ProduceResult{}, err)
	}
	p.inflight, p.dups = nil, nil
	p.h.cfg.Logger.Info().Err(err).Str("topic", p.topic).Int32("partition", p.key.Index).Msg("no longer writing shared partition")
}

// committed records chunk ch, holding pds, as committed: it moves the
// high watermark and answers the batches.
func (p *Partition) committed(ch metastore.SharedChunk, pds []*pending) {
	p.mu.Lock()
	if ch.LastOffset+1 > p.end {
		p.end = ch.LastOffset + 1
	}
	p.addChunksLocked([]metastore.SharedChunk{ch})
	end := p.end
	for w := range p.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
	p.wmu.Lock()
	if pds[0].gen == p.gen {
		i := 0
		for i < len(p.inflight) && p.inflight[i].last <= ch.LastOffset {
			i++
		}
		p.inflight = p.inflight[i:]
	}
	dups := p.dups[:0]
	for _, d := range p.dups {
		if d.last < end {
			d.prop.finish(d.res, nil)
		} else {
			dups = append(dups, d)
		}
	}
	p.dups = dups
	p.wmu.Unlock()
	for _, pd := range pds {
		pd.prop.finish(partition.ProduceResult{BaseOffset: pd.base, LastOffset: pd.last}, nil)
	}
}

func (p *Partition) close() {
	p.wmu.Lock()
	gen, writer := p.gen, p.writer
	p.wmu.Unlock()
	if writer {
		p.reset(gen, partition.ErrPartitionClosed)
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// ---- Reader ----

// refresh reads the partition's offsets from the metastore unless this
// broker writes it (its view is the metastore's then) or it read them
// within maxAge.
func (p *Partition) refresh(maxAge time.Duration) {
	p.wmu.Lock()
	writer := p.writer
	p.wmu.Unlock()
	if writer {
		return
	}
	p.mu.Lock()
	fresh := time.Since(p.refreshed) < maxAge
	p.mu.Unlock()
	if fresh {
		return
	}
	ctx, cancel := p.h.ctx()
	defer cancel()
	sp, err := p.h.cfg.Catalog.SharedChunks(ctx, p.key.TopicID, p.key.Index, 0, 1)
	if err != nil {
		return // the last view stands
	}
	p.mu.Lock()
	moved := sp.EndOffset > p.end
	if moved {
		p.end = sp.EndOffset
	}
	p.refreshed = time.Now()
	p.setStartLocked(sp.StartOffset)
	if moved {
		for w := range p.watchers {
			select {
			case w <- struct{}{}:
			default:
			}
		}
	}
	p.mu.Unlock()
}

func (p *Partition) HighWatermark() int64 {
	p.refresh(refreshEvery)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.end
}

func (p *Partition) LogStartOffset() int64 {
	p.refresh(refreshEvery)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start
}

// LogEndOffset is the high watermark: nothing uncommitted is readable.
func (p *Partition) LogEndOffset() int64 { return p.HighWatermark() }

// LeaderEpoch is the epoch this broker writes in, or the one the
// metastore names.
func (p *Partition) LeaderEpoch() int32 {
	p.wmu.Lock()
	writer, epoch := p.writer, p.epoch
	p.wmu.Unlock()
	if writer {
		return epoch
	}
	if t, ok := p.h.cfg.Catalog.TopicByID(p.key.TopicID); ok && int(p.key.Index) < len(t.Partitions) {
		return t.Partitions[p.key.Index].LeaderEpoch
	}
	return 0
}

func (p *Partition) IsLeader() bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.writer
}

// OffsetForLeaderEpoch: a shared partition is never truncated, so the
// end of any epoch up to the current one is at most the high watermark,
// which is what is answered.
func (p *Partition) OffsetForLeaderEpoch(epoch int32) (int64, int32) {
	if epoch > p.LeaderEpoch() {
		return -1, -1
	}
	return p.HighWatermark(), epoch
}

func (p *Partition) Storage() partition.Storage { return p }

// Watch signals ch when the high watermark moves. On a broker that does
// not write the partition, a poll of the metastore runs while anyone
// watches.
func (p *Partition) Watch(ch chan<- struct{}) (stop func()) {
	p.mu.Lock()
	p.watchers[ch] = struct{}{}
	startPoll := !p.polling
	p.polling = true
	p.mu.Unlock()
	if startPoll {
		go p.poll()
	}
	return func() {
		p.mu.Lock()
		delete(p.watchers, ch)
		p.mu.Unlock()
	}
}

func (p *Partition) poll() {
	t := time.NewTicker(refreshEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.h.stop:
			p.mu.Lock()
			p.polling = false
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		if len(p.watchers) == 0 || p.closed {
			p.polling = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.refresh(refreshEvery)
	}
}

// Read returns whole committed batches from offset.
func (p *Partition) Read(offset int64, maxBytes int) (partition.ReadResult, error) {
	hw := p.HighWatermark()
	data, next, err := p.read(offset, maxBytes, hw)
	if err != nil {
		return partition.ReadResult{}, err
	}
	p.mu.Lock()
	start := p.start
	p.mu.Unlock()
	return partition.ReadResult{Data: data, NextOffset: next, LogStartOffset: start, LogEndOffset: hw}, nil
}

// ReadRange is Read below upTo, as an in-memory range.
func (p *Partition) ReadRange(offset int64, maxBytes int, upTo int64) (partition.RangeResult, error) {
	hw := p.HighWatermark()
	data, next, err := p.read(offset, maxBytes, min(upTo, hw))
	if err != nil {
		return partition.RangeResult{}, err
	}
	p.mu.Lock()
	start := p.start
	p.mu.Unlock()
	return partition.RangeResult{Range: partition.NewMemRange(data), NextOffset: next, LogStartOffset: start, LogEndOffset: hw}, nil
}

// read gathers whole batches from offset below bound, at most maxBytes
// but at least one batch; next is the offset after the last.
func (p *Partition) read(offset int64, maxBytes int, bound int64) ([]byte, int64, error) {
	p.mu.Lock()
	start := p.start
	p.mu.Unlock()
	if offset < start || offset > bound && offset > p.HighWatermark() {
		return nil, offset, partition.ErrOffsetOutOfRange
	}
	var out []byte
	next := offset
	ctx, cancel := p.h.ctx()
	defer cancel()
	retried := false
	for next < bound {
		ch, err := p.chunkAt(ctx, next)
		if err != nil {
			return nil, offset, err
		}
		data, err := p.h.chunkBytes(ctx, ch)
		if errors.Is(err, objstore.ErrNotFound) && !retried {
			// The chunk known here was compacted into another object
			// since and its object collected: forget the known chunks
			// and look the offset up again, once.
			retried = true
			p.mu.Lock()
			p.chunks = nil
			p.mu.Unlock()
			continue
		}
		if err != nil {
			return nil, offset, err
		}
		full := false
		if err := walkBatches(data, func(hd *protocol.BatchHeader, b []byte) bool {
			if hd.LastOffset() < next {
				return true
			}
			if hd.BaseOffset >= bound {
				full = true
				return false
			}
			if len(out) > 0 && len(out)+len(b) > maxBytes {
				full = true
				return false
			}
			out = append(out, b...)
			next = hd.LastOffset() + 1
			return true
		}); err != nil {
			return nil, offset, err
		}
		if full || len(out) >= maxBytes {
			break
		}
		if next <= ch.LastOffset {
			// The chunk ended before its last offset: it is corrupt.
			return nil, offset, fmt.Errorf("%w: chunk %s@%d ends before offset %d", partition.ErrCorrupt, ch.Key, ch.Pos, ch.LastOffset)
		}
	}
	if next < bound {
		// Stopped by maxBytes inside the history: the next reads go on
		// from next.
		p.readAhead(next)
	}
	if out == nil {
		out = []byte{}
	}
	return out, next, nil
}

// chunkAt returns the committed chunk holding offset, from the known
// chunks or the metastore.
func (p *Partition) chunkAt(ctx context.Context, offset int64) (metastore.SharedChunk, error) {
	p.mu.Lock()
	ch, ok := p.floorLocked(offset)
	p.mu.Unlock()
	if ok {
		return ch, nil
	}
	sp, err := p.h.cfg.Catalog.SharedChunks(ctx, p.key.TopicID, p.key.Index, offset, lookupChunks)
	if err != nil {
		return metastore.SharedChunk{}, fmt.Errorf("%w: chunk lookup: %v", partition.ErrNotLeader, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addChunksLocked(sp.Chunks)
	if sp.EndOffset > p.end {
		p.end = sp.EndOffset
	}
	if ch, ok := p.floorLocked(offset); ok {
		return ch, nil
	}
	return metastore.SharedChunk{}, partition.ErrOffsetOutOfRange
}

func (p *Partition) floorLocked(offset int64) (metastore.SharedChunk, bool) {
	i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].BaseOffset > offset })
	if i == 0 {
		return metastore.SharedChunk{}, false
	}
	ch := p.chunks[i-1]
	return ch, offset <= ch.LastOffset
}

// addChunksLocked adds chunks the metastore answered (or this broker just
// committed). A known chunk overlapping one of them was replaced by it
// (the compactor merged it) and is forgotten. Past maxKnownChunks it keeps
// the window around the chunks just added, mostly after them (readers
// move forward), and forgets the rest: floorLocked checks that the chunk
// it finds holds the offset, so a chunk forgotten is looked up again.
func (p *Partition) addChunksLocked(chs []metastore.SharedChunk) {
	for _, ch := range chs {
		i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].LastOffset >= ch.BaseOffset })
		j := i
		for j < len(p.chunks) && p.chunks[j].BaseOffset <= ch.LastOffset {
			j++
		}
		if j == i+1 && p.chunks[i] == ch {
			continue
		}
		p.chunks = slices.Replace(p.chunks, i, j, ch)
	}
	if len(p.chunks) > maxKnownChunks && len(chs) > 0 {
		at := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].LastOffset >= chs[0].BaseOffset })
		lo := max(0, min(at-maxKnownChunks/4, len(p.chunks)-maxKnownChunks))
		p.chunks = slices.Clone(p.chunks[lo : lo+maxKnownChunks])
	}
}

// chunkBytes returns a chunk's bytes from the cache, memory then disk, or
// one ranged read (after the read-ahead of the chunk in flight, if there
// is one).
func (h *Host) chunkBytes(ctx context.Context, ch metastore.SharedChunk) ([]byte, error) {
	if b, ok := h.cache.get(ch.Key, ch.Pos); ok {
		h.memHits.Add(1)
		return b, nil
	}
	h.memMisses.Add(1)
	h.awaitReadahead(ctx, cacheKey{ch.Key, ch.Pos})
	return h.fetchChunk(ctx, ch)
}

// fetchChunk is chunkBytes without waiting for a read-ahead or counting
// memory hits. Readers of one chunk at once share one ranged read: the
// first reads, the others wait for its bytes (and read it themselves
// only if that read failed). A chunk read from disk or shared storage
// is kept in memory, and one read from shared storage is written to the
// disk tier too (in the background).
func (h *Host) fetchChunk(ctx context.Context, ch metastore.SharedChunk) ([]byte, error) {
	k := cacheKey{ch.Key, ch.Pos}
	for waited := false; ; waited = true {
		if b, ok := h.cache.get(ch.Key, ch.Pos); ok {
			return b, nil
		}
		if h.disk != nil {
			if b, ok := h.disk.get(ch); ok {
				h.cache.put(ch, b)
				return b, nil
			}
		}
		h.loadMu.Lock()
		l, busy := h.loads[k]
		if !busy || waited {
			if !busy {
				l = &load{done: make(chan struct{})}
				h.loads[k] = l
			} else {
				l = nil // read it alone: the shared read failed
			}
		}
		h.loadMu.Unlock()
		if busy && !waited {
			select {
			case <-l.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: reading %s from shared storage: %v", partition.ErrNotLeader, ch.Key, ctx.Err())
			}
			if l.err == nil {
				return l.b, nil
			}
			continue
		}
		b, err := h.getChunk(ctx, ch)
		if err == nil {
			h.cache.put(ch, b)
			if h.disk != nil {
				h.disk.put(ch, b)
			}
		}
		if l != nil {
			l.b, l.err = b, err
			h.loadMu.Lock()
			delete(h.loads, k)
			h.loadMu.Unlock()
			close(l.done)
		}
		return b, err
	}
}

// getChunk is one ranged read of ch from shared storage.
func (h *Host) getChunk(ctx context.Context, ch metastore.SharedChunk) ([]byte, error) {
	b, err := h.cfg.Store.GetRange(ctx, ch.Key, ch.Pos, ch.Len)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: reading %s from shared storage: %w", partition.ErrNotLeader, ch.Key, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s from shared storage: %v", partition.ErrNotLeader, ch.Key, err)
	}
	h.gets.Add(1)
	if int64(len(b)) != ch.Len {
		return nil, fmt.Errorf("%w: %s holds %d bytes at %d, the chunk %d", partition.ErrCorrupt, ch.Key, len(b), ch.Pos, ch.Len)
	}
	return b, nil
}

// walkBatches calls fn for each whole batch of data, in order, until it
// returns false.
func walkBatches(data []byte, fn func(hd *protocol.BatchHeader, b []byte) bool) error {
	var hd protocol.BatchHeader
	for pos := 0; pos < len(data); {
		if err := hd.Decode(data[pos:]); err != nil {
			return fmt.Errorf("%w: %v", partition.ErrCorrupt, err)
		}
		end := pos + int(hd.Size)
		if end > len(data) {
			return fmt.Errorf("%w: batch at %d runs past its chunk", partition.ErrCorrupt, pos)
		}
		if !fn(&hd, data[pos:end]) {
			return nil
		}
		pos = end
	}
	return nil
}

// ---- Storage ----

// allChunks lists every committed chunk, in pages from the metastore.
func (p *Partition) allChunks(ctx context.Context) ([]metastore.SharedChunk, error) {
	return p.chunksFrom(ctx, 0)
}

// MaxTimestamp is the largest timestamp and the offset of the first record
// that has it, as the log answers: per record in uncompressed CreateTime
// batches, the batch's first offset in others.
func (p *Partition) MaxTimestamp() (int64, int64, error) {
	ctx, cancel := p.h.ctx()
	defer cancel()
	chs, err := p.allChunks(ctx)
	if err != nil {
		return -1, -1, err
	}
	best := -1
	for i, ch := range chs {
		if best < 0 || ch.MaxTimestamp > chs[best].MaxTimestamp {
			best = i
		}
	}
	if best < 0 || chs[best].MaxTimestamp < 0 {
		return -1, -1, nil
	}
	data, err := p.h.chunkBytes(ctx, chs[best])
	if err != nil {
		return -1, -1, err
	}
	off, ts := int64(-1), int64(-1)
	var bestBatch []byte
	var bestHd protocol.BatchHeader
	err = walkBatches(data, func(hd *protocol.BatchHeader, b []byte) bool {
		if hd.MaxTimestamp > ts {
			off, ts, bestBatch, bestHd = hd.BaseOffset, hd.MaxTimestamp, b, *hd
		}
		return true
	})
	if err != nil || bestBatch == nil || bestHd.Compressed() || bestHd.LogAppendTime() {
		return off, ts, err
	}
	err = log.RecordTimestamps(bestBatch, &bestHd, func(d int32, rts int64) bool {
		if rts == ts {
			off = bestHd.BaseOffset + int64(d)
			return false
		}
		return true
	})
	return off, ts, err
}

// OffsetForTimestamp is the first offset whose timestamp is at least ts,
// as the log answers: per record in uncompressed CreateTime batches, the
// first offset of the first batch whose max timestamp is at least ts in
// others.
func (p *Partition) OffsetForTimestamp(ts int64) (int64, int64, bool, error) {
	ctx, cancel := p.h.ctx()
	defer cancel()
	chs, err := p.allChunks(ctx)
	if err != nil {
		return -1, -1, false, err
	}
	for _, ch := range chs {
		if ch.MaxTimestamp < ts {
			continue
		}
		data, err := p.h.chunkBytes(ctx, ch)
		if err != nil {
			return -1, -1, false, err
		}
		off, found := int64(-1), int64(-1)
		var rerr error
		if err := walkBatches(data, func(hd *protocol.BatchHeader, b []byte) bool {
			if hd.MaxTimestamp < ts {
				return true
			}
			off, found = hd.BaseOffset, hd.MaxTimestamp
			if hd.Compressed() || hd.LogAppendTime() {
				return false
			}
			rerr = log.RecordTimestamps(b, hd, func(d int32, rts int64) bool {
				if rts >= ts {
					off, found = hd.BaseOffset+int64(d), rts
					return false
				}
				return true
			})
			return false
		}); err != nil {
			return -1, -1, false, err
		}
		if rerr != nil {
			return -1, -1, false, rerr
		}
		if off >= 0 {
			return off, found, true, nil
		}
	}
	return -1, -1, false, nil
}

// ProducerState is the writer's table entry; a reader holds none.
func (p *Partition) ProducerState(producerID int64) (partition.ProducerState, bool) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	e := p.producers[producerID]
	if e == nil {
		return partition.ProducerState{}, false
	}
	st := partition.ProducerState{Epoch: e.Epoch, LastSequence: -1, LastOffset: -1, CoordinatorEpoch: e.CoordEpoch,
		Batches: slices.Clone(e.Batches)}
	if n := len(e.Batches); n > 0 {
		st.LastSequence, st.LastOffset = e.Batches[n-1].LastSequence, e.Batches[n-1].LastOffset
	}
	return st, true
}

// ActiveProducers lists the writer's producers.
func (p *Partition) ActiveProducers() ([]partition.ActiveProducer, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	out := make([]partition.ActiveProducer, 0, len(p.producers))
	for id, e := range p.producers {
		ap := partition.ActiveProducer{ID: id, Epoch: e.Epoch, LastSequence: -1, LastTimestamp: -1, CurrentTxnStartOffset: -1, CoordinatorEpoch: e.CoordEpoch}
		if first, open := p.txns.Open(id); open {
			ap.CurrentTxnStartOffset = first
		}
		if n := len(e.Batches); n > 0 {
			ap.LastSequence = e.Batches[n-1].LastSequence
		}
		out = append(out, ap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Size is the bytes of the chunks known here; nothing is on local disk.
func (p *Partition) Size() (int64, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := int64(0)
	for _, ch := range p.chunks {
		n += ch.Len
	}
	return n, 0
}
