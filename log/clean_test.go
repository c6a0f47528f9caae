package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/protocol"
)

// kv is one record for mkKeyed: a nil key or value is null.
type kv struct {
	key, value []byte
}

func rec(k string, v string) kv { return kv{[]byte(k), []byte(v)} }
func tomb(k string) kv          { return kv{key: []byte(k)} }

// keyedSpec describes a batch for mkKeyed.
type keyedSpec struct {
	recs     []kv
	ts       int64 // base timestamp; record i has ts+i
	codec    int8
	pid      int64 // producer id; -1 (the zero value is mapped) without idem
	idem     bool
	seq      int32
	control  bool
	producer int16
	txn      bool // transactional (needs idem)
}

// mkKeyed encodes a v2 batch of keyed records with base offset 0.
func mkKeyed(t testing.TB, s keyedSpec) []byte {
	t.Helper()
	var recs []byte
	for i, r := range s.recs {
		var b []byte
		b = append(b, 0)
		b = binary.AppendVarint(b, int64(i)) // timestamp delta
		b = binary.AppendVarint(b, int64(i)) // offset delta
		for _, f := range [][]byte{r.key, r.value} {
			if f == nil {
				b = binary.AppendVarint(b, -1)
			} else {
				b = binary.AppendVarint(b, int64(len(f)))
				b = append(b, f...)
			}
		}
		b = binary.AppendVarint(b, 0)
		recs = binary.AppendVarint(recs, int64(len(b)))
		recs = append(recs, b...)
	}
	if s.codec != 0 {
		var err error
		if recs, err = protocol.Deflate(nil, recs, s.codec); err != nil {
			t.Fatal(err)
		}
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if s.idem {
		pid, epoch, seq = s.pid, s.producer, s.seq
	}
	attrs := int16(s.codec)
	if s.control {
		attrs |= protocol.AttrControl
	}
	if s.txn {
		attrs |= protocol.AttrTransactional
	}
	h := protocol.BatchHeader{
		Size: int64(protocol.BatchHeaderSize + len(recs)), LeaderEpoch: 1, Attributes: attrs,
		LastOffsetDelta: int32(len(s.recs) - 1), BaseTimestamp: s.ts, MaxTimestamp: s.ts + int64(len(s.recs)-1),
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, RecordCount: int32(len(s.recs)),
	}
	b := make([]byte, protocol.BatchHeaderSize, h.Size)
	h.Put(b)
	b = append(b, recs...)
	protocol.Batch(b).SetCRC()
	return b
}

// got is one record as read back.
type got struct {
	off   int64
	key   string
	value *string
	ts    int64
}

func (g got) String() string {
	v := "<null>"
	if g.value != nil {
		v = *g.value
	}
	return fmt.Sprintf("%d:%s=%s", g.off, g.key, v)
}

// readRecords reads every record of the log, as a consumer would, and the
// batches it came in.
func readRecords(t testing.TB, l *Log) ([]got, [][]byte) {
	t.Helper()
	var out []got
	var batches [][]byte
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		r, err := l.Read(off, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(r.Data) == 0 {
			break // a removed tail below the (empty) active segment
		}
		for _, b := range splitBatches(t, r.Data) {
			batches = append(batches, b)
			pb := protocol.Batch(b)
			err := pb.EachRecord(math.MaxInt32, nil, func(rc *protocol.Record) error {
				g := got{off: pb.BaseOffset() + int64(rc.OffsetDelta), key: string(rc.Key), ts: pb.BaseTimestamp() + rc.TimestampDelta}
				if rc.Value != nil {
					v := string(rc.Value)
					g.value = &v
				}
				out = append(out, g)
				return nil
			})
			if err != nil {
				t.Fatalf("batch at %d: %v", pb.BaseOffset(), err)
			}
		}
		off = r.NextOffset
	}
	return out, batches
}

func recordsString(rs []got) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.String())
	}
	return strings.Join(s, " ")
}

func compactConfig() Config {
	c := testConfig()
	c.Compact, c.Delete = true, false
	c.MinCleanableDirtyRatio = 0
	c.SegmentBytes = 400
	return c
}

// cleanT runs passes until one reports nothing to clean.
func cleanT(t testing.TB, l *Log, now time.Time, mapBytes int64, retainEmpty bool) []CleanStats {
	t.Helper()
	var all []CleanStats
	m := newOffsetMap(mapBytes)
	for i := 0; i < 100; i++ {
		st, ok, err := l.clean(cleanOptions{now: now, limit: math.MaxInt64, m: m, retainEmpty: retainEmpty})
		if err != nil {
			t.Fatalf("clean: %v", err)
		}
		if !ok {
			return all
		}
		all = append(all, st)
	}
	t.Fatal("cleaning does not converge")
	return nil
}

// roll makes the active segment inactive by appending a batch of a key
// that the test ignores into a new segment.
func roll(t testing.TB, l *Log) {
	t.Helper()
	l.mu.Lock()
	err := l.rollLocked()
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCleanSurvivors(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	cases := map[string]struct {
		cfg         func(*Config)
		batches     []keyedSpec
		retainEmpty bool
		mapBytes    int64
		want        string // records read back after cleaning
		wantBatches int
	}{
		"latest value per key, offsets kept": {
			batches: []keyedSpec{
				{recs: []kv{rec("a", "1"), rec("b", "1")}},
				{recs: []kv{rec("a", "2"), rec("c", "1")}},
				{recs: []kv{rec("b", "2")}},
				{recs: []kv{rec("a", "3")}},
			},
			want: "3:c=1 4:b=2 5:a=3",
		},
		"several idempotent producers and a plain one": {
			batches: []keyedSpec{
				{recs: []kv{rec("k1", "p1a"), rec("k2", "p1a")}, idem: true, pid: 1, seq: 0},
				{recs: []kv{rec("k1", "p2a")}, idem: true, pid: 2, seq: 0},
				{recs: []kv{rec("k2", "plain")}},
				{recs: []kv{rec("k3", "p1b")}, idem: true, pid: 1, seq: 2},
				{recs: []kv{rec("k1", "p2b")}, idem: true, pid: 2, seq: 1},
			},
			// p1's first batch loses both records (k1, k2 rewritten
			// later) and is not its last: dropped. p2's first batch
			// is not its last either. The plain batch keeps k2.
			want:        "3:k2=plain 4:k3=p1b 5:k1=p2b",
			wantBatches: 3,
		},
		"emptied last batch of a producer stays as a header": {
			batches: []keyedSpec{
				{recs: []kv{rec("x", "1")}, idem: true, pid: 7, seq: 0},
				{recs: []kv{rec("x", "2")}},
			},
			want:        "1:x=2",
			wantBatches: 2,
		},
		"raft partitions keep every batch": {
			batches: []keyedSpec{
				{recs: []kv{rec("x", "1")}},
				{recs: []kv{rec("x", "2")}},
				{recs: []kv{rec("x", "3")}},
			},
			retainEmpty: true,
			want:        "2:x=3",
			wantBatches: 3,
		},
		"records without key are dropped": {
			batches: []keyedSpec{
				{recs: []kv{{value: []byte("nokey")}, rec("a", "1")}},
				{recs: []kv{rec("a", "2")}},
			},
			want: "2:a=2",
		},
		"tombstone kept before its horizon": {
			batches: []keyedSpec{
				{recs: []kv{rec("a", "1"), rec("b", "1")}},
				{recs: []kv{tomb("a")}},
			},
			want: "1:b=1 2:a=<null>",
		},
		"control batches are copied": {
			batches: []keyedSpec{
				{recs: []kv{rec("a", "1")}},
				{recs: []kv{rec("", "ctl")}, control: true},
				{recs: []kv{rec("a", "2")}},
			},
			want: "1:=ctl 2:a=2",
		},
		"gzip":   {batches: codecBatches(1), want: "2:b=2 3:a=3"},
		"snappy": {batches: codecBatches(2), want: "2:b=2 3:a=3"},
		"lz4":    {batches: codecBatches(3), want: "2:b=2 3:a=3"},
		"zstd":   {batches: codecBatches(4), want: "2:b=2 3:a=3"},
		"offset map smaller than the dirty keys: several passes": {
			batches: manyKeys(40, 3),
			// 3 rounds of k00..k39; the last round survives.
			want:     manyKeysWant(40, 3),
			mapBytes: 30 * slotBytes,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := compactConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			l := openT(t, t.TempDir(), cfg, Options{Logger: testLogger(t), Now: func() time.Time { return now }})
			defer l.Close()
			codecs := map[int64]int8{}
			for _, s := range tc.batches {
				s.ts = now.UnixMilli() - 10_000
				r := mustAppend(t, l, mkKeyed(t, s))
				codecs[r.BaseOffset] = s.codec
			}
			roll(t, l)
			mb := tc.mapBytes
			if mb == 0 {
				mb = 1 << 20
			}
			cleanT(t, l, now, mb, tc.retainEmpty)
			recs, batches := readRecords(t, l)
			if g := recordsString(recs); g != tc.want {
				t.Fatalf("after cleaning:\n got %s\nwant %s", g, tc.want)
			}
			if tc.wantBatches > 0 && len(batches) != tc.wantBatches {
				t.Fatalf("%d batches after cleaning, want %d", len(batches), tc.wantBatches)
			}
			for _, b := range batches {
				pb := protocol.Batch(b)
				if want, ok := codecs[pb.BaseOffset()]; ok && pb.RecordCount() > 0 && pb.Compression() != want {
					t.Fatalf("batch at %d has codec %d, want %d", pb.BaseOffset(), pb.Compression(), want)
				}
			}
			// The cleaned log survives a restart as it is.
			dir := l.dir
			l.Close()
			l2 := openT(t, dir, cfg)
			defer l2.Close()
			again, _ := readRecords(t, l2)
			if g := recordsString(again); g != tc.want {
				t.Fatalf("after reopening:\n got %s\nwant %s", g, tc.want)
			}
		})
	}
}

func codecBatches(codec int8) []keyedSpec {
	big := strings.Repeat("v", 300) // worth compressing
	return []keyedSpec{
		{recs: []kv{rec("a", big), rec("b", "1")}, codec: codec},
		{recs: []kv{rec("b", "2"), rec("a", "3")}, codec: codec},
	}
}

func manyKeys(keys, rounds int) []keyedSpec {
	var out []keyedSpec
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k += 4 {
			var recs []kv
			for j := k; j < k+4 && j < keys; j++ {
				recs = append(recs, rec(fmt.Sprintf("k%02d", j), fmt.Sprint(r)))
			}
			out = append(out, keyedSpec{recs: recs})
		}
	}
	return out
}

func manyKeysWant(keys, rounds int) string {
	var s []string
	base := (rounds - 1) * keys
	for k := 0; k < keys; k++ {
		s = append(s, fmt.Sprintf("%d:k%02d=%d", base+k, k, rounds-1))
	}
	return strings.Join(s, " ")
}

// TestCleanTombstoneHorizon: a tombstone survives the pass that first
// keeps it, which stamps its batch with a delete horizon of now +
// delete.retention.ms, and goes with the first pass after the horizon.
func TestCleanTombstoneHorizon(t *testing.T) {
	now := time.UnixMilli(5_000_000)
	cfg := compactConfig()
	cfg.DeleteRetentionMs = time.Minute
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "1"), rec("b", "1")}, ts: 1000}))
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{tomb("a"), rec("c", "1")}, ts: 2000}))
	roll(t, l)
	cleanT(t, l, now, 1<<20, false)
	recs, batches := readRecords(t, l)
	if g := recordsString(recs); g != "1:b=1 2:a=<null> 3:c=1" {
		t.Fatalf("first pass: %s", g)
	}
	tb := protocol.Batch(batches[len(batches)-1])
	if !tb.HasDeleteHorizon() || tb.BaseTimestamp() != now.Add(time.Minute).UnixMilli() {
		t.Fatalf("tombstone batch horizon %v at %d, want %d", tb.HasDeleteHorizon(), tb.BaseTimestamp(), now.Add(time.Minute).UnixMilli())
	}
	// Record timestamps are unchanged by the new base.
	if recs[1].ts != 2000 || recs[2].ts != 2001 {
		t.Fatalf("record timestamps after rebasing: %d %d", recs[1].ts, recs[2].ts)
	}
	// More data makes the log dirty again; before the horizon the
	// tombstone stays.
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("d", "1")}, ts: 3000}))
	roll(t, l)
	cleanT(t, l, now.Add(30*time.Second), 1<<20, false)
	if recs, _ := readRecords(t, l); recordsString(recs) != "1:b=1 2:a=<null> 3:c=1 4:d=1" {
		t.Fatalf("before the horizon: %s", recordsString(recs))
	}
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("e", "1")}, ts: 4000}))
	roll(t, l)
	cleanT(t, l, now.Add(61*time.Second), 1<<20, false)
	if recs, _ := readRecords(t, l); recordsString(recs) != "1:b=1 3:c=1 4:d=1 5:e=1" {
		t.Fatalf("after the horizon: %s", recordsString(recs))
	}
}

// TestCleanMergesSegments: a pass writes consecutive small segments into
// one cleaned segment of at most segment.bytes (Kafka's
// groupSegmentsBySize), keeping every offset; with retainEmpty every
// batch survives the merge as a header, and the log reopens the same.
func TestCleanMergesSegments(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	cfg := compactConfig() // 400-byte segments
	dir := t.TempDir()
	l := openT(t, dir, cfg)
	defer func() { l.Close() }()
	for i := 0; i < 20; i++ {
		mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec(fmt.Sprint("k", i%4), fmt.Sprint(i))}}))
		roll(t, l)
	}
	before := len(segFiles(t, dir, logSuffix))
	cleanT(t, l, now, 1<<20, true)
	files := segFiles(t, dir, logSuffix)
	if len(files) > before/3 {
		t.Fatalf("%d segments after cleaning, %d before: not merged", len(files), before)
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Size() > int64(cfg.SegmentBytes) {
			t.Fatalf("segment %s: %v, size above segment.bytes", f, err)
		}
	}
	check := func(step string) {
		t.Helper()
		recs, batches := readRecords(t, l)
		if g := recordsString(recs); g != "16:k0=16 17:k1=17 18:k2=18 19:k3=19" {
			t.Fatalf("%s: records %s", step, g)
		}
		if len(batches) != 20 {
			t.Fatalf("%s: %d batches, want every one of the 20", step, len(batches))
		}
		for i, b := range batches {
			if protocol.Batch(b).BaseOffset() != int64(i) {
				t.Fatalf("%s: batch %d at offset %d", step, i, protocol.Batch(b).BaseOffset())
			}
		}
	}
	check("after merging")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, cleanShutdownFile))
	l = openT(t, dir, cfg)
	check("reopened")
}

// TestCleanLagBounds: min.compaction.lag.ms keeps young segments out of a
// pass; max.compaction.lag.ms cleans a log whose dirty ratio is below
// min.cleanable.dirty.ratio; the active segment is never cleaned.
func TestCleanLagBounds(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.MinCompactionLagMs = time.Hour
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	old := now.Add(-2 * time.Hour).UnixMilli()
	young := now.Add(-time.Minute).UnixMilli()
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "1")}, ts: old}))
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "2")}, ts: old}))
	roll(t, l)
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "3")}, ts: young}))
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "4")}, ts: young}))
	roll(t, l)
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "5")}, ts: young}))
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "6")}, ts: young})) // active
	cleanT(t, l, now, 1<<20, false)
	recs, _ := readRecords(t, l)
	if g := recordsString(recs); g != "1:a=2 2:a=3 3:a=4 4:a=5 5:a=6" {
		t.Fatalf("with min.compaction.lag.ms: %s", g)
	}
	// An hour later the young segments are old enough; the active one
	// still is not cleaned.
	cleanT(t, l, now.Add(time.Hour), 1<<20, false)
	if g, _ := readRecords(t, l); recordsString(g) != "3:a=4 4:a=5 5:a=6" {
		t.Fatalf("after the lag: %s", recordsString(g))
	}

	// max.compaction.lag.ms: a ratio below the minimum is cleaned once the
	// first dirty segment is older than the lag.
	cfg2 := compactConfig()
	cfg2.SegmentBytes = 1 << 20
	cfg2.MinCleanableDirtyRatio = 0.99
	cfg2.MaxCompactionLagMs = time.Hour
	l2 := openT(t, t.TempDir(), cfg2)
	defer l2.Close()
	for i := 0; i < 4; i++ {
		mustAppend(t, l2, mkKeyed(t, keyedSpec{recs: []kv{rec(fmt.Sprint("k", i), "1")}, ts: old}))
	}
	roll(t, l2)
	cleanT(t, l2, now.Add(-3*time.Hour), 1<<20, false)
	mustAppend(t, l2, mkKeyed(t, keyedSpec{recs: []kv{rec("k0", "2")}, ts: old}))
	roll(t, l2)
	if _, must, ok := l2.cleanable(now.Add(-90*time.Minute), math.MaxInt64); ok || must {
		t.Fatalf("cleanable before max lag: ok %v must %v", ok, must)
	}
	if _, must, ok := l2.cleanable(now, math.MaxInt64); !ok || !must {
		t.Fatalf("not cleanable after max lag: ok %v must %v", ok, must)
	}
	cleanT(t, l2, now, 1<<20, false)
	if g, _ := readRecords(t, l2); recordsString(g) != "1:k1=1 2:k2=1 3:k3=1 4:k0=2" {
		t.Fatalf("after max lag: %s", recordsString(g))
	}
}

// TestCleanLimit: nothing at or past the caller's limit is cleaned.
func TestCleanLimit(t *testing.T) {
	cfg := compactConfig()
	cfg.SegmentBytes = 1 << 20
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 3; i++ {
		mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", fmt.Sprint(i))}}))
		roll(t, l)
	}
	m := newOffsetMap(1 << 20)
	if _, _, err := l.clean(cleanOptions{now: time.Now(), limit: 2, m: m}); err != nil {
		t.Fatal(err)
	}
	if g, _ := readRecords(t, l); recordsString(g) != "1:a=1 2:a=2" {
		t.Fatalf("limit 2: %s", recordsString(g))
	}
}

// TestCleanProducerStateSurvives: after cleaning and a crash, the
// producer's next sequence is accepted and a retry of its last batch is a
// duplicate: its emptied last batch kept the state.
func TestCleanProducerStateSurvives(t *testing.T) {
	cfg := compactConfig()
	dir := t.TempDir()
	l := openT(t, dir, cfg)
	last := mkKeyed(t, keyedSpec{recs: []kv{rec("a", "2")}, idem: true, pid: 3, seq: 1})
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "1")}, idem: true, pid: 3, seq: 0}))
	mustAppend(t, l, last)
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "3")}}))
	roll(t, l)
	cleanT(t, l, time.Now(), 1<<20, false)
	crash(t, l)
	l = openT(t, dir, cfg)
	defer l.Close()
	st, ok := l.ProducerState(3)
	if !ok || st.LastSequence != 1 || st.LastOffset != 1 {
		t.Fatalf("producer state after cleaning and a crash: %+v %v", st, ok)
	}
	r, err := l.Append(bytes.Clone(last))
	if err != nil || !r.Duplicate {
		t.Fatalf("retry of the last batch: %+v %v", r, err)
	}
	if _, err := l.Append(mkKeyed(t, keyedSpec{recs: []kv{rec("a", "4")}, idem: true, pid: 3, seq: 2})); err != nil {
		t.Fatal(err)
	}
}

// TestCleanSwapRecovery: Open finishes a swap a crash cut short and
// drops a cleaned file that was never swapped in.
func TestCleanSwapRecovery(t *testing.T) {
	cfg := compactConfig()
	dir := t.TempDir()
	l := openT(t, dir, cfg)
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "1"), rec("b", "1")}}))
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "2")}}))
	roll(t, l)
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("b", "2")}}))
	roll(t, l)
	// What a pass writes for the first segment: only a=2 (offset 2)
	// survives, b=1 is replaced by b=2 in the second segment.
	cleaned := mkKeyed(t, keyedSpec{recs: []kv{rec("a", "2")}})
	protocol.Batch(cleaned).SetBaseOffset(2)
	crash(t, l)
	first := filepath.Join(dir, segmentName(0, logSuffix))
	orig, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	// A .cleaned file only: the old segment stays.
	if err := os.WriteFile(first+cleanedSuffix, cleaned, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, cfg)
	if _, err := os.Stat(first + cleanedSuffix); !os.IsNotExist(err) {
		t.Fatalf(".cleaned file left: %v", err)
	}
	if g, _ := readRecords(t, l); recordsString(g) != "0:a=1 1:b=1 2:a=2 3:b=2" {
		t.Fatalf("after a .cleaned file: %s", recordsString(g))
	}
	crash(t, l)
	if b, _ := os.ReadFile(first); !bytes.Equal(b, orig) {
		t.Fatal("segment changed")
	}
	// A .swap file: the swap is completed.
	if err := os.WriteFile(first+swapSuffix, cleaned, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, cfg)
	defer l.Close()
	if g, _ := readRecords(t, l); recordsString(g) != "2:a=2 3:b=2" {
		t.Fatalf("after a .swap file: %s", recordsString(g))
	}
	if l.LogStartOffset() != 0 || l.LogEndOffset() != 4 {
		t.Fatalf("log start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
}

// TestReadRangeHidesEmptyBatches: ReadRange, what Fetch sends, leaves out
// the batches a raft partition's cleaning emptied (Read, what raft reads
// its entries with, keeps them), stopping before each with Hidden set, so
// that a reader going on from NextOffset gets every record once.
func TestReadRangeHidesEmptyBatches(t *testing.T) {
	cfg := compactConfig()
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	for _, v := range []string{"1", "2", "3"} {
		mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("x", v)}}))
		mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("y"+v, v)}}))
	}
	roll(t, l)
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("z", "1")}}))
	cleanT(t, l, time.Now(), 1<<20, true)
	if _, batches := readRecords(t, l); len(batches) != 7 {
		t.Fatalf("Read returns %d batches, want all 7", len(batches))
	}
	var got []string
	hidden := 0
	for off := int64(0); off < l.LogEndOffset(); {
		rr, err := l.ReadRange(off, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		b, err := rr.Range.Bytes()
		rr.Range.Release()
		if err != nil {
			t.Fatal(err)
		}
		for _, bb := range splitBatches(t, b) {
			if protocol.Batch(bb).RecordCount() == 0 {
				t.Fatalf("ReadRange sent the empty batch at %d", baseOf(bb))
			}
			got = append(got, fmt.Sprint(baseOf(bb)))
		}
		if rr.Hidden {
			hidden++
		}
		if len(b) == 0 && !rr.Hidden {
			break
		}
		off = rr.NextOffset
	}
	if strings.Join(got, " ") != "1 3 4 5 6" || hidden == 0 {
		t.Fatalf("ReadRange batches %v (hidden stops %d), want 1 3 4 5 6", got, hidden)
	}
}

// TestCleanDropsOldEmptyBatches: the empty batch kept for a producer's
// last batch goes once the producer has written a later one.
func TestCleanDropsOldEmptyBatches(t *testing.T) {
	l := openT(t, t.TempDir(), compactConfig())
	defer l.Close()
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "1")}, idem: true, pid: 9, seq: 0}))
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "2")}}))
	roll(t, l)
	cleanT(t, l, time.Now(), 1<<20, false)
	if _, b := readRecords(t, l); len(b) != 2 {
		t.Fatalf("%d batches, want the producer's emptied last one and a=2", len(b))
	}
	mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("b", "1")}, idem: true, pid: 9, seq: 1}))
	roll(t, l)
	cleanT(t, l, time.Now(), 1<<20, false)
	recs, b := readRecords(t, l)
	if len(b) != 2 || recordsString(recs) != "1:a=2 2:b=1" {
		t.Fatalf("%d batches (%s), want a=2 and b=1 only", len(b), recordsString(recs))
	}
}

// TestCompactRollsByMaxCompactionLag: a compacted log rolls its active
// segment (which is never cleaned) once it spans max.compaction.lag.ms,
// when that is below segment.ms (Kafka's LogConfig.maxSegmentMs).
func TestCompactRollsByMaxCompactionLag(t *testing.T) {
	for _, tc := range []struct {
		compact bool
		want    int
	}{{false, 1}, {true, 3}} {
		cfg := compactConfig()
		cfg.Compact = tc.compact
		cfg.SegmentBytes = 1 << 20
		cfg.SegmentMs = time.Hour
		cfg.MaxCompactionLagMs = time.Minute
		l := openT(t, t.TempDir(), cfg)
		for i := int64(0); i < 3; i++ {
			mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec("a", "1")}, ts: i * 61_000}))
		}
		l.mu.RLock()
		n := len(l.segs)
		l.mu.RUnlock()
		l.Close()
		if n != tc.want {
			t.Fatalf("compact %v: %d segments, want %d", tc.compact, n, tc.want)
		}
	}
}

// TestCleanWithWAL: cleaning a log whose appends go through the
// broker-wide WAL, then a crash: the WAL replays only what the active
// segment lacks, never a cleaned batch, and the survivors stay.
func TestCleanWithWAL(t *testing.T) {
	root := t.TempDir()
	open := func() (*Flusher, *Log) {
		f, err := OpenFlusher(FlusherConfig{Policy: FlushGroup, Dir: filepath.Join(root, "wal"), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		f.Start()
		return f, openT(t, filepath.Join(root, "p"), compactConfig(), Options{Logger: testLogger(t), Flusher: f})
	}
	f, l := open()
	for round := 0; round < 5; round++ {
		for k := 0; k < 4; k++ {
			mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec(fmt.Sprint("k", k), fmt.Sprint(round))}}))
		}
	}
	if err := l.WaitDurable(t.Context(), l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	cleanT(t, l, time.Now(), 1<<20, false)
	before, _ := readRecords(t, l)
	if len(before) >= 20 {
		t.Fatalf("nothing cleaned: %s", recordsString(before))
	}
	crash(t, l)
	f.Close()
	f, l = open()
	defer f.Close()
	defer l.Close()
	after, _ := readRecords(t, l)
	if recordsString(after) != recordsString(before) {
		t.Fatalf("after a crash with the WAL:\n got %s\nwant %s", recordsString(after), recordsString(before))
	}
}

// TestCleanTransactions: an aborted transactional write of a key never
// counts as the key's latest value (the committed value before it
// survives), and nothing at or past an open transaction is cleaned.
func TestCleanTransactions(t *testing.T) {
	for _, retainEmpty := range []bool{false, true} {
		t.Run(fmt.Sprintf("retainEmpty=%v", retainEmpty), func(t *testing.T) { testCleanTransactions(t, retainEmpty) })
	}
}

// batchesString lists the log's batches as offset, kind (d data, A ABORT
// marker, C COMMIT marker, c an emptied marker), record count and h for a
// delete horizon.
func batchesString(t *testing.T, l *Log) string {
	t.Helper()
	_, batches := readRecords(t, l)
	var s []string
	for _, b := range batches {
		var h batchHeader
		if err := h.Decode(b); err != nil {
			t.Fatal(err)
		}
		kind := "d"
		if h.IsControl() {
			switch markerOf(b, &h).typ {
			case protocol.ControlAbort:
				kind = "A"
			case protocol.ControlCommit:
				kind = "C"
			default:
				kind = "c"
			}
		}
		hz := ""
		if protocol.Batch(b).HasDeleteHorizon() {
			hz = "h"
		}
		s = append(s, fmt.Sprintf("%d%s%d%s", h.BaseOffset, kind, h.RecordCount, hz))
	}
	return strings.Join(s, " ")
}

// testCleanTransactions: the cleaner removes the records of aborted
// transactions at once, and a marker once no batch of its transaction is
// left, in two steps (a delete horizon first, removal after it), taking
// an ABORT marker's entry out of the aborted list as it goes; records of
// an open transaction and everything after it stay. With retainEmpty (raft
// partitions) every batch stays as a header. Either way the log read again
// from its files (no snapshot) has the same open transaction and aborted
// list.
func testCleanTransactions(t *testing.T, retainEmpty bool) {
	now := time.UnixMilli(1_000_000)
	cfg := compactConfig()
	cfg.DeleteRetentionMs = time.Minute
	dir := t.TempDir()
	l := openT(t, dir, cfg)
	defer func() { l.Close() }()
	for i, b := range [][]byte{
		mkKeyed(t, keyedSpec{recs: []kv{rec("a", "committed"), rec("c", "old")}}),               // 0-1
		mkKeyed(t, keyedSpec{recs: []kv{rec("a", "aborted")}, idem: true, pid: 7, txn: true}),   // 2
		protocol.TxnMarkerBatch(7, 0, false, 0, 0),                                              // 3: ABORT
		mkKeyed(t, keyedSpec{recs: []kv{rec("b", "txn")}, idem: true, pid: 9, txn: true}),       // 4
		protocol.TxnMarkerBatch(9, 0, true, 0, 0),                                               // 5: COMMIT
		mkKeyed(t, keyedSpec{recs: []kv{rec("d", "7")}, idem: true, pid: 7, seq: 1, txn: true}), // 6
		protocol.TxnMarkerBatch(7, 0, true, 0, 0),                                               // 7: COMMIT
		mkKeyed(t, keyedSpec{recs: []kv{rec("e", "9")}, idem: true, pid: 9, seq: 1, txn: true}), // 8
		protocol.TxnMarkerBatch(9, 0, true, 0, 0),                                               // 9: COMMIT
		mkKeyed(t, keyedSpec{recs: []kv{rec("b", "newer")}}),                                    // 10
		mkKeyed(t, keyedSpec{recs: []kv{rec("c", "open")}, idem: true, pid: 8, txn: true}),      // 11: open
		mkKeyed(t, keyedSpec{recs: []kv{rec("c", "after")}}),                                    // 12
	} {
		if _, err := l.Append(b); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		roll(t, l)
	}
	if fu := l.FirstUnstableOffset(); fu != 11 {
		t.Fatalf("first unstable offset %d, want 11", fu)
	}
	if a := mustAborted(l.AbortedTxns(0, 100)); len(a) != 1 || a[0] != (AbortedTxn{ProducerID: 7, FirstOffset: 2, LastOffset: 3}) {
		t.Fatalf("aborted transactions %v", a)
	}
	data := func() string {
		rs, _ := readRecords(t, l)
		var d []got
		for _, r := range rs {
			if r.key[0] != 0 { // not a control record
				d = append(d, r)
			}
		}
		return recordsString(d)
	}
	check := func(step, wantRecs, wantRaft, wantPlain string) {
		t.Helper()
		if g := data(); g != wantRecs {
			t.Errorf("%s: records\n got %s\nwant %s", step, g, wantRecs)
		}
		want := wantPlain
		if retainEmpty {
			want = wantRaft
		}
		if g := batchesString(t, l); g != want {
			t.Errorf("%s: batches\n got %s\nwant %s", step, g, want)
		}
	}
	// Pass 1 cleans below the open transaction only (c=old stays). The
	// aborted record goes, and the superseded b=txn; every marker's
	// transaction had a batch in the pass, so all markers stay. Without
	// retainEmpty the emptied batches 2 and 4 go: neither is its
	// producer's last.
	cleanT(t, l, now, 1<<20, retainEmpty)
	check("first pass", "0:a=committed 1:c=old 6:d=7 8:e=9 10:b=newer 11:c=open 12:c=after",
		"0d2 2d0 3A1 4d0 5C1 6d1 7C1 8d1 9C1 10d1 11d1 12d1",
		"0d2 3A1 5C1 6d1 7C1 8d1 9C1 10d1 11d1 12d1")
	if fu := l.FirstUnstableOffset(); fu != 11 {
		t.Fatalf("first unstable offset %d, want 11", fu)
	}
	mustAppend(t, l, protocol.TxnMarkerBatch(8, 0, true, 0, 0)) // 13: COMMIT
	roll(t, l)
	// pass appends a record of a new key (the log gets dirty again, as
	// new data makes it in Kafka) and cleans at now+after.
	next := 14
	pass := func(after time.Duration) {
		t.Helper()
		mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec(fmt.Sprintf("z%d", next), "1")}}))
		next++
		roll(t, l)
		cleanT(t, l, now.Add(after), 1<<20, retainEmpty)
	}
	// Pass 2: the transactions of markers 3 and 5 have no batch left:
	// the markers get a delete horizon (now+1s+1m). Batch 11 loses its
	// record but is producer 8's last, so stays as a header.
	pass(time.Second)
	check("second pass", "0:a=committed 6:d=7 8:e=9 10:b=newer 12:c=after 14:z14=1",
		"0d1 2d0 3A1h 4d0 5C1h 6d1 7C1 8d1 9C1 10d1 11d0 12d1 13C1 14d1",
		"0d1 3A1h 5C1h 6d1 7C1 8d1 9C1 10d1 11d0 12d1 13C1 14d1")
	if a := mustAborted(l.AbortedTxns(0, 100)); len(a) != 1 {
		t.Fatalf("aborted transactions before the horizon: %v", a)
	}
	// Before the horizon the markers stay. With retainEmpty the emptied
	// header 11 no longer counts as a batch of its transaction, so 13 is
	// stamped now; without, it keeps its marker as Kafka does.
	pass(59 * time.Second)
	check("before the horizon", "0:a=committed 6:d=7 8:e=9 10:b=newer 12:c=after 14:z14=1 15:z15=1",
		"0d1 2d0 3A1h 4d0 5C1h 6d1 7C1 8d1 9C1 10d1 11d0 12d1 13C1h 14d1 15d1",
		"0d1 3A1h 5C1h 6d1 7C1 8d1 9C1 10d1 11d0 12d1 13C1 14d1 15d1")
	// After it markers 3 and 5 go (with retainEmpty their headers stay,
	// without records), and the aborted transaction with its marker.
	pass(62 * time.Second)
	check("after the horizon", "0:a=committed 6:d=7 8:e=9 10:b=newer 12:c=after 14:z14=1 15:z15=1 16:z16=1",
		"0d1 2d0 3c0h 4d0 5c0h 6d1 7C1 8d1 9C1 10d1 11d0 12d1 13C1h 14d1 15d1 16d1",
		"0d1 6d1 7C1 8d1 9C1 10d1 11d0 12d1 13C1 14d1 15d1 16d1")
	if a := mustAborted(l.AbortedTxns(0, 100)); len(a) != 0 {
		t.Fatalf("aborted transactions after their marker went: %v", a)
	}
	if fu := l.FirstUnstableOffset(); fu != -1 {
		t.Fatalf("first unstable offset %d after cleaning, want none", fu)
	}
	// Read again from the files alone: no open transaction and no
	// aborted one.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, cleanShutdownFile))
	l = openT(t, dir, cfg)
	if fu := l.FirstUnstableOffset(); fu != -1 {
		t.Fatalf("first unstable offset %d after reopening, want none", fu)
	}
	if a := mustAborted(l.AbortedTxns(0, 100)); len(a) != 0 {
		t.Fatalf("aborted transactions after reopening: %v", a)
	}
}
