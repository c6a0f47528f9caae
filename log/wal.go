package log

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/protocol"
)

// The broker-wide write-ahead log (see "Durability: the write-ahead log" in
// the package documentation). A WAL directory holds files named by a
// sequence number as 20 decimal digits with the suffix .wal. Each starts
// with a header and is followed by records:
//
//	header: "SLWL" | version uint16 (1) | reserved uint16 (0) | seq uint64 |
//	        crc uint32 (CRC-32C of the 16 bytes before it)
//	record: length uint32 (bytes of payload) |
//	        crc uint32 (CRC-32C of the length field and the payload) |
//	        payload: kind uint8 (1: batch) | log id [16]byte |
//	                 truncation epoch uint32 | base offset int64 |
//	                 the record batch exactly as written to the segment
//
// All integers are big-endian. A file is only ever appended to by the
// process that created it; after a restart a new file is started, so a torn
// tail stays where it is and is never written after.
const (
	walSuffix        = ".wal"
	walMagic         = "SLWL"
	walVersion       = 1
	walHeaderSize    = 20
	walRecHeaderSize = 8
	walPayloadHeader = 1 + 16 + 4 + 8
	walKindBatch     = 1

	// defaultWALFileBytes is when the active WAL file is rotated.
	defaultWALFileBytes = 64 << 20
	// walMaxSealed is how many rotated files may wait for their checkpoint
	// before a round checkpoints inline (back-pressure) instead of leaving
	// it to the background.
	walMaxSealed = 2
)

// walSoftBuffer: above this many buffered bytes an append kicks the flusher
// even under FlushInterval. walHardBuffer: appends wait. Variables for tests.
var (
	walSoftBuffer = 4 << 20
	walHardBuffer = 64 << 20
)

// errWALClosed tells an appender that the WAL no longer takes records; the
// log then makes its data durable by syncing its segment.
var errWALClosed = errors.New("log: write-ahead log closed")

// walRecord is one decoded record. batch aliases the decoder's buffer.
type walRecord struct {
	id    [16]byte
	epoch uint32
	base  int64
	end   int64 // last offset of the batch + 1
	batch []byte
}

// appendWALRecord encodes one record onto b.
func appendWALRecord(b []byte, id [16]byte, epoch uint32, base int64, batch []byte) []byte {
	start := len(b)
	n := walPayloadHeader + len(batch)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, 0, 0, 0, 0) // crc
	b = append(b, walKindBatch)
	b = append(b, id[:]...)
	b = binary.BigEndian.AppendUint32(b, epoch)
	b = binary.BigEndian.AppendUint64(b, uint64(base))
	b = append(b, batch...)
	crc := crc32.Update(crc32.Checksum(b[start:start+4], castagnoli), castagnoli, b[start+walRecHeaderSize:])
	binary.BigEndian.PutUint32(b[start+4:], crc)
	return b
}

// decodeWALPayload checks and decodes a record's payload, given its header.
func decodeWALPayload(hdr []byte, payload []byte) (walRecord, error) {
	var r walRecord
	crc := crc32.Update(crc32.Checksum(hdr[:4], castagnoli), castagnoli, payload)
	if crc != binary.BigEndian.Uint32(hdr[4:]) {
		return r, fmt.Errorf("%w: WAL record CRC mismatch", ErrCorrupt)
	}
	if len(payload) < walPayloadHeader+protocol.BatchHeaderSize || payload[0] != walKindBatch {
		return r, fmt.Errorf("%w: WAL record kind %d, %d bytes", ErrCorrupt, payload[0], len(payload))
	}
	copy(r.id[:], payload[1:17])
	r.epoch = binary.BigEndian.Uint32(payload[17:])
	r.base = int64(binary.BigEndian.Uint64(payload[21:]))
	r.batch = payload[walPayloadHeader:]
	h, err := parseHeader(r.batch)
	if err != nil {
		return r, err
	}
	if h.Size != int64(len(r.batch)) || h.BaseOffset != r.base {
		return r, fmt.Errorf("%w: WAL record holds a batch of %d bytes at %d, record says %d bytes at %d",
			ErrCorrupt, h.Size, h.BaseOffset, len(r.batch), r.base)
	}
	r.end = h.LastOffset() + 1
	return r, nil
}

func walFileHeader(seq uint64) []byte {
	b := []byte(walMagic)
	b = binary.BigEndian.AppendUint16(b, walVersion)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, seq)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func checkWALFileHeader(b []byte, seq uint64) error {
	if len(b) < walHeaderSize || string(b[:4]) != walMagic ||
		binary.BigEndian.Uint16(b[4:]) != walVersion ||
		binary.BigEndian.Uint32(b[16:]) != crc32.Checksum(b[:16], castagnoli) {
		return fmt.Errorf("%w: bad WAL file header", ErrCorrupt)
	}
	if got := binary.BigEndian.Uint64(b[8:]); got != seq {
		return fmt.Errorf("%w: WAL file header says sequence %d, name %d", ErrCorrupt, got, seq)
	}
	return nil
}

// scanWAL reads the records that follow a file header from r, which holds
// size bytes (header included), calling fn with each good one and its
// batch's position in the file. It stops at the first record that is torn
// or fails a check: validEnd is where the good records end and bad says why
// it stopped early (nil if it read to the end). err is an I/O error.
func scanWAL(r io.Reader, size int64, fn func(rec *walRecord, pos int64)) (validEnd int64, bad, err error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var hdr [walRecHeaderSize]byte
	var payload []byte
	pos := int64(walHeaderSize)
	for pos < size {
		if size-pos < walRecHeaderSize {
			return pos, fmt.Errorf("%w: torn WAL record header at %d", ErrCorrupt, pos), nil
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return pos, nil, err
		}
		n := int64(binary.BigEndian.Uint32(hdr[:]))
		if n < walPayloadHeader+protocol.BatchHeaderSize || n > size-pos-walRecHeaderSize || n > math.MaxInt32 {
			return pos, fmt.Errorf("%w: WAL record at %d has length %d, %d bytes left", ErrCorrupt, pos, n, size-pos-walRecHeaderSize), nil
		}
		if int64(cap(payload)) < n {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(br, payload); err != nil {
			return pos, nil, err
		}
		rec, derr := decodeWALPayload(hdr[:], payload)
		if derr != nil {
			return pos, fmt.Errorf("WAL record at %d: %w", pos, derr), nil
		}
		fn(&rec, pos+walRecHeaderSize+walPayloadHeader)
		pos += walRecHeaderSize + n
	}
	return pos, nil, nil
}

// walFile is one file of the WAL and what it is still needed for.
type walFile struct {
	seq       uint64
	path      string
	recovered bool     // left by an earlier process
	rf        *os.File // recovered: read handle for replay
	// live: logs of this process with records here, and the log end offset
	// after their last record here; an entry goes once the log's segment
	// is synced past it (or the log truncated or closed cleanly).
	live map[*walLog]int64
	// ids: recovered files only: logs whose records here have not been
	// replayed yet.
	ids map[[16]byte]struct{}
}

func (f *walFile) idle() bool { return len(f.live) == 0 && len(f.ids) == 0 }

// walLog is a Log's registration with the WAL. Fields are guarded by wal.mu.
type walLog struct {
	l       *Log
	id      [16]byte
	epoch   uint32
	end     int64 // log end offset after the last record appended
	inRound bool  // in wal.dirty
	closed  bool
}

// walRec locates one recovered record for replay.
type walRec struct {
	file      *walFile
	pos       int64 // of the batch bytes
	n         int
	epoch     uint32
	base, end int64
}

type walAdvance struct {
	wl    *walLog
	epoch uint32
	end   int64
}

// wal is the broker-wide write-ahead log owned by a Flusher.
//
// Locks: syncMu (one round at a time; guards f and fsize) before any Log
// lock; a Log's mu before wal.mu. wal.mu is never held while a Log lock is
// taken.
type wal struct {
	dir       string
	lg        zerolog.Logger
	lock      *os.File
	fileBytes int64
	maxConc   int
	running   func() bool // the flusher's goroutine runs
	kick      func()      // wake the flusher for a round
	ckptKick  func()      // wake the checkpointer

	syncMu sync.Mutex
	f      *os.File // active file; nil once closed
	fsize  int64

	mu        sync.Mutex
	drained   *sync.Cond   // signalled when the buffer is taken or the WAL fails or closes
	buf       []byte       // records appended and not yet written
	bufLen    atomic.Int64 // len(buf), for admit without the lock
	spare     []byte
	dirty     []*walLog // logs with records in buf
	files     []*walFile
	active    *walFile // nil when closed or recovery-only
	logs      map[[16]byte]*walLog
	recovered map[[16]byte][]walRec
	replaying map[[16]byte]int // Opens between recoveredFor and recoveredDone
	closed    bool
	err       error
	full      bool // the last write ran out of space (logged once per run)

	stats struct {
		rounds, syncs, checkpoints, deleted, bytes int64
	}
}

// openWAL scans the files in dir and, if active, starts a new file for
// appends. Recovered records are indexed by log id for replay at Log Open.
func openWAL(dir string, active bool, fileBytes int64, maxConc int, lg zerolog.Logger) (*wal, error) {
	if fileBytes <= 0 {
		fileBytes = defaultWALFileBytes
	}
	if err := fsutil.MkdirAllSync(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	w := &wal{
		dir: dir, lg: lg, lock: lock, fileBytes: fileBytes, maxConc: maxConc,
		logs: map[[16]byte]*walLog{}, recovered: map[[16]byte][]walRec{}, replaying: map[[16]byte]int{},
		running: func() bool { return false }, kick: func() {}, ckptKick: func() {},
	}
	w.drained = sync.NewCond(&w.mu)
	if err := w.recover(); err != nil {
		w.closeFiles()
		lock.Close()
		return nil, err
	}
	if !active {
		w.closed = true
		return w, nil
	}
	var seq uint64 = 1
	if n := len(w.files); n > 0 {
		seq = w.files[n-1].seq + 1
	}
	if err := w.createFile(seq); err != nil {
		w.closeFiles()
		lock.Close()
		return nil, err
	}
	return w, nil
}

func (w *wal) recover() error {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return err
	}
	var seqs []uint64
	for _, e := range entries {
		name := e.Name()
		stem, ok := cutWALName(name)
		if !ok {
			w.lg.Warn().Str("file", name).Msg("unknown file in write-ahead log directory left alone")
			continue
		}
		seqs = append(seqs, stem)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for i, seq := range seqs {
		path := filepath.Join(w.dir, walFileName(seq))
		rf, err := os.Open(path)
		if err != nil {
			return err
		}
		st, err := rf.Stat()
		if err != nil {
			rf.Close()
			return err
		}
		wf := &walFile{seq: seq, path: path, recovered: true, rf: rf, live: map[*walLog]int64{}, ids: map[[16]byte]struct{}{}}
		var hb [walHeaderSize]byte
		var bad error
		var validEnd int64
		records := 0
		if _, err := io.ReadFull(io.NewSectionReader(rf, 0, st.Size()), hb[:]); err != nil {
			bad = fmt.Errorf("%w: WAL file shorter than its header", ErrCorrupt)
		} else if bad = checkWALFileHeader(hb[:], seq); bad == nil {
			validEnd, bad, err = scanWAL(io.NewSectionReader(rf, walHeaderSize, st.Size()-walHeaderSize), st.Size(), func(rec *walRecord, pos int64) {
				w.recovered[rec.id] = append(w.recovered[rec.id], walRec{
					file: wf, pos: pos, n: len(rec.batch), epoch: rec.epoch, base: rec.base, end: rec.end,
				})
				wf.ids[rec.id] = struct{}{}
				records++
			})
			if err != nil {
				rf.Close()
				return err
			}
		}
		if bad != nil {
			ev := w.lg.Warn()
			msg := "write-ahead log ends in a torn record; replaying what precedes it"
			if i < len(seqs)-1 {
				ev = w.lg.Error()
				msg = "damaged record in a write-ahead log file that is not the last; its later records are lost"
			}
			ev.Err(bad).Str("file", walFileName(seq)).Int("records", records).
				Int64("valid_bytes", validEnd).Int64("dropped_bytes", st.Size()-max(validEnd, 0)).Msg(msg)
		}
		if records == 0 {
			rf.Close()
			if err := os.Remove(path); err != nil {
				return err
			}
			continue
		}
		if bad != nil && i == len(seqs)-1 && validEnd >= walHeaderSize {
			// Cut the torn tail (what a power cut leaves) so that, once
			// later files follow this one, the next recovery does not
			// take it for damage in the middle of the WAL.
			if err := truncateSync(path, validEnd); err != nil {
				rf.Close()
				return err
			}
		}
		w.files = append(w.files, wf)
		w.lg.Info().Str("file", walFileName(seq)).Int("records", records).Int("logs", len(wf.ids)).
			Msg("write-ahead log file kept for replay")
	}
	return nil
}

// truncateSync cuts the file at path to size, durably.
func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func walFileName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, walSuffix) }

func cutWALName(name string) (uint64, bool) {
	b, ok := parseSegmentName(name, walSuffix)
	return uint64(b), ok
}

// createFile starts the active file seq: header, fdatasync, directory sync,
// so a record written to it is durable once the file is synced.
func (w *wal) createFile(seq uint64) error {
	path := filepath.Join(w.dir, walFileName(seq))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	// A file that did not become the active one holds no record: remove
	// it, so a later attempt at the same sequence number can create it.
	abandon := func(err error) error {
		f.Close()
		os.Remove(path)
		return err
	}
	h := walFileHeader(seq)
	if _, err := writeAt(f, h, 0); err != nil {
		return abandon(err)
	}
	if err := syncFile(f); err != nil {
		return abandon(err)
	}
	if err := fsutil.SyncDir(w.dir); err != nil {
		return abandon(err)
	}
	wf := &walFile{seq: seq, path: path, live: map[*walLog]int64{}}
	w.mu.Lock()
	w.files = append(w.files, wf)
	w.active = wf
	w.mu.Unlock()
	w.f, w.fsize = f, int64(len(h))
	return nil
}

// register adds a log that will append records. The log end offset must be
// durable in its segments already.
func (w *wal) register(l *Log, id [16]byte, epoch uint32) (*walLog, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, w.err
	}
	if w.closed {
		return nil, errWALClosed
	}
	if o := w.logs[id]; o != nil && !o.closed {
		return nil, fmt.Errorf("log id %x is already open in this write-ahead log (a copied partition directory?)", id)
	}
	wl := &walLog{l: l, id: id, epoch: epoch}
	w.logs[id] = wl
	return wl, nil
}

// recoveredFor returns the recovered records of a log id, in WAL order,
// and keeps them from forgetUnopened until recoveredDone or replayAborted.
func (w *wal) recoveredFor(id [16]byte) []walRec {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.replaying[id]++
	return w.recovered[id]
}

// replayAborted undoes recoveredFor for an Open that failed.
func (w *wal) replayAborted(id [16]byte) {
	w.mu.Lock()
	if w.replaying[id]--; w.replaying[id] <= 0 {
		delete(w.replaying, id)
	}
	w.mu.Unlock()
}

// readRecovered reads a recovered record's batch again.
func (w *wal) readRecovered(r walRec) ([]byte, error) {
	b := make([]byte, r.n)
	if _, err := r.file.rf.ReadAt(b, r.pos); err != nil {
		return nil, err
	}
	return b, nil
}

// recoveredDone says the log with id has replayed its records and synced its
// segment: files kept only for it can go.
func (w *wal) recoveredDone(id [16]byte) {
	w.mu.Lock()
	delete(w.recovered, id)
	delete(w.replaying, id)
	for _, f := range w.files {
		delete(f.ids, id)
	}
	gone := w.reapLocked()
	w.mu.Unlock()
	w.unlink(gone)
}

// forgetUnopened drops the recovered records of every log not opened yet.
func (w *wal) forgetUnopened() int {
	w.mu.Lock()
	n := 0
	for id := range w.recovered {
		if w.replaying[id] > 0 {
			continue // an Open is replaying it now
		}
		delete(w.recovered, id)
		for _, f := range w.files {
			delete(f.ids, id)
		}
		n++
	}
	gone := w.reapLocked()
	w.mu.Unlock()
	w.unlink(gone)
	return n
}

// admit waits while the buffer is over its hard limit (back-pressure when
// the disk is slower than the appenders). Called without Log locks.
func (w *wal) admit() {
	if w.bufLen.Load() < int64(walHardBuffer) {
		return
	}
	w.mu.Lock()
	for len(w.buf) >= walHardBuffer && w.err == nil && !w.closed {
		if !w.running() {
			w.mu.Unlock()
			w.sync()
			w.mu.Lock()
			continue
		}
		w.kick()
		w.drained.Wait()
	}
	w.mu.Unlock()
}

// append buffers one record; the caller holds the log's mu and has written
// the batch to its segment already. end is the log end offset after it.
// kick says the buffer is large enough to write out now.
func (w *wal) append(wl *walLog, base, end int64, batch []byte) (kick bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return false, w.err
	}
	if w.closed {
		return false, errWALClosed
	}
	w.buf = appendWALRecord(w.buf, wl.id, wl.epoch, base, batch)
	w.bufLen.Store(int64(len(w.buf)))
	wl.end = end
	if !wl.inRound {
		wl.inRound = true
		w.dirty = append(w.dirty, wl)
	}
	return len(w.buf) >= walSoftBuffer, nil
}

// sync is one group-commit round: it takes every record buffered so far,
// writes them to the active file, fdatasyncs it and then advances the
// durable offset of every log that had records in them. Records appended
// during the round go to the next one. It reports whether it synced.
func (w *wal) sync() (bool, error) {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return false, w.err
	}
	if len(w.buf) == 0 || w.f == nil {
		w.mu.Unlock()
		return false, nil
	}
	buf := w.buf
	w.buf, w.spare = w.spare[:0], nil
	w.bufLen.Store(0)
	advs := make([]walAdvance, 0, len(w.dirty))
	for _, wl := range w.dirty {
		wl.inRound = false
		advs = append(advs, walAdvance{wl, wl.epoch, wl.end})
		if !wl.closed {
			// end only grows within an epoch, and a truncation removes
			// the log's entries, so the newest end is the one needed.
			w.active.live[wl] = wl.end
		}
	}
	w.dirty = w.dirty[:0]
	w.drained.Broadcast()
	w.mu.Unlock()

	_, err := writeAt(w.f, buf, w.fsize)
	if err != nil && IsNoSpace(err) {
		if terr := w.f.Truncate(w.fsize); terr != nil {
			err = errors.Join(err, terr)
		} else {
			w.spill(advs, err)
			w.recycle(buf)
			return true, nil
		}
	}
	if err == nil {
		err = syncFile(w.f)
	}
	if err != nil {
		w.fail(fmt.Errorf("write-ahead log %s: %w", filepath.Base(w.f.Name()), err))
		return false, err
	}
	w.fsize += int64(len(buf))
	w.recycle(buf)
	w.mu.Lock()
	w.stats.rounds++
	w.stats.syncs++
	w.stats.bytes += int64(len(buf))
	w.mu.Unlock()
	for _, a := range advs {
		a.wl.l.walDurable(a.epoch, a.end)
	}
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if w.fsize >= w.fileBytes && !closed {
		if err := w.rotate(); err != nil && !IsNoSpace(err) {
			w.fail(fmt.Errorf("rotating write-ahead log: %w", err))
			return true, err
		} else if err != nil {
			// The active file stays active, past its size, and the
			// next round tries again.
			w.noSpace(err)
			return true, nil
		}
	}
	w.mu.Lock()
	if w.full {
		w.full = false
		w.lg.Info().Msg("space available again: write-ahead log rounds resumed")
	}
	w.mu.Unlock()
	return true, nil
}

// recycle keeps a round's buffer for the next one unless it is large.
func (w *wal) recycle(buf []byte) {
	w.mu.Lock()
	if cap(buf) <= 2*walSoftBuffer && w.spare == nil {
		w.spare = buf[:0]
	}
	w.mu.Unlock()
}

// noSpace logs the first write of a run that found the file system full.
func (w *wal) noSpace(err error) {
	w.mu.Lock()
	first := !w.full
	w.full = true
	w.mu.Unlock()
	if first {
		w.lg.Warn().Err(err).Msg("file system full: appends are made durable by syncing their segments until space is freed")
	}
}

// spill makes a round's records durable without the WAL, which had no
// space for them (the file was cut back to its last whole record): every
// batch of the round is already in its log's segment, written before its
// record was buffered, so syncing those segments covers the round, as
// a checkpoint does. The round's records are then not needed; a log whose
// sync fails fails alone, as without a WAL. Called with syncMu held.
func (w *wal) spill(advs []walAdvance, err error) {
	w.noSpace(err)
	logs := make([]*Log, 0, len(advs))
	for _, a := range advs {
		logs = append(logs, a.wl.l)
	}
	w.flushLogs(logs)
}

// flushLogs syncs the logs' active segments, at most maxConc at once.
func (w *wal) flushLogs(logs []*Log) { flushAll(logs, w.maxConc) }

// flushAll syncs the logs' active segments, at most maxConc at once.
func flushAll(logs []*Log, maxConc int) {
	sem := make(chan struct{}, max(maxConc, 1))
	var wg sync.WaitGroup
	for _, l := range logs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			l.flush()
		}()
	}
	wg.Wait()
}

// rotate seals the active file (already synced by the caller) and starts the
// next. Sealed files go once every log with records in them has synced its
// segment past them; the checkpointer does that in the background, or this
// round does it inline when too many sealed files wait (a hard bound on
// disk use). Called with syncMu held.
func (w *wal) rotate() error {
	old := w.f
	if err := w.createFile(w.active.seq + 1); err != nil {
		return err
	}
	old.Close()
	w.mu.Lock()
	gone := w.reapLocked()
	sealed := 0
	for _, f := range w.files {
		if f != w.active && !f.recovered && !f.idle() {
			sealed++
		}
	}
	w.mu.Unlock()
	w.unlink(gone)
	if sealed > walMaxSealed {
		w.checkpoint()
	} else if sealed > 0 {
		w.ckptKick()
	}
	return nil
}

// checkpoint syncs the segments of every log that has records in a sealed
// file, so that those files can be deleted.
func (w *wal) checkpoint() {
	w.mu.Lock()
	seen := map[*walLog]bool{}
	var todo []*Log
	for _, f := range w.files {
		if f == w.active {
			continue
		}
		for wl := range f.live {
			if !seen[wl] {
				seen[wl] = true
				todo = append(todo, wl.l)
			}
		}
	}
	w.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	w.flushLogs(todo)
	w.mu.Lock()
	w.stats.checkpoints += int64(len(todo))
	w.mu.Unlock()
}

// segmentSynced says every record of wl with end <= target in epoch is now
// in a synced segment.
func (w *wal) segmentSynced(wl *walLog, epoch uint32, target int64) {
	w.mu.Lock()
	if wl.epoch != epoch {
		w.mu.Unlock()
		return
	}
	changed := false
	for _, f := range w.files {
		if e, ok := f.live[wl]; ok && e <= target {
			delete(f.live, wl)
			changed = changed || f.idle()
		}
	}
	var gone []*walFile
	if changed {
		gone = w.reapLocked()
	}
	w.mu.Unlock()
	w.unlink(gone)
}

// truncated starts a new epoch for wl: its earlier records will never be
// replayed, so no file needs to be kept for them.
func (w *wal) truncated(wl *walLog, epoch uint32) {
	w.mu.Lock()
	wl.epoch, wl.end = epoch, 0
	for _, f := range w.files {
		delete(f.live, wl)
	}
	gone := w.reapLocked()
	w.mu.Unlock()
	w.unlink(gone)
}

// unregister removes a closing log. clean: its segment is synced through
// everything it appended, so no file is kept for it.
func (w *wal) unregister(wl *walLog, clean bool) {
	w.mu.Lock()
	wl.closed = true
	if w.logs[wl.id] == wl {
		delete(w.logs, wl.id)
	}
	var gone []*walFile
	if clean {
		for _, f := range w.files {
			delete(f.live, wl)
		}
		gone = w.reapLocked()
	}
	w.mu.Unlock()
	w.unlink(gone)
}

// reapLocked removes idle files other than the active one from the list and
// returns them for unlink.
func (w *wal) reapLocked() []*walFile {
	var gone []*walFile
	keep := w.files[:0]
	for _, f := range w.files {
		if f != w.active && f.idle() {
			gone = append(gone, f)
		} else {
			keep = append(keep, f)
		}
	}
	clear(w.files[len(keep):])
	w.files = keep
	w.stats.deleted += int64(len(gone))
	return gone
}

// unlink deletes files that hold nothing needed. The directory is not
// synced: a deleted file that comes back after a crash holds only records
// that replay skips (below the log end offset, or of an older epoch).
func (w *wal) unlink(files []*walFile) {
	for _, f := range files {
		if f.rf != nil {
			f.rf.Close()
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.lg.Warn().Err(err).Str("file", filepath.Base(f.path)).Msg("could not delete write-ahead log file")
		}
	}
}

// fail makes err sticky and fails every registered log: after a failed
// write or fdatasync nothing buffered can be trusted to reach the disk.
func (w *wal) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
		w.lg.Error().Err(err).Msg("write-ahead log failed; failing every log that uses it")
	}
	var logs []*Log
	for _, wl := range w.logs {
		logs = append(logs, wl.l)
	}
	w.drained.Broadcast()
	w.mu.Unlock()
	for _, l := range logs {
		l.mu.Lock()
		l.failLocked("write-ahead log", err)
		l.mu.Unlock()
	}
}

// close stops taking records, writes and syncs what is buffered and closes
// the active file. Logs still open then sync their own segments. Files that
// hold nothing needed are deleted, the active one included.
func (w *wal) close() error {
	w.mu.Lock()
	w.closed = true
	w.drained.Broadcast()
	w.mu.Unlock()
	_, err := w.sync()
	w.syncMu.Lock()
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	w.mu.Lock()
	w.active = nil
	gone := w.reapLocked()
	w.mu.Unlock()
	w.syncMu.Unlock()
	w.unlink(gone)
	return err
}

// release closes every file handle and the directory lock, deleting nothing.
func (w *wal) release() {
	w.closeFiles()
	w.lock.Close()
}

func (w *wal) closeFiles() {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.files {
		if f.rf != nil {
			f.rf.Close()
			f.rf = nil
		}
	}
}
