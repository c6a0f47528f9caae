package log

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

// TestCleanerThreads: the Cleaner cleans the compacted logs it is given,
// leaves the others alone, keeps cleaning while producers append and
// consumers read, and stops on Close.
func TestCleanerThreads(t *testing.T) {
	cfg := compactConfig()
	plain := testConfig()
	plain.SegmentBytes = cfg.SegmentBytes
	lc := openT(t, t.TempDir(), cfg)
	defer lc.Close()
	lp := openT(t, t.TempDir(), plain)
	defer lp.Close()
	c := NewCleaner(CleanerConfig{
		Threads: 2, DedupeBufferSize: 1 << 20, Backoff: 5 * time.Millisecond, Logger: testLogger(t),
		Targets: func() []CleanTarget { return []CleanTarget{{Log: lc}, {Log: lp, Limit: lp.LogEndOffset}} },
	})
	c.Start()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // a consumer reading from the start over and over
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			readRecords(t, lc)
		}
	}()
	for round := 0; round < 30; round++ {
		for k := 0; k < 5; k++ {
			s := keyedSpec{recs: []kv{rec(fmt.Sprint("k", k), fmt.Sprint(round))}}
			mustAppend(t, lc, mkKeyed(t, s))
			mustAppend(t, lp, mkKeyed(t, s))
		}
	}
	roll(t, lc)
	roll(t, lp)
	want := "145:k0=29 146:k1=29 147:k2=29 148:k3=29 149:k4=29"
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, _ := readRecords(t, lc)
		if recordsString(g) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("compacted log never reached the survivors: %s", recordsString(g))
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	c.Close()
	if g, _ := readRecords(t, lp); len(g) != 150 {
		t.Fatalf("log without compaction holds %d records, want 150", len(g))
	}
	tot := c.Totals()
	if tot.Passes == 0 || tot.Segments == 0 || tot.RecordsGone != 145 || tot.Errors != 0 {
		t.Fatalf("totals %+v", tot)
	}
}

// TestCleanerThrottle: log.cleaner.io.max.bytes.per.second bounds a pass.
func TestCleanerThrottle(t *testing.T) {
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 200; i++ {
		mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec(fmt.Sprint("k", i%10), fmt.Sprintf("%01000d", i))}}))
	}
	roll(t, l)
	size := segmentsBytes(l)
	const rate = 256 << 10
	start := time.Now()
	st, ok, err := l.clean(cleanOptions{now: time.Now(), limit: math.MaxInt64, m: newOffsetMap(1 << 20), throttle: newThrottler(rate)})
	if err != nil || !ok {
		t.Fatal(err)
	}
	io := st.BytesRead + st.BytesWritten
	if io < 2*size {
		t.Fatalf("pass did %d bytes of I/O for a %d-byte log", io, size)
	}
	// The first window's worth passes at once, the rest at the rate.
	if min := time.Duration(float64(io-rate) / rate * float64(time.Second)); time.Since(start) < min {
		t.Fatalf("%d bytes in %v at %d B/s, want at least %v", io, time.Since(start), rate, min)
	}
}
