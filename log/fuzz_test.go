package log

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-broker/sluice/protocol"
)

func fuzzSeeds() [][]byte {
	a := mkBatch(spec{n: 3, valueSize: 10, ts: 5})
	b := mkBatch(spec{n: 1, idem: true, pid: 3, seq: 0, leaderEpoch: 2})
	putBase(b, 3)
	c := mkBatch(spec{n: 2, attrs: 1})
	putBase(c, 4)
	three := bytes.Join([][]byte{a, b, c}, nil)
	badCRC := bytes.Clone(three)
	badCRC[len(a)+70] ^= 1
	magic1 := bytes.Clone(a)
	magic1[protocol.BatchMagicAt] = 1
	return [][]byte{
		nil,
		a,
		three,
		three[:len(three)-7],
		badCRC,
		magic1,
		append(bytes.Clone(a), a...), // second copy repeats offsets
		bytes.Repeat([]byte{0xff}, 100),
	}
}

// FuzzRecover feeds arbitrary bytes to Open as the only segment and checks
// that recovery keeps exactly a prefix of whole valid batches, that the
// result reads back batch by batch, survives a second Open unchanged, and
// accepts appends at the recovered log end offset.
func FuzzRecover(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(checkRecover)
}

func checkRecover(t *testing.T, data []byte) {
	dir := t.TempDir()
	seg := filepath.Join(dir, segmentName(0, logSuffix))
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.IndexIntervalBytes = 64
	l, err := Open(dir, cfg, Options{})
	if err != nil {
		t.Fatalf("Open on arbitrary bytes: %v", err)
	}
	kept, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) > len(data) || !bytes.Equal(kept, data[:len(kept)]) {
		t.Fatalf("recovery kept %d bytes that are not a prefix of the %d input bytes", len(kept), len(data))
	}
	batches := readAll(t, l)
	if joined := bytes.Join(batches, nil); !bytes.Equal(joined, kept) {
		t.Fatalf("reads return %d bytes, the segment keeps %d", len(joined), len(kept))
	}
	wantLEO := int64(0)
	if n := len(batches); n > 0 {
		h, _ := parseHeader(batches[n-1])
		wantLEO = h.LastOffset() + 1
	}
	if l.LogEndOffset() != wantLEO {
		t.Fatalf("leo %d, want %d", l.LogEndOffset(), wantLEO)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	again := readAll(t, l)
	if len(again) != len(batches) {
		t.Fatalf("second open: %d batches, first %d", len(again), len(batches))
	}
	for i := range again {
		if !bytes.Equal(again[i], batches[i]) {
			t.Fatalf("second open: batch %d differs", i)
		}
	}
	if wantLEO < math.MaxInt64/2 {
		r, err := l.Append(mkBatch(spec{n: 2}))
		if err != nil || r.BaseOffset != wantLEO {
			t.Fatalf("append after recovery: %+v %v", r, err)
		}
	}
}
