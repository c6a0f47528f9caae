package protocol

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// compressWith compresses raw as a producer would for the codec (and the
// framing variants brokers must accept: xerial-framed snappy as the Java
// client writes it, zstd without a declared content size as a streaming
// encoder writes it).
func compressWith(t testing.TB, codec string, raw []byte) ([]byte, int16) {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case "gzip":
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		w.Close()
		return buf.Bytes(), 1
	case "snappy":
		return s2.EncodeSnappy(nil, raw), 2
	case "xerial":
		buf.Write(xerialHeader)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for rest := raw; len(rest) > 0; {
			blk := rest[:min(len(rest), 32<<10)]
			rest = rest[len(blk):]
			enc := s2.EncodeSnappy(nil, blk)
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(enc))))
			buf.Write(enc)
		}
		return buf.Bytes(), 2
	case "lz4":
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		w.Close()
		return buf.Bytes(), 3
	case "zstd":
		enc, _ := zstd.NewWriter(nil)
		return enc.EncodeAll(raw, nil), 4
	case "zstd-stream":
		w, _ := zstd.NewWriter(&buf, zstd.WithZeroFrames(true))
		w.Write(raw)
		w.Close()
		return buf.Bytes(), 4
	}
	t.Fatalf("unknown codec %s", codec)
	return nil, 0
}

var testCodecs = []string{"gzip", "snappy", "xerial", "lz4", "zstd", "zstd-stream"}

// rawBatch wraps an already encoded records section in a v2 batch header
// claiming n records, with a correct CRC.
func rawBatch(codecID int16, records []byte, n int) Batch {
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.Attributes = codecID
	b.LastOffsetDelta = int32(n - 1)
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	b.NumRecords = int32(n)
	b.Records = records
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return Batch(raw)
}

// recordsOf encodes n records whose values are size bytes each.
func recordsOf(n, size int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = bytes.Repeat([]byte{'a' + byte(i%26)}, size)
		recs = appendRecord(recs, r)
	}
	return recs
}

// countingBudget records what ValidateRecords reserves and refuses past
// a ceiling.
type countingBudget struct {
	total, ceiling int
}

var errNoRoom = errors.New("no room")

func (c *countingBudget) Reserve(n int) error {
	if c.ceiling > 0 && c.total+n > c.ceiling {
		return errNoRoom
	}
	c.total += n
	return nil
}

// TestInflateLimit: records exactly at the limit pass, one byte over is
// ErrRecordsTooLarge, for every codec and framing.
func TestInflateLimit(t *testing.T) {
	recs := recordsOf(40, 3000)
	for _, codec := range testCodecs {
		t.Run(codec, func(t *testing.T) {
			comp, id := compressWith(t, codec, recs)
			b := rawBatch(id, comp, 40)
			var bud countingBudget
			if err := b.ValidateRecords(len(recs), &bud); err != nil {
				t.Fatalf("records of exactly the limit refused: %v", err)
			}
			if bud.total < len(recs) {
				t.Fatalf("reserved %d bytes for %d inflated", bud.total, len(recs))
			}
			if err := b.ValidateRecords(len(recs)-1, nil); !errors.Is(err, ErrRecordsTooLarge) {
				t.Fatalf("records one byte over the limit: %v, want ErrRecordsTooLarge", err)
			}
		})
	}
}

// TestInflateBomb: a batch inflating to 64 times the 1 MiB limit is
// refused with ErrRecordsTooLarge having reserved (and so allocated)
// little more than the limit, for every codec.
func TestInflateBomb(t *testing.T) {
	zeros := make([]byte, 64<<20)
	const limit = 1 << 20
	for _, codec := range testCodecs {
		t.Run(codec, func(t *testing.T) {
			var comp []byte
			var id int16
			if codec == "gzip" {
				// compress/flate is slow under -race: repeat
				// one flushed MiB of zeros instead.
				comp, id = gzipRepeat(64), 1
			} else {
				comp, id = compressWith(t, codec, zeros)
			}
			b := rawBatch(id, comp, 1)
			var bud countingBudget
			err := b.ValidateRecords(limit, &bud)
			if !errors.Is(err, ErrRecordsTooLarge) {
				t.Fatalf("%d-byte %s bomb: %v, want ErrRecordsTooLarge", len(comp), codec, err)
			}
			if bud.total > 2*limit+8<<20 {
				t.Fatalf("%d bytes reserved for a %d limit", bud.total, limit)
			}
			t.Logf("%s: %d compressed bytes, %d reserved: %v", codec, len(comp), bud.total, err)
		})
	}
}

// gzipRepeat is a gzip stream of n MiB of zeros made by repeating the
// deflate blocks of one flushed MiB (the same bytes each time, as the
// window holds only zeros); its trailer's CRC is wrong for the data.
func gzipRepeat(n int) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	zeros := make([]byte, 1<<20)
	w.Write(zeros)
	w.Flush()
	start := buf.Len()
	w.Write(zeros)
	w.Flush()
	chunk := append([]byte(nil), buf.Bytes()[start:]...)
	for i := 2; i < n; i++ {
		buf.Write(chunk)
	}
	w.Close()
	return buf.Bytes()
}

// TestInflateBudgetRefuses: a budget that refuses stops the inflation
// and its error comes back as it is.
func TestInflateBudgetRefuses(t *testing.T) {
	recs := recordsOf(100, 5000)
	for _, codec := range testCodecs {
		t.Run(codec, func(t *testing.T) {
			comp, id := compressWith(t, codec, recs)
			b := rawBatch(id, comp, 100)
			bud := countingBudget{ceiling: 100 << 10}
			if err := b.ValidateRecords(1<<20, &bud); !errors.Is(err, errNoRoom) {
				t.Fatalf("got %v, want the budget's error", err)
			}
			if bud.total > bud.ceiling {
				t.Fatalf("reserved %d past the ceiling %d", bud.total, bud.ceiling)
			}
		})
	}
}

// TestInflateLies: sizes a codec declares wrongly are corruption, not a
// crash or an allocation of the declared size.
func TestInflateLies(t *testing.T) {
	recs := recordsOf(10, 1000)
	for _, tc := range []struct {
		name   string
		codec  string
		mangle func([]byte) []byte
		want   error
	}{
		// A snappy block claiming 2 GiB: refused from the header.
		{"snappy huge length", "snappy", func(c []byte) []byte {
			_, n := binary.Uvarint(c)
			return append(binary.AppendUvarint(nil, 1<<31-1), c[n:]...)
		}, ErrRecordsTooLarge},
		// A snappy block claiming less than it holds.
		{"snappy short length", "snappy", func(c []byte) []byte {
			_, n := binary.Uvarint(c)
			return append(binary.AppendUvarint(nil, 100), c[n:]...)
		}, ErrCorruptBatch},
		// A gzip trailer claiming 4 GiB - 1: only a hint.
		{"gzip isize", "gzip", func(c []byte) []byte {
			binary.LittleEndian.PutUint32(c[len(c)-4:], 0xffffffff)
			return c
		}, ErrCorruptBatch},
		// An xerial block length past the end.
		{"xerial block length", "xerial", func(c []byte) []byte {
			binary.BigEndian.PutUint32(c[16:], 1<<30)
			return c
		}, ErrCorruptBatch},
		// A truncated lz4 frame.
		{"lz4 truncated", "lz4", func(c []byte) []byte { return c[:len(c)/2] }, ErrCorruptBatch},
		// A zstd frame declaring 1 TiB (single segment, 8-byte content
		// size) that holds one raw block of one byte.
		{"zstd fcs", "zstd", func(c []byte) []byte {
			f := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}
			f = binary.LittleEndian.AppendUint64(f, 1<<40)
			return append(f, 0x09, 0, 0, 'x')
		}, ErrRecordsTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comp, id := compressWith(t, tc.codec, recs)
			b := rawBatch(id, tc.mangle(append([]byte(nil), comp...)), 10)
			var bud countingBudget
			if err := b.ValidateRecords(1<<20, &bud); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if bud.total > 2<<20+8<<20 { // an lz4 frame's two 4 MiB blocks

				t.Fatalf("reserved %d bytes", bud.total)
			}
		})
	}
}

// FuzzValidateRecords: whatever the records section holds, validation
// returns (an error or nil) without panicking and within the limit.
func FuzzValidateRecords(f *testing.F) {
	recs := recordsOf(3, 50)
	for _, codec := range testCodecs {
		comp, id := compressWith(f, codec, recs)
		f.Add(int8(id), comp)
	}
	f.Add(int8(0), recs)
	f.Fuzz(func(t *testing.T, codec int8, records []byte) {
		b := rawBatch(int16(codec&7), records, 3)
		var bud countingBudget
		_ = b.ValidateRecords(64<<10, &bud)
		if bud.total > 2*(64<<10)+8<<20+1 {
			t.Fatalf("reserved %d bytes for a 64 KiB limit", bud.total)
		}
	})
}
