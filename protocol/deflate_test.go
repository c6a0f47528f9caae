package protocol

import (
	"bytes"
	"errors"
	"testing"
)

// TestRecompress: a batch of every codec and framing a producer sends,
// recompressed to every codec a topic's compression.type names, keeps its
// header fields and its records exactly, carries a valid CRC and the new
// codec bits, and passes ValidateRecords; the inflation and the output are
// charged to the budget.
func TestRecompress(t *testing.T) {
	recs := recordsOf(300, 200)
	for _, src := range append([]string{"none"}, testCodecs...) {
		var b Batch
		if src == "none" {
			b = rawBatch(0, recs, 300)
		} else {
			comp, id := compressWith(t, src, recs)
			b = rawBatch(id, comp, 300)
		}
		// Producer fields and timestamps must survive as they are.
		copy(b[BatchBaseTimestampAt:], []byte{0, 0, 1, 2, 3, 4, 5, 6})
		copy(b[BatchProducerIDAt:], []byte{0, 0, 0, 0, 0, 0, 0, 42, 0, 3, 0, 0, 0, 9})
		b.SetCRC()
		for _, name := range []string{"uncompressed", "gzip", "snappy", "lz4", "zstd"} {
			codec, ok := CodecOf(name)
			if !ok {
				t.Fatalf("CodecOf(%s) not ok", name)
			}
			var budget countingBudget
			nb, err := b.Recompress(codec, 1<<20, &budget)
			if err != nil {
				t.Fatalf("%s -> %s: %v", src, name, err)
			}
			if _, err := ParseBatch(nb); err != nil {
				t.Fatalf("%s -> %s: %v", src, name, err)
			}
			if nb.Compression() != codec {
				t.Errorf("%s -> %s: codec bits %d", src, name, nb.Compression())
			}
			if err := nb.ValidateRecords(1<<20, nil); err != nil {
				t.Errorf("%s -> %s: %v", src, name, err)
			}
			got := []byte(nb[BatchHeaderSize:])
			if codec != CodecNone {
				buf, n, err := inflate(got, codec, 1<<20, nil)
				if err != nil {
					t.Fatalf("%s -> %s: inflating the result: %v", src, name, err)
				}
				got = append([]byte(nil), buf[:n]...)
				PutFrameBuffer(buf)
			}
			if !bytes.Equal(got, recs) {
				t.Errorf("%s -> %s: records changed", src, name)
			}
			for _, r := range [][2]int{{BatchBaseOffsetAt, BatchLengthAt}, {BatchLeaderEpochAt, BatchCRCAt}, {BatchAttributesAt + 2, BatchHeaderSize}} {
				if !bytes.Equal(nb[r[0]:r[1]], b[r[0]:r[1]]) {
					t.Errorf("%s -> %s: header bytes %d-%d changed", src, name, r[0], r[1])
				}
			}
			if nb.Attributes()&^AttrCompressionMask != b.Attributes()&^AttrCompressionMask {
				t.Errorf("%s -> %s: attributes other than the codec changed", src, name)
			}
			if budget.total < len(nb) {
				t.Errorf("%s -> %s: %d bytes charged for a %d-byte result", src, name, budget.total, len(nb))
			}
		}
	}
	if _, ok := CodecOf("producer"); ok {
		t.Error("CodecOf(producer) must say: keep the producer's codec")
	}
}

// TestRecompressLimits: records inflating past the limit and a budget
// that refuses stop the recompression with their errors.
func TestRecompressLimits(t *testing.T) {
	recs := recordsOf(100, 1000)
	comp, id := compressWith(t, "zstd", recs)
	b := rawBatch(id, comp, 100)
	if _, err := b.Recompress(CodecGzip, len(recs)-1, nil); !errors.Is(err, ErrRecordsTooLarge) {
		t.Errorf("recompressing past the inflation limit: %v, want ErrRecordsTooLarge", err)
	}
	if _, err := b.Recompress(CodecGzip, 1<<20, &countingBudget{ceiling: 1000}); err != errNoRoom {
		t.Errorf("budget refusal: %v, want errNoRoom", err)
	}
}

// BenchmarkRecompress: one batch of 1,000 records of 1 KiB (1 MiB of
// repetitive text), sent with the producer's codec and stored with the
// topic's.
func BenchmarkRecompress(b *testing.B) {
	recs := recordsOf(1000, 1000)
	for _, tc := range []struct{ from, to string }{
		{"none", "lz4"}, {"none", "zstd"}, {"none", "gzip"}, {"none", "snappy"},
		{"lz4", "zstd"}, {"zstd", "uncompressed"},
	} {
		b.Run(tc.from+"-to-"+tc.to, func(b *testing.B) {
			batch := rawBatch(0, recs, 1000)
			if tc.from != "none" {
				comp, id := compressWith(b, tc.from, recs)
				batch = rawBatch(id, comp, 1000)
			}
			codec, _ := CodecOf(tc.to)
			b.SetBytes(int64(len(recs)))
			for b.Loop() {
				if _, err := batch.Recompress(codec, 2<<20, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
