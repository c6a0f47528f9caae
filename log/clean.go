package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/protocol"
)

// Log compaction (cleanup.policy=compact), one pass over one log; the
// Cleaner (cleaner.go) decides which log and when. It follows Kafka's
// Cleaner.doClean:
//
//  1. The dirty section runs from the cleaner checkpoint (the offset the
//     last pass cleaned up to, file cleanerCheckpointFile) to the first
//     segment that may not be cleaned yet: the active segment, a segment
//     whose records are younger than min.compaction.lag.ms, or one that
//     reaches past the caller's limit (the high watermark; for a raft
//     partition the applied offset).
//  2. An offset map (offsetMap, Kafka's SkimpyOffsetMap) is filled with
//     the latest offset of every key of the dirty section, as far as the
//     map holds; where it fills up the pass ends and the rest stays dirty.
//  3. Every segment from the log start to the end of the mapped section is
//     rewritten: a record survives if it has a key and no later offset is
//     mapped for that key, and, if it is a tombstone (null value), only
//     until its batch's delete horizon (KIP-534: the first pass that keeps
//     a tombstone stamps its batch with now + delete.retention.ms).
//     Surviving records keep their offsets; a batch keeps its base offset,
//     lastOffsetDelta, producer fields and codec (protocol.Batch.Filter).
//     Control batches are copied as they are. A batch left without records
//     is dropped, unless it is an idempotent producer's last batch (its
//     sequence numbers are the producer's state) or the caller keeps every
//     batch (raft partitions: each batch is a raft entry).
//  4. Each rewritten segment is written to <base>.log.cleaned, synced,
//     renamed to <base>.log.swap, and then renamed over <base>.log, as
//     Kafka swaps cleaned segments. Open deletes a .cleaned file (the pass
//     did not finish it) and completes a .swap (it did): a kill at any
//     point leaves either the old or the new segment, never a mix, and the
//     index files are rebuilt from whichever it is. Then the checkpoint
//     moves to the end of the mapped section.

const (
	cleanerCheckpointFile = "cleaner-offset-checkpoint"
	cleanedSuffix         = ".cleaned"
	swapSuffix            = ".swap"
)

// cleanCrashAt is a test seam: when it returns true at a stage of a pass,
// the pass stops there as if the process had been killed, leaving the
// files as they are (crash_test.go).
var cleanCrashAt = func(stage string) bool { return false }

var errCrashed = errors.New("log: cleaning stopped by the crash test seam")

// errCleanAborted: the log changed under a pass (retention, truncation,
// DeleteRecords or Close took the segment); the pass stops and a later one
// starts over. Nothing was changed.
var errCleanAborted = errors.New("log: cleaning aborted, the log changed")

// CleanStats reports one cleaning pass.
type CleanStats struct {
	Segments      int   // segments rewritten
	BytesRead     int64 // segment bytes read (map and rewrite)
	BytesWritten  int64 // bytes of the rewritten segments
	RecordsKept   int64
	RecordsGone   int64
	FirstDirty    int64 // the dirty section the pass cleaned
	CleanedTo     int64 // the new checkpoint
	DirtyRatio    float64
	MaxLagReached bool // cleaned because of max.compaction.lag.ms
}

// cleanPlan is what one pass works on, chosen under the read lock.
type cleanPlan struct {
	segs       []*segment // log start up to the first uncleanable segment
	sizes      []int64    // their sizes when planned
	firstDirty int64
	gen        uint64
	ratio      float64
	mustClean  bool            // max.compaction.lag.ms passed
	lastOfProd map[int64]int64 // producer id -> last offset of its last data batch
	// aborted is the log's aborted transactions when planned: their
	// records never count as a key's latest value.
	aborted []AbortedTxn
	txn     *txnCleaning // the pass's transaction state (clean_txn.go)
	cfg     Config
}

// inflateLimit is what a compressed batch's records may inflate to in a
// pass: the topic's max.message.bytes, the bound the produce path puts
// on them, so that a batch stored before that bound (or written to disk
// some other way) cannot make the cleaner allocate up to protocol's
// 256 MiB ceiling per batch. Such a batch fails to decode and is kept as
// it is, with a warning.
func (p *cleanPlan) inflateLimit() int {
	if p.cfg.MaxMessageBytes > 0 {
		return p.cfg.MaxMessageBytes
	}
	return math.MaxInt32
}

// cleanable reports whether a pass at now, limited to offsets below
// limit, would clean anything, and the dirty ratio and max-lag flag it
// would have (Kafka's LogCleanerManager.cleanableOffsets and grabFilthiestLog).
func (l *Log) cleanable(now time.Time, limit int64) (ratio float64, must, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	p, ok := l.planLocked(now, limit)
	return p.ratio, p.mustClean, ok
}

func (l *Log) planLocked(now time.Time, limit int64) (cleanPlan, bool) {
	// Nothing at or past the first offset of an open transaction is
	// cleaned (Kafka cleans up to the last stable offset): its records
	// may yet be aborted.
	if fu := l.txns.firstUnstable(); fu >= 0 && fu < limit {
		limit = fu
	}
	p := cleanPlan{cfg: l.cfg, gen: l.gen}
	if !l.cfg.Compact || l.usableLocked() != nil {
		return p, false
	}
	p.firstDirty = max(l.cleanedTo, l.logStart, l.segs[0].base)
	lagEdge := now.Add(-l.cfg.MinCompactionLagMs).UnixMilli()
	k := 0
	for ; k < len(l.segs)-1; k++ {
		s := l.segs[k]
		if s.next > limit {
			break
		}
		if l.cfg.MinCompactionLagMs > 0 && segmentTime(s, s.maxTs) > lagEdge {
			break
		}
	}
	var clean, dirty int64
	firstDirtySeg := -1
	for i, s := range l.segs[:k] {
		if s.next <= p.firstDirty {
			clean += s.size
			continue
		}
		if firstDirtySeg < 0 {
			firstDirtySeg = i
		}
		dirty += s.size
	}
	if firstDirtySeg < 0 || dirty == 0 {
		return p, false
	}
	p.ratio = float64(dirty) / float64(clean+dirty)
	fd := l.segs[firstDirtySeg]
	if l.cfg.MaxCompactionLagMs < time.Duration(math.MaxInt64) {
		p.mustClean = segmentTime(fd, fd.firstBatchMaxTs) < now.Add(-l.cfg.MaxCompactionLagMs).UnixMilli()
	}
	if p.ratio < l.cfg.MinCleanableDirtyRatio && !p.mustClean {
		return p, false
	}
	p.segs = append([]*segment(nil), l.segs[:k]...)
	for _, s := range p.segs {
		p.sizes = append(p.sizes, s.size)
	}
	return p, true
}

// segmentTime is a segment's timestamp ts, or its creation time when no
// batch of it has one.
func segmentTime(s *segment, ts int64) int64 {
	if ts >= 0 {
		return ts
	}
	return s.created.UnixMilli()
}

// cleanOptions are the cleaner's resources for one pass.
type cleanOptions struct {
	now         time.Time
	limit       int64
	m           *offsetMap
	throttle    *throttler
	retainEmpty bool
	stop        <-chan struct{}
}

// clean runs one pass (see the top of this file). It returns ok false
// when there was nothing to clean. errCleanAborted and a closed stop
// channel end it early without harm; other errors come from the files and
// are fatal for the log if they happen after a swap began.
func (l *Log) clean(o cleanOptions) (CleanStats, bool, error) {
	l.mu.Lock()
	p, ok := l.planLocked(o.now, o.limit)
	if ok {
		// The files must stay open while the pass reads them without
		// the lock, whatever retention does meanwhile.
		for _, s := range p.segs {
			s.ref.acquire()
		}
		p.aborted = slices.Clone(l.txns.aborted)
		p.lastOfProd = make(map[int64]int64, len(l.producers))
		for id, e := range l.producers {
			if n := len(e.Batches); n > 0 {
				p.lastOfProd[id] = e.Batches[n-1].LastOffset
			}
		}
	}
	l.mu.Unlock()
	if !ok {
		return CleanStats{}, false, nil
	}
	defer func() {
		for _, s := range p.segs {
			s.ref.release()
		}
	}()
	p.txn = newTxnCleaning(p.aborted, o.retainEmpty)
	st := CleanStats{FirstDirty: p.firstDirty, DirtyRatio: p.ratio, MaxLagReached: p.mustClean}
	end, err := l.buildMap(&p, o, &st)
	if err != nil {
		return st, true, err
	}
	horizon := o.now.Add(p.cfg.DeleteRetentionMs).UnixMilli()
	for i := 0; i < len(p.segs) && p.segs[i].base < end; {
		j := p.groupEnd(i, end)
		if err := l.cleanGroup(&p, i, j, end, horizon, o, &st); err != nil {
			return st, true, err
		}
		i = j
	}
	st.CleanedTo = end
	if cleanCrashAt("checkpoint") {
		return st, true, errCrashed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return st, true, err
	}
	if l.gen != p.gen {
		return st, true, errCleanAborted
	}
	if end > l.cleanedTo {
		if err := fsutil.WriteFileSync(l.dir, cleanerCheckpointFile, []byte("0\n"+fmt.Sprint(end)+"\n")); err != nil {
			// The segments are cleaned; losing the checkpoint only
			// means the next pass maps them again.
			return st, true, fmt.Errorf("writing cleaner checkpoint: %w", err)
		}
		l.cleanedTo = end
	}
	return st, true, nil
}

// eachBatch reads the whole batches of s below size in order.
func eachBatch(s *segment, size int64, o *cleanOptions, st *CleanStats, fn func(b []byte, h *batchHeader) error) error {
	br := bufio.NewReaderSize(io.NewSectionReader(s.log, 0, size), 256<<10)
	var buf []byte
	for pos := int64(0); pos < size; {
		if o.stop != nil {
			select {
			case <-o.stop:
				return errCleanAborted
			default:
			}
		}
		var hb [protocol.BatchHeaderSize]byte
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			return fmt.Errorf("reading %s at %d: %w", segmentName(s.base, logSuffix), pos, err)
		}
		h, err := parseHeader(hb[:])
		if err != nil || h.Size > size-pos {
			return fmt.Errorf("%w: segment %s position %d while cleaning", ErrCorrupt, segmentName(s.base, logSuffix), pos)
		}
		if int64(cap(buf)) < h.Size {
			buf = make([]byte, h.Size)
		}
		buf = buf[:h.Size]
		copy(buf, hb[:])
		if _, err := io.ReadFull(br, buf[protocol.BatchHeaderSize:]); err != nil {
			return fmt.Errorf("reading %s at %d: %w", segmentName(s.base, logSuffix), pos, err)
		}
		st.BytesRead += h.Size
		o.throttle.wait(h.Size, o.stop)
		if err := fn(buf, &h); err != nil {
			return err
		}
		pos += h.Size
	}
	return nil
}

// buildMap fills the offset map from the dirty section and returns the
// end of what it mapped: the offset after the last batch that fit.
func (l *Log) buildMap(p *cleanPlan, o cleanOptions, st *CleanStats) (int64, error) {
	// At most one entry per offset of the dirty section.
	span := int64(0)
	for _, s := range p.segs {
		span = max(span, s.next-p.firstDirty)
	}
	o.m.reset(span)
	end := p.firstDirty
	full := errors.New("map full")
	for i, s := range p.segs {
		if s.next <= p.firstDirty {
			continue
		}
		err := eachBatch(s, p.sizes[i], &o, st, func(b []byte, h *batchHeader) error {
			if h.LastOffset() < p.firstDirty {
				return nil
			}
			if o.m.full(int(h.RecordCount)) {
				return full
			}
			if !h.IsControl() && !abortedBatch(p.aborted, h) {
				err := protocol.Batch(b).EachRecord(p.inflateLimit(), nil, func(r *protocol.Record) error {
					if off := h.BaseOffset + int64(r.OffsetDelta); r.Key != nil && off >= p.firstDirty {
						o.m.put(r.Key, off)
					}
					return nil
				})
				if err != nil {
					// A batch stored but not decodable is kept as it is
					// by the rewrite; its keys are not mapped.
					l.lg.Warn().Err(err).Int64("offset", h.BaseOffset).Msg("cleaner cannot decode a stored batch; leaving it as it is")
				}
			}
			end = h.LastOffset() + 1
			return nil
		})
		if errors.Is(err, full) {
			if end == p.firstDirty {
				return end, fmt.Errorf("log.cleaner.dedupe.buffer.size too small: no room for one batch at offset %d", end)
			}
			return end, nil
		}
		if err != nil {
			return end, err
		}
		end = max(end, s.next)
	}
	return end, nil
}

// abortedBatch says whether h is a batch of an aborted transaction: its
// records are never a key's latest value, so an aborted write cannot make
// the cleaner drop the committed value before it.
func abortedBatch(aborted []AbortedTxn, h *batchHeader) bool {
	if h.ProducerID < 0 || !h.IsTransactional() {
		return false
	}
	for _, a := range aborted {
		if a.ProducerID == h.ProducerID && h.BaseOffset >= a.FirstOffset && h.BaseOffset <= a.LastOffset {
			return true
		}
	}
	return false
}

// groupEnd is the end (exclusive) of the group of segments from p.segs[i]
// that one pass writes into a single cleaned segment (Kafka's
// groupSegmentsBySize): consecutive segments below end whose sizes when
// planned add up to at most segment.bytes, and whose offsets stay within
// 2^31 of the first one's base (the offset index holds 32-bit relative
// offsets). A segment too big to share stays alone.
func (p *cleanPlan) groupEnd(i int, end int64) int {
	size := p.sizes[i]
	j := i + 1
	for ; j < len(p.segs) && p.segs[j].base < end; j++ {
		if size+p.sizes[j] > int64(p.cfg.SegmentBytes) || p.segs[j].next-1-p.segs[i].base > math.MaxInt32 {
			break
		}
		size += p.sizes[j]
	}
	return j
}

// cleanGroup rewrites p.segs[i:j] into one .cleaned file named after the
// first and swaps it in for all of them, unless it is one segment and no
// batch of it changes.
func (l *Log) cleanGroup(p *cleanPlan, i, j int, end, horizon int64, o cleanOptions, st *CleanStats) error {
	s := p.segs[i]
	cleaned := filepath.Join(l.dir, segmentName(s.base, logSuffix)+cleanedSuffix)
	f, err := os.OpenFile(cleaned, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	discard := func() {
		f.Close()
		os.Remove(cleaned)
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	changed := j-i > 1 // a merge changes the files whatever it keeps
	var written, kept, gone int64
	var out []byte
	var goneMarkers []AbortedTxn // ABORT markers removed from this group
	err = nil
	for k := i; k < j && err == nil; k++ {
		err = eachBatch(p.segs[k], p.sizes[k], &o, st, func(b []byte, h *batchHeader) error {
			if isTxnMarker(h) {
				mr, err := cleanMarker(p, b, h, horizon, o, out)
				if err != nil {
					return err
				}
				gone += int64(mr.removed)
				if mr.ended != nil {
					goneMarkers = append(goneMarkers, *mr.ended)
				}
				if mr.out == nil {
					changed = true
					return nil
				}
				if mr.changed {
					changed = true
					out = mr.out
				}
				if _, err := bw.Write(mr.out); err != nil {
					return err
				}
				written += int64(len(mr.out))
				return nil
			}
			keepAll := h.IsControl()
			abortedTxn := !keepAll && p.txn.data(h)
			var res protocol.FilterResult
			if !keepAll {
				var ferr error
				res, ferr = protocol.Batch(b).Filter(out, p.inflateLimit(), horizon, func(off int64, r *protocol.Record) bool {
					if abortedTxn {
						return false // Kafka removes aborted transactions' records
					}
					if r.Key == nil {
						return false // Kafka drops keyless records from compacted logs
					}
					if off < end && off < o.m.get(r.Key) {
						return false
					}
					if r.Value == nil && protocol.Batch(b).HasDeleteHorizon() && o.now.UnixMilli() >= protocol.Batch(b).BaseTimestamp() {
						return false // a tombstone past its delete horizon
					}
					return true
				})
				if ferr != nil {
					l.lg.Warn().Err(ferr).Int64("offset", h.BaseOffset).Msg("cleaner cannot rewrite a stored batch; keeping it as it is")
					keepAll = true
				}
			}
			kept += int64(res.Kept)
			gone += int64(res.Dropped)
			w := b
			switch {
			case keepAll:
			case res.Kept == 0 && !o.retainEmpty && !(h.ProducerID >= 0 && p.lastOfProd[h.ProducerID] == h.LastOffset()):
				// The whole batch goes, also one an earlier pass emptied
				// that is no longer its producer's last.
				changed = true
				return nil
			case res.Changed:
				changed = true
				w, out = res.Out, res.Out
			}
			if _, err := bw.Write(w); err != nil {
				return err
			}
			written += int64(len(w))
			return nil
		})
	}
	if err == nil && changed {
		err = bw.Flush()
	}
	if err == nil && changed {
		err = syncFile(f)
	}
	if err != nil || !changed {
		discard()
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(cleaned)
		return err
	}
	o.throttle.wait(written, o.stop)
	if cleanCrashAt("cleaned") {
		return errCrashed
	}
	// Keep the old files' last modification time: retention by time falls
	// back to it for segments without timestamps, as Kafka's cleaner keeps
	// the last modified time of the segments it replaces.
	var mtime time.Time
	for _, old := range p.segs[i:j] {
		if fi, err := old.log.Stat(); err == nil && fi.ModTime().After(mtime) {
			mtime = fi.ModTime()
		}
	}
	if !mtime.IsZero() {
		os.Chtimes(cleaned, mtime, mtime)
	}
	swap := filepath.Join(l.dir, segmentName(s.base, logSuffix)+swapSuffix)
	if err := os.Rename(cleaned, swap); err != nil {
		os.Remove(cleaned)
		return err
	}
	if err := l.swapIn(p.segs[i:j], p.sizes[i:j], p.gen, swap, goneMarkers); err != nil {
		return err
	}
	st.Segments += j - i
	st.BytesWritten += written
	st.RecordsKept += kept
	st.RecordsGone += gone
	return nil
}

// swapIn replaces olds, consecutive segments, with the cleaned file at
// swap (named after the first), if they are still non-active segments of
// the log with the sizes they were planned with. Removed ABORT markers
// (ended) leave the aborted list in the same step.
func (l *Log) swapIn(olds []*segment, sizes []int64, gen uint64, swap string, ended []AbortedTxn) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	at := -1
	for i, s := range l.segs[:len(l.segs)-1] {
		if s == olds[0] {
			at = i
		}
	}
	ok := at >= 0 && at+len(olds) < len(l.segs) && l.gen == gen
	for k := 0; ok && k < len(olds); k++ {
		ok = l.segs[at+k] == olds[k] && !olds[k].closed && olds[k].size == sizes[k]
	}
	if err := l.usableLocked(); err != nil || !ok {
		os.Remove(swap)
		if err != nil {
			return err
		}
		return errCleanAborted
	}
	first := olds[0]
	// The commit point: a .swap is complete, and Open finishes the
	// swap (the rename, and the removal of the other segments it
	// covers) if a crash comes first.
	if err := fsutil.SyncDir(l.dir); err != nil {
		return l.failLocked("sync directory", err)
	}
	if cleanCrashAt("swap") {
		return errCrashed
	}
	// The other segments of a merged group go first: a crash before the
	// rename leaves the .swap, which Open completes.
	for k, s := range olds[1:] {
		if err := removeSegmentFiles(l.dir, s.base); err != nil {
			return l.failLocked("remove merged segment", err)
		}
		if k == 0 && cleanCrashAt("merged") {
			return errCrashed
		}
	}
	if err := os.Rename(swap, filepath.Join(l.dir, segmentName(first.base, logSuffix))); err != nil {
		return l.failLocked("swap cleaned segment", err)
	}
	if cleanCrashAt("renamed") {
		return errCrashed
	}
	ns, err := openSegment(l.dir, first.base, false, first.created, int64(l.cfg.SegmentIndexBytes))
	if err != nil {
		return l.failLocked("open cleaned segment", err)
	}
	minOffset := first.base
	if at > 0 {
		minOffset = l.segs[at-1].next
	}
	res, err := ns.scan(minOffset, false, l.cfg.IndexIntervalBytes, nil)
	if err == nil && res.bad != nil {
		err = res.bad
	}
	if err == nil {
		err = ns.idx.rewrite()
	}
	if err == nil {
		err = ns.sync()
	}
	if err != nil {
		ns.close()
		return l.failLocked("index cleaned segment", err)
	}
	ns.idx.evict()
	for _, s := range olds {
		s.close()
	}
	rest := l.segs[at+len(olds):]
	l.segs = l.segs[:at]
	if ns.size > 0 || at == 0 {
		l.segs = append(l.segs, ns)
	} else {
		// Nothing survived; the offsets stay reachable through the
		// neighbours (a read past a gap finds the next batch).
		if err := ns.remove(l.dir); err != nil {
			l.segs = append(l.segs, rest...)
			return l.failLocked("remove empty cleaned segment", err)
		}
	}
	l.segs = append(l.segs, rest...)
	l.txns.dropAborted(ended)
	if err := fsutil.SyncDir(l.dir); err != nil {
		return l.failLocked("sync directory", err)
	}
	return nil
}

// removeSegmentFiles deletes the files of the segment at base.
func removeSegmentFiles(dir string, base int64) error {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := os.Remove(filepath.Join(dir, segmentName(base, suf))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// completeSwaps is Open's part of the swap: a .swap file is a finished
// cleaned segment whose swap was cut short. The segments after its base up
// to its last offset are the rest of its merged group (as Kafka's recovery
// deletes the segments a swap file covers): they go, then the rename over
// the .log of its base.
func completeSwaps(dir string, names []string) error {
	done := false
	for _, name := range names {
		stem, ok := cutSuffix(name, logSuffix+swapSuffix)
		if !ok {
			continue
		}
		base, ok := parseSegmentName(stem+logSuffix, logSuffix)
		if !ok {
			continue
		}
		last, err := lastOffsetIn(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		for _, other := range names {
			b, ok := parseSegmentName(other, logSuffix)
			if ok && b > base && b <= last {
				if err := removeSegmentFiles(dir, b); err != nil {
					return err
				}
			}
		}
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, stem+logSuffix)); err != nil {
			return err
		}
		done = true
	}
	if done {
		return fsutil.SyncDir(dir)
	}
	return nil
}

// lastOffsetIn is the last offset of the whole batches of the segment file
// at path, -1 without any.
func lastOffsetIn(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return -1, err
	}
	last := int64(-1)
	var hb [protocol.BatchHeaderSize]byte
	for pos := int64(0); pos+protocol.BatchHeaderSize <= fi.Size(); {
		if _, err := f.ReadAt(hb[:], pos); err != nil {
			return -1, err
		}
		h, err := parseHeader(hb[:])
		if err != nil || h.Size > fi.Size()-pos {
			break
		}
		last = h.LastOffset()
		pos += h.Size
	}
	return last, nil
}

func cutSuffix(name, suffix string) (string, bool) {
	if len(name) <= len(suffix) || name[len(name)-len(suffix):] != suffix {
		return "", false
	}
	stem := name[:len(name)-len(suffix)]
	_, ok := parseSegmentName(stem+logSuffix, logSuffix)
	return stem, ok
}

// CleanedOffset is the cleaner checkpoint: every offset below it was in
// the dirty section of a finished pass.
func (l *Log) CleanedOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cleanedTo
}
