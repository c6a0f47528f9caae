//go:build linux

package log

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/internal/powerloss"
	"github.com/sluice-broker/sluice/protocol"
)

// TestPowerLoss writes a log from concurrent idempotent producers under each
// flush policy, cuts the power while they write, and reopens every image a
// power cut could leave (the exact last-synced state and seeded random ones
// with torn and partly kept unsynced writes). The promises checked:
//   - every image opens, and the log is dense from 0 to its end: each batch
//     is one that was appended, at the offset it was given, with a good CRC,
//     and the segment files cover the offsets without a gap;
//   - with log.fsync=group (segments or the WAL), every batch acknowledged
//     (WaitDurable returned) before the cut is there; under interval what
//     DurableOffset reported before the cut is there, and only the tail
//     after it may be lost; under never only what rolled segments held is
//     certain, and any tail may be lost;
//   - the producers' state is rebuilt: each producer's next sequence after
//     what survived is accepted at the log end.
func TestPowerLoss(t *testing.T) {
	seed := powerloss.Seed(t)
	for i, tc := range []struct {
		name   string
		policy FlushPolicy
		wal    bool
	}{
		{"group", FlushGroup, false},
		{"group-wal", FlushGroup, true},
		{"interval", FlushInterval, false},
		{"never", FlushNever, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := 0; round < 2; round++ {
				testPowerLossRound(t, tc.policy, tc.wal, seed+int64(100*i+round))
			}
		})
	}
}

const plWriters = 3

func testPowerLossRound(t *testing.T, policy FlushPolicy, useWAL bool, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	root := t.TempDir()
	rec, err := powerloss.Start(root)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()
	fcfg := FlusherConfig{Policy: policy, Interval: 5 * time.Millisecond, Logger: testLogger(t), WALFileBytes: 16 << 10}
	if useWAL {
		fcfg.Dir = filepath.Join(root, "wal")
	}
	f := NewFlusher(fcfg)
	f.Start()
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 10 // several rolls
	cfg.IndexIntervalBytes = 512
	dir := filepath.Join(root, "p-0")
	l := openT(t, dir, cfg, Options{Logger: testLogger(t), Flusher: f})

	var mu sync.Mutex
	stored := map[int64][]byte{} // base offset -> batch as appended
	var acked []int64            // base offsets whose WaitDurable returned
	stop := make(chan struct{})
	var wg sync.WaitGroup
	sizes := make([][]int, plWriters)
	for w := range sizes {
		for i := 0; i < 400; i++ {
			sizes[w] = append(sizes[w], 1+rng.Intn(300))
		}
	}
	for w := 0; w < plWriters; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			seq := int32(0)
			for _, size := range sizes[w] {
				select {
				case <-stop:
					return
				default:
				}
				n := 1 + size%4
				b := mkBatch(spec{n: n, valueSize: size, ts: int64(seq), idem: true, pid: int64(w + 1), seq: seq, leaderEpoch: 1})
				r, err := l.Append(b)
				if err != nil {
					return // closed by the cut
				}
				seq += int32(n)
				mu.Lock()
				stored[r.BaseOffset] = append([]byte(nil), b...)
				mu.Unlock()
				if policy == FlushGroup {
					if err := l.WaitDurable(context.Background(), r.LastOffset+1); err != nil {
						return
					}
					mu.Lock()
					acked = append(acked, r.BaseOffset)
					mu.Unlock()
				}
			}
		}(w)
	}
	// Cut at a random point while the writers run.
	deadline := time.Now().Add(10 * time.Second)
	target := 50 + rng.Intn(300)
	for {
		mu.Lock()
		n := len(stored)
		mu.Unlock()
		if n >= target || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	mustHave := append([]int64(nil), acked...)
	mu.Unlock()
	durable := l.DurableOffset()
	// The writers and the flusher run on while the cut reads the files; a
	// slow read gives syncs time to end (and the code to act on them)
	// during it, which must not reach the images.
	rec.SlowCut(time.Millisecond)
	if err := rec.Cut(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("files at the cut, as recorded:\n%s", rec.Describe())
		}
	}()
	close(stop)
	l.Close()
	f.Close()
	wg.Wait()
	t.Logf("seed %d: cut after %d batches appended, %d acknowledged, durable offset %d", seed, len(stored), len(mustHave), durable)

	for img := 0; img < 4; img++ {
		mode, iseed := powerloss.ImageFor(seed, img)
		idir := filepath.Join(t.TempDir(), "img")
		if err := rec.Image(idir, mode, iseed); err != nil {
			t.Fatal(err)
		}
		checkPowerLossImage(t, fmt.Sprintf("seed %d image %s/%d", seed, mode, iseed), idir, cfg, fcfg, useWAL, stored, mustHave, durable)
	}
}

func checkPowerLossImage(t *testing.T, what, root string, cfg Config, fcfg FlusherConfig, useWAL bool, stored map[int64][]byte, acked []int64, durable int64) {
	t.Helper()
	if useWAL {
		fcfg.Dir = filepath.Join(root, "wal")
	}
	f, err := OpenFlusher(fcfg)
	if err != nil {
		t.Fatalf("%s: flusher: %v", what, err)
	}
	f.Start()
	defer f.Close()
	l, err := Open(filepath.Join(root, "p-0"), cfg, Options{Logger: testLogger(t), Flusher: f})
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer l.Close()
	if l.LogStartOffset() != 0 {
		t.Fatalf("%s: log start %d", what, l.LogStartOffset())
	}
	leo := l.LogEndOffset()
	next := map[int64]int32{} // producer -> next sequence
	off := int64(0)
	for _, b := range readAll(t, l) {
		h, err := protocol.ParseBatch(b)
		if err != nil {
			t.Fatalf("%s: batch at %d is corrupt (%v)", what, off, err)
		}
		if h.BaseOffset() != off {
			t.Fatalf("%s: batch at %d, want %d: a gap", what, h.BaseOffset(), off)
		}
		want, ok := stored[off]
		if !ok || !bytes.Equal(b, want) {
			t.Fatalf("%s: batch at %d is not the one appended there", what, off)
		}
		next[h.ProducerID()] = h.BaseSequence() + h.LastOffsetDelta() + 1
		off = h.BaseOffset() + int64(h.LastOffsetDelta()) + 1
	}
	if off != leo {
		t.Fatalf("%s: batches end at %d, log end offset %d", what, off, leo)
	}
	for _, a := range acked {
		if a >= leo {
			t.Fatalf("%s: acknowledged batch at %d lost (log end %d)", what, a, leo)
		}
	}
	if fcfg.Policy != FlushNever && leo < durable {
		t.Fatalf("%s: log end %d below the durable offset %d reported before the cut", what, leo, durable)
	}
	for p := int64(1); p <= plWriters; p++ {
		r, err := l.Append(mkBatch(spec{n: 1, idem: true, pid: p, seq: next[p], leaderEpoch: 1}))
		if err != nil || r.BaseOffset != l.LogEndOffset()-1 {
			t.Fatalf("%s: producer %d's next batch (seq %d) after recovery: %+v %v", what, p, next[p], r, err)
		}
	}
}
