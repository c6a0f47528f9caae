package log

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
)

// BenchmarkAppend appends 16 KiB batches of 1 KiB records.
//
//	nosync:         Append only, page cache (FlushNever)
//	group/logs=N:   Append + WaitDurable from 64 goroutines over N logs
//	                sharing one FlushGroup flusher, per-segment syncs
//	group-wal/logs=N: the same with the broker-wide WAL
func BenchmarkAppend(b *testing.B) {
	proto := mkBatch(spec{n: 16, valueSize: 1000})
	b.Run("nosync", func(b *testing.B) {
		f := NewFlusher(FlusherConfig{Policy: FlushNever})
		l, err := Open(b.TempDir(), DefaultConfig(), Options{Logger: zerolog.Nop(), Flusher: f})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		batch := make([]byte, len(proto))
		b.SetBytes(int64(len(proto)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			copy(batch, proto)
			if _, err := l.Append(batch); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, v := range []struct {
		name string
		wal  bool
		logs int
	}{{"group", false, 1}, {"group", false, 16}, {"group-wal", true, 1}, {"group-wal", true, 16}} {
		nlogs := v.logs
		b.Run(fmt.Sprintf("%s/logs=%d", v.name, nlogs), func(b *testing.B) {
			fc := FlusherConfig{Policy: FlushGroup}
			if v.wal {
				fc.Dir = filepath.Join(b.TempDir(), "wal")
			}
			f, err := OpenFlusher(fc)
			if err != nil {
				b.Fatal(err)
			}
			f.Start()
			defer f.Close()
			logs := make([]*Log, nlogs)
			for i := range logs {
				l, err := Open(b.TempDir(), DefaultConfig(), Options{Logger: zerolog.Nop(), Flusher: f})
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
					l := logs[int(next.Add(1))%nlogs]
					copy(batch, proto)
					r, err := l.Append(batch)
					if err != nil {
						b.Error(err)
						return
					}
					if err := l.WaitDurable(context.Background(), r.LastOffset+1); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			st := f.Stats()
			b.ReportMetric(float64(st.Syncs)/float64(b.N), "fsyncs/op")
		})
	}
}
