package log

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// TestConcurrentAppendWaitDurable runs many producers over several logs that
// share one FlushGroup flusher; run it with -race. Every append must get a
// unique offset, WaitDurable must not return before the log's durable
// offset covers it, and the syncs must be shared (fewer syncs than appends).
func TestConcurrentAppendWaitDurable(t *testing.T) {
	t.Run("segments", func(t *testing.T) { testConcurrentAppendWaitDurable(t, "") })
	t.Run("wal", func(t *testing.T) { testConcurrentAppendWaitDurable(t, filepath.Join(t.TempDir(), "wal")) })
}

func testConcurrentAppendWaitDurable(t *testing.T, walDir string) {
	f := NewFlusher(FlusherConfig{Policy: FlushGroup, Logger: testLogger(t), Dir: walDir, WALFileBytes: 32 << 10})
	f.Start()
	defer f.Close()
	const nlogs, writers, perWriter = 4, 16, 40
	cfg := testConfig()
	cfg.SegmentBytes = 16 << 10   // rolls happen under load too
	cfg.RetentionBytes = 64 << 10 // and retention deletes segments
	var logs []*Log
	dirs := make([]string, nlogs)
	for i := range dirs {
		dirs[i] = t.TempDir()
		logs = append(logs, openT(t, dirs[i], cfg, Options{Logger: testLogger(t), Flusher: f}))
	}
	type got struct{ log, base int }
	results := make(chan got, writers*perWriter)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		// Retention and timestamp lookups race with appends, rolls and syncs.
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, l := range logs {
				if _, err := l.ApplyRetention(time.Now()); err != nil {
					t.Error(err)
					return
				}
				if _, _, _, err := l.OffsetForTimestamp(0); err != nil {
					t.Error(err)
				}
				if _, _, err := l.MaxTimestamp(); err != nil {
					t.Error(err)
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				li := (w + i) % nlogs
				l := logs[li]
				r, err := l.Append(mkBatch(spec{n: 4, valueSize: 200, idem: true, pid: int64(w), seq: int32(4 * i / nlogs)}))
				if err != nil {
					// Sequences per (producer, log) are not contiguous here
					// unless writers visit logs round-robin; they do.
					t.Error(err)
					return
				}
				if err := l.WaitDurable(context.Background(), r.LastOffset+1); err != nil {
					t.Error(err)
					return
				}
				if d := l.DurableOffset(); d <= r.LastOffset {
					t.Errorf("WaitDurable returned with durable %d <= %d", d, r.LastOffset)
				}
				// Readers run concurrently with appends, rolls and retention.
				if _, err := l.Read(r.BaseOffset, 1<<10, r.LastOffset+1); err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
					t.Error(err)
				}
				results <- got{li, int(r.BaseOffset)}
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	close(results)
	seen := make([]map[int]bool, nlogs)
	for i := range seen {
		seen[i] = map[int]bool{}
	}
	n := 0
	for r := range results {
		if seen[r.log][r.base] {
			t.Fatalf("log %d offset %d assigned twice", r.log, r.base)
		}
		seen[r.log][r.base] = true
		n++
	}
	if n != writers*perWriter {
		t.Fatalf("%d appends finished", n)
	}
	st := f.Stats()
	t.Logf("flusher: %d rounds, %d log syncs for %d appends", st.Rounds, st.Syncs, n)
	if st.Syncs >= int64(n) {
		t.Errorf("no group commit: %d syncs for %d appends", st.Syncs, n)
	}
	for i, l := range logs {
		if l.LogEndOffset() != int64(4*len(seen[i])) {
			t.Fatalf("log %d ends at %d after %d batches", i, l.LogEndOffset(), len(seen[i]))
		}
		if l.LogStartOffset() == 0 {
			t.Fatalf("log %d: retention deleted nothing", i)
		}
		for _, b := range readAll(t, l) {
			if !seen[i][int(baseOf(b))] {
				t.Fatalf("log %d holds a batch at %d nobody appended", i, baseOf(b))
			}
		}
		l.Close()
	}
}

func TestWaitDurablePolicies(t *testing.T) {
	wal := func(t *testing.T, cfg FlusherConfig) *Flusher {
		cfg.Dir = filepath.Join(t.TempDir(), "wal")
		f, err := OpenFlusher(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		name string
		f    func(t *testing.T) *Flusher
	}{
		{"no flusher", func(*testing.T) *Flusher { return nil }},
		{"group", func(*testing.T) *Flusher { return NewFlusher(FlusherConfig{Policy: FlushGroup}) }},
		{"interval", func(*testing.T) *Flusher {
			return NewFlusher(FlusherConfig{Policy: FlushInterval, Interval: 5 * time.Millisecond})
		}},
		{"never", func(*testing.T) *Flusher { return NewFlusher(FlusherConfig{Policy: FlushNever}) }},
		{"not started", func(*testing.T) *Flusher { return NewFlusher(FlusherConfig{Policy: FlushGroup}) }},
		{"wal group", func(t *testing.T) *Flusher { return wal(t, FlusherConfig{Policy: FlushGroup}) }},
		{"wal interval", func(t *testing.T) *Flusher {
			return wal(t, FlusherConfig{Policy: FlushInterval, Interval: 5 * time.Millisecond})
		}},
		{"wal never", func(t *testing.T) *Flusher { return wal(t, FlusherConfig{Policy: FlushNever}) }},
		{"wal not started", func(t *testing.T) *Flusher { return wal(t, FlusherConfig{Policy: FlushGroup}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f(t)
			if f != nil && !strings.HasSuffix(tc.name, "not started") {
				f.Start()
				defer f.Close()
			}
			l := openT(t, t.TempDir(), testConfig(), Options{Logger: testLogger(t), Flusher: f})
			defer l.Close()
			r := mustAppend(t, l, mkBatch(spec{n: 5}))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := l.WaitDurable(ctx, r.LastOffset+1); err != nil {
				t.Fatal(err)
			}
			if d := l.DurableOffset(); d != 5 {
				t.Fatalf("durable %d", d)
			}
			// Waiting for an offset not yet appended blocks until the
			// context ends (or, with FlushNever, returns at once).
			short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel2()
			err := l.WaitDurable(short, 100)
			if strings.HasSuffix(tc.name, "never") {
				if err != nil {
					t.Fatal(err)
				}
			} else if err != context.DeadlineExceeded {
				t.Fatalf("wait for future offset: %v", err)
			}
		})
	}
}

func TestFlusherCloseReleasesWaiters(t *testing.T) {
	t.Run("segments", func(t *testing.T) { testFlusherCloseReleasesWaiters(t, "") })
	t.Run("wal", func(t *testing.T) { testFlusherCloseReleasesWaiters(t, filepath.Join(t.TempDir(), "wal")) })
}

func testFlusherCloseReleasesWaiters(t *testing.T, walDir string) {
	f := NewFlusher(FlusherConfig{Policy: FlushInterval, Interval: time.Hour, Dir: walDir})
	f.Start()
	l := openT(t, t.TempDir(), testConfig(), Options{Logger: testLogger(t), Flusher: f})
	defer l.Close()
	r := mustAppend(t, l, mkBatch(spec{}))
	done := make(chan error)
	go func() { done <- l.WaitDurable(context.Background(), r.LastOffset+1) }()
	time.Sleep(10 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned before any flush: %v", err)
	default:
	}
	f.Close() // the final round syncs the log
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// After Close, waiters sync inline.
	r = mustAppend(t, l, mkBatch(spec{}))
	if err := l.WaitDurable(context.Background(), r.LastOffset+1); err != nil {
		t.Fatal(err)
	}
}

func TestCloseWakesWaiters(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig())
	done := make(chan error)
	go func() { done <- l.WaitDurable(context.Background(), 10) }()
	time.Sleep(10 * time.Millisecond)
	l.Close()
	select {
	case err := <-done:
		if err != ErrClosed {
			t.Fatalf("got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by Close")
	}
}

// failSyncs makes every file sync fail until the test ends.
func failSyncs(t *testing.T) {
	orig := syncFile
	syncFile = func(f *os.File) error { return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: syscall.EIO} }
	t.Cleanup(func() { syncFile = orig })
}

func TestFailedFlushIsFatal(t *testing.T) {
	f := NewFlusher(FlusherConfig{Policy: FlushGroup})
	f.Start()
	defer f.Close()
	dir := t.TempDir()
	l := openT(t, dir, testConfig(), Options{Logger: testLogger(t), Flusher: f})
	r := mustAppend(t, l, mkBatch(spec{}))
	if err := l.WaitDurable(context.Background(), r.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	failSyncs(t)
	r = mustAppend(t, l, mkBatch(spec{}))
	err := l.WaitDurable(context.Background(), r.LastOffset+1)
	if !errors.Is(err, ErrFatal) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("WaitDurable after failed sync: %v", err)
	}
	if l.DurableOffset() != 1 {
		t.Fatalf("durable offset moved to %d past a failed sync", l.DurableOffset())
	}
	// Sticky: nothing works any more, even once syncs would succeed again.
	syncFile = fsutil.Fdatasync
	if _, err := l.Append(mkBatch(spec{})); !errors.Is(err, ErrFatal) {
		t.Fatalf("append: %v", err)
	}
	if _, err := l.Read(0, 10, 10); !errors.Is(err, ErrFatal) {
		t.Fatalf("read: %v", err)
	}
	if err := l.WaitDurable(context.Background(), 1); !errors.Is(err, ErrFatal) {
		t.Fatalf("wait: %v", err)
	}
	l.Close()
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err == nil {
		t.Fatal("failed log marked clean")
	}
}

func TestFailedRollSyncIsFatal(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = int64(len(mkBatch(spec{})))
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	mustAppend(t, l, mkBatch(spec{}))
	failSyncs(t)
	if _, err := l.Append(mkBatch(spec{})); !errors.Is(err, ErrFatal) {
		t.Fatalf("append that rolls over a failed sync: %v", err)
	}
	if l.LogEndOffset() != 1 {
		t.Fatalf("leo %d", l.LogEndOffset())
	}
}
