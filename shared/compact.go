package shared

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/protocol"
)

// The compactor (docs/shared-storage.md). A writer cuts an object every
// linger period, so a partition that takes a few records at a time is
// left with many small chunks, each a ranged GET for a reader and an
// entry in the metastore. The compactor of the partition's write leader
// reads a run of such chunks, writes their bytes, unchanged, as one new
// object and swaps the run's chunk entries for one entry naming it with
// replace_shared_chunks: one metastore command, fenced by the leader
// epoch as a commit is and refused unless the run's entries are still
// stored as read, so a reader's floor lookup finds either the old chunks
// or the merged one, never a gap or both. The replaced objects lose their
// references; garbage collection deletes them once no chunk names them
// and they are older than the grace period. A merged object whose swap
// never happened (the broker died, the swap was refused) is an upload
// never committed, collected the same way.
//
// Merged objects are named data/<node>/<incarnation>-c/<sequence>: a
// sequence of their own, apart from the uploads', so that condemning
// one (garbage collection condemns a writer's objects up to a sequence)
// never fences an upload in flight. One broker compacts one run at a
// time, each within the operation timeout, as the committer commits.

// CompactConfig bounds the compactor.
type CompactConfig struct {
	// Interval is how often the compactor looks at the partitions this
	// broker writes (shared.compact.interval.ms); 0: never.
	Interval time.Duration
	// Chunks: a run of more than this many consecutive small chunks is
	// merged (shared.compact.chunks); 0: 8.
	Chunks int
	// ChunkBytes: a chunk smaller than this is small
	// (shared.compact.chunk.bytes); 0: 1 MiB.
	ChunkBytes int64
	// ObjectBytes bounds a merged object (shared.compact.object.bytes);
	// 0: 32 MiB.
	ObjectBytes int64
}

func (c *CompactConfig) defaults() {
	if c.Chunks <= 0 {
		c.Chunks = 8
	}
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = 1 << 20
	}
	if c.ObjectBytes <= 0 {
		c.ObjectBytes = 32 << 20
	}
}

// compactor runs Compact every Interval.
func (h *Host) compactor() {
	defer h.wg.Done()
	if h.cfg.Compact.Interval <= 0 {
		return
	}
	t := time.NewTicker(h.cfg.Compact.Interval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		if n, err := h.Compact(); err != nil {
			h.cfg.Logger.Warn().Err(err).Msg("shared storage compaction")
		} else if n > 0 {
			h.cfg.Logger.Debug().Int("objects", n).Msg("compacted shared chunks")
		}
	}
}

// Compact merges the runs of small chunks of every partition this broker
// writes and returns how many merged objects it committed. One failed
// partition does not stop the others; the first error is returned.
func (h *Host) Compact() (int, error) {
	h.compactMu.Lock()
	defer h.compactMu.Unlock()
	h.mu.Lock()
	parts := make([]*Partition, 0, len(h.parts))
	for _, p := range h.parts {
		parts = append(parts, p)
	}
	h.mu.Unlock()
	total := 0
	var first error
	for _, p := range parts {
		select {
		case <-h.stop:
			return total, first
		default:
		}
		n, err := p.compact()
		total += n
		if err != nil && first == nil {
			first = fmt.Errorf("%s-%d: %w", p.topic, p.key.Index, err)
		}
	}
	return total, first
}

// compact merges this partition's runs of small chunks, from where the
// last pass left off, if this broker writes it.
func (p *Partition) compact() (int, error) {
	p.wmu.Lock()
	writer, epoch, gen := p.writer, p.epoch, p.gen
	if p.compactGen != gen {
		p.compactGen, p.compactFrom = gen, 0
	}
	from := p.compactFrom
	p.wmu.Unlock()
	if !writer {
		return 0, nil
	}
	cc := p.h.cfg.Compact
	ctx, cancel := p.h.ctx()
	chs, err := p.chunksFrom(ctx, from)
	cancel()
	if err != nil {
		return 0, err
	}
	n := 0
	var run []metastore.SharedChunk
	var runBytes int64
	next := from // where the next pass starts: no run before it can grow
	flush := func() error {
		defer func() { run, runBytes = nil, 0 }()
		if len(run) <= cc.Chunks {
			return nil
		}
		m, err := p.merge(epoch, run)
		if err != nil {
			return err
		}
		n++
		if m.Len < cc.ChunkBytes {
			next = m.BaseOffset // still small: it may lead the next run
		} else {
			next = m.LastOffset + 1
		}
		return nil
	}
	for _, ch := range chs {
		if ch.Len >= cc.ChunkBytes || runBytes+ch.Len > cc.ObjectBytes {
			if err := flush(); err != nil {
				return n, err
			}
			if ch.Len >= cc.ChunkBytes {
				next = ch.LastOffset + 1
				continue
			}
		}
		if len(run) == 0 {
			next = ch.BaseOffset
		}
		run = append(run, ch)
		runBytes += ch.Len
	}
	if err := flush(); err != nil {
		return n, err
	}
	p.wmu.Lock()
	if p.compactGen == gen {
		p.compactFrom = next
	}
	p.wmu.Unlock()
	return n, nil
}

// chunksFrom lists the committed chunks from the one holding offset from.
func (p *Partition) chunksFrom(ctx context.Context, from int64) ([]metastore.SharedChunk, error) {
	var out []metastore.SharedChunk
	for {
		page, err := p.h.cfg.Catalog.SharedChunks(ctx, p.key.TopicID, p.key.Index, from, 1024)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Chunks...)
		if len(page.Chunks) == 0 || page.Chunks[len(page.Chunks)-1].LastOffset+1 >= page.EndOffset {
			return out, nil
		}
		from = page.Chunks[len(page.Chunks)-1].LastOffset + 1
	}
}

// merge writes run's bytes as one object and swaps run's chunk entries
// for one naming it, in epoch. The batches are checked to be whole and
// dense before anything is written.
func (p *Partition) merge(epoch int32, run []metastore.SharedChunk) (metastore.SharedChunk, error) {
	h := p.h
	ctx, cancel := h.ctx()
	defer cancel()
	var size int64
	for _, ch := range run {
		size += ch.Len
	}
	body := make([]byte, 0, size)
	maxTs := int64(-1)
	for _, ch := range run {
		b, ok := h.cache.get(ch.Key, ch.Pos)
		if !ok && h.disk != nil {
			b, ok = h.disk.get(ch)
		}
		if !ok {
			// Not into the cache: these bytes are read once, and
			// the merged chunk is what readers ask for from now on.
			var err error
			if b, err = h.cfg.Store.GetRange(ctx, ch.Key, ch.Pos, ch.Len); err != nil {
				return metastore.SharedChunk{}, fmt.Errorf("reading %s: %w", ch.Key, err)
			}
			h.gets.Add(1)
			if int64(len(b)) != ch.Len {
				return metastore.SharedChunk{}, fmt.Errorf("%s holds %d bytes at %d, the chunk %d", ch.Key, len(b), ch.Pos, ch.Len)
			}
		}
		body = append(body, b...)
		maxTs = max(maxTs, ch.MaxTimestamp)
	}
	next := run[0].BaseOffset
	if err := walkBatches(body, func(hd *protocol.BatchHeader, _ []byte) bool {
		if hd.BaseOffset != next {
			return false
		}
		next = hd.LastOffset() + 1
		return true
	}); err != nil {
		return metastore.SharedChunk{}, err
	}
	if last := run[len(run)-1].LastOffset; next != last+1 {
		return metastore.SharedChunk{}, fmt.Errorf("chunks %d..%d do not hold dense batches (stopped at %d)", run[0].BaseOffset, last, next)
	}
	f := h.fence()
	key := fmt.Sprintf("data/%d/%d-c/%020d", h.cfg.NodeID, f.Incarnation, h.compactSeq.Add(1))
	if err := h.cfg.Store.PutIfAbsent(ctx, key, body); err != nil {
		return metastore.SharedChunk{}, fmt.Errorf("uploading %s: %w", key, err)
	}
	h.puts.Add(1)
	h.putBytes.Add(int64(len(body)))
	if h.compactFault != nil {
		if err := h.compactFault(key); err != nil {
			return metastore.SharedChunk{}, err
		}
	}
	txns, err := mergeTxns(run)
	if err != nil {
		return metastore.SharedChunk{}, err
	}
	m := metastore.SharedChunk{TopicID: p.key.TopicID, Partition: p.key.Index, LeaderEpoch: epoch,
		BaseOffset: run[0].BaseOffset, LastOffset: run[len(run)-1].LastOffset, Key: key, Len: int64(len(body)), MaxTimestamp: maxTs,
		Txns: txns}
	if err := h.cfg.Catalog.ReplaceSharedChunks(ctx, f, run, m); err != nil {
		// The merged object stays unreferenced: garbage collection
		// deletes it after the grace period. A refusal is not the
		// writer's failure (retention may have moved the start, or the
		// partition was claimed, which the leadership check sees).
		if errors.Is(err, metastore.ErrFenced) || errors.Is(err, metastore.ErrInvalidRequest) {
			h.cfg.Logger.Info().Err(err).Str("topic", p.topic).Int32("partition", p.key.Index).Msg("compaction swap refused")
		}
		return metastore.SharedChunk{}, fmt.Errorf("swapping in %s: %w", key, err)
	}
	h.compactions.Add(1)
	h.compactedChunks.Add(int64(len(run)))
	p.mu.Lock()
	p.addChunksLocked([]metastore.SharedChunk{m})
	p.mu.Unlock()
	return m, nil
}
