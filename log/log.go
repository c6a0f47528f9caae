package log

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

const (
	// cleanShutdownFile marks a log closed by Close after everything was
	// synced, and holds the snapshot that lets Open skip recovery.
	cleanShutdownFile = ".clean-shutdown"
	// logStartFile persists a log start offset advanced past the first
	// segment's base (DeleteRecords).
	logStartFile = "log-start-offset"
)

// AppendResult reports where a batch went.
type AppendResult = partition.AppendResult

// ReadResult is the answer to Read.
type ReadResult = partition.ReadResult

// Log is one partition's log in its own directory. All methods are safe for
// concurrent use. Appends are serialised; reads run in parallel with each
// other and wait only for an append's page-cache write or while a segment is
// rolled, truncated or deleted.
type Log struct {
	lock    *os.File // holds the directory lock until Close
	dir     string
	lg      zerolog.Logger
	flusher *Flusher
	now     func() time.Time
	// queued is set while the log sits in the flusher's dirty set.
	queued atomic.Bool
	// wal is the flusher's write-ahead log, nil without one.
	wal *wal

	// syncMu is held across an fdatasync of the active segment and by
	// anything that closes or removes segment files, so a file is never
	// closed under a sync. Lock order: syncMu, then mu.
	syncMu sync.Mutex
	// dropSeg and dropPos (under syncMu): the active segment's bytes below
	// dropPos were synced and dropped from the page cache (drop-behind).
	dropSeg *segment
	dropPos int64

	mu        sync.RWMutex
	cfg       Config
	segs      []*segment // by base offset; the last is active
	logStart  int64
	leo       int64
	durable   int64         // every offset below it is synced (in the WAL or a segment)
	segSynced int64         // every offset below it is in synced segment files
	ident     logIdentity   // id and truncation epoch in the WAL
	wl        *walLog       // registration with wal; nil when appends are not logged
	durableCh chan struct{} // closed and replaced when durable advances or the log fails or closes
	producers producers
	txns      txnState // open and aborted transactions (txn.go)
	epochs    epochCache
	cleanedTo int64  // the cleaner checkpoint (clean.go)
	gen       uint64 // bumped by truncation, so a cleaning pass can tell
	closed    bool
	err       error // sticky; wraps ErrFatal
	full      bool  // the last write failed with ErrNoSpace (logged once per run)

	openedFromSnapshot bool // for tests: Open skipped the recovery walk
}

// Open opens or creates the log in dir and recovers it (see the package
// documentation). After a clean Close it loads the snapshot Close left and
// reads no batch. Otherwise it checks the last segment batch by batch (length
// bounds, magic, CRC-32C, record count, increasing offsets), walks every
// other segment's headers, truncates at the first damaged batch (deleting any
// later segments), rebuilds index files that disagree with their segment and
// rebuilds producer state and the leader epoch cache from the batch headers.
// Files that belong to no segment are removed either way. If the Flusher
// has a WAL, Open then replays the WAL records of this log that the
// recovered segments lack (see the package documentation) and registers the
// log with the WAL. A new directory gets a log-id file. Open blocks for all
// of that and a few fsyncs. An error means the log could not be made
// consistent (an invalid Config or an I/O failure); the caller must not
// serve the partition.
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	if err := validateConfig(cfg); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// A new partition directory must survive a crash with its files.
	if err := fsutil.MkdirAllSync(dir, 0o755); err != nil {
		return nil, err
	}
	if opts.Flusher != nil && opts.Flusher.err != nil {
		return nil, opts.Flusher.err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	l := &Log{
		lock:      lock,
		dir:       dir,
		lg:        opts.Logger.With().Str("component", "log").Str("log_dir", filepath.Base(dir)).Logger(),
		flusher:   opts.Flusher,
		now:       opts.Now,
		cfg:       cfg,
		durableCh: make(chan struct{}),
		producers: producers{},
		txns:      newTxnState(),
	}
	if opts.Flusher != nil {
		l.wal = opts.Flusher.wal
	}
	fail := func(err error) (*Log, error) {
		for _, s := range l.segs {
			s.close()
		}
		lock.Close()
		return nil, err
	}
	if l.ident, err = loadIdentity(dir); err != nil {
		return fail(err)
	}
	if err := l.recover(); err != nil {
		if l.wal != nil {
			l.wal.replayAborted(l.ident.id)
		}
		return fail(err)
	}
	if l.wal != nil {
		wl, err := l.wal.register(l, l.ident.id, l.ident.epoch)
		if err != nil && !errors.Is(err, errWALClosed) {
			l.wal.replayAborted(l.ident.id)
			return fail(err)
		}
		l.wl = wl
		// Everything replayed is in a synced segment now.
		l.wal.recoveredDone(l.ident.id)
	}
	return l, nil
}

func (l *Log) recover() error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	if err := completeSwaps(l.dir, names); err != nil {
		return err
	}
	if entries, err = os.ReadDir(l.dir); err != nil {
		return err
	}
	bases := map[int64]bool{}
	var strays []string
	clean := false
	for _, e := range entries {
		name := e.Name()
		if b, ok := parseSegmentName(name, logSuffix); ok {
			bases[b] = true
		}
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == cleanShutdownFile:
			clean = true
		case name == logStartFile, name == logIDFile, name == cleanerCheckpointFile:
		case name == "partition.metadata", strings.HasPrefix(name, "raft."):
			// Kafka's layout keeps the topic id beside the segments,
			// and a raft replica its index and state files; the
			// replica layer writes them, the log leaves them alone.
		case strings.HasSuffix(name, logSuffix) && isSegmentFile(name, logSuffix):
		case isSegmentFile(name, indexSuffix) || isSegmentFile(name, timeIndexSuffix):
			b, _ := parseSegmentName(name, filepath.Ext(name))
			if !bases[b] {
				strays = append(strays, name)
			}
		case strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".deleted") ||
			strings.HasSuffix(name, ".cleaned") || strings.HasSuffix(name, ".swap"):
			strays = append(strays, name)
		default:
			l.lg.Warn().Str("file", name).Msg("unknown file in log directory left alone")
		}
	}
	for _, name := range strays {
		if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
			return err
		}
		l.lg.Warn().Str("file", name).Msg("removed file that belongs to no segment")
	}
	checkpoint, err := readLogStart(l.dir)
	if err != nil {
		l.lg.Warn().Err(err).Msg("ignoring unreadable log start checkpoint")
		checkpoint = 0
	}
	sorted := make([]int64, 0, len(bases))
	for b := range bases {
		sorted = append(sorted, b)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })

	// Only the cleaner leaves offsets between two segments (it deletes a
	// segment it emptied). In a log that is not compacted and was never
	// cleaned, such a gap is a segment lost from outside, and serving it
	// would skip records consumers never see.
	_, ckErr := os.Stat(filepath.Join(l.dir, cleanerCheckpointFile))
	gapsPossible := l.cfg.Compact || ckErr == nil
	now := l.now()
	fast := false
	if clean && len(sorted) > 0 {
		if err := l.loadSnapshot(sorted, now); err != nil {
			// Without a usable snapshot the marker proves nothing.
			l.lg.Warn().Err(err).Msg("clean shutdown marker present but unusable; recovering as after a crash")
			clean = false
		} else {
			fast = true
			l.openedFromSnapshot = true
		}
	}
	for i, base := range sorted {
		if fast {
			break
		}
		s, err := openSegment(l.dir, base, false, now, int64(l.cfg.SegmentIndexBytes))
		if err != nil {
			return err
		}
		if i > 0 && base < l.segs[i-1].next {
			// Overlaps the previous segment: no crash of ours leaves this, so
			// it is debris from outside. Like Kafka, keep the older data.
			l.lg.Error().Int64("segment", base).Int64("previous_end", l.segs[i-1].next).
				Msg("segment overlaps its predecessor; deleting it and every later segment")
			s.remove(l.dir)
			if err := l.removeBases(sorted[i+1:]); err != nil {
				return err
			}
			break
		}
		if i > 0 && base > l.segs[i-1].next && !gapsPossible {
			// Like damage in an older segment: keep what precedes and
			// delete the rest rather than leave a gap (a raft replica
			// then finds entries missing, see replica.ErrLostCommitted).
			l.lg.Error().Int64("segment", base).Int64("previous_end", l.segs[i-1].next).
				Msg("offsets missing before this segment in a log that is never compacted (a segment lost); deleting it and every later segment")
			s.remove(l.dir)
			if err := l.removeBases(sorted[i+1:]); err != nil {
				return err
			}
			break
		}
		last := i == len(sorted)-1
		minOffset := base
		if i > 0 {
			minOffset = l.segs[i-1].next
		}
		res, err := s.scan(minOffset, last && !clean, l.cfg.IndexIntervalBytes, func(h *batchHeader) {
			m := markerAt(s.log, s.size-h.Size, h)
			l.producers.update(h, m)
			l.txns.update(h, m.typ, 0)
			l.epochs.assign(h.LeaderEpoch, h.BaseOffset)
		})
		if err != nil {
			s.close()
			return fmt.Errorf("scanning segment %s: %w", segmentName(base, logSuffix), err)
		}
		l.segs = append(l.segs, s)
		if err := l.checkIndexFiles(s); err != nil {
			return err
		}
		if !last && res.bad == nil {
			s.idx.evict()
		}
		if res.bad != nil {
			dropped := res.fileSize - res.validEnd
			l.lg.Warn().Err(res.bad).Str("segment", segmentName(base, logSuffix)).
				Int64("valid_bytes", res.validEnd).Int64("dropped_bytes", dropped).
				Int("later_segments_deleted", len(sorted)-i-1).
				Msg("truncating log at the first damaged batch")
			if err := s.log.Truncate(res.validEnd); err != nil {
				return err
			}
			if err := s.sync(); err != nil {
				return err
			}
			if err := l.removeBases(sorted[i+1:]); err != nil {
				return err
			}
			break
		}
	}
	if len(l.segs) == 0 {
		s, err := openSegment(l.dir, checkpoint, true, now, int64(l.cfg.SegmentIndexBytes))
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
	}
	l.leo = l.active().next
	l.logStart = min(max(checkpoint, l.segs[0].base), l.leo)
	if l.cleanedTo, err = readOffsetFile(l.dir, cleanerCheckpointFile); err != nil {
		l.lg.Warn().Err(err).Msg("ignoring unreadable cleaner checkpoint; the log is cleaned again from its start")
		l.cleanedTo = 0
	}
	l.cleanedTo = min(l.cleanedTo, l.leo)
	l.epochs.truncateFromStart(l.logStart)
	replayed, err := l.replayWAL()
	if err != nil {
		return err
	}
	if !clean || replayed > 0 {
		// What the previous process wrote may still be only in the page
		// cache; one sync makes all of it durable before anything new is
		// acknowledged on top of it.
		if err := l.active().sync(); err != nil {
			return err
		}
	}
	l.durable, l.segSynced = l.leo, l.leo
	if clean {
		if err := os.Remove(filepath.Join(l.dir, cleanShutdownFile)); err != nil {
			return err
		}
	}
	return fsutil.SyncDir(l.dir)
}

// replayWAL appends the WAL records an earlier process left for this log
// that its recovered segments lack: those of its current truncation epoch,
// in WAL order, starting with the one whose base offset is the log end
// offset and continuing while each starts where the last ended. It stops,
// with an error in the log, at a gap or a record that straddles the log end
// offset; neither can follow from a crash.
func (l *Log) replayWAL() (int, error) {
	if l.wal == nil {
		return 0, nil
	}
	n := 0
	for _, r := range l.wal.recoveredFor(l.ident.id) {
		if r.epoch != l.ident.epoch || r.end <= l.leo {
			if r.epoch > l.ident.epoch {
				l.lg.Error().Uint32("record_epoch", r.epoch).Uint32("epoch", l.ident.epoch).
					Msg("write-ahead log record from a later truncation epoch than this log's; skipped")
			}
			continue
		}
		if r.base != l.leo {
			l.lg.Error().Int64("record_base", r.base).Int64("record_end", r.end).Int64("log_end", l.leo).
				Msg("write-ahead log records do not continue the recovered log; replay stopped")
			break
		}
		b, err := l.wal.readRecovered(r)
		if err != nil {
			return n, fmt.Errorf("replaying write-ahead log: %w", err)
		}
		h, err := parseHeader(b)
		if err != nil || h.Size != int64(len(b)) || h.BaseOffset != r.base || !checkCRC(b) {
			l.lg.Error().AnErr("reason", err).Int64("record_base", r.base).
				Msg("write-ahead log record changed since it was scanned; replay stopped")
			break
		}
		if err := l.appendLocked(b, &h); err != nil {
			return n, fmt.Errorf("replaying write-ahead log at offset %d: %w", r.base, err)
		}
		n++
	}
	if n > 0 {
		l.lg.Warn().Int("batches", n).Int64("log_end", l.leo).
			Msg("restored batches from the write-ahead log that the segment had lost")
	}
	return n, nil
}

func isSegmentFile(name, suffix string) bool {
	_, ok := parseSegmentName(name, suffix)
	return ok
}

// checkIndexFiles compares s's index files with the entries its scan rebuilt
// and rewrites them if they differ in any way (missing, torn, garbage, or
// written with another index.interval.bytes).
func (l *Log) checkIndexFiles(s *segment) error {
	offs, times, err := readIndexFiles(s.idx.offFile, s.idx.timeFile, int64(l.cfg.SegmentIndexBytes)+1<<20)
	if err == nil && equalEntries(offs, s.idx.offsets) && equalEntries(times, s.idx.times) {
		return nil
	}
	l.lg.Warn().Str("segment", segmentName(s.base, logSuffix)).AnErr("reason", err).Msg("rebuilding index files")
	if err := s.idx.rewrite(); err != nil {
		return err
	}
	return s.idx.sync()
}

func equalEntries[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (l *Log) removeBases(bases []int64) error {
	for j := len(bases) - 1; j >= 0; j-- {
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := os.Remove(filepath.Join(l.dir, segmentName(bases[j], suf))); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// usableLocked returns the sticky error or ErrClosed.
func (l *Log) usableLocked() error {
	if l.err != nil {
		return l.err
	}
	if l.closed {
		return ErrClosed
	}
	return nil
}

// failLocked makes err sticky: from now on every call returns it. Nothing
// is retried, because after a failed write or fsync the state of the page
// cache is unknown (the fsyncgate lesson).
func (l *Log) failLocked(op string, err error) error {
	if l.err == nil {
		l.err = fmt.Errorf("%w: %s: %w", ErrFatal, op, err)
		l.lg.Error().Err(err).Str("op", op).Msg("log storage failed; refusing all further operations")
		l.wakeLocked()
	}
	return l.err
}

func (l *Log) wakeLocked() {
	close(l.durableCh)
	l.durableCh = make(chan struct{})
}

// Append writes one v2 record batch as the leader. The caller has checked the
// batch's framing and CRC and stamped its partitionLeaderEpoch; Append
// overwrites bytes 0..8 (baseOffset) in place with the log end offset, which
// the CRC does not cover, and keeps no reference to batch after returning.
//
// Idempotent batches (producerId >= 0) are checked against the producer's
// state first (ProducerEntry.Check): a retry of one of the last five batches
// returns the original offsets with Duplicate set and writes nothing. The
// original may not be durable yet, so acks=all still waits on LastOffset+1.
//
// Append does not wait for durability; call WaitDurable. It blocks only for
// the write to the page cache, and on a segment roll for the old segment's
// fdatasync. Errors: ErrCorrupt, ErrBatchTooLarge, ErrOutOfOrderSequence,
// ErrInvalidProducerEpoch, ErrCoordinatorFenced reject this batch only;
// ErrFatal and ErrClosed are permanent.
func (l *Log) Append(batch []byte) (AppendResult, error) {
	return l.appendLeader(batch, 0)
}

// AppendMarker is Append for a transaction marker that a coordinator sent
// with WriteTxnMarkers' transaction version (v2, KIP-1228; 0 before):
// besides Append's checks, a marker whose coordinator epoch is below the
// last one the producer's markers carried here is refused with
// ErrCoordinatorFenced, and with transaction version 2 its producer epoch
// must be above the producer's (the epoch EndTxn bumped to), not only at
// least it: ErrInvalidProducerEpoch otherwise (Kafka's
// ProducerAppendInfo.appendEndTxnMarker).
func (l *Log) AppendMarker(batch []byte, txnVersion int8) (AppendResult, error) {
	return l.appendLeader(batch, txnVersion)
}

func (l *Log) appendLeader(batch []byte, txnVersion int8) (AppendResult, error) {
	h, err := parseHeader(batch)
	if err != nil {
		return AppendResult{}, err
	}
	if h.Size != int64(len(batch)) {
		return AppendResult{}, fmt.Errorf("%w: batch length says %d bytes, got %d", ErrCorrupt, h.Size, len(batch))
	}
	if l.wal != nil {
		l.wal.admit()
	}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return AppendResult{}, err
	}
	if err := l.checkSizeLocked(h.Size); err != nil {
		l.mu.Unlock()
		return AppendResult{}, err
	}
	if h.ProducerID >= 0 {
		dup, isDup, err := l.producers.check(&h, markerOf(batch, &h), txnVersion)
		if err != nil {
			l.mu.Unlock()
			return AppendResult{}, err
		}
		if isDup {
			l.mu.Unlock()
			return AppendResult{BaseOffset: dup.FirstOffset, LastOffset: dup.LastOffset, Duplicate: true}, nil
		}
	}
	h.BaseOffset = l.leo
	protocol.Batch(batch).SetBaseOffset(h.BaseOffset)
	if err := l.appendLocked(batch, &h); err != nil {
		l.mu.Unlock()
		return AppendResult{}, err
	}
	logged, kick, err := l.logLocked(batch, &h)
	l.mu.Unlock()
	if err != nil {
		return AppendResult{}, err
	}
	l.markDirty(logged, kick)
	return AppendResult{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset()}, nil
}

// logLocked appends the batch just written to the segment to the WAL, if the
// log uses one. logged says it did; once the WAL is closed (the Flusher
// closed) the log stops using it and syncs its segment instead.
func (l *Log) logLocked(batch []byte, h *batchHeader) (logged, kick bool, err error) {
	if l.wl == nil {
		return false, false, nil
	}
	kick, err = l.wal.append(l.wl, h.BaseOffset, l.leo, batch)
	switch {
	case err == nil:
		return true, kick, nil
	case errors.Is(err, errWALClosed):
		l.wl = nil
		return false, false, nil
	default:
		return false, false, l.failLocked("append to write-ahead log", err)
	}
}

// AppendReplicated writes a batch whose offsets the leader already assigned;
// its base offset must equal the log end offset (ErrOffsetMismatch otherwise).
// No idempotence checks run: the leader made them, and every replica applies
// the same batches to its producer state so that dedupe survives failover.
// Blocking and the other errors are as for Append.
func (l *Log) AppendReplicated(batch []byte) error {
	h, err := parseHeader(batch)
	if err != nil {
		return err
	}
	if h.Size != int64(len(batch)) {
		return fmt.Errorf("%w: batch length says %d bytes, got %d", ErrCorrupt, h.Size, len(batch))
	}
	if l.wal != nil {
		l.wal.admit()
	}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	if h.BaseOffset != l.leo {
		l.mu.Unlock()
		return fmt.Errorf("%w: base offset %d, log end offset %d", ErrOffsetMismatch, h.BaseOffset, l.leo)
	}
	if err := l.appendLocked(batch, &h); err != nil {
		l.mu.Unlock()
		return err
	}
	logged, kick, err := l.logLocked(batch, &h)
	l.mu.Unlock()
	if err == nil {
		l.markDirty(logged, kick)
	}
	return err
}

// CheckBatchSize refuses, as Append does, a batch of n bytes that is larger
// than segment.bytes (Kafka's RecordBatchTooLargeException): a leader
// checks before it assigns offsets. Replicated appends take any size (the
// batch then fills a segment of its own), so a batch a leader accepted
// under an older, larger segment.bytes never fails a follower.
func (l *Log) CheckBatchSize(n int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkSizeLocked(n)
}

func (l *Log) checkSizeLocked(n int64) error {
	if n > int64(l.cfg.SegmentBytes) {
		return fmt.Errorf("%w: %d bytes, segment.bytes %d", ErrBatchTooLarge, n, l.cfg.SegmentBytes)
	}
	return nil
}

func (l *Log) appendLocked(batch []byte, h *batchHeader) error {
	s := l.active()
	if l.shouldRollLocked(s, h) {
		if err := l.rollLocked(); err != nil {
			return err
		}
		s = l.active()
	}
	pos, m := s.size, s.mark()
	undo := func() error { return s.rollback(m) }
	if _, err := writeAt(s.log, batch, pos); err != nil {
		return l.noSpaceLocked("write segment", err, undo)
	}
	if err := s.track(pos, h, l.cfg.IndexIntervalBytes, true); err != nil {
		return l.noSpaceLocked("write index", err, undo)
	}
	l.spaceBackLocked()
	l.leo = s.next
	mk := markerOf(batch, h)
	l.producers.update(h, mk)
	l.txns.update(h, mk.typ, l.logStart)
	l.epochs.assign(h.LeaderEpoch, h.BaseOffset)
	return nil
}

// shouldRollLocked is Kafka's LogSegment.shouldRoll.
func (l *Log) shouldRollLocked(s *segment, h *batchHeader) bool {
	if s.size == 0 {
		return false
	}
	if s.size+h.Size > l.cfg.SegmentBytes || s.indexFull() || h.LastOffset()-s.base > 1<<31-1 {
		return true
	}
	// Like Kafka, measure segment.ms in the batches' own timestamps when
	// they have them, so a restart does not reset the clock.
	if s.firstBatchMaxTs >= 0 {
		return h.MaxTimestamp-s.firstBatchMaxTs > maxSegmentMs(l.cfg).Milliseconds()
	}
	return l.now().Sub(s.created) > maxSegmentMs(l.cfg)
}

// rollLocked syncs the active segment and starts a new one at the log end
// offset. Syncing here keeps recovery simple: only the last segment can ever
// hold unsynced bytes, so only it needs a CRC scan after a crash. On a full
// disk (the final time index entry or the new files) the old segment stays
// active and the next append tries the roll again; repeating the final
// entry and the sync is harmless.
func (l *Log) rollLocked() error {
	old := l.active()
	if old.maxTs >= 0 {
		n := len(old.idx.times)
		if err := old.idx.maybeAppendTime(old.finalTimeEntry()); err != nil {
			return l.noSpaceLocked("write time index", err, func() error {
				return old.idx.timeFile.Truncate(int64(n) * timeIndexEntrySize)
			})
		}
	}
	if err := old.sync(); err != nil {
		return l.failLocked("sync rolled segment", err)
	}
	s, err := openSegment(l.dir, l.leo, true, l.now(), int64(l.cfg.SegmentIndexBytes))
	if err != nil {
		// openSegment closed what it opened; the files it created are
		// empty and belong to no batch.
		return l.noSpaceLocked("create segment", err, func() error { return l.removeBases([]int64{l.leo}) })
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		s.close()
		return l.failLocked("sync directory", err)
	}
	old.idx.evict()
	l.segs = append(l.segs, s)
	l.segmentSyncedLocked(l.leo)
	return nil
}

// segmentSyncedLocked records that every offset below off is in synced
// segment files.
func (l *Log) segmentSyncedLocked(off int64) {
	l.advanceDurableLocked(off)
	if off > l.segSynced {
		l.segSynced = off
	}
	if l.wl != nil {
		l.wal.segmentSynced(l.wl, l.ident.epoch, off)
	}
}

// walDurable is called by a WAL round: every record of this log up to end,
// in truncation epoch epoch, is synced in the WAL.
func (l *Log) walDurable(epoch uint32, end int64) {
	l.mu.Lock()
	if l.ident.epoch == epoch && l.usableLocked() == nil {
		l.advanceDurableLocked(min(end, l.leo))
	}
	l.mu.Unlock()
}

func (l *Log) advanceDurableLocked(off int64) {
	if off > l.durable {
		l.durable = off
		l.wakeLocked()
	}
}

// markDirty tells the flusher there is something to sync: with the WAL
// (logged) a kick under FlushGroup, or when the WAL buffer is large;
// otherwise the log joins the flusher's dirty set.
func (l *Log) markDirty(logged, kick bool) {
	f := l.flusher
	if f == nil || f.cfg.Policy == FlushNever {
		return
	}
	if logged {
		if kick || f.cfg.Policy == FlushGroup {
			f.kickNow()
		}
		return
	}
	if !f.running() {
		return
	}
	if !l.queued.Swap(true) {
		f.add(l)
	}
}

// flush syncs the active segment, making everything appended so far
// durable in the segment files. It is what the Flusher runs for each dirty
// log without a WAL, what WaitDurable runs without a running Flusher, and
// what a WAL checkpoint runs. Concurrent callers queue on syncMu, and each
// finds the work of the one before done: group commit among one log's
// waiters.
func (l *Log) flush() {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.RLock()
	if l.usableLocked() != nil {
		l.mu.RUnlock()
		return
	}
	if l.leo <= l.segSynced {
		logged := l.wl != nil
		l.mu.RUnlock()
		if logged {
			// Let a checkpoint see what an earlier sync covered.
			l.mu.Lock()
			l.segmentSyncedLocked(l.segSynced)
			l.mu.Unlock()
		}
		return
	}
	seg := l.active()
	target, f, pos := l.leo, seg.log, seg.size
	l.mu.RUnlock()
	// Everything below target is in f or in a segment synced when it
	// rolled, so syncing f alone makes target durable.
	err := syncFile(f)
	l.mu.Lock()
	if err != nil {
		l.failLocked("sync segment", err)
	} else if l.usableLocked() == nil {
		l.segmentSyncedLocked(target)
	}
	l.mu.Unlock()
	if err == nil {
		l.dropBehind(seg, pos)
	}
}

// dropBehind drops from the page cache the bytes of seg, synced up to pos,
// that lie more than the flusher's CacheTailBytes behind pos. Called with
// syncMu held, which also keeps seg's file open. Dropping is advice: a
// failure changes nothing but the cache, and is ignored.
func (l *Log) dropBehind(seg *segment, pos int64) {
	if l.flusher == nil || l.flusher.cfg.CacheTailBytes <= 0 {
		return
	}
	if l.dropSeg != seg {
		l.dropSeg, l.dropPos = seg, 0
	}
	// Drop whole 2 MiB-aligned steps: the page cache keeps a file in
	// naturally aligned folios (up to 2 MiB), and a folio straddling the
	// range's edge would stay; one call per sync would also drop only a few
	// pages at a time.
	const step = 2 << 20
	end := (pos - l.flusher.cfg.CacheTailBytes) &^ (step - 1)
	if end <= l.dropPos {
		return
	}
	dropCache(seg.log, l.dropPos, end-l.dropPos)
	l.dropPos = end
}

// WaitDurable blocks until every offset below offset is synced to disk under
// the Flusher's policy, the context ends (ctx.Err()), or the log fails
// (ErrFatal) or closes (ErrClosed). With FlushNever it returns at once. An
// offset past the log end offset waits for it to be appended.
func (l *Log) WaitDurable(ctx context.Context, offset int64) error {
	f := l.flusher
	if f != nil && f.cfg.Policy == FlushNever {
		l.mu.RLock()
		defer l.mu.RUnlock()
		return l.usableLocked()
	}
	for {
		l.mu.RLock()
		err, durable, leo, ch, logged := l.usableLocked(), l.durable, l.leo, l.durableCh, l.wl != nil
		l.mu.RUnlock()
		if err != nil {
			return err
		}
		if durable >= offset {
			return nil
		}
		var stopped <-chan struct{}
		if f != nil && f.running() {
			stopped = f.done
			if logged {
				// The WAL round that covers this log's records releases
				// the waiter; under FlushGroup make sure one is coming.
				if f.cfg.Policy == FlushGroup {
					f.kickNow()
				}
			} else if !l.queued.Load() {
				// The append this waiter depends on may have raced with the
				// flusher's start or a round that took the log before it
				// was written; queueing again is harmless.
				l.markDirty(false, false)
			}
		} else if leo > durable {
			if logged {
				if synced, _ := l.wal.sync(); synced {
					continue
				}
			}
			l.flush()
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-stopped:
		}
	}
}

// LogStartOffset is the first offset a reader may ask for.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStart
}

// LogEndOffset is the offset the next appended batch will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leo
}

// DurableOffset is the offset below which everything is synced; with
// FlushNever it is the log end offset, since nothing is waited for.
func (l *Log) DurableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.flusher != nil && l.flusher.cfg.Policy == FlushNever {
		return l.leo
	}
	return l.durable
}

// ProducerState returns what the log holds for an idempotent producer, false
// if it holds nothing.
func (l *Log) ProducerState(producerID int64) (ProducerState, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.producers.state(producerID)
}

// SetConfig changes the topic config; new values apply to the next append,
// roll and retention pass. An invalid config is refused and the old one kept.
func (l *Log) SetConfig(cfg Config) error {
	if err := validateConfig(cfg); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg
	for _, s := range l.segs {
		s.maxIdxBytes = int64(cfg.SegmentIndexBytes)
	}
	return nil
}

// Close syncs everything, marks the shutdown clean and closes the files. It
// waits for reads and a running flush. Later calls return ErrClosed; a
// failed log closes its files but stays failed and is not marked clean.
func (l *Log) Close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	err := l.err
	if err == nil {
		err = l.closeCleanLocked()
	}
	if l.wl != nil {
		// A failed log keeps the WAL files that hold its records.
		l.wal.unregister(l.wl, l.err == nil)
	}
	for _, s := range l.segs {
		s.close()
	}
	l.lock.Close()
	l.closed = true
	l.wakeLocked()
	return err
}

// closeCleanLocked syncs the active segment and leaves the clean shutdown
// marker. On a full disk it leaves out the final time index entry and the
// marker, which only save time: the next Open then recovers as after a
// crash and rebuilds the index files, from a segment that is synced.
func (l *Log) closeCleanLocked() error {
	s := l.active()
	marker := true
	if s.maxTs >= 0 {
		n := len(s.idx.times)
		if err := s.idx.maybeAppendTime(s.finalTimeEntry()); err != nil {
			if err := l.noSpaceLocked("write time index", err, func() error {
				return s.idx.timeFile.Truncate(int64(n) * timeIndexEntrySize)
			}); !errors.Is(err, ErrNoSpace) {
				return err
			}
			marker = false
		}
	}
	if err := s.sync(); err != nil {
		return l.failLocked("sync segment", err)
	}
	l.segmentSyncedLocked(l.leo)
	if !marker {
		return nil
	}
	if err := fsutil.WriteFileSync(l.dir, cleanShutdownFile, l.encodeSnapshotLocked()); err != nil {
		if err := l.noSpaceLocked("write clean shutdown marker", err, func() error {
			return removeIfExists(filepath.Join(l.dir, cleanShutdownFile+".tmp"))
		}); !errors.Is(err, ErrNoSpace) {
			return err
		}
	}
	return nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Delete closes the log and removes its directory (topic deletion).
func (l *Log) Delete() error {
	cerr := l.Close()
	if err := os.RemoveAll(l.dir); err != nil {
		return err
	}
	if err := fsutil.SyncDir(filepath.Dir(l.dir)); err != nil {
		return err
	}
	if cerr != nil && !errors.Is(cerr, ErrFatal) {
		return cerr
	}
	return nil
}

// syncFile is how segment and index files are made durable; tests replace
// it to inject failures.
var syncFile = observedSync

// The log start checkpoint is "0\n<offset>\n": a version, then the offset.
func readLogStart(dir string) (int64, error) { return readOffsetFile(dir, logStartFile) }

// readOffsetFile reads a checkpoint of one offset, "0\n<offset>\n" (the
// log start, the cleaner's); a missing file is offset 0.
func readOffsetFile(dir, name string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "0" {
		return 0, fmt.Errorf("malformed %s", name)
	}
	off, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || off < 0 {
		return 0, fmt.Errorf("malformed %s offset %q", name, lines[1])
	}
	return off, nil
}

func writeLogStart(dir string, off int64) error {
	return fsutil.WriteFileSync(dir, logStartFile, []byte("0\n"+strconv.FormatInt(off, 10)+"\n"))
}
