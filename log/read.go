package log

import (
	"fmt"
	"sort"

	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

// locateLocked finds the first batch whose last offset is >= offset: its
// segment index, file position and header. found is false past the end.
// Only headers are read: an index lookup, then at most index.interval.bytes
// plus one batch of header reads.
func (l *Log) locateLocked(offset int64) (si int, pos int64, h batchHeader, found bool, err error) {
	si = sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	if si < 0 {
		si = 0
	}
	var hb [protocol.BatchHeaderSize]byte
	for ; si < len(l.segs); si++ {
		s := l.segs[si]
		if offset >= s.next {
			continue
		}
		pos = 0
		if offset > s.base {
			if pos, err = s.idx.lookup(uint32(offset - s.base)); err != nil {
				return 0, 0, h, false, fmt.Errorf("index of %s: %w", segmentName(s.base, logSuffix), err)
			}
		}
		for pos < s.size {
			if _, err = s.log.ReadAt(hb[:], pos); err != nil {
				return 0, 0, h, false, fmt.Errorf("read %s at %d: %w", segmentName(s.base, logSuffix), pos, err)
			}
			if h, err = parseHeader(hb[:]); err != nil {
				return 0, 0, h, false, fmt.Errorf("segment %s position %d: %w", segmentName(s.base, logSuffix), pos, err)
			}
			if h.LastOffset() >= offset {
				return si, pos, h, true, nil
			}
			pos += h.Size
		}
	}
	return 0, 0, h, false, nil
}

// firstBatchLocked is where Read and ReadRange start: the batch holding
// offset. ok is false when there is nothing to read: offset is the log end,
// or that batch starts at or after upTo (the caller's high watermark), or
// err says why (ErrOffsetOutOfRange outside the log, an I/O error).
func (l *Log) firstBatchLocked(offset, upTo int64) (si int, pos int64, h batchHeader, ok bool, err error) {
	if offset < l.logStart || offset > l.leo {
		return 0, 0, h, false, fmt.Errorf("%w: offset %d, log start %d, log end %d", ErrOffsetOutOfRange, offset, l.logStart, l.leo)
	}
	if offset == l.leo {
		return 0, 0, h, false, nil
	}
	si, pos, h, found, err := l.locateLocked(offset)
	if err != nil || !found || h.BaseOffset >= upTo {
		return 0, 0, h, false, err
	}
	return si, pos, h, true, nil
}

// Read returns whole batches starting with the one that contains offset,
// none whose base offset is >= upTo (the caller's high watermark), stopping
// before maxBytes would be exceeded but always returning at least one whole
// batch if one qualifies (Kafka's minOneMessage). Like Kafka it reads from
// one segment per call; NextOffset tells the caller where to continue.
//
// Errors: ErrOffsetOutOfRange if offset < LogStartOffset or > LogEndOffset;
// an I/O or ErrCorrupt error for a file that cannot be read; ErrFatal,
// ErrClosed. The returned Data is a fresh buffer the caller owns. Read
// blocks on one pread and never decodes records.
func (l *Log) Read(offset int64, maxBytes int, upTo int64) (ReadResult, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return ReadResult{}, err
	}
	res := ReadResult{NextOffset: offset, LogStartOffset: l.logStart, LogEndOffset: l.leo}
	si, pos, h, ok, err := l.firstBatchLocked(offset, upTo)
	if !ok {
		return res, err
	}
	s := l.segs[si]
	n := s.size - pos
	if int64(maxBytes) < n {
		n = max(int64(maxBytes), h.Size)
	}
	buf := make([]byte, n)
	if _, err := s.log.ReadAt(buf, pos); err != nil {
		return res, fmt.Errorf("read %s at %d: %w", segmentName(s.base, logSuffix), pos, err)
	}
	cut := int64(0)
	for cut+protocol.BatchHeaderSize <= n {
		bh, err := parseHeader(buf[cut:])
		if err != nil {
			return res, fmt.Errorf("segment %s position %d: %w", segmentName(s.base, logSuffix), pos+cut, err)
		}
		if cut+bh.Size > n || bh.BaseOffset >= upTo {
			break
		}
		cut += bh.Size
		res.NextOffset = bh.LastOffset() + 1
	}
	res.Data = buf[:cut]
	return res, nil
}

// ReadRange is Read without the copy: it selects the same batches (the
// same offset, maxBytes and upTo rules, at least one whole batch, one
// segment per call) and returns them as a range of the segment file, held
// open until the caller releases it. It reads batch headers only: the
// offset index skips to the last indexed batch that fits, so a range of
// any size costs a few small preads.
//
// Unlike Read it leaves out batches without records (compaction leaves
// them): it skips those at offset and stops before the next one, saying
// so in Hidden.
//
// Errors are those of Read. NextOffset assumes offsets run on without gaps
// from one batch to the next, as they do in a log that is never compacted.
func (l *Log) ReadRange(offset int64, maxBytes int, upTo int64) (RangeResult, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return RangeResult{}, err
	}
	res := RangeResult{NextOffset: offset, LogStartOffset: l.logStart, LogEndOffset: l.leo}
	si, pos, h, ok, err := l.firstBatchLocked(offset, upTo)
	if ok && hiddenBatch(&h) {
		// Batches without records, left by compaction (a raft
		// partition keeps every batch, an idempotent producer's last
		// one stays), are not sent: some clients cannot step over
		// them (kafka-go panics on two in a row). The consumer skips
		// them with the next batch it gets.
		si, pos, h, ok, err = l.skipHiddenLocked(si, pos, h, upTo)
	}
	if !ok {
		return res, err
	}
	s := l.segs[si]
	end := s.size
	if int64(maxBytes) < end-pos {
		end = pos + max(int64(maxBytes), h.Size)
	}
	// The first batch qualifies (it starts below upTo and fits by the
	// rule above); skip what the index vouches for, then walk headers.
	cut := pos + h.Size
	res.NextOffset = h.LastOffset() + 1
	// A compacted log may hold batches without records, which the
	// headers must show; the index cannot skip them.
	if !l.cfg.Compact {
		if jump, ok, err := s.idx.floor(cut, end, upTo-s.base); err != nil {
			return res, fmt.Errorf("index of %s: %w", segmentName(s.base, logSuffix), err)
		} else if ok {
			cut = jump
		}
	}
	var hb [protocol.BatchHeaderSize]byte
	// Headers are read up to the segment's end, not the range's, so that
	// NextOffset comes from the first batch left out even after a jump.
	for cut < s.size {
		if _, err := s.log.ReadAt(hb[:], cut); err != nil {
			return res, fmt.Errorf("read %s at %d: %w", segmentName(s.base, logSuffix), cut, err)
		}
		bh, err := parseHeader(hb[:])
		if err != nil {
			return res, fmt.Errorf("segment %s position %d: %w", segmentName(s.base, logSuffix), cut, err)
		}
		// Every batch before this one is in: the offset after them is
		// this batch's base.
		res.NextOffset = bh.BaseOffset
		if cut+bh.Size > end || bh.BaseOffset >= upTo {
			break
		}
		if hiddenBatch(&bh) {
			res.Hidden = true
			break
		}
		cut += bh.Size
		res.NextOffset = bh.LastOffset() + 1
	}
	s.ref.acquire()
	res.Range = partition.NewFileRange(s.ref, pos, cut-pos)
	return res, nil
}

// skipHiddenLocked walks the headers from the hidden batch h at pos in
// segment si to the first batch that is not hidden; ok is false when
// none starts below upTo.
func (l *Log) skipHiddenLocked(si int, pos int64, h batchHeader, upTo int64) (int, int64, batchHeader, bool, error) {
	var hb [protocol.BatchHeaderSize]byte
	for hiddenBatch(&h) {
		pos += h.Size
		for si < len(l.segs) && pos >= l.segs[si].size {
			si, pos = si+1, 0
		}
		if si == len(l.segs) {
			return 0, 0, h, false, nil
		}
		s := l.segs[si]
		if _, err := s.log.ReadAt(hb[:], pos); err != nil {
			return 0, 0, h, false, fmt.Errorf("read %s at %d: %w", segmentName(s.base, logSuffix), pos, err)
		}
		var err error
		if h, err = parseHeader(hb[:]); err != nil {
			return 0, 0, h, false, fmt.Errorf("segment %s position %d: %w", segmentName(s.base, logSuffix), pos, err)
		}
		if h.BaseOffset >= upTo {
			return 0, 0, h, false, nil
		}
	}
	return si, pos, h, true, nil
}

// hiddenBatch is a data batch without records, which only compaction
// leaves and ReadRange does not send.
func hiddenBatch(h *batchHeader) bool { return h.RecordCount == 0 && !h.IsControl() }

// readBatchLocked reads the whole batch at pos in segment si.
func (l *Log) readBatchLocked(si int, pos int64, h *batchHeader) ([]byte, error) {
	b := make([]byte, h.Size)
	if _, err := l.segs[si].log.ReadAt(b, pos); err != nil {
		return nil, err
	}
	return b, nil
}

// OffsetForTimestamp answers ListOffsets by timestamp: the first record at
// or after LogStartOffset with a timestamp >= ts, and that timestamp. found
// is false when no record qualifies. Records of uncompressed CreateTime
// batches are resolved exactly; for a compressed batch (records cannot be
// read without a codec) or a LogAppendTime batch the answer is the batch:
// its first offset and its max timestamp. The caller must treat an answer
// at or above its high watermark as not found, as Kafka does.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return -1, -1, false, err
	}
	for si, s := range l.segs {
		if s.next <= l.logStart || s.maxTs < ts {
			continue
		}
		start := max(s.base, l.logStart)
		rel, ok, err := s.idx.lookupTime(ts)
		if err != nil {
			return -1, -1, false, err
		}
		if ok {
			start = max(start, s.base+int64(rel))
		}
		pos := int64(0)
		if start > s.base {
			if pos, err = s.idx.lookup(uint32(start - s.base)); err != nil {
				return -1, -1, false, err
			}
		}
		var hb [protocol.BatchHeaderSize]byte
		for pos < s.size {
			if _, err := s.log.ReadAt(hb[:], pos); err != nil {
				return -1, -1, false, err
			}
			h, err := parseHeader(hb[:])
			if err != nil {
				return -1, -1, false, err
			}
			if h.LastOffset() < l.logStart || h.MaxTimestamp < ts {
				pos += h.Size
				continue
			}
			first := max(h.BaseOffset, l.logStart)
			if h.Compressed() || h.LogAppendTime() {
				return first, h.MaxTimestamp, true, nil
			}
			b, err := l.readBatchLocked(si, pos, &h)
			if err != nil {
				return -1, -1, false, err
			}
			offset, timestamp = -1, -1
			err = recordTimestamps(b, &h, func(d int32, rts int64) bool {
				if o := h.BaseOffset + int64(d); o >= l.logStart && rts >= ts {
					offset, timestamp = o, rts
					return false
				}
				return true
			})
			if err != nil {
				return -1, -1, false, err
			}
			if offset >= 0 {
				return offset, timestamp, true, nil
			}
			// The header promised a timestamp the records do not have; the
			// batch is the best answer there is.
			return first, h.MaxTimestamp, true, nil
		}
	}
	return -1, -1, false, nil
}

// MaxTimestamp answers ListOffsets -3 (KIP-734): the offset and timestamp of
// the first record with the largest timestamp at or after LogStartOffset,
// (-1, -1) if there is none. Exact for uncompressed CreateTime batches; for
// a compressed batch it is the batch's first offset.
func (l *Log) MaxTimestamp() (offset int64, timestamp int64, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return -1, -1, err
	}
	var best *segment
	for _, s := range l.segs {
		if s.next <= l.logStart || s.maxTs < 0 {
			continue
		}
		if best == nil || s.maxTs > best.maxTs {
			best = s
		}
	}
	if best == nil {
		return -1, -1, nil
	}
	// A segment's max may sit in a batch wholly below the log start; then
	// fall back to the batch-level answer at the log start.
	if best.maxTsLast < l.logStart {
		return l.logStart, best.maxTs, nil
	}
	si, pos, h, found, err := l.locateLocked(max(best.maxTsBase, l.logStart))
	if err != nil || !found {
		return -1, -1, err
	}
	first := max(h.BaseOffset, l.logStart)
	if h.Compressed() || h.LogAppendTime() {
		return first, h.MaxTimestamp, nil
	}
	b, err := l.readBatchLocked(si, pos, &h)
	if err != nil {
		return -1, -1, err
	}
	offset = -1
	err = recordTimestamps(b, &h, func(d int32, rts int64) bool {
		if o := h.BaseOffset + int64(d); o >= l.logStart && rts == h.MaxTimestamp {
			offset = o
			return false
		}
		return true
	})
	if err != nil {
		return -1, -1, err
	}
	if offset < 0 {
		offset = first
	}
	return offset, h.MaxTimestamp, nil
}

// OffsetForLeaderEpoch answers OffsetForLeaderEpoch (Kafka's
// LeaderEpochFileCache.endOffsetFor): the end offset of the largest leader
// epoch <= epoch, that is the start of the next epoch or the log end offset
// for the latest, and that epoch; (-1, -1) if epoch is newer than every
// epoch in the log or no batch carries one.
func (l *Log) OffsetForLeaderEpoch(epoch int32) (endOffset int64, leaderEpoch int32) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.endOffsetFor(epoch, l.leo)
}
