package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/protocol"
)

// syncTracker records, for every file synced through syncFile, its size
// just before the sync: what a crash is guaranteed to leave of it.
type syncTracker struct {
	mu     sync.Mutex
	synced map[string]int64
}

func trackSyncs(t *testing.T) *syncTracker {
	tr := &syncTracker{synced: map[string]int64{}}
	orig := syncFile
	syncFile = func(f *os.File) error {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if err := orig(f); err != nil {
			return err
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		old, seen := tr.synced[f.Name()]
		if !seen || st.Size() >= old {
			tr.synced[f.Name()] = st.Size()
		} else if post, err := f.Stat(); err == nil && post.Size() < old {
			// Cut since the last sync (TruncateTo), not a sync that
			// started before a later one finished.
			tr.synced[f.Name()] = st.Size()
		}
		return nil
	}
	t.Cleanup(func() { syncFile = orig })
	return tr
}

// loseUnsynced cuts every segment and WAL file under dirs back to the size
// it had at its last sync (nothing if it was never synced): what the page
// cache held and a power cut took. It returns the bytes dropped.
func (tr *syncTracker) loseUnsynced(t *testing.T, dirs ...string) int64 {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var lost int64
	for _, dir := range dirs {
		for _, suf := range []string{logSuffix, walSuffix} {
			for _, p := range segFiles(t, dir, suf) {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				keep := tr.synced[p]
				if keep < st.Size() {
					lost += st.Size() - keep
					if err := os.Truncate(p, keep); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	return lost
}

// abandonLog closes a log's files without syncing or marking it clean, the
// way a killed process leaves them.
func abandonLog(l *Log) {
	l.syncMu.Lock()
	l.mu.Lock()
	if !l.closed {
		for _, s := range l.segs {
			s.close()
		}
		l.lock.Close()
		l.closed = true
		l.wakeLocked()
	}
	l.mu.Unlock()
	l.syncMu.Unlock()
}

type walEnv struct {
	t    *testing.T
	root string
	wal  string
	cfg  FlusherConfig
	f    *Flusher
}

func newWALEnv(t *testing.T, cfg FlusherConfig) *walEnv {
	root := t.TempDir()
	cfg.Dir = filepath.Join(root, "wal")
	cfg.Logger = testLogger(t)
	e := &walEnv{t: t, root: root, wal: cfg.Dir, cfg: cfg}
	e.start()
	return e
}

func (e *walEnv) start() {
	e.t.Helper()
	f, err := OpenFlusher(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	f.Start()
	e.f = f
	e.t.Cleanup(func() { f.Close() })
}

func (e *walEnv) dir(i int) string { return filepath.Join(e.root, fmt.Sprintf("topic-%d", i)) }

func (e *walEnv) open(i int, cfg Config) *Log {
	e.t.Helper()
	return openT(e.t, e.dir(i), cfg, Options{Logger: testLogger(e.t), Flusher: e.f})
}

// crash kills the flusher and the logs without any sync.
func (e *walEnv) crash(logs ...*Log) {
	e.f.abandon()
	for _, l := range logs {
		abandonLog(l)
	}
}

func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	return segFiles(t, dir, walSuffix)
}

func appendDurable(t *testing.T, l *Log, b []byte) AppendResult {
	t.Helper()
	r := mustAppend(t, l, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitDurable(ctx, r.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	return r
}

func checkBatches(t *testing.T, l *Log, want [][]byte) {
	t.Helper()
	got := readAll(t, l)
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d (offset %d) differs", i, baseOf(want[i]))
		}
	}
	var leo int64
	if n := len(want); n > 0 {
		h, _ := parseHeader(want[n-1])
		leo = h.LastOffset() + 1
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("log end offset %d, want %d", l.LogEndOffset(), leo)
	}
}

// TestWALCrashRestoresDurableBatches: every batch WaitDurable acknowledged
// comes back, in order and byte for byte, after a crash that lost every
// unsynced segment byte; appends and idempotence continue after it.
func TestWALCrashRestoresDurableBatches(t *testing.T) {
	for _, segBytes := range []int64{1 << 30, 4 << 10} {
		t.Run(fmt.Sprintf("segment.bytes=%d", segBytes), func(t *testing.T) {
			tr := trackSyncs(t)
			e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
			cfg := testConfig()
			cfg.SegmentBytes = segBytes
			cfg.IndexIntervalBytes = 300
			const nlogs, per = 3, 40
			var logs []*Log
			for i := 0; i < nlogs; i++ {
				logs = append(logs, e.open(i, cfg))
			}
			want := make([][][]byte, nlogs)
			var wg sync.WaitGroup
			for i, l := range logs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < per; j++ {
						b := mkBatch(spec{n: 2, valueSize: 100, ts: int64(j), idem: true, pid: 7, seq: int32(2 * j), leaderEpoch: 3})
						r, err := l.Append(b)
						if err == nil {
							err = l.WaitDurable(context.Background(), r.LastOffset+1)
						}
						if err != nil {
							t.Error(err)
							return
						}
						want[i] = append(want[i], b)
					}
				}()
			}
			wg.Wait()
			e.crash(logs...)
			segDirs := []string{e.wal}
			for i := range logs {
				segDirs = append(segDirs, e.dir(i))
			}
			if lost := tr.loseUnsynced(t, segDirs...); lost == 0 {
				t.Fatal("the crash lost nothing: the test proves nothing")
			}
			e.start()
			for i := range logs {
				l := e.open(i, cfg)
				checkBatches(t, l, want[i])
				st, ok := l.ProducerState(7)
				if !ok || st.LastSequence != 2*per-1 || st.LastOffset != 2*per-1 {
					t.Fatalf("producer state after replay: %+v %v", st, ok)
				}
				// A retry of the last batch is still a duplicate.
				r, err := l.Append(bytes.Clone(want[i][per-1]))
				if err != nil || !r.Duplicate {
					t.Fatalf("retry after replay: %+v %v", r, err)
				}
				b := mkBatch(spec{n: 2, idem: true, pid: 7, seq: 2 * per, leaderEpoch: 3})
				if r := appendDurable(t, l, b); r.BaseOffset != 2*per {
					t.Fatalf("append after replay at %d", r.BaseOffset)
				}
				want[i] = append(want[i], b)
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			e.f.Close()
			if n := len(walFiles(t, e.wal)); n != 0 {
				t.Fatalf("%d WAL files left after every log and the flusher closed", n)
			}
			// A clean reopen without a WAL agrees.
			for i := range logs {
				l := openT(t, e.dir(i), cfg)
				checkBatches(t, l, want[i])
				l.Close()
			}
		})
	}
}

// writeOneLog appends n durable batches to one log through a WAL flusher,
// crashes, loses every segment byte not synced and returns the batches.
func writeOneLog(t *testing.T, e *walEnv, tr *syncTracker, n int) [][]byte {
	l := e.open(0, testConfig())
	var want [][]byte
	for i := 0; i < n; i++ {
		b := mkBatch(spec{n: 3, valueSize: 50})
		appendDurable(t, l, b)
		want = append(want, b)
	}
	e.crash(l)
	tr.loseUnsynced(t, e.dir(0))
	return want
}

func TestWALTornTail(t *testing.T) {
	// Record sizes are equal, so a cut inside record k keeps k records.
	recSize := int64(walRecHeaderSize + walPayloadHeader + len(mkBatch(spec{n: 3, valueSize: 50})))
	for _, tc := range []struct {
		name string
		cut  func(size int64) int64 // bytes to keep
		keep int
	}{
		{"whole", func(s int64) int64 { return s }, 10},
		{"inside last record", func(s int64) int64 { return s - recSize/2 }, 9},
		{"inside a record header", func(s int64) int64 { return walHeaderSize + 4*recSize + 3 }, 4},
		{"at a record boundary", func(s int64) int64 { return walHeaderSize + 6*recSize }, 6},
		{"header only", func(s int64) int64 { return walHeaderSize }, 0},
		{"torn header", func(s int64) int64 { return 7 }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := trackSyncs(t)
			e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
			want := writeOneLog(t, e, tr, 10)
			files := walFiles(t, e.wal)
			if len(files) != 1 {
				t.Fatalf("%d WAL files", len(files))
			}
			st, _ := os.Stat(files[0])
			if st.Size() != walHeaderSize+10*recSize {
				t.Fatalf("WAL file %d bytes, want %d", st.Size(), walHeaderSize+10*recSize)
			}
			if err := os.Truncate(files[0], tc.cut(st.Size())); err != nil {
				t.Fatal(err)
			}
			e.start()
			// The torn tail is cut off, so that the file is whole
			// once another follows it (a later recovery would take a
			// torn record in a file that is not the last for damage).
			if st, err := os.Stat(files[0]); err == nil && tc.keep > 0 && st.Size() != walHeaderSize+int64(tc.keep)*recSize {
				t.Fatalf("WAL file %d bytes after recovery, want %d", st.Size(), walHeaderSize+int64(tc.keep)*recSize)
			}
			l := e.open(0, testConfig())
			checkBatches(t, l, want[:tc.keep])
			appendDurable(t, l, mkBatch(spec{n: 3}))
			l.Close()
		})
	}
}

func TestWALGarbage(t *testing.T) {
	tr := trackSyncs(t)
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
	want := writeOneLog(t, e, tr, 5)
	files := walFiles(t, e.wal)
	// Garbage after the last record, a file of garbage with a WAL name, and
	// a file whose header is right but whose records are garbage.
	f, _ := os.OpenFile(files[0], os.O_APPEND|os.O_WRONLY, 0)
	f.Write(bytes.Repeat([]byte{0x5a, 0, 0xff}, 300))
	f.Close()
	os.WriteFile(filepath.Join(e.wal, walFileName(7)), bytes.Repeat([]byte("garbage!"), 100), 0o644)
	os.WriteFile(filepath.Join(e.wal, walFileName(8)), append(walFileHeader(8), bytes.Repeat([]byte{0, 0, 0, 90, 1, 2, 3, 4}, 50)...), 0o644)
	// A record with a valid CRC whose batch is not a batch.
	bad := appendWALRecord(walFileHeader(9), [16]byte{1}, 0, 0, bytes.Repeat([]byte{7}, protocol.BatchHeaderSize+10))
	os.WriteFile(filepath.Join(e.wal, walFileName(9)), bad, 0o644)
	os.WriteFile(filepath.Join(e.wal, "notes.txt"), []byte("x"), 0o644)
	e.start()
	l := e.open(0, testConfig())
	checkBatches(t, l, want)
	l.Close()
	e.f.Close()
	for _, p := range walFiles(t, e.wal) {
		t.Errorf("WAL file %s left", filepath.Base(p))
	}
	if _, err := os.Stat(filepath.Join(e.wal, "notes.txt")); err != nil {
		t.Error("unknown file removed")
	}
}

// TestWALUnknownAndDeletedLogs: records of a log whose directory is gone are
// never applied anywhere, and ForgetUnopened lets their files go.
func TestWALUnknownAndDeletedLogs(t *testing.T) {
	tr := trackSyncs(t)
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
	a, b := e.open(0, testConfig()), e.open(1, testConfig())
	var wantB [][]byte
	for i := 0; i < 5; i++ {
		appendDurable(t, a, mkBatch(spec{n: 2}))
		x := mkBatch(spec{n: 1, valueSize: 9})
		appendDurable(t, b, x)
		wantB = append(wantB, x)
	}
	e.crash(a, b)
	tr.loseUnsynced(t, e.dir(0), e.dir(1))
	if err := os.RemoveAll(e.dir(0)); err != nil { // topic deleted while down
		t.Fatal(err)
	}
	e.start()
	b = e.open(1, testConfig())
	checkBatches(t, b, wantB)
	if n := len(walFiles(t, e.wal)); n != 2 {
		t.Fatalf("%d WAL files; want the recovered one (kept for log 0) and the new one", n)
	}
	if n := e.f.ForgetUnopened(); n != 1 {
		t.Fatalf("ForgetUnopened dropped %d logs' records", n)
	}
	if n := len(walFiles(t, e.wal)); n != 1 {
		t.Fatalf("%d WAL files after ForgetUnopened", n)
	}
	// Log 0 comes back as a new topic: empty.
	a = e.open(0, testConfig())
	checkBatches(t, a, nil)
	a.Close()
	b.Close()
}

// TestWALRecreatedTopic: a directory removed and created again gets a new
// log id, so the old incarnation's records are not replayed into it even
// before ForgetUnopened.
func TestWALRecreatedTopic(t *testing.T) {
	tr := trackSyncs(t)
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
	writeOneLog(t, e, tr, 4)
	old, err := loadIdentity(e.dir(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.dir(0)); err != nil {
		t.Fatal(err)
	}
	e.start()
	l := e.open(0, testConfig())
	if l.ident.id == old.id {
		t.Fatal("recreated directory got the old log id")
	}
	checkBatches(t, l, nil)
	x := mkBatch(spec{n: 5})
	appendDurable(t, l, x)
	checkBatches(t, l, [][]byte{x})
	l.Close()
}

// TestWALRotationAndCheckpoint: with small WAL files, rotated files are
// deleted once checkpointed, the number of files stays bounded, and a crash
// at any point still restores everything acknowledged.
func TestWALRotationAndCheckpoint(t *testing.T) {
	tr := trackSyncs(t)
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup, WALFileBytes: 8 << 10})
	const nlogs = 4
	var logs []*Log
	want := make([][][]byte, nlogs)
	for i := 0; i < nlogs; i++ {
		logs = append(logs, e.open(i, testConfig()))
	}
	maxFiles := 0
	for j := 0; j < 150; j++ {
		i := j % nlogs
		b := mkBatch(spec{n: 1, valueSize: 400})
		appendDurable(t, logs[i], b)
		want[i] = append(want[i], b)
		maxFiles = max(maxFiles, len(walFiles(t, e.wal)))
	}
	st := e.f.Stats()
	t.Logf("stats %+v, at most %d WAL files", st, maxFiles)
	if st.WALDeleted == 0 || st.Checkpoints == 0 {
		t.Fatalf("no WAL file was checkpointed and deleted: %+v", st)
	}
	if maxFiles > walMaxSealed+3 {
		t.Fatalf("%d WAL files at once", maxFiles)
	}
	e.crash(logs...)
	var dirs []string
	for i := range logs {
		dirs = append(dirs, e.dir(i))
	}
	tr.loseUnsynced(t, append(dirs, e.wal)...)
	e.start()
	for i := range logs {
		l := e.open(i, testConfig())
		checkBatches(t, l, want[i])
		l.Close()
	}
	e.f.Close()
	if n := len(walFiles(t, e.wal)); n != 0 {
		t.Fatalf("%d WAL files left", n)
	}
}

// TestWALTruncateThenCrash: batches cut by TruncateTo never come back from
// the WAL, whether or not new batches were written and made durable after.
func TestWALTruncateThenCrash(t *testing.T) {
	for _, tc := range []struct {
		name       string
		to         int64
		newBatches int
		waitNew    bool
	}{
		{"no new batches", 10, 0, false},
		{"new batches durable", 10, 3, true},
		{"new batches lost", 10, 3, false},
		{"new batches fewer offsets", 20, 1, true},
		{"to zero", 0, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := trackSyncs(t)
			e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
			l := e.open(0, testConfig())
			var old [][]byte
			for i := 0; i < 10; i++ {
				b := mkBatch(spec{n: 5, valueSize: 20})
				appendDurable(t, l, b)
				old = append(old, b)
			}
			if err := l.TruncateTo(tc.to); err != nil {
				t.Fatal(err)
			}
			want := append([][]byte(nil), old[:tc.to/5]...)
			var lost [][]byte
			for i := 0; i < tc.newBatches; i++ {
				b := mkBatch(spec{n: 2, valueSize: 33})
				if tc.waitNew {
					appendDurable(t, l, b)
					want = append(want, b)
				} else {
					mustAppend(t, l, b)
					lost = append(lost, b)
				}
			}
			e.crash(l)
			tr.loseUnsynced(t, e.dir(0), e.wal)
			e.start()
			l = e.open(0, testConfig())
			defer l.Close()
			got := readAll(t, l)
			if len(got) < len(want) {
				t.Fatalf("%d batches, want at least %d", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("batch %d differs", i)
				}
			}
			// Unacknowledged new batches may survive; truncated ones never.
			for _, g := range got[len(want):] {
				found := false
				for _, x := range lost {
					found = found || bytes.Equal(g, x)
				}
				if !found {
					t.Fatalf("batch at offset %d came back from before the truncation", baseOf(g))
				}
			}
		})
	}
}

// TestWALFailedSyncIsFatal: a failed WAL fdatasync fails every log that uses
// the WAL, for good.
func TestWALFailedSyncIsFatal(t *testing.T) {
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
	a, b := e.open(0, testConfig()), e.open(1, testConfig())
	defer a.Close()
	defer b.Close()
	appendDurable(t, a, mkBatch(spec{}))
	failSyncs(t)
	r := mustAppend(t, a, mkBatch(spec{}))
	err := a.WaitDurable(context.Background(), r.LastOffset+1)
	if !errors.Is(err, ErrFatal) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable after failed WAL sync: %v", err)
	}
	if a.DurableOffset() != 1 {
		t.Fatalf("durable offset moved to %d", a.DurableOffset())
	}
	if _, err := b.Append(mkBatch(spec{})); !errors.Is(err, ErrFatal) {
		t.Fatalf("other log after failed WAL sync: %v", err)
	}
}

// TestWALNeverPolicy: FlushNever writes no WAL but still replays one left by
// an earlier run.
func TestWALNeverPolicy(t *testing.T) {
	tr := trackSyncs(t)
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
	want := writeOneLog(t, e, tr, 3)
	e.cfg.Policy = FlushNever
	e.start()
	l := e.open(0, testConfig())
	checkBatches(t, l, want)
	mustAppend(t, l, mkBatch(spec{}))
	if e.f.Stats().WALBytes != 0 {
		t.Fatal("FlushNever wrote to the WAL")
	}
	if n := len(walFiles(t, e.wal)); n != 0 {
		t.Fatalf("%d WAL files after replay under FlushNever", n)
	}
	l.Close()
}

// TestWALFlusherClosedFirst: logs still open after the flusher closed make
// their appends durable by syncing their segments, and nothing is lost.
func TestWALFlusherClosedFirst(t *testing.T) {
	tr := trackSyncs(t)
	e := newWALEnv(t, FlusherConfig{Policy: FlushInterval, Interval: time.Hour})
	l := e.open(0, testConfig())
	var want [][]byte
	b := mkBatch(spec{n: 2})
	r := mustAppend(t, l, b)
	want = append(want, b)
	done := make(chan error)
	go func() { done <- l.WaitDurable(context.Background(), r.LastOffset+1) }()
	time.Sleep(10 * time.Millisecond)
	e.f.Close() // the final round syncs the WAL
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b = mkBatch(spec{n: 2})
	appendDurable(t, l, b)
	want = append(want, b)
	abandonLog(l)
	tr.loseUnsynced(t, e.dir(0), e.wal)
	e.start()
	l = e.open(0, testConfig())
	checkBatches(t, l, want)
	l.Close()
}

// TestWALConcurrent: many logs, appenders, waiters, rotations, truncations
// and retention at once (run with -race), then a crash: every batch
// acknowledged after the last truncation of its log comes back.
func TestWALConcurrent(t *testing.T) {
	tr := trackSyncs(t)
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup, WALFileBytes: 16 << 10, MaxConcurrent: 4})
	const nlogs, writers, per = 6, 12, 30
	cfg := testConfig()
	cfg.SegmentBytes = 6 << 10
	logs := make([]*Log, nlogs)
	for i := range logs {
		logs[i] = e.open(i, cfg)
	}
	var mu sync.Mutex
	acked := make([]map[int64][]byte, nlogs) // by base offset
	for i := range acked {
		acked[i] = map[int64][]byte{}
	}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < per; j++ {
				i := 1 + (w*7+j)%(nlogs-1) // log 0 is the truncation goroutine's
				l := logs[i]
				b := mkBatch(spec{n: 1 + j%3, valueSize: 100 + w})
				r, err := l.Append(b)
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.WaitDurable(context.Background(), r.LastOffset+1); err != nil {
					t.Error(err)
					return
				}
				if l.DurableOffset() <= r.LastOffset {
					t.Errorf("durable %d after waiting for %d", l.DurableOffset(), r.LastOffset+1)
				}
				mu.Lock()
				acked[i][r.BaseOffset] = b
				mu.Unlock()
			}
		}()
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		// Log 0 is a diverged raft follower: batches, then a truncation,
		// again and again, while the others take appends. (A waiter on a
		// truncated offset is not woken, so appends and truncations of
		// log 0 are not concurrent here.)
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			l := logs[0]
			for j := 0; j < 5; j++ {
				b := mkBatch(spec{n: 2, valueSize: 300})
				r := appendDurable(t, l, b)
				mu.Lock()
				acked[0][r.BaseOffset] = b
				mu.Unlock()
			}
			mu.Lock()
			to := l.LogEndOffset() / 2
			if err := l.TruncateTo(to); err != nil {
				t.Error(err)
			}
			for off := range acked[0] {
				if off >= l.LogEndOffset() { // a batch containing to went whole
					delete(acked[0], off)
				}
			}
			mu.Unlock()
			if _, err := logs[k%nlogs].Read(0, 1000, 1<<62); err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	st := e.f.Stats()
	t.Logf("stats %+v", st)
	if st.WALDeleted == 0 {
		t.Error("no WAL file deleted")
	}
	e.crash(logs...)
	var dirs []string
	for i := range logs {
		dirs = append(dirs, e.dir(i))
	}
	tr.loseUnsynced(t, append(dirs, e.wal)...)
	e.start()
	for i := range logs {
		l := e.open(i, cfg)
		got := readAll(t, l)
		byBase := map[int64][]byte{}
		for _, g := range got {
			byBase[baseOf(g)] = g
		}
		for off, b := range acked[i] {
			if !bytes.Equal(byBase[off], b) {
				t.Fatalf("log %d: acknowledged batch at %d lost or changed", i, off)
			}
		}
		l.Close()
	}
}

// TestWALRecordRoundTrip checks the encoder against the decoder and the
// file scanner against what was written.
func TestWALRecordRoundTrip(t *testing.T) {
	var file []byte
	file = append(file, walFileHeader(3)...)
	var ids [][16]byte
	for i := 0; i < 5; i++ {
		b := mkBatch(spec{n: i + 1, valueSize: 10 * i})
		putBase(b, int64(100*i))
		id := [16]byte{byte(i), 9}
		ids = append(ids, id)
		file = appendWALRecord(file, id, uint32(i), int64(100*i), b)
	}
	if err := checkWALFileHeader(file, 3); err != nil {
		t.Fatal(err)
	}
	if checkWALFileHeader(file, 4) == nil {
		t.Fatal("header accepted for another sequence")
	}
	n := 0
	end, bad, err := scanWAL(bytes.NewReader(file[walHeaderSize:]), int64(len(file)), func(r *walRecord, pos int64) {
		if r.id != ids[n] || r.epoch != uint32(n) || r.base != int64(100*n) || r.end != int64(100*n+n+1) {
			t.Fatalf("record %d decoded as %+v", n, r)
		}
		if !bytes.Equal(file[pos:pos+int64(len(r.batch))], r.batch) {
			t.Fatalf("record %d position wrong", n)
		}
		n++
	})
	if err != nil || bad != nil || end != int64(len(file)) || n != 5 {
		t.Fatalf("scan: %d records, end %d of %d, %v %v", n, end, len(file), bad, err)
	}
}

// TestWALLogIDDamaged: a damaged log-id file fails Open instead of guessing.
func TestWALLogIDDamaged(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig())
	l.Close()
	if err := os.WriteFile(filepath.Join(dir, logIDFile), []byte("SLID nonsense"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, testConfig(), Options{Logger: testLogger(t)})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), logIDFile) {
		t.Fatalf("Open with a damaged log-id: %v", err)
	}
}

// TestWALDirLocked: two flushers never share a WAL directory.
func TestWALDirLocked(t *testing.T) {
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
	f2 := NewFlusher(FlusherConfig{Policy: FlushGroup, Dir: e.wal})
	if !errors.Is(f2.Err(), ErrLocked) {
		t.Fatalf("second flusher on one WAL directory: %v", f2.Err())
	}
	if _, err := Open(t.TempDir(), testConfig(), Options{Flusher: f2}); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open with a flusher whose WAL failed: %v", err)
	}
}

func sortedNames(t *testing.T, dir string) []string {
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// TestWALRestoresDamagedTail: recovery cuts a damaged batch off the
// segment and replay puts the WAL's copy back.
func TestWALRestoresDamagedTail(t *testing.T) {
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
	l := e.open(0, testConfig())
	var want [][]byte
	for i := 0; i < 6; i++ {
		b := mkBatch(spec{n: 2, valueSize: 80})
		appendDurable(t, l, b)
		want = append(want, b)
	}
	e.crash(l)
	seg := lastSegment(t, e.dir(0))
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-len(want[5])+70] ^= 0x10 // inside the last batch's records
	data[len(data)-2*len(want[5])+70] ^= 0x10
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	e.start()
	l = e.open(0, testConfig())
	checkBatches(t, l, want)
	l.Close()
}

// TestWALAfterCleanClose: records of batches a clean Close already synced to
// the segment are not replayed again when the flusher dies before deleting
// its files.
func TestWALAfterCleanClose(t *testing.T) {
	e := newWALEnv(t, FlusherConfig{Policy: FlushGroup})
	l := e.open(0, testConfig())
	var want [][]byte
	for i := 0; i < 4; i++ {
		b := mkBatch(spec{n: 3})
		appendDurable(t, l, b)
		want = append(want, b)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	e.f.abandon()
	if n := len(walFiles(t, e.wal)); n != 1 {
		t.Fatalf("%d WAL files", n)
	}
	e.start()
	l = e.open(0, testConfig())
	if !l.openedFromSnapshot {
		t.Fatal("clean close not used")
	}
	checkBatches(t, l, want)
	l.Close()
	e.f.Close()
	if n := len(walFiles(t, e.wal)); n != 0 {
		t.Fatalf("%d WAL files left", n)
	}
}

// TestWALBackPressure: with tiny buffer limits, appenders are held back
// until a round takes the buffer, with the flusher running (FlushInterval
// with a long interval: only full buffers start rounds) and without it.
func TestWALBackPressure(t *testing.T) {
	soft, hard := walSoftBuffer, walHardBuffer
	walSoftBuffer, walHardBuffer = 2<<10, 8<<10
	t.Cleanup(func() { walSoftBuffer, walHardBuffer = soft, hard })
	for _, started := range []bool{true, false} {
		t.Run(fmt.Sprintf("started=%v", started), func(t *testing.T) {
			root := t.TempDir()
			f, err := OpenFlusher(FlusherConfig{Policy: FlushInterval, Interval: time.Hour, Dir: filepath.Join(root, "wal"), Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if started {
				f.Start()
			}
			defer f.Close()
			var logs []*Log
			for i := 0; i < 3; i++ {
				logs = append(logs, openT(t, filepath.Join(root, fmt.Sprint(i)), testConfig(), Options{Logger: testLogger(t), Flusher: f}))
			}
			var wg sync.WaitGroup
			for w := 0; w < 6; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < 50; j++ {
						if _, err := logs[(w+j)%3].Append(mkBatch(spec{n: 1, valueSize: 500})); err != nil {
							t.Error(err)
							return
						}
						if n := f.wal.bufLen.Load(); n > int64(walHardBuffer)+6*700 {
							t.Errorf("buffer at %d bytes", n)
							return
						}
					}
				}()
			}
			wg.Wait()
			if st := f.Stats(); st.Rounds == 0 {
				t.Fatalf("no round under back-pressure: %+v", st)
			}
			for _, l := range logs {
				if l.DurableOffset() == 0 {
					t.Errorf("nothing durable in a log")
				}
				l.Close()
			}
		})
	}
}
