package protocol

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// makeBatch encodes a v2 batch of n small uncompressed records.
func makeBatch(n int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Key = []byte("k")
		r.Value = []byte("value")
		recs = appendRecord(recs, r)
	}
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.LastOffsetDelta = int32(n - 1)
	b.FirstTimestamp = 1000
	b.MaxTimestamp = 1000 + int64(n)
	b.ProducerID = -1
	b.ProducerEpoch = -1
	b.FirstSequence = -1
	b.NumRecords = int32(n)
	b.Records = recs
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

func TestParseBatch(t *testing.T) {
	good := makeBatch(3)
	mutate := func(f func(b []byte) []byte) []byte {
		c := append([]byte(nil), good...)
		return f(c)
	}
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
		return b
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"good", good, nil},
		{"empty", nil, ErrCorruptBatch},
		{"short header", good[:40], ErrCorruptBatch},
		{"truncated", good[:len(good)-1], ErrCorruptBatch},
		{"two batches", append(append([]byte(nil), good...), good...), ErrInvalidRecord},
		{"bad crc", mutate(func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }), ErrCorruptBatch},
		{"magic 1", mutate(func(b []byte) []byte { b[16] = 1; return b }), ErrUnsupportedMagic},
		{"length below header", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 10); return b }), ErrCorruptBatch},
		{"negative length", mutate(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 0xffffffff); return b }), ErrCorruptBatch},
		{"count vs last delta", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 7)
			return recrc(b)
		}), ErrCorruptBatch},
		{"zero records", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[57:], 0)
			binary.BigEndian.PutUint32(b[23:], 0xffffffff)
			return recrc(b)
		}), ErrCorruptBatch},
		{"codec 7", mutate(func(b []byte) []byte { b[22] |= 7; return recrc(b) }), ErrUnsupportedCompression},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBatch(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ParseBatch: got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestBatchSetters(t *testing.T) {
	raw := makeBatch(2)
	b, err := ParseBatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	b.SetBaseOffset(42)
	b.SetLeaderEpoch(7)
	if _, err := ParseBatch(raw); err != nil {
		t.Fatalf("base offset and epoch lie outside the CRC, yet: %v", err)
	}
	b.SetLogAppendTime(99)
	if _, err := ParseBatch(raw); err != nil {
		t.Fatalf("SetLogAppendTime must recompute the CRC: %v", err)
	}
	if b.BaseOffset() != 42 || b.LeaderEpoch() != 7 || b.MaxTimestamp() != 99 || b.Attributes()&AttrLogAppendTime == 0 {
		t.Fatalf("fields: base %d epoch %d max ts %d attrs %x", b.BaseOffset(), b.LeaderEpoch(), b.MaxTimestamp(), b.Attributes())
	}
	// A kmsg decode agrees with our view.
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if kb.FirstOffset != 42 || kb.NumRecords != 2 || kb.MaxTimestamp != 99 {
		t.Fatalf("kmsg sees %+v", kb)
	}
}

// FuzzParseBatch: never panics, and whatever it accepts is one batch whose
// fields agree with kmsg's decoding and whose CRC checks.
func FuzzParseBatch(f *testing.F) {
	f.Add(makeBatch(1))
	f.Add(makeBatch(5))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		b, err := ParseBatch(in)
		if err != nil {
			return
		}
		if len(b) != len(in) || int(b.Length())+12 != len(in) {
			t.Fatalf("accepted %d bytes with length field %d", len(in), b.Length())
		}
		if crc32.Checksum(in[21:], castagnoli) != b.CRC() {
			t.Fatal("accepted a bad CRC")
		}
		if b.RecordCount() != b.LastOffsetDelta()+1 {
			t.Fatal("accepted a record count that disagrees with lastOffsetDelta")
		}
	})
}

// FuzzControlType: the control type parser never panics on any bytes,
// and reads back what TxnMarkerBatch wrote.
func FuzzControlType(f *testing.F) {
	f.Add([]byte(TxnMarkerBatch(1, 0, true, 0, 0)))
	f.Add([]byte(TxnMarkerBatch(9, 3, false, 7, 1700000000000)))
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, err := ControlType(b)
		// EndTxnMarker reads the same type, and a coordinator epoch from
		// whatever follows the key without reading past b.
		if typ2, _, err2 := EndTxnMarker(b); (err == nil) != (err2 == nil) || typ2 != typ {
			t.Fatalf("EndTxnMarker = %d, %v; ControlType = %d, %v", typ2, err2, typ, err)
		}
		if err != nil {
			return
		}
		var h BatchHeader
		if h.Decode(b) != nil || !h.IsControl() {
			t.Fatalf("ControlType accepted a batch that is not a control batch (type %d)", typ)
		}
	})
}

func TestTxnMarkerBatch(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := TxnMarkerBatch(5, 2, commit, 11, 1234)
		var h BatchHeader
		if err := h.Decode(b); err != nil {
			t.Fatal(err)
		}
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 5 || h.ProducerEpoch != 2 ||
			h.BaseSequence != -1 || h.RecordCount != 1 || h.LastOffsetDelta != 0 || !b.CRCValid() || h.Size != int64(len(b)) {
			t.Fatalf("marker header %+v (CRC valid %v)", h, b.CRCValid())
		}
		want := ControlAbort
		if commit {
			want = ControlCommit
		}
		if typ, err := ControlType(b); err != nil || typ != want {
			t.Errorf("ControlType = %d, %v; want %d", typ, err, want)
		}
		// The coordinator epoch, from the whole batch and from the
		// prefix the log reads.
		for _, n := range []int{len(b), min(len(b), ControlTypeBytes)} {
			if typ, ce, err := EndTxnMarker(b[:n]); err != nil || typ != want || ce != 11 {
				t.Errorf("EndTxnMarker of %d bytes = %d, %d, %v; want %d, 11", n, typ, ce, err, want)
			}
		}
		// Without the value's bytes: the type, and no epoch.
		if _, ce, err := EndTxnMarker(b[:len(b)-4]); err != nil || ce != -1 {
			t.Errorf("EndTxnMarker of a cut value = %d, %v; want -1", ce, err)
		}
		// The records must parse as Kafka's: one record, no compression.
		if err := b.ValidateRecords(1<<20, nil); err != nil {
			t.Errorf("marker records: %v", err)
		}
	}
}
