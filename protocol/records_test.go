package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchWith builds a v2 batch of n records whose records section is
// compressed with codec through franz-go's own compressor.
func batchWith(t *testing.T, n int, codec kgo.CompressionCodec, codecID int16) []byte {
	t.Helper()
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Key = []byte("k")
		r.Value = bytes.Repeat([]byte("v"), 100)
		r.Headers = []kmsg.Header{{Key: "h", Value: []byte("x")}}
		recs = appendRecord(recs, r)
	}
	if codecID != 0 {
		c, err := kgo.DefaultCompressor(codec)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := c.Compress(new(bytes.Buffer), recs)
		recs = append([]byte(nil), out...)
	}
	return rawBatch(codecID, recs, n)
}

func TestValidateRecords(t *testing.T) {
	for _, tc := range []struct {
		name  string
		codec kgo.CompressionCodec
		id    int16
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := batchWith(t, 50, tc.codec, tc.id)
			b, err := ParseBatch(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.ValidateRecords(1<<20, nil); err != nil {
				t.Fatalf("valid batch refused: %v", err)
			}
			// Claim one record more than the payload holds.
			bad := append([]byte(nil), raw...)
			binary.BigEndian.PutUint32(bad[57:], 51)
			binary.BigEndian.PutUint32(bad[23:], 50)
			binary.BigEndian.PutUint32(bad[17:], crc32.Checksum(bad[21:], castagnoli))
			if bb, err := ParseBatch(bad); err != nil || !errors.Is(bb.ValidateRecords(1<<20, nil), ErrCorruptBatch) {
				t.Fatalf("a batch claiming more records than it holds was accepted (%v)", err)
			}
			if tc.id != 0 {
				// Garbage in place of the compressed payload, CRC fixed.
				bad = append([]byte(nil), raw...)
				for i := BatchHeaderSize; i < len(bad); i++ {
					bad[i] ^= 0x5a
				}
				binary.BigEndian.PutUint32(bad[17:], crc32.Checksum(bad[21:], castagnoli))
				if bb, err := ParseBatch(bad); err != nil || !errors.Is(bb.ValidateRecords(1<<20, nil), ErrCorruptBatch) {
					t.Fatalf("undecodable %s payload accepted (%v)", tc.name, err)
				}
			}
		})
	}
}

// appendRecord encodes r with its length prefix filled in (kmsg writes the
// Length field as given).
func appendRecord(dst []byte, r kmsg.Record) []byte {
	r.Length = 0
	body := r.AppendTo(nil)
	r.Length = int32(len(body) - 1) // a zero length is one varint byte
	return r.AppendTo(dst)
}

// BenchmarkValidateRecords measures the produce path's record check per
// codec on a 16 KiB-ish batch (150 records of ~100 bytes).
func BenchmarkValidateRecords(b *testing.B) {
	t := &testing.T{}
	for _, tc := range []struct {
		name  string
		codec kgo.CompressionCodec
		id    int16
	}{
		{"none", kgo.NoCompression(), 0},
		{"gzip", kgo.GzipCompression(), 1},
		{"snappy", kgo.SnappyCompression(), 2},
		{"lz4", kgo.Lz4Compression(), 3},
		{"zstd", kgo.ZstdCompression(), 4},
	} {
		raw := batchWith(t, 150, tc.codec, tc.id)
		bt, err := ParseBatch(raw)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bt.ValidateRecords(1<<20, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
