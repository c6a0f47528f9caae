package log

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// A full file system is the one write failure the log survives (see
// ErrNoSpace). write(2) reports ENOSPC before anything reaches the page
// cache's dirty state that a later fsync would have to carry, and a short
// write leaves only bytes past the last whole batch, which are cut off
// before the error is returned. So unlike a failed fsync (fsyncgate: the
// page cache state is then unknown) nothing needs to be distrusted, and
// the next append once space is freed continues the log exactly where the
// last good batch ended.

// writeAt is how segment, index and WAL bytes are written; tests replace
// it to inject a full disk (a short write, then ENOSPC).
var writeAt = func(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }

// IsNoSpace says a write failed because the file system, or the user's
// quota on it, is full.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// segmentMark is everything an append may change in the active segment,
// so that an append that ran out of space can be undone.
type segmentMark struct {
	size, next, firstBatchMaxTs, maxTs, maxTsBase, maxTsLast, sinceIndex int64
	nOffsets, nTimes                                                     int
}

// mark records the active (resident) segment's state before an append.
func (s *segment) mark() segmentMark {
	return segmentMark{
		size: s.size, next: s.next, firstBatchMaxTs: s.firstBatchMaxTs,
		maxTs: s.maxTs, maxTsBase: s.maxTsBase, maxTsLast: s.maxTsLast, sinceIndex: s.sinceIndex,
		nOffsets: len(s.idx.offsets), nTimes: len(s.idx.times),
	}
}

// rollback cuts the segment file and both index files back to m and
// forgets what was learnt since, so a torn batch or index entry never
// stays in a file where a reader or a later append could meet it.
func (s *segment) rollback(m segmentMark) error {
	if err := s.log.Truncate(m.size); err != nil {
		return err
	}
	if err := s.idx.offFile.Truncate(int64(m.nOffsets) * offsetIndexEntrySize); err != nil {
		return err
	}
	if err := s.idx.timeFile.Truncate(int64(m.nTimes) * timeIndexEntrySize); err != nil {
		return err
	}
	s.size, s.next, s.firstBatchMaxTs = m.size, m.next, m.firstBatchMaxTs
	s.maxTs, s.maxTsBase, s.maxTsLast, s.sinceIndex = m.maxTs, m.maxTsBase, m.maxTsLast, m.sinceIndex
	s.idx.offsets, s.idx.times = s.idx.offsets[:m.nOffsets], s.idx.times[:m.nTimes]
	return nil
}

// noSpaceLocked handles a failed write of op. A full file system is undone
// by undo (which puts the files back at the last whole batch) and returned
// as ErrNoSpace, the log staying usable; any other error, or an undo that
// fails, is fatal (failLocked). The first of a run of full-disk failures
// is logged, not every one: a producer retries, and the log lines would
// go to a disk that is likely full too.
func (l *Log) noSpaceLocked(op string, err error, undo func() error) error {
	if !IsNoSpace(err) {
		return l.failLocked(op, err)
	}
	if uerr := undo(); uerr != nil {
		return l.failLocked(op+" (cutting back after a full disk)", errors.Join(err, uerr))
	}
	if !l.full {
		l.full = true
		l.lg.Warn().Err(err).Str("op", op).Msg("file system full: appends refused until space is freed; reads go on")
	}
	return fmt.Errorf("%w: %s: %w", ErrNoSpace, op, err)
}

// spaceBackLocked ends a run of full-disk failures after a write that
// succeeded.
func (l *Log) spaceBackLocked() {
	if l.full {
		l.full = false
		l.lg.Info().Msg("space available again: appends resumed")
	}
}
