package log

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// The flush-design benchmarks model the two ways one fdatasync can cover many
// partitions' appends, without any of this package's code in the way:
//
//	a-serial:     one file per partition; the group-commit goroutine syncs the
//	              dirty files one after another.
//	a-concurrent: one file per partition; the dirty files are synced by
//	              concurrent goroutines, so the filesystem journal can coalesce
//	              them into few commits.
//	b-wal:        every partition's append goes to one shared write-ahead file
//	              that is synced once per group. Materialising segments from it
//	              is not modelled, so b's cost is understated.
//
// and the implementations, this package's Log and Flusher under FlushGroup:
//
//	log-segments: design (a): each dirty log's segment synced, concurrently
//	              (FlusherConfig without Dir).
//	log-wal:      design (b): the broker-wide WAL (FlusherConfig.Dir),
//	              segments written to the page cache and checkpointed in the
//	              background, WAL files rotated at the default 64 MiB.
//
// In every variant many appenders write a batch, then wait until a flush that
// started after their write has finished: true group commit.
func BenchmarkFlushDesign(b *testing.B) {
	for _, batch := range []int{1 << 10, 16 << 10} {
		for _, parts := range []int{16, 256} {
			for _, v := range []string{"a-serial", "a-concurrent", "b-wal", "log-segments", "log-wal"} {
				b.Run(fmt.Sprintf("%s/partitions=%d/batch=%d", v, parts, batch), func(b *testing.B) {
					if strings.HasPrefix(v, "log-") {
						benchFlushLog(b, v == "log-wal", parts, batch)
						return
					}
					benchFlushModel(b, v, parts, batch)
				})
			}
		}
	}
}

// benchFlushLog runs the flush-design workload against the real Log: 64
// appenders, each Append then WaitDurable, over parts logs, with batches of
// about batchSize bytes.
func benchFlushLog(b *testing.B, withWAL bool, parts, batchSize int) {
	dir := b.TempDir()
	fc := FlusherConfig{Policy: FlushGroup, Logger: zerolog.Nop()}
	if withWAL {
		fc.Dir = filepath.Join(dir, "wal")
	}
	f, err := OpenFlusher(fc)
	if err != nil {
		b.Fatal(err)
	}
	f.Start()
	defer f.Close()
	// Records of about 1000 bytes, or one record filling the batch.
	n, value := max(batchSize/1024, 1), min(batchSize, 1024)-40
	proto := mkBatch(spec{n: n, valueSize: value})
	logs := make([]*Log, parts)
	for i := range logs {
		l, err := Open(filepath.Join(dir, fmt.Sprintf("t-%d", i)), DefaultConfig(), Options{Logger: zerolog.Nop(), Flusher: f})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		logs[i] = l
	}
	var next atomic.Int64
	b.SetBytes(int64(len(proto)))
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		batch := make([]byte, len(proto))
		for pb.Next() {
			l := logs[int(next.Add(1))%parts]
			copy(batch, proto)
			r, err := l.Append(batch)
			if err == nil {
				err = l.WaitDurable(context.Background(), r.LastOffset+1)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := f.Stats()
	b.ReportMetric(float64(st.Syncs)/float64(b.N), "fsyncs/op")
}

type flushModel struct {
	files   []*os.File
	fileMu  []sync.Mutex
	perPart bool
	conc    bool

	mu      sync.Mutex
	cond    *sync.Cond
	dirty   map[int]bool
	curGen  uint64 // generation of the last flush started
	doneGen uint64 // generation of the last flush finished
	closed  bool
	err     error
	syncs   atomic.Int64
	flushes atomic.Int64
	kick    chan struct{}
}

func benchFlushModel(b *testing.B, variant string, parts, batchSize int) {
	dir := b.TempDir()
	m := &flushModel{dirty: map[int]bool{}, kick: make(chan struct{}, 1)}
	m.cond = sync.NewCond(&m.mu)
	nfiles := 1
	if variant != "b-wal" {
		m.perPart = true
		nfiles = parts
	}
	m.conc = variant == "a-concurrent"
	m.fileMu = make([]sync.Mutex, nfiles)
	for i := 0; i < nfiles; i++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d.log", i)), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		m.files = append(m.files, f)
	}
	done := make(chan struct{})
	go m.run(done)

	payload := make([]byte, batchSize)
	var next atomic.Int64
	b.SetBytes(int64(batchSize))
	b.SetParallelism(32) // 64 appenders on a 2-core machine
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p := int(next.Add(1)) % parts
			fi := 0
			if m.perPart {
				fi = p
			}
			m.fileMu[fi].Lock()
			_, err := m.files[fi].Write(payload)
			m.fileMu[fi].Unlock()
			if err != nil {
				b.Error(err)
				return
			}
			m.mu.Lock()
			m.dirty[fi] = true
			want := m.curGen + 1
			select {
			case m.kick <- struct{}{}:
			default:
			}
			for m.doneGen < want && m.err == nil {
				m.cond.Wait()
			}
			m.mu.Unlock()
		}
	})
	b.StopTimer()
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	close(m.kick)
	<-done
	if m.err != nil {
		b.Fatal(m.err)
	}
	b.ReportMetric(float64(m.syncs.Load())/float64(b.N), "fsyncs/op")
	if f := m.flushes.Load(); f > 0 {
		b.ReportMetric(float64(b.N)*float64(batchSize)/float64(f)/1024, "KiB/flush")
	}
	for _, f := range m.files {
		f.Close()
	}
}

func (m *flushModel) run(done chan struct{}) {
	defer close(done)
	for range m.kick {
		m.mu.Lock()
		if len(m.dirty) == 0 {
			m.mu.Unlock()
			continue
		}
		var todo []int
		for fi := range m.dirty {
			todo = append(todo, fi)
		}
		clear(m.dirty)
		m.curGen++
		gen := m.curGen
		m.mu.Unlock()

		var err error
		if m.conc && len(todo) > 1 {
			var wg sync.WaitGroup
			var errMu sync.Mutex
			for _, fi := range todo {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if e := fsutil.Fdatasync(m.files[fi]); e != nil {
						errMu.Lock()
						err = e
						errMu.Unlock()
					}
				}()
			}
			wg.Wait()
		} else {
			for _, fi := range todo {
				if e := fsutil.Fdatasync(m.files[fi]); e != nil {
					err = e
				}
			}
		}
		m.syncs.Add(int64(len(todo)))
		m.flushes.Add(1)

		m.mu.Lock()
		m.doneGen = gen
		if err != nil {
			m.err = err
		}
		m.cond.Broadcast()
		// Appenders that registered during the flush need another one.
		if len(m.dirty) > 0 {
			select {
			case m.kick <- struct{}{}:
			default:
			}
		}
		m.mu.Unlock()
	}
}
