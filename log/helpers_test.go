package log

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
	"github.com/sluice-broker/sluice/protocol"
)

// spec describes a v2 batch for mkBatch. Zero values give a non-idempotent
// batch of one record at timestamp 0 with no leader epoch.
type spec struct {
	n           int     // records, default 1
	valueSize   int     // bytes per value
	ts          int64   // base timestamp
	tsDeltas    []int64 // per record; default 0
	pid         int64   // producer id; 0 means "not idempotent" unless idem
	idem        bool
	epoch       int16
	seq         int32
	leaderEpoch int32
	attrs       int16
}

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// mkBatch encodes one v2 record batch with base offset 0 and a valid CRC.
func mkBatch(s spec) []byte {
	if s.n == 0 {
		s.n = 1
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if s.idem {
		pid, epoch, seq = s.pid, s.epoch, s.seq
	}
	var recs []byte
	maxTs := s.ts
	for i := 0; i < s.n; i++ {
		var d int64
		if i < len(s.tsDeltas) {
			d = s.tsDeltas[i]
		}
		maxTs = max(maxTs, s.ts+d)
		var r []byte
		r = append(r, 0) // attributes
		r = appendVarint(r, d)
		r = appendVarint(r, int64(i))
		r = appendVarint(r, -1) // null key
		r = appendVarint(r, int64(s.valueSize))
		r = append(r, bytes.Repeat([]byte{byte('a' + i%26)}, s.valueSize)...)
		r = appendVarint(r, 0) // headers
		recs = appendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	h := protocol.BatchHeader{
		Size:            int64(protocol.BatchHeaderSize + len(recs)),
		LeaderEpoch:     s.leaderEpoch,
		Attributes:      s.attrs,
		LastOffsetDelta: int32(s.n - 1),
		BaseTimestamp:   s.ts,
		MaxTimestamp:    maxTs,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		BaseSequence:    seq,
		RecordCount:     int32(s.n),
	}
	b := make([]byte, protocol.BatchHeaderSize, protocol.BatchHeaderSize+len(recs))
	h.Put(b)
	b = append(b, recs...)
	protocol.Batch(b).SetCRC()
	return b
}

func testLogger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
}

func testConfig() Config {
	c := DefaultConfig()
	c.RetentionMs = -1
	return c
}

func openT(t testing.TB, dir string, cfg Config, opts ...Options) *Log {
	t.Helper()
	o := Options{Logger: testLogger(t)}
	if len(opts) > 0 {
		o = opts[0]
	}
	l, err := Open(dir, cfg, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte) AppendResult {
	t.Helper()
	r, err := l.Append(b)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return r
}

// readAll returns every batch from the log start to the end, split.
func readAll(t testing.TB, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		r, err := l.Read(off, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(r.Data) == 0 {
			t.Fatalf("Read(%d) returned nothing below log end %d", off, l.LogEndOffset())
		}
		out = append(out, splitBatches(t, r.Data)...)
		off = r.NextOffset
	}
	return out
}

func splitBatches(t testing.TB, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(data) > 0 {
		h, err := parseHeader(data)
		if err != nil || h.Size > int64(len(data)) {
			t.Fatalf("bad batch in read data: %v", err)
		}
		if !checkCRC(data[:h.Size]) {
			t.Fatalf("read batch at offset %d has a bad CRC", h.BaseOffset)
		}
		out = append(out, data[:h.Size])
		data = data[h.Size:]
	}
	return out
}

func baseOf(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }

// crash closes the log's files without the clean shutdown marker, the way a
// killed process leaves them.
func crash(t testing.TB, l *Log) {
	t.Helper()
	l.Close()
	if err := os.Remove(filepath.Join(l.dir, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
}

func segFiles(t testing.TB, dir, suffix string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
