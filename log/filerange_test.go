package log

import (
	"bytes"
	"math/rand"
	"testing"
	"time"
)

// ReadRange must select exactly what Read copies, for every offset, size
// limit and upper bound, across active and inactive (non-resident index)
// segments.
func TestReadRangeMatchesRead(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 300
	cfg.SegmentBytes = 8 << 10
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 300; i++ {
		mustAppend(t, l, mkBatch(spec{n: 1 + rng.Intn(4), valueSize: rng.Intn(400)}))
	}
	if len(l.segs) < 3 {
		t.Fatalf("only %d segments", len(l.segs))
	}
	leo := l.LogEndOffset()
	for k := 0; k < 3000; k++ {
		off := rng.Int63n(leo + 1)
		maxBytes := rng.Intn(6 << 10)
		upTo := off + rng.Int63n(leo-off+5) - 2
		if k%5 == 0 {
			upTo = leo
		}
		want, werr := l.Read(off, maxBytes, upTo)
		got, gerr := l.ReadRange(off, maxBytes, upTo)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("Read(%d, %d, %d) err %v, ReadRange err %v", off, maxBytes, upTo, werr, gerr)
		}
		b, err := got.Range.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want.Data) || got.NextOffset != want.NextOffset {
			t.Fatalf("Read(%d, %d, %d): %d bytes next %d; ReadRange %d bytes next %d",
				off, maxBytes, upTo, len(want.Data), want.NextOffset, len(b), got.NextOffset)
		}
		got.Range.Release()
	}
}

// A range stays readable while retention deletes its segment; the file is
// closed only when the range is released.
func TestReadRangeSurvivesRetention(t *testing.T) {
	one := int64(len(mkBatch(spec{valueSize: 100})))
	cfg := testConfig()
	cfg.SegmentBytes = 2 * one
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 6; i++ {
		mustAppend(t, l, mkBatch(spec{valueSize: 100}))
	}
	r, err := l.ReadRange(0, 1<<20, 6)
	if err != nil || r.Range.Len != 2*one {
		t.Fatalf("ReadRange: %d bytes, %v", r.Range.Len, err)
	}
	want, _ := l.Read(0, 1<<20, 6)
	cfg.RetentionBytes = 0
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(time.Now()); err != nil || n == 0 {
		t.Fatalf("retention deleted %d: %v", n, err)
	}
	got, err := r.Range.Bytes()
	if err != nil || !bytes.Equal(got, want.Data) {
		t.Fatalf("range after retention: %v", err)
	}
	f := r.Range.File()
	r.Range.Release()
	r.Range.Release() // a second release is harmless
	if _, err := f.ReadAt(make([]byte, 1), 0); err == nil {
		t.Fatal("file still open after the last release")
	}
}

func TestReadRangeEmpty(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig())
	defer l.Close()
	mustAppend(t, l, mkBatch(spec{}))
	r, err := l.ReadRange(0, 100, 0) // nothing below upTo
	if err != nil || r.Range.Len != 0 {
		t.Fatalf("got %d bytes, %v", r.Range.Len, err)
	}
	if b, err := r.Range.Bytes(); err != nil || len(b) != 0 {
		t.Fatal("empty range bytes")
	}
	r.Range.Release()
}
