package log

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// fullDisk replaces writeAt with a file system that holds budget more
// bytes, counted over the writes to files whose name ends in one of
// suffixes (every file if none): the write that crosses the budget writes
// the bytes that fit, as a short write(2) does, and then fails with
// ENOSPC. free lifts the limit.
type fullDisk struct {
	mu       sync.Mutex
	budget   int64
	limited  bool
	suffixes []string
	failures int
}

func injectFullDisk(t *testing.T) *fullDisk {
	d := &fullDisk{}
	orig := writeAt
	writeAt = func(f *os.File, b []byte, off int64) (int, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.limited || !d.matches(f.Name()) || int64(len(b)) <= d.budget {
			if d.limited && d.matches(f.Name()) {
				d.budget -= int64(len(b))
			}
			return orig(f, b, off)
		}
		n, err := orig(f, b[:d.budget], off)
		d.budget -= int64(n)
		d.failures++
		if err == nil {
			err = &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
		return n, err
	}
	t.Cleanup(func() { writeAt = orig })
	return d
}

func (d *fullDisk) matches(name string) bool {
	if len(d.suffixes) == 0 {
		return true
	}
	for _, s := range d.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

func (d *fullDisk) fill(budget int64, suffixes ...string) {
	d.mu.Lock()
	d.budget, d.limited, d.suffixes = budget, true, suffixes
	d.mu.Unlock()
}

func (d *fullDisk) free() {
	d.mu.Lock()
	d.limited = false
	d.mu.Unlock()
}

// logCapture collects a log's warnings to check what recovery had to do.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// checkFilesMatch fails unless the active segment's files hold exactly
// what the log says it holds: no torn batch after its last batch, no torn
// or extra index entry.
func checkFilesMatch(t *testing.T, l *Log) {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	s := l.active()
	st, err := s.log.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != s.size {
		t.Fatalf("segment file has %d bytes, the log %d: bytes past the last batch", st.Size(), s.size)
	}
	offs, times, err := readIndexFiles(s.idx.offFile, s.idx.timeFile, 1<<20)
	if err != nil {
		t.Fatalf("index files: %v", err)
	}
	if !equalEntries(offs, s.idx.offsets) || !equalEntries(times, s.idx.times) {
		t.Fatalf("index files (%d, %d entries) differ from the log's (%d, %d)", len(offs), len(times), len(s.idx.offsets), len(s.idx.times))
	}
}

// TestNoSpaceAppend: an append that runs out of space (in the batch, in
// either index, or while rolling a segment) is refused with ErrNoSpace,
// not ErrFatal; the files are cut back to the last whole batch, reads go
// on, and once space is freed appends continue at the same offset. After
// a crash and after a clean restart every accepted batch is there once, in
// order, and recovery finds nothing to truncate or rebuild.
func TestNoSpaceAppend(t *testing.T) {
	batch := func(i int) []byte { return mkBatch(spec{n: 3, valueSize: 300, ts: 1000 + int64(i)}) }
	size := int64(len(batch(0)))
	cases := []struct {
		name     string
		segBytes int64 // 0: default
		interval int   // index.interval.bytes; 0: 1, an entry for every batch
		budget   int64
		suffixes []string
	}{
		{name: "nothing fits", budget: 0},
		{name: "short batch write", budget: size / 2},
		{name: "all but one byte", budget: size - 1},
		{name: "offset index entry", budget: 4, suffixes: []string{indexSuffix}},
		{name: "time index entry", budget: 6, suffixes: []string{timeIndexSuffix}},
		// Four batches per segment: the failing append rolls first.
		{name: "roll: final time entry", segBytes: 4 * size, interval: 4096, budget: 0, suffixes: []string{timeIndexSuffix}},
		{name: "roll: batch in the new segment", segBytes: 4 * size, budget: size / 3, suffixes: []string{logSuffix}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			disk := injectFullDisk(t)
			cfg := testConfig()
			cfg.IndexIntervalBytes = 1
			if tc.interval > 0 {
				cfg.IndexIntervalBytes = tc.interval
			}
			if tc.segBytes > 0 {
				cfg.SegmentBytes = tc.segBytes
			}
			dir := t.TempDir()
			var logs logCapture
			opts := Options{Logger: zerolog.New(&logs).Level(zerolog.InfoLevel)}
			l := openT(t, dir, cfg, opts)
			var want [][]byte
			for i := range 4 {
				b := batch(i)
				mustAppend(t, l, b)
				want = append(want, b)
			}
			disk.fill(tc.budget, tc.suffixes...)
			for range 3 { // a producer retrying against a full disk
				_, err := l.Append(batch(99))
				if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFatal) {
					t.Fatalf("append on a full disk: %v", err)
				}
			}
			if disk.failures == 0 {
				t.Fatal("the injected fault was never hit")
			}
			if l.LogEndOffset() != 12 {
				t.Fatalf("log end offset %d after refused appends, want 12", l.LogEndOffset())
			}
			checkFilesMatch(t, l)
			checkBatches(t, l, want)
			if err := l.WaitDurable(context.Background(), 12); err != nil {
				t.Fatalf("WaitDurable on a full disk: %v", err)
			}
			if n := strings.Count(logs.String(), "file system full"); n != 1 {
				t.Fatalf("full disk logged %d times, want once per run", n)
			}

			disk.free()
			for i := 4; i < 8; i++ {
				b := batch(i)
				r := mustAppend(t, l, b)
				if r.BaseOffset != int64(3*i) {
					t.Fatalf("batch %d at offset %d after space returned, want %d", i, r.BaseOffset, 3*i)
				}
				want = append(want, b)
			}
			checkFilesMatch(t, l)
			checkBatches(t, l, want)
			if !strings.Contains(logs.String(), "space available again") {
				t.Fatal("recovery from the full disk not logged")
			}

			crash(t, l)
			l = openT(t, dir, cfg, opts)
			checkBatches(t, l, want)
			if strings.Contains(logs.String(), "truncating log") {
				t.Fatalf("recovery after a crash found a torn batch:\n%s", logs.String())
			}
			l.Close()
			logs.buf.Reset()
			l = openT(t, dir, cfg, opts)
			defer l.Close()
			if !l.openedFromSnapshot {
				t.Fatalf("clean restart did not use its snapshot:\n%s", logs.String())
			}
			checkBatches(t, l, want)
			checkFilesMatch(t, l)
		})
	}
}

// TestNoSpaceIdempotentRetry: a refused idempotent batch leaves no
// producer state behind, so its retry is accepted at the same sequence
// once space returns, and the one after continues it.
func TestNoSpaceIdempotentRetry(t *testing.T) {
	disk := injectFullDisk(t)
	l := openT(t, t.TempDir(), testConfig())
	defer l.Close()
	mk := func(seq int32) []byte { return mkBatch(spec{n: 2, idem: true, pid: 7, seq: seq}) }
	mustAppend(t, l, mk(0))
	disk.fill(10)
	if _, err := l.Append(mk(2)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("append on a full disk: %v", err)
	}
	disk.free()
	if r := mustAppend(t, l, mk(2)); r.Duplicate || r.BaseOffset != 2 {
		t.Fatalf("retry after space returned: %+v", r)
	}
	if r := mustAppend(t, l, mk(4)); r.BaseOffset != 4 {
		t.Fatalf("next batch: %+v", r)
	}
}

// TestNoSpaceFsyncIsFatal: an fsync that fails is fatal whatever its
// errno, ENOSPC included (NFS and thin volumes report it at fsync): the
// page cache state is then unknown.
func TestNoSpaceFsyncIsFatal(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig())
	defer l.Close()
	r := mustAppend(t, l, mkBatch(spec{}))
	orig := syncFile
	syncFile = func(f *os.File) error { return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: syscall.ENOSPC} }
	defer func() { syncFile = orig }()
	if err := l.WaitDurable(context.Background(), r.LastOffset+1); !errors.Is(err, ErrFatal) {
		t.Fatalf("WaitDurable after an fsync failing with ENOSPC: %v", err)
	}
	syncFile = orig
	if _, err := l.Append(mkBatch(spec{})); !errors.Is(err, ErrFatal) {
		t.Fatalf("append after a failed fsync: %v", err)
	}
}

// TestNoSpaceCloseSkipsMarker: Close on a full disk still syncs the
// segment and leaves the log openable, without the snapshot marker.
func TestNoSpaceCloseSkipsMarker(t *testing.T) {
	disk := injectFullDisk(t)
	dir := t.TempDir()
	l := openT(t, dir, testConfig())
	var want [][]byte
	for i := range 3 {
		b := mkBatch(spec{ts: int64(i + 1)})
		mustAppend(t, l, b)
		want = append(want, b)
	}
	disk.fill(0, timeIndexSuffix)
	if err := l.Close(); err != nil {
		t.Fatalf("Close on a full disk: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err == nil {
		t.Fatal("clean shutdown marker written without the final time index entry")
	}
	disk.free()
	l = openT(t, dir, testConfig())
	defer l.Close()
	checkBatches(t, l, want)
}

// TestNoSpaceWAL: a WAL round that runs out of space cuts the WAL file
// back to its last whole record and makes the round's appends durable by
// syncing their segments instead: waiters are released, no log fails, and
// the WAL takes rounds again once space is freed. A crash that loses
// every unsynced byte afterwards loses no acknowledged batch.
func TestNoSpaceWAL(t *testing.T) {
	tr := trackSyncs(t)
	disk := injectFullDisk(t)
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
	a, b := e.open(0, testConfig()), e.open(1, testConfig())
	var wantA, wantB [][]byte
	add := func(l *Log, want *[][]byte, i int) {
		bt := mkBatch(spec{n: 2, valueSize: 100, ts: int64(i)})
		appendDurable(t, l, bt)
		*want = append(*want, bt)
	}
	add(a, &wantA, 0)
	add(b, &wantB, 0)
	walPath := walFiles(t, e.wal)[0]
	st, err := os.Stat(walPath)
	if err != nil {
		t.Fatal(err)
	}
	before := e.f.Stats().WALBytes
	disk.fill(50, walSuffix) // a short write in the middle of a record
	for i := 1; i <= 3; i++ {
		add(a, &wantA, i) // appendDurable fails the test if a waiter is not released
		add(b, &wantB, i)
	}
	if disk.failures == 0 {
		t.Fatal("the injected fault was never hit")
	}
	if got := e.f.Stats().WALBytes; got != before {
		t.Fatalf("WAL bytes went from %d to %d on a full disk", before, got)
	}
	if st2, err := os.Stat(walPath); err != nil || st2.Size() != st.Size() {
		t.Fatalf("WAL file not cut back to its last whole record: %d bytes, was %d (%v)", st2.Size(), st.Size(), err)
	}
	disk.free()
	for i := 4; i <= 5; i++ {
		add(a, &wantA, i)
		add(b, &wantB, i)
	}
	if e.f.Stats().WALBytes == before {
		t.Fatal("the WAL took no round after space returned")
	}
	e.crash(a, b)
	if lost := tr.loseUnsynced(t, e.root); lost == 0 {
		t.Log("the crash lost no unsynced byte")
	}
	e.start()
	a, b = e.open(0, testConfig()), e.open(1, testConfig())
	defer a.Close()
	defer b.Close()
	checkBatches(t, a, wantA)
	checkBatches(t, b, wantB)
}

// TestNoSpaceWALRotation: a WAL file that cannot be created on a full disk
// leaves the active one in use (and no half-made file behind); rotation
// happens once space is back.
func TestNoSpaceWALRotation(t *testing.T) {
	// Records still fit, but no new file's header does while full is set.
	var full atomic.Bool
	prev := writeAt
	t.Cleanup(func() { writeAt = prev })
	writeAt = func(f *os.File, b []byte, off int64) (int, error) {
		if full.Load() && off == 0 && len(b) == walHeaderSize && strings.HasSuffix(f.Name(), walSuffix) {
			return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
		return prev(f, b, off)
	}
	var logs logCapture
	root := t.TempDir()
	e := &walEnv{t: t, root: root, wal: filepath.Join(root, "wal"),
		cfg: FlusherConfig{Policy: FlushGroup, WALFileBytes: 1, Dir: filepath.Join(root, "wal"), Logger: zerolog.New(&logs)}}
	e.start()
	l := e.open(0, testConfig())
	defer l.Close()
	appendDurable(t, l, mkBatch(spec{}))
	// The newest file once no round runs: the round that released a
	// waiter may still be rotating.
	lastFile := func() string {
		e.f.wal.syncMu.Lock()
		defer e.f.wal.syncMu.Unlock()
		fs := walFiles(t, e.wal)
		return filepath.Base(fs[len(fs)-1])
	}
	active := lastFile()
	bytesBefore := e.f.Stats().WALBytes
	full.Store(true)
	for range 3 {
		appendDurable(t, l, mkBatch(spec{}))
	}
	if got := lastFile(); got != active {
		t.Fatalf("newest WAL file %s after failed rotations, want %s still active", got, active)
	}
	if e.f.Stats().WALBytes == bytesBefore {
		t.Fatal("no record reached the WAL while only rotation failed")
	}
	if c := strings.Count(logs.String(), "file system full"); c != 1 {
		t.Fatalf("full disk logged %d times, want once per run", c)
	}
	full.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		appendDurable(t, l, mkBatch(spec{}))
		if lastFile() > active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no rotation after space returned")
		}
	}
	if _, err := l.Append(mkBatch(spec{})); err != nil {
		t.Fatal(err)
	}
}
