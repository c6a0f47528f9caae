package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// keyedRecords encodes n records with keys k0..k(n-1), timestamp delta
// 10*i, a header, and a null value for every index in tombs.
func keyedRecords(n int, tombs ...int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.TimestampDelta64 = int64(10 * i)
		r.Key = []byte(fmt.Sprint("k", i))
		r.Value = bytes.Repeat([]byte{'a' + byte(i%26)}, 40)
		for _, t := range tombs {
			if t == i {
				r.Value = nil
			}
		}
		r.Headers = []kmsg.Header{{Key: "h", Value: []byte{byte(i)}}}
		recs = appendRecord(recs, r)
	}
	return recs
}

// clientRecords decodes b as a client does, with franz-go's decompressor,
// into absolute offset -> key/value/timestamp strings.
func clientRecords(t testing.TB, b []byte) []string {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatalf("client cannot read the batch: %v", err)
	}
	raw := rb.Records
	if codec := rb.Attributes & 7; codec != 0 && rb.NumRecords > 0 {
		var err error
		if raw, err = kgo.DefaultDecompressor().Decompress(raw, kgo.CompressionCodecType(codec)); err != nil {
			t.Fatalf("client cannot decompress the batch: %v", err)
		}
	}
	var out []string
	for i := int32(0); i < rb.NumRecords; i++ {
		l, n := binary.Varint(raw)
		var r kmsg.Record
		if n <= 0 || r.ReadFrom(raw[:n+int(l)]) != nil {
			t.Fatalf("record %d undecodable", i)
		}
		raw = raw[n+int(l):]
		v := "<null>"
		if r.Value != nil {
			v = string(r.Value[:1])
		}
		out = append(out, fmt.Sprintf("%d:%s=%s@%d/h%d", rb.FirstOffset+int64(r.OffsetDelta), r.Key, v, rb.FirstTimestamp+r.TimestampDelta64, r.Headers[0].Value[0]))
	}
	return out
}

func TestFilter(t *testing.T) {
	const base, baseTs = 1000, 50_000
	for _, codec := range append([]string{"none"}, testCodecs...) {
		t.Run(codec, func(t *testing.T) {
			recs, id := keyedRecords(10, 3, 4), int16(0)
			if codec != "none" {
				recs, id = compressWith(t, codec, recs)
			}
			b := rawBatch(id, recs, 10)
			b.SetBaseOffset(base)
			binary.BigEndian.PutUint64(b[BatchBaseTimestampAt:], baseTs)
			all := clientRecords(t, b)

			// Keep the even offsets, the tombstone at 4 among them.
			res, err := b.Filter(nil, 1<<20, -1, func(off int64, r *Record) bool { return off%2 == 0 })
			if err != nil {
				t.Fatal(err)
			}
			if !res.Changed || res.Kept != 5 || res.Dropped != 5 || res.Tombstones != 1 {
				t.Fatalf("result %+v", res)
			}
			out := Batch(res.Out)
			if !out.CRCValid() || out.Compression() != b.Compression() || out.BaseOffset() != base ||
				out.LastOffsetDelta() != 9 || out.RecordCount() != 5 || out.HasDeleteHorizon() {
				t.Fatalf("header: crc %v codec %d base %d lod %d count %d", out.CRCValid(), out.Compression(), out.BaseOffset(), out.LastOffsetDelta(), out.RecordCount())
			}
			if codec == "xerial" && !bytes.HasPrefix(out[BatchHeaderSize:], xerialHeader) {
				t.Fatal("xerial framing not kept")
			}
			got := clientRecords(t, out)
			want := []string{all[0], all[2], all[4], all[6], all[8]}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("kept %v, want %v", got, want)
			}

			// With a horizon: the tombstone's batch is stamped, the record
			// timestamps stay.
			res, err = b.Filter(nil, 1<<20, 90_000, func(off int64, r *Record) bool { return off%2 == 0 })
			if err != nil {
				t.Fatal(err)
			}
			out = Batch(res.Out)
			if !out.HasDeleteHorizon() || out.BaseTimestamp() != 90_000 || !out.CRCValid() {
				t.Fatalf("horizon: %v %d", out.HasDeleteHorizon(), out.BaseTimestamp())
			}
			if got := clientRecords(t, out); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("with a horizon kept %v, want %v", got, want)
			}

			// Nothing kept: a header without records or codec.
			res, err = b.Filter(nil, 1<<20, -1, func(int64, *Record) bool { return false })
			if err != nil {
				t.Fatal(err)
			}
			out = Batch(res.Out)
			if len(out) != BatchHeaderSize || out.RecordCount() != 0 || out.Compression() != 0 || out.LastOffsetDelta() != 9 || !out.CRCValid() {
				t.Fatalf("empty batch: %d bytes, count %d, codec %d", len(out), out.RecordCount(), out.Compression())
			}

			// Everything kept and no horizon asked: unchanged.
			res, err = b.Filter(nil, 1<<20, -1, func(int64, *Record) bool { return true })
			if err != nil || res.Changed || res.Out != nil {
				t.Fatalf("keep all: %+v %v", res, err)
			}

			// StampDeleteHorizon (a marker's first step): every record
			// kept, the horizon set though no tombstone is; a batch that
			// has one already is left alone.
			res, err = b.StampDeleteHorizon(nil, 1<<20, 90_000)
			if err != nil || !res.Changed || res.Kept != 10 {
				t.Fatalf("stamp: %+v %v", res, err)
			}
			out = Batch(res.Out)
			if !out.HasDeleteHorizon() || out.BaseTimestamp() != 90_000 || !out.CRCValid() {
				t.Fatalf("stamped horizon: %v %d", out.HasDeleteHorizon(), out.BaseTimestamp())
			}
			if got := clientRecords(t, out); fmt.Sprint(got) != fmt.Sprint(all) {
				t.Fatalf("stamped batch holds %v, want %v", got, all)
			}
			if res, err := out.StampDeleteHorizon(nil, 1<<20, 95_000); err != nil || res.Changed {
				t.Fatalf("stamping a stamped batch: %+v %v", res, err)
			}
		})
	}
}

func TestValidateKeyedRecords(t *testing.T) {
	good := rawBatch(0, keyedRecords(3), 3)
	if err := good.ValidateKeyedRecords(1<<20, nil); err != nil {
		t.Fatal(err)
	}
	bad := rawBatch(0, recordsOf(3, 10), 3) // recordsOf has no keys
	if err := bad.ValidateKeyedRecords(1<<20, nil); !errors.Is(err, ErrNullKey) || !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("keyless records: %v", err)
	}
	if err := bad.ValidateRecords(1<<20, nil); err != nil {
		t.Fatalf("keyless records on a topic that is not compacted: %v", err)
	}
}

// FuzzFilter: for any records section that decodes, Filter with any keep
// pattern and horizon yields a batch that validates, has a correct CRC,
// keeps the header's offsets and producer fields, and holds exactly the
// kept records (byte for byte without a new horizon).
func FuzzFilter(f *testing.F) {
	recs := keyedRecords(6, 2)
	for _, codec := range testCodecs {
		comp, id := compressWith(f, codec, recs)
		f.Add(int8(id), comp, uint8(6), uint64(0b101101), int64(-1))
	}
	f.Add(int8(0), recs, uint8(6), uint64(0b010010), int64(77))
	f.Add(int8(0), recs, uint8(6), uint64(0), int64(-1))
	f.Fuzz(func(t *testing.T, codec int8, records []byte, n uint8, mask uint64, horizon int64) {
		b := rawBatch(int16(codec&7), records, int(n%64)+1)
		b.SetBaseOffset(500)
		var kept [][]byte
		i := 0
		res, err := b.Filter(nil, 64<<10, horizon, func(off int64, r *Record) bool {
			keep := mask&(1<<(i%64)) != 0
			i++
			if keep {
				kept = append(kept, bytes.Clone(r.Raw))
			}
			return keep
		})
		if err != nil {
			if b.ValidateRecords(64<<10, nil) == nil {
				t.Fatalf("Filter failed on a valid batch: %v", err)
			}
			return
		}
		if !res.Changed {
			if res.Dropped != 0 {
				t.Fatal("records dropped but unchanged")
			}
			return
		}
		out := Batch(res.Out)
		var h BatchHeader
		if err := h.Decode(out); err != nil || h.Size != int64(len(out)) {
			t.Fatalf("rewritten batch header does not decode: %v", err)
		}
		if !out.CRCValid() || out.BaseOffset() != 500 || out.LastOffsetDelta() != b.LastOffsetDelta() ||
			out.ProducerID() != b.ProducerID() || int(out.RecordCount()) != len(kept) {
			t.Fatal("header not kept")
		}
		var again [][]byte
		if err := out.EachRecord(256<<20, nil, func(r *Record) error {
			again = append(again, bytes.Clone(r.Raw))
			return nil
		}); err != nil {
			t.Fatalf("rewritten batch does not decode: %v", err)
		}
		if len(again) != len(kept) {
			t.Fatalf("%d records, kept %d", len(again), len(kept))
		}
		if !out.HasDeleteHorizon() || b.HasDeleteHorizon() {
			for j := range kept {
				if !bytes.Equal(again[j], kept[j]) {
					t.Fatalf("record %d changed", j)
				}
			}
		}
	})
}
