package shared

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/objstore"
	"github.com/sluice-broker/sluice/partition"
)

// Retention, DeleteRecords and garbage collection (docs/shared-storage.md).
//
// A partition's start offset lives in the metastore. Only its write leader
// moves it (advance_shared_start, a compare-and-set on the leader epoch),
// which drops the chunk entries wholly below it. An object is deleted only
// after condemn_shared_objects found no chunk entry referencing it and
// fenced every later commit naming it, so a deleted object is never
// referenced: neither by a partition that still holds another chunk of it
// nor by a writer's commit still in flight.

// gcPage bounds the object keys one condemn_shared_objects command
// carries, gcReadPage those one shared_unreferenced read asks about.
const (
	gcPage     = 1000
	gcReadPage = 10000
)

// DeleteRecords moves the partition's start offset to offset (DeleteRecords;
// the caller checked it against the high watermark) and returns the start
// afterwards. Only the writer moves it.
func (p *Partition) DeleteRecords(ctx context.Context, offset int64) (int64, error) {
	return p.advanceStart(ctx, offset)
}

// advanceStart moves the start offset to offset in the metastore, fenced by
// this broker's write leadership, then deletes the objects no chunk
// references any more.
func (p *Partition) advanceStart(ctx context.Context, offset int64) (int64, error) {
	p.wmu.Lock()
	writer, epoch, gen := p.writer, p.epoch, p.gen
	p.wmu.Unlock()
	if !writer {
		return 0, fmt.Errorf("%w: this broker does not write the shared partition", partition.ErrNotLeader)
	}
	start, keys, err := p.h.cfg.Catalog.AdvanceSharedStart(ctx, p.h.fence(), p.key.TopicID, p.key.Index, epoch, offset)
	switch {
	case errors.Is(err, metastore.ErrFenced):
		err = fmt.Errorf("%w: the shared partition was claimed by another broker: %v", partition.ErrNotLeader, err)
		p.reset(gen, err)
		return 0, err
	case errors.Is(err, metastore.ErrInvalidRequest):
		return 0, fmt.Errorf("%w: %v", partition.ErrOffsetOutOfRange, err)
	case err != nil:
		return 0, err
	}
	p.mu.Lock()
	p.setStartLocked(start)
	p.mu.Unlock()
	p.h.deleteUnreferenced(ctx, keys)
	return start, nil
}

// setStartLocked records a start offset read from the metastore and
// forgets the chunks wholly below it.
func (p *Partition) setStartLocked(start int64) {
	if start <= p.start {
		return
	}
	p.start = start
	i := 0
	for i < len(p.chunks) && p.chunks[i].LastOffset < start {
		i++
	}
	p.chunks = slices.Delete(p.chunks, 0, i)
}

// applyRetention moves the start offset past the leading chunks wholly
// beyond retention.ms (by the chunk's largest timestamp, or its object's
// modification time when no batch has one) or not needed to keep the
// partition within retention.bytes, as a log deletes segments
// (log.Log.ApplyRetention; cfg is the topic's, resolved as for a log).
// Only the writer applies it. It returns how many chunks it dropped.
func (p *Partition) applyRetention(cfg partition.LogConfig, now time.Time) (int, error) {
	if !p.IsLeader() || !cfg.Delete || cfg.RetentionMs < 0 && cfg.RetentionBytes < 0 {
		return 0, nil
	}
	ctx, cancel := p.h.ctx()
	defer cancel()
	chs, err := p.allChunks(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, ch := range chs {
		total += ch.Len
	}
	excess := total - cfg.RetentionBytes
	n := 0
	for n < len(chs) {
		ch := chs[n]
		byTime := false
		if cfg.RetentionMs >= 0 {
			ts := ch.MaxTimestamp
			if ts < 0 {
				// No timestamps: the object's modification time, as a log
				// falls back to its segment file's.
				st, err := p.h.cfg.Store.Stat(ctx, ch.Key)
				if err != nil {
					return 0, err
				}
				ts = st.ModTime.UnixMilli()
			}
			byTime = now.UnixMilli()-ts > cfg.RetentionMs.Milliseconds()
		}
		bySize := cfg.RetentionBytes >= 0 && excess-ch.Len >= 0
		if !byTime && !bySize {
			break
		}
		excess -= ch.Len
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := p.advanceStart(ctx, chs[n-1].LastOffset+1); err != nil {
		return 0, err
	}
	return n, nil
}

// ApplyRetention applies cfg's retention to partition k if this broker
// writes it (partition.SharedHost).
func (h *Host) ApplyRetention(k partition.Key, cfg partition.LogConfig, now time.Time) (int, error) {
	h.mu.Lock()
	p, ok := h.parts[k]
	h.mu.Unlock()
	if !ok {
		return 0, nil
	}
	return p.applyRetention(cfg, now)
}

// deleteUnreferenced condemns keys in the metastore and deletes those no
// chunk references. A failure leaves the rest to garbage collection.
func (h *Host) deleteUnreferenced(ctx context.Context, keys []string) int {
	n := 0
	for len(keys) > 0 {
		page := keys[:min(len(keys), gcPage)]
		keys = keys[len(page):]
		dead, err := h.cfg.Catalog.CondemnSharedObjects(ctx, page)
		if err != nil {
			h.cfg.Logger.Warn().Err(err).Msg("condemning shared objects")
			return n
		}
		for _, k := range dead {
			if err := h.cfg.Store.Delete(ctx, k); err != nil {
				h.cfg.Logger.Warn().Err(err).Str("key", k).Msg("deleting a shared object")
				continue
			}
			h.deletes.Add(1)
			n++
		}
	}
	return n
}

// gcSweeper says whether this broker sweeps shared storage: the registered
// write broker with the lowest id (one broker at a time, normally; two
// sweeping at once after a registration change only repeat each other's
// idempotent work).
func (h *Host) gcSweeper() bool {
	low := int32(-1)
	for _, b := range h.cfg.Catalog.Brokers() {
		if b.Role == metastore.RoleRead || b.ShuttingDown {
			continue
		}
		if low < 0 || b.ID < low {
			low = b.ID
		}
	}
	return low == h.cfg.NodeID
}

// CollectGarbage deletes the objects under data/ older than the grace
// period (by their modification time in the store) that no chunk
// references, and returns how many it deleted. Each is condemned first, so
// a writer still holding its commit is refused rather than left pointing
// at a deleted object.
func (h *Host) CollectGarbage(ctx context.Context, now time.Time) (int, error) {
	var old []string
	err := h.cfg.Store.List(ctx, "data/", func(o objstore.ObjectInfo) error {
		if now.Sub(o.ModTime) > h.cfg.GCGrace {
			old = append(old, o.Key)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	// A read first, so the condemn commands (raft entries) carry only
	// the objects unreferenced now, not every committed one.
	var dead []string
	for len(old) > 0 {
		page := old[:min(len(old), gcReadPage)]
		old = old[len(page):]
		d, err := h.cfg.Catalog.UnreferencedSharedObjects(ctx, page)
		if err != nil {
			return 0, err
		}
		dead = append(dead, d...)
	}
	return h.deleteUnreferenced(ctx, dead), nil
}

// gc sweeps shared storage on the sweeping broker every quarter of the
// grace period (1 s to 5 min).
func (h *Host) gc() {
	defer h.wg.Done()
	every := min(max(h.cfg.GCGrace/4, time.Second), 5*time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			if !h.gcSweeper() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), every)
			n, err := h.CollectGarbage(ctx, now)
			cancel()
			if err != nil {
				h.cfg.Logger.Warn().Err(err).Msg("shared storage garbage collection")
			} else if n > 0 {
				h.cfg.Logger.Info().Int("objects", n).Msg("deleted unreferenced shared objects")
			}
		}
	}
}
