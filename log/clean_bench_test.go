//go:build unix

package log

import (
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// BenchmarkClean measures cleaning throughput: a 32 MiB log of batches
// of 100 records (a 120-byte value of random hex digits each) over 20,000 keys, each
// key written about 13 times, cleaned in one pass with a 128 MiB offset
// map (the whole dirty section fits), uncompressed and lz4. MB/s is log
// bytes cleaned per second (read for the map, read again and rewritten);
// building the log is not timed.
//
//	go test ./log/ -run '^$' -bench BenchmarkClean -benchtime 3x
//
// MB/s is wall-clock; MB/cpu-s divides by the CPU time the process used
// during the passes, which stays meaningful on a busy machine.
//
// On the 2-core development VM with a load average of 22 (other builds and
// tests), one run: none 34 MB/s (110 MB/cpu-s), lz4 20 MB/s (77 MB/cpu-s),
// zstd 9.4 MB/s (34 MB/cpu-s); the cleaned log is 8%, 5% and 3% of the
// input. Hashing keys (MD5, twice a record) and the offset map's lookups
// take most of the CPU uncompressed; recompression the rest.
func BenchmarkClean(b *testing.B) {
	for _, codec := range []struct {
		name string
		id   int8
	}{{"none", 0}, {"lz4", 3}, {"zstd", 4}} {
		b.Run(codec.name, func(b *testing.B) {
			const keys, perBatch, total = 20_000, 100, 32 << 20
			// Values of random hex digits: about 2x compressible, like
			// text ids and JSON.
			rnd := rand.New(rand.NewPCG(1, 2))
			values := make([]string, 64)
			for i := range values {
				v := make([]byte, 120)
				for j := range v {
					v[j] = "0123456789abcdef"[rnd.IntN(16)]
				}
				values[i] = string(v)
			}
			m := newOffsetMap(128 << 20)
			var logBytes int64
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				cfg := compactConfig()
				cfg.SegmentBytes = 4 << 20
				l := openT(b, b.TempDir(), cfg)
				n := 0
				for l.LogEndOffset() == 0 || segmentsBytes(l) < total {
					recs := make([]kv, perBatch)
					for j := range recs {
						recs[j] = rec(fmt.Sprintf("key-%05d", n%keys), values[n%len(values)])
						n++
					}
					mustAppend(b, l, mkKeyed(b, keyedSpec{recs: recs, codec: codec.id}))
				}
				roll(b, l)
				logBytes = segmentsBytes(l)
				cpu0 := cpuTime(b)
				b.StartTimer()
				st, ok, err := l.clean(cleanOptions{now: time.Now(), limit: math.MaxInt64, m: m})
				b.StopTimer()
				cpu += cpuTime(b) - cpu0
				if err != nil || !ok || st.CleanedTo != l.LogEndOffset() {
					b.Fatalf("clean: %+v %v %v", st, ok, err)
				}
				b.ReportMetric(float64(st.BytesWritten)/float64(logBytes), "written/log")
				l.Close()
				b.StartTimer()
			}
			b.SetBytes(logBytes)
			// The same per second of CPU the process used, which a
			// machine shared with other work does not distort.
			b.ReportMetric(float64(logBytes)*float64(b.N)/1e6/cpu.Seconds(), "MB/cpu-s")
		})
	}
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func segmentsBytes(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}
