package protocol

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsgBatch encodes a v2 batch header with kmsg (an independent codec) and
// n filler record bytes, with batchLength and CRC set.
func kmsgBatch(rb kmsg.RecordBatch, recordBytes int) []byte {
	rb.Magic = 2
	rb.Records = make([]byte, recordBytes)
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	Batch(raw).SetCRC()
	return raw
}

func TestBatchHeaderDecodeFields(t *testing.T) {
	for _, rb := range []kmsg.RecordBatch{
		{FirstOffset: 0, PartitionLeaderEpoch: -1, Attributes: 0, LastOffsetDelta: 0, FirstTimestamp: -1, MaxTimestamp: -1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1},
		{FirstOffset: 4711, PartitionLeaderEpoch: 7, Attributes: AttrControl | AttrTransactional, LastOffsetDelta: 9, FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000009, ProducerID: 1234567890123, ProducerEpoch: 3, FirstSequence: 42, NumRecords: 10},
		{FirstOffset: math.MaxInt64 - 1, PartitionLeaderEpoch: math.MaxInt32, Attributes: 4 | AttrLogAppendTime, LastOffsetDelta: math.MaxInt32, FirstTimestamp: math.MinInt64, MaxTimestamp: math.MaxInt64, ProducerID: math.MaxInt64, ProducerEpoch: math.MaxInt16, FirstSequence: math.MaxInt32, NumRecords: 0},
	} {
		raw := kmsgBatch(rb, 17)
		var want kmsg.RecordBatch
		if err := want.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		// Only the header: the records need not be there.
		var h BatchHeader
		if err := h.Decode(raw[:BatchHeaderSize]); err != nil {
			t.Fatalf("%+v: %v", rb, err)
		}
		got := BatchHeader{
			BaseOffset: want.FirstOffset, Size: int64(want.Length) + 12, LeaderEpoch: want.PartitionLeaderEpoch,
			CRC: uint32(want.CRC), Attributes: want.Attributes, LastOffsetDelta: want.LastOffsetDelta,
			BaseTimestamp: want.FirstTimestamp, MaxTimestamp: want.MaxTimestamp, ProducerID: want.ProducerID,
			ProducerEpoch: want.ProducerEpoch, BaseSequence: want.FirstSequence, RecordCount: want.NumRecords,
		}
		if h != got {
			t.Errorf("Decode = %+v, kmsg says %+v", h, got)
		}
		if h.Size != int64(len(raw)) {
			t.Errorf("Size %d, batch is %d bytes", h.Size, len(raw))
		}
		// Put writes back exactly the header kmsg encoded.
		out := make([]byte, BatchHeaderSize)
		h.Put(out)
		if string(out) != string(raw[:BatchHeaderSize]) {
			t.Errorf("Put(%+v) = %x, want %x", h, out, raw[:BatchHeaderSize])
		}
		if !Batch(raw).CRCValid() {
			t.Errorf("CRCValid false after SetCRC")
		}
		raw[len(raw)-1] ^= 1
		if Batch(raw).CRCValid() {
			t.Errorf("CRCValid true after a record byte changed")
		}
		if h.IsControl() != (rb.Attributes&AttrControl != 0) || h.IsTransactional() != (rb.Attributes&AttrTransactional != 0) ||
			h.Compressed() != (rb.Attributes&7 != 0) || h.LogAppendTime() != (rb.Attributes&AttrLogAppendTime != 0) {
			t.Errorf("attribute accessors disagree with attributes %#x", rb.Attributes)
		}
		if h.LastOffset() != rb.FirstOffset+int64(rb.LastOffsetDelta) {
			t.Errorf("LastOffset %d", h.LastOffset())
		}
	}
}

func TestBatchHeaderDecodeErrors(t *testing.T) {
	good := kmsgBatch(kmsg.RecordBatch{LastOffsetDelta: 2, NumRecords: 3, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1}, 30)
	mutate := func(f func(b []byte)) []byte {
		c := append([]byte(nil), good...)
		f(c)
		return c
	}
	for _, tc := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"good", good, true},
		{"header only", good[:BatchHeaderSize], true},
		{"empty", nil, false},
		{"one byte short of a header", good[:BatchHeaderSize-1], false},
		{"magic 1", mutate(func(b []byte) { b[BatchMagicAt] = 1 }), false},
		{"magic 3", mutate(func(b []byte) { b[BatchMagicAt] = 3 }), false},
		{"length below header", mutate(func(b []byte) { binary.BigEndian.PutUint32(b[BatchLengthAt:], 48) }), false},
		{"length exactly header", mutate(func(b []byte) { binary.BigEndian.PutUint32(b[BatchLengthAt:], 49) }), true},
		{"negative length", mutate(func(b []byte) { binary.BigEndian.PutUint32(b[BatchLengthAt:], 0xffffffff) }), false},
		{"negative last offset delta", mutate(func(b []byte) { binary.BigEndian.PutUint32(b[BatchLastOffsetDeltaAt:], 0xffffffff) }), false},
		{"negative record count", mutate(func(b []byte) { binary.BigEndian.PutUint32(b[BatchRecordCountAt:], 0x80000000) }), false},
		// The caller decides about offsets and CRCs.
		{"negative base offset", mutate(func(b []byte) { binary.BigEndian.PutUint64(b[BatchBaseOffsetAt:], math.MaxUint64) }), true},
		{"bad crc", mutate(func(b []byte) { b[BatchCRCAt] ^= 1 }), true},
		{"more records than offsets", mutate(func(b []byte) { binary.BigEndian.PutUint32(b[BatchRecordCountAt:], 9) }), true},
	} {
		var h BatchHeader
		err := h.Decode(tc.in)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrCorruptBatch) {
			t.Errorf("%s: err %v, want ErrCorruptBatch", tc.name, err)
		}
	}
}

func TestBatchHeaderLastSequence(t *testing.T) {
	for _, tc := range []struct {
		base, delta, want int32
	}{
		{0, 0, 0},
		{5, 4, 9},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 2, 5, 2},
		{-1, 0, -1},
	} {
		h := BatchHeader{BaseSequence: tc.base, LastOffsetDelta: tc.delta}
		if got := h.LastSequence(); got != tc.want {
			t.Errorf("LastSequence(%d + %d) = %d, want %d", tc.base, tc.delta, got, tc.want)
		}
	}
}

// The log reads a header for every batch it appends, scans or serves.
func TestBatchHeaderDecodeAllocs(t *testing.T) {
	raw := makeBatch(3)
	var h BatchHeader
	if n := testing.AllocsPerRun(100, func() {
		if err := h.Decode(raw); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Decode allocates %v times", n)
	}
}

func BenchmarkBatchHeaderDecode(b *testing.B) {
	raw := makeBatch(10)
	b.ReportAllocs()
	var sink int64
	var h BatchHeader
	for b.Loop() {
		if err := h.Decode(raw); err != nil {
			b.Fatal(err)
		}
		sink += h.LastOffset()
	}
	_ = sink
}
