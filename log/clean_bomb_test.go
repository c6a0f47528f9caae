package log

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/protocol"
)

// syncBuffer is a log sink tests read after the fact.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCleanBoundsInflation: a compacted log holding a zstd batch whose
// records inflate to 64 MiB (stored as a log would hold one written
// before max.message.bytes bounded inflation: Append does not inflate)
// is cleaned without inflating it past max.message.bytes: the pass
// allocates a few MiB, not the bomb's 64, keeps the batch as it is with a
// warning, and cleans the records around it.
func TestCleanBoundsInflation(t *testing.T) {
	const inflated = 64 << 20
	comp, err := protocol.Deflate(nil, make([]byte, inflated), protocol.CodecZstd)
	if err != nil {
		t.Fatal(err)
	}
	h := protocol.BatchHeader{
		Size: int64(protocol.BatchHeaderSize + len(comp)), LeaderEpoch: 1, Attributes: int16(protocol.CodecZstd),
		LastOffsetDelta: 0, BaseTimestamp: 1, MaxTimestamp: 1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, RecordCount: 1,
	}
	bomb := make([]byte, protocol.BatchHeaderSize, h.Size)
	h.Put(bomb)
	bomb = append(bomb, comp...)
	protocol.Batch(bomb).SetCRC()

	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.MaxMessageBytes = 1 << 20
	var logs syncBuffer
	l := openT(t, t.TempDir(), cfg, Options{Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)})
	defer l.Close()
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "1"), rec("b", "1")}}))
	mustAppend(t, l, bomb)
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "2")}}))
	roll(t, l)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cleanT(t, l, time.Now(), 1<<20, false)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Fatalf("cleaning allocated %d MiB for a batch inflating to %d MiB under max.message.bytes=%d", alloc>>20, inflated>>20, cfg.MaxMessageBytes)
	}
	if !strings.Contains(logs.String(), "max.message.bytes") {
		t.Fatalf("no warning naming the refused inflation; logged: %s", logs.String())
	}
	kept := false
	var others []string
	for _, b := range readAll(t, l) {
		if bytes.Equal(b[8:], bomb[8:]) { // base offset aside
			kept = true
			continue
		}
		if err := protocol.Batch(b).EachRecord(1<<20, nil, func(r *protocol.Record) error {
			others = append(others, string(r.Key)+"="+string(r.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if !kept {
		t.Fatal("the batch the cleaner could not inflate is not kept as it was")
	}
	if got := strings.Join(others, " "); got != "b=1 a=2" {
		t.Fatalf("records around it after cleaning: %s, want b=1 a=2", got)
	}
}
