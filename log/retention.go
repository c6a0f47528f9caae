package log

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/protocol"
)

// TruncateTo drops every batch at or after offset, for a raft follower whose
// log diverged. A batch that contains offset is dropped whole, so the new log
// end offset is that batch's base offset (<= offset). If offset is at or
// below the log start, the log is emptied and restarts at offset. Before
// cutting, it syncs the active segment and persists a new truncation epoch
// in the log-id file, so that no WAL record from before the cut is replayed
// after a crash. The truncation is synced before TruncateTo returns; producer state and the
// leader epoch cache are rebuilt from the remaining batch headers. It waits
// for reads and a running flush. Errors are fatal (ErrFatal) except
// ErrClosed. A WaitDurable caller blocked on a truncated offset is not told;
// it returns once new data reaches that offset, so the caller (raft) must
// not wait on entries it may truncate.
func (l *Log) TruncateTo(offset int64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset >= l.leo {
		return nil
	}
	if err := l.newEpochLocked(); err != nil {
		return err
	}
	l.gen++
	l.cleanedTo = min(l.cleanedTo, offset)
	if offset <= l.logStart || offset <= l.segs[0].base {
		return l.resetLocked(offset)
	}
	si, pos, _, found, err := l.locateLocked(offset)
	if err != nil {
		return l.failLocked("truncate", err)
	}
	if !found {
		return l.failLocked("truncate", fmt.Errorf("offset %d below log end %d not found", offset, l.leo))
	}
	// Newest first, so a crash part-way leaves a prefix of the log.
	for j := len(l.segs) - 1; j > si; j-- {
		if err := l.segs[j].remove(l.dir); err != nil {
			return l.failLocked("remove segment", err)
		}
	}
	l.segs = l.segs[:si+1]
	s := l.segs[si]
	if err := s.log.Truncate(pos); err != nil {
		return l.failLocked("truncate segment", err)
	}
	if err := l.rescanLocked(s); err != nil {
		return err
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		return l.failLocked("sync directory", err)
	}
	l.leo = s.next
	l.durable = min(l.durable, l.leo)
	l.segSynced = min(l.segSynced, l.leo)
	if l.logStart > l.leo {
		l.logStart = l.leo
		if err := writeLogStart(l.dir, l.logStart); err != nil {
			return l.failLocked("write log start", err)
		}
	}
	return l.rebuildStateLocked()
}

// newEpochLocked starts a new truncation epoch before anything is cut, so
// that no WAL record written before the cut is ever replayed (replay takes
// only records of the log's current epoch). The active segment is synced
// first: every batch the WAL made durable is then in a synced segment, so
// giving up the WAL's copies loses nothing, and a crash between here and
// the cut leaves the untruncated log, which the caller truncates again.
func (l *Log) newEpochLocked() error {
	if l.segSynced < l.leo {
		if err := l.active().sync(); err != nil {
			return l.failLocked("sync segment", err)
		}
		l.segmentSyncedLocked(l.leo)
	}
	id := l.ident
	id.epoch++
	if err := fsutil.WriteFileSync(l.dir, logIDFile, id.encode()); err != nil {
		return l.failLocked("write log id", err)
	}
	l.ident = id
	if l.wl != nil {
		l.wal.truncated(l.wl, id.epoch)
	}
	return nil
}

// rescanLocked rebuilds s's in-memory state and index files from the segment
// file after it was cut, and syncs them.
func (l *Log) rescanLocked(s *segment) error {
	if _, err := s.scan(s.base, false, l.cfg.IndexIntervalBytes, nil); err != nil {
		return l.failLocked("rescan segment", err)
	}
	if err := s.idx.rewrite(); err != nil {
		return l.failLocked("rewrite index", err)
	}
	if err := s.sync(); err != nil {
		return l.failLocked("sync segment", err)
	}
	return nil
}

// resetLocked removes every segment and restarts the log empty at offset.
func (l *Log) resetLocked(offset int64) error {
	// The new start first: a crash part-way then reopens at or after it.
	if err := writeLogStart(l.dir, offset); err != nil {
		return l.failLocked("write log start", err)
	}
	for j := len(l.segs) - 1; j >= 0; j-- {
		if err := l.segs[j].remove(l.dir); err != nil {
			return l.failLocked("remove segment", err)
		}
	}
	l.segs = l.segs[:0]
	s, err := openSegment(l.dir, offset, true, l.now(), int64(l.cfg.SegmentIndexBytes))
	if err != nil {
		return l.failLocked("create segment", err)
	}
	l.segs = append(l.segs, s)
	if err := fsutil.SyncDir(l.dir); err != nil {
		return l.failLocked("sync directory", err)
	}
	l.logStart, l.leo, l.durable, l.segSynced = offset, offset, offset, offset
	l.wakeLocked()
	clear(l.producers)
	l.txns.reset()
	l.epochs.reset()
	return nil
}

// rebuildStateLocked replays every batch header into fresh producer state
// and epoch cache, as Open does.
func (l *Log) rebuildStateLocked() error {
	clear(l.producers)
	l.txns.reset()
	l.epochs.reset()
	var hb [protocol.BatchHeaderSize]byte
	for _, s := range l.segs {
		for pos := int64(0); pos < s.size; {
			if _, err := s.log.ReadAt(hb[:], pos); err != nil {
				return l.failLocked("rebuild producer state", err)
			}
			h, err := parseHeader(hb[:])
			if err != nil {
				return l.failLocked("rebuild producer state", err)
			}
			m := markerAt(s.log, pos, &h)
			l.producers.update(&h, m)
			l.txns.update(&h, m.typ, 0)
			l.epochs.assign(h.LeaderEpoch, h.BaseOffset)
			pos += h.Size
		}
	}
	l.epochs.truncateFromStart(l.logStart)
	return nil
}

// ApplyRetention deletes whole segments, oldest first, while the oldest is
// wholly below the log start offset, or, when cleanup.policy includes
// delete (Config.Delete), older than retention.ms (by its largest
// timestamp, or its creation time if no batch has one) or not needed to
// keep the log within retention.bytes. The active segment is never deleted. The
// log start offset moves to the first remaining segment. It returns how many
// segments were deleted; errors are fatal (ErrFatal) except ErrClosed.
func (l *Log) ApplyRetention(now time.Time) (deleted int, err error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	excess := total - l.cfg.RetentionBytes
	n := 0
	for n < len(l.segs)-1 {
		s := l.segs[n]
		byStart := l.segs[n+1].base <= l.logStart
		byTime := false
		if l.cfg.Delete && l.cfg.RetentionMs >= 0 {
			ts := s.maxTs
			if ts < 0 {
				// No timestamps: Kafka falls back to the file's mtime.
				ts = s.created.UnixMilli()
				if st, err := s.log.Stat(); err == nil {
					ts = st.ModTime().UnixMilli()
				}
			}
			byTime = now.UnixMilli()-ts > l.cfg.RetentionMs.Milliseconds()
		}
		bySize := l.cfg.Delete && l.cfg.RetentionBytes >= 0 && excess-s.size >= 0
		if !byStart && !byTime && !bySize {
			break
		}
		excess -= s.size
		n++
	}
	return n, l.deleteOldestLocked(n)
}

// deleteOldestLocked removes the n oldest segments and moves the log start.
func (l *Log) deleteOldestLocked(n int) error {
	if n == 0 {
		return nil
	}
	for j := 0; j < n; j++ {
		if err := l.segs[j].remove(l.dir); err != nil {
			return l.failLocked("remove segment", err)
		}
	}
	l.segs = append(l.segs[:0], l.segs[n:]...)
	if err := fsutil.SyncDir(l.dir); err != nil {
		return l.failLocked("sync directory", err)
	}
	l.logStart = max(l.logStart, l.segs[0].base)
	l.epochs.truncateFromStart(l.logStart)
	return nil
}

// DeleteRecordsBefore advances the log start offset to offset (DeleteRecords)
// and persists it before returning, then deletes segments wholly below it.
// An offset at or below the current start does nothing; one past the log end
// offset is ErrOffsetOutOfRange (the caller checks its high watermark).
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset > l.leo {
		return fmt.Errorf("%w: offset %d past log end %d", ErrOffsetOutOfRange, offset, l.leo)
	}
	if offset <= l.logStart {
		return nil
	}
	if err := writeLogStart(l.dir, offset); err != nil {
		// Nothing changed yet: on a full disk the caller may retry, or
		// let retention free space first.
		return l.noSpaceLocked("write log start", err, func() error {
			return removeIfExists(filepath.Join(l.dir, logStartFile+".tmp"))
		})
	}
	l.logStart = offset
	n := 0
	for n < len(l.segs)-1 && l.segs[n+1].base <= offset {
		n++
	}
	if err := l.deleteOldestLocked(n); err != nil {
		return err
	}
	l.epochs.truncateFromStart(l.logStart)
	return nil
}
