package log

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/protocol"
)

func TestAppendAssignsOffsetsAndReopens(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig())
	var want [][]byte
	for i := 0; i < 10; i++ {
		b := mkBatch(spec{n: 3, valueSize: 10})
		r := mustAppend(t, l, b)
		if r.BaseOffset != int64(i*3) || r.LastOffset != int64(i*3+2) || r.Duplicate {
			t.Fatalf("append %d: %+v", i, r)
		}
		if baseOf(b) != r.BaseOffset {
			t.Fatalf("base offset not patched in place: %d", baseOf(b))
		}
		want = append(want, bytes.Clone(b))
	}
	check := func(l *Log) {
		t.Helper()
		if l.LogStartOffset() != 0 || l.LogEndOffset() != 30 {
			t.Fatalf("start %d end %d", l.LogStartOffset(), l.LogEndOffset())
		}
		got := readAll(t, l)
		if len(got) != len(want) {
			t.Fatalf("got %d batches, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("batch %d differs", i)
			}
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(mkBatch(spec{})); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	l = openT(t, dir, testConfig())
	defer l.Close()
	check(l)
	if r := mustAppend(t, l, mkBatch(spec{})); r.BaseOffset != 30 {
		t.Fatalf("append after reopen: %+v", r)
	}
}

func TestAppendRejectsMalformed(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig())
	defer l.Close()
	good := mkBatch(spec{n: 2})
	badMagic := bytes.Clone(good)
	badMagic[protocol.BatchMagicAt] = 1
	tooFewRecords := bytes.Clone(good) // count 3 > lastOffsetDelta+1
	tooFewRecords[protocol.BatchRecordCountAt+3] = 3
	for name, b := range map[string][]byte{
		"short":        good[:40],
		"truncated":    good[:len(good)-1],
		"trailing":     append(bytes.Clone(good), 0),
		"magic":        badMagic,
		"record count": tooFewRecords,
	} {
		if _, err := l.Append(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("rejected batches moved the log end to %d", l.LogEndOffset())
	}
	cfg := testConfig()
	cfg.SegmentBytes = 200
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(mkBatch(spec{valueSize: 300})); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("got %v, want ErrBatchTooLarge", err)
	}
	if err := l.CheckBatchSize(201); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("CheckBatchSize(201) with segment.bytes 200: %v", err)
	}
	// A batch the leader accepted (segment.bytes was larger there) is
	// stored by a follower all the same, in a segment of its own.
	big := mkBatch(spec{valueSize: 300})
	putBase(big, l.LogEndOffset())
	if err := l.AppendReplicated(big); err != nil {
		t.Fatalf("replicated batch over segment.bytes: %v", err)
	}
	if got := readAll(t, l); len(got) != 1 || !bytes.Equal(got[0], big) {
		t.Fatalf("read back %d batches", len(got))
	}
	if err := l.SetConfig(Config{}); err == nil {
		t.Fatal("SetConfig accepted a zero config")
	}
}

func TestRead(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig())
	defer l.Close()
	// Five batches of 4 records: offsets 0-3, 4-7, 8-11, 12-15, 16-19.
	var size int
	for i := 0; i < 5; i++ {
		b := mkBatch(spec{n: 4, valueSize: 100})
		size = len(b)
		mustAppend(t, l, b)
	}
	tests := []struct {
		name      string
		offset    int64
		maxBytes  int
		upTo      int64
		wantBases []int64
		wantNext  int64
		wantErr   error
	}{
		{"all", 0, 1 << 20, 1 << 62, []int64{0, 4, 8, 12, 16}, 20, nil},
		{"mid batch starts at its base", 6, 1 << 20, 1 << 62, []int64{4, 8, 12, 16}, 20, nil},
		{"maxBytes cuts whole batches", 0, 2*size + size/2, 1 << 62, []int64{0, 4}, 8, nil},
		{"maxBytes exact", 0, 2 * size, 1 << 62, []int64{0, 4}, 8, nil},
		{"minOneMessage", 9, 1, 1 << 62, []int64{8}, 12, nil},
		{"maxBytes zero still one", 0, 0, 1 << 62, []int64{0}, 4, nil},
		{"upTo stops at base", 0, 1 << 20, 8, []int64{0, 4}, 8, nil},
		{"upTo inside batch keeps it", 0, 1 << 20, 9, []int64{0, 4, 8}, 12, nil},
		{"upTo before first", 4, 1 << 20, 4, nil, 4, nil},
		{"at log end", 20, 1 << 20, 1 << 62, nil, 20, nil},
		{"past log end", 21, 1 << 20, 1 << 62, nil, 0, ErrOffsetOutOfRange},
		{"negative", -1, 1 << 20, 1 << 62, nil, 0, ErrOffsetOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := l.Read(tt.offset, tt.maxBytes, tt.upTo)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var bases []int64
			for _, b := range splitBatches(t, r.Data) {
				bases = append(bases, baseOf(b))
			}
			if !equalEntries(bases, tt.wantBases) || r.NextOffset != tt.wantNext {
				t.Fatalf("bases %v next %d, want %v next %d", bases, r.NextOffset, tt.wantBases, tt.wantNext)
			}
			if r.LogStartOffset != 0 || r.LogEndOffset != 20 {
				t.Fatalf("start %d end %d", r.LogStartOffset, r.LogEndOffset)
			}
		})
	}
}

func TestReadUsesIndexAcrossManyBatches(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 256
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	for i := 0; i < 500; i++ {
		mustAppend(t, l, mkBatch(spec{n: 2, valueSize: 50}))
	}
	if len(l.active().idx.offsets) < 50 {
		t.Fatalf("only %d index entries", len(l.active().idx.offsets))
	}
	for off := int64(0); off < 1000; off += 37 {
		r, err := l.Read(off, 1, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		bs := splitBatches(t, r.Data)
		if len(bs) != 1 || baseOf(bs[0]) != off&^1 {
			t.Fatalf("Read(%d) got %d batches, first base %d", off, len(bs), baseOf(bs[0]))
		}
	}
}

// idemStep is one append in an idempotence scenario.
type idemStep struct {
	pid     int64
	epoch   int16
	seq     int32
	n       int
	control bool
	want    int64 // expected base offset, or the original one for a duplicate
	dup     bool
	wantErr error
}

func TestIdempotence(t *testing.T) {
	tests := []struct {
		name  string
		steps []idemStep
	}{
		{"in order", []idemStep{
			{pid: 1, seq: 0, n: 2, want: 0},
			{pid: 1, seq: 2, n: 3, want: 2},
			{pid: 1, seq: 5, n: 1, want: 5},
		}},
		{"retry of last is duplicate", []idemStep{
			{pid: 1, seq: 0, n: 2, want: 0},
			{pid: 1, seq: 2, n: 2, want: 2},
			{pid: 1, seq: 2, n: 2, want: 2, dup: true},
			{pid: 1, seq: 4, n: 1, want: 4},
		}},
		{"retry among last five is duplicate", []idemStep{
			{pid: 1, seq: 0, n: 1, want: 0},
			{pid: 1, seq: 1, n: 1, want: 1},
			{pid: 1, seq: 2, n: 1, want: 2},
			{pid: 1, seq: 3, n: 1, want: 3},
			{pid: 1, seq: 4, n: 1, want: 4},
			{pid: 1, seq: 0, n: 1, want: 0, dup: true},
			{pid: 1, seq: 5, n: 1, want: 5},
			// seq 0 has left the window of five: now it is out of order.
			{pid: 1, seq: 0, n: 1, wantErr: ErrOutOfOrderSequence},
			{pid: 1, seq: 1, n: 1, want: 1, dup: true},
		}},
		{"gap is out of order", []idemStep{
			{pid: 1, seq: 0, n: 2, want: 0},
			{pid: 1, seq: 3, n: 1, wantErr: ErrOutOfOrderSequence},
			{pid: 1, seq: 2, n: 1, want: 2},
		}},
		{"same first seq other length is out of order", []idemStep{
			{pid: 1, seq: 0, n: 2, want: 0},
			{pid: 1, seq: 0, n: 3, wantErr: ErrOutOfOrderSequence},
		}},
		{"unknown producer any sequence", []idemStep{
			{pid: 7, seq: 42, n: 1, want: 0},
			{pid: 7, seq: 43, n: 1, want: 1},
		}},
		{"stale epoch fenced", []idemStep{
			{pid: 1, epoch: 3, seq: 0, n: 1, want: 0},
			{pid: 1, epoch: 2, seq: 1, n: 1, wantErr: ErrInvalidProducerEpoch},
			{pid: 1, epoch: 2, seq: 0, n: 1, wantErr: ErrInvalidProducerEpoch},
		}},
		{"new epoch must start at 0", []idemStep{
			{pid: 1, epoch: 0, seq: 0, n: 1, want: 0},
			{pid: 1, epoch: 1, seq: 1, n: 1, wantErr: ErrOutOfOrderSequence},
			{pid: 1, epoch: 1, seq: 0, n: 1, want: 1},
			// The old epoch's batch is no longer a duplicate: fenced.
			{pid: 1, epoch: 0, seq: 0, n: 1, wantErr: ErrInvalidProducerEpoch},
		}},
		{"sequence wraps", []idemStep{
			{pid: 1, seq: math.MaxInt32 - 1, n: 2, want: 0},
			{pid: 1, seq: 0, n: 1, want: 2},
		}},
		{"batch spanning the wrap", []idemStep{
			{pid: 1, seq: math.MaxInt32 - 5, n: 1, want: 0},
			{pid: 1, seq: math.MaxInt32 - 4, n: 10, want: 1},
			{pid: 1, seq: 5, n: 1, want: 11},
			{pid: 1, seq: math.MaxInt32 - 4, n: 10, want: 1, dup: true},
		}},
		{"control batch bumps the epoch", []idemStep{
			{pid: 1, epoch: 0, seq: 0, n: 2, want: 0},
			{pid: 1, epoch: 1, control: true, want: 2},
			{pid: 1, epoch: 0, seq: 2, n: 1, wantErr: ErrInvalidProducerEpoch},
			{pid: 1, epoch: 1, seq: 3, n: 1, wantErr: ErrOutOfOrderSequence},
			{pid: 1, epoch: 1, seq: 0, n: 1, want: 3},
		}},
		{"stale control batch fenced", []idemStep{
			{pid: 1, epoch: 2, seq: 0, n: 1, want: 0},
			{pid: 1, epoch: 1, control: true, wantErr: ErrInvalidProducerEpoch},
		}},
		{"producers independent", []idemStep{
			{pid: 1, seq: 0, n: 1, want: 0},
			{pid: 2, seq: 0, n: 1, want: 1},
			{pid: 1, seq: 1, n: 1, want: 2},
			{pid: 2, seq: 0, n: 1, want: 1, dup: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, dir, testConfig())
			run := func(l *Log, steps []idemStep) {
				for i, st := range steps {
					sp := spec{idem: true, pid: st.pid, epoch: st.epoch, seq: st.seq, n: st.n}
					if st.control {
						sp.attrs, sp.n, sp.seq = protocol.AttrControl|protocol.AttrTransactional, 1, -1
					}
					r, err := l.Append(mkBatch(sp))
					if st.wantErr != nil {
						if !errors.Is(err, st.wantErr) {
							t.Fatalf("step %d: got %v, want %v", i, err, st.wantErr)
						}
						continue
					}
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if r.BaseOffset != st.want || r.Duplicate != st.dup || r.LastOffset != st.want+int64(max(st.n, 1))-1 {
						t.Fatalf("step %d: got %+v, want base %d dup %v", i, r, st.want, st.dup)
					}
				}
			}
			run(l, tt.steps)
			leo := l.LogEndOffset()
			l.Close()
			// State rebuilt from the batch headers must give the same
			// answers to every retry.
			l = openT(t, dir, testConfig())
			defer l.Close()
			var retries []idemStep
			for _, st := range tt.steps {
				if st.wantErr == nil && !st.control {
					retries = append(retries, st)
				}
			}
			if n := len(retries); n > 0 {
				last := retries[n-1]
				last.dup = true
				run(l, []idemStep{last})
			}
			if l.LogEndOffset() != leo {
				t.Fatalf("retry after reopen wrote: leo %d, was %d", l.LogEndOffset(), leo)
			}
		})
	}
}

func TestProducerStateAndReplicated(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig())
	defer l.Close()
	if _, ok := l.ProducerState(9); ok {
		t.Fatal("unknown producer has state")
	}
	mustAppend(t, l, mkBatch(spec{idem: true, pid: 9, epoch: 2, seq: 0, n: 3}))
	st, ok := l.ProducerState(9)
	want := ProducerState{Epoch: 2, LastSequence: 2, LastOffset: 2, Batches: []ProducerBatch{{FirstSequence: 0, LastSequence: 2, FirstOffset: 0, LastOffset: 2}}, CoordinatorEpoch: -1}
	if !ok || !reflect.DeepEqual(st, want) {
		t.Fatalf("state %+v %v", st, ok)
	}
	// A follower applies the leader's batch as is, even a sequence gap.
	b := mkBatch(spec{idem: true, pid: 9, epoch: 2, seq: 10, n: 1})
	putBase(b, 3)
	if err := l.AppendReplicated(b); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.ProducerState(9); st.LastSequence != 10 || st.LastOffset != 3 {
		t.Fatalf("state after replicated append: %+v", st)
	}
	b = mkBatch(spec{})
	putBase(b, 7)
	if err := l.AppendReplicated(b); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("got %v, want ErrOffsetMismatch", err)
	}
}

func TestRollBySize(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	one := len(mkBatch(spec{n: 2, valueSize: 100}))
	cfg.SegmentBytes = int64(3 * one) // three batches per segment
	l := openT(t, dir, cfg)
	for i := 0; i < 10; i++ {
		mustAppend(t, l, mkBatch(spec{n: 2, valueSize: 100}))
	}
	logs := segFiles(t, dir, logSuffix)
	want := []string{"00000000000000000000.log", "00000000000000000006.log", "00000000000000000012.log", "00000000000000000018.log"}
	if len(logs) != len(want) {
		t.Fatalf("segments %v", logs)
	}
	for i := range want {
		if filepath.Base(logs[i]) != want[i] {
			t.Fatalf("segment %d is %s, want %s", i, logs[i], want[i])
		}
		if _, err := os.Stat(filepath.Join(dir, want[i][:20]+indexSuffix)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(readAll(t, l)); n != 10 {
		t.Fatalf("read %d batches", n)
	}
	// Rolled segments are synced, so the durable offset reached the last roll.
	if d := l.DurableOffset(); d != 18 {
		t.Fatalf("durable %d, want 18", d)
	}
	l.Close()
	l = openT(t, dir, cfg)
	defer l.Close()
	if n := len(readAll(t, l)); n != 10 || l.LogEndOffset() != 20 {
		t.Fatalf("after reopen %d batches, leo %d", n, l.LogEndOffset())
	}
}

func TestRollByTimeAndIndexSize(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentMs = time.Second
	l := openT(t, dir, cfg)
	mustAppend(t, l, mkBatch(spec{ts: 10_000}))
	mustAppend(t, l, mkBatch(spec{ts: 10_900}))
	mustAppend(t, l, mkBatch(spec{ts: 11_001})) // > 1s after the first batch
	if n := len(segFiles(t, dir, logSuffix)); n != 2 {
		t.Fatalf("%d segments, want 2", n)
	}
	// Without timestamps the segment's creation time on the log's clock counts.
	now := time.Unix(100, 0)
	cfg.IndexIntervalBytes = 0
	cfg.SegmentIndexBytes = 4 * timeIndexEntrySize
	dir2 := t.TempDir()
	l2 := openT(t, dir2, cfg, Options{Logger: testLogger(t), Now: func() time.Time { return now }})
	defer l2.Close()
	mustAppend(t, l2, mkBatch(spec{ts: -1}))
	mustAppend(t, l2, mkBatch(spec{ts: -1}))
	now = now.Add(2 * time.Second)
	mustAppend(t, l2, mkBatch(spec{ts: -1}))
	if n := len(segFiles(t, dir2, logSuffix)); n != 2 {
		t.Fatalf("time roll without timestamps: %d segments, want 2", n)
	}
	// An index entry per batch (interval 0) fills the 48-byte offset index
	// after six entries: the segment rolls.
	for i := 0; i < 10; i++ {
		mustAppend(t, l2, mkBatch(spec{ts: -1}))
	}
	if n := len(segFiles(t, dir2, logSuffix)); n < 3 {
		t.Fatalf("index-full roll: %d segments", n)
	}
	l.Close()
}

func TestRetention(t *testing.T) {
	one := int64(len(mkBatch(spec{n: 1, valueSize: 100})))
	tests := []struct {
		name        string
		retMs       time.Duration
		retBytes    int64
		now         int64 // unix ms
		wantDeleted int
		wantStart   int64
	}{
		// Six segments of two batches (one record each); segment i holds
		// timestamps 1000*i and 1000*i+500. The active one is the sixth.
		{"keep forever", -1, -1, 1e9, 0, 0},
		{"by time", 2 * time.Second, -1, 5000, 3, 6}, // max ts 500, 1500, 2500 are > 2 s old
		{"time never active", time.Millisecond, -1, 1e9, 5, 10},
		{"by bytes", -1, 5 * one, 0, 3, 6}, // 12 batches, keep >= 5 batches' worth whole segments
		{"bytes below one segment", -1, 0, 0, 5, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig()
			cfg.SegmentBytes = 2 * one
			l := openT(t, dir, cfg)
			defer l.Close()
			for i := 0; i < 12; i++ {
				mustAppend(t, l, mkBatch(spec{valueSize: 100, ts: int64(i/2)*1000 + int64(i%2)*500}))
			}
			if n := len(segFiles(t, dir, logSuffix)); n != 6 {
				t.Fatalf("%d segments", n)
			}
			cfg.RetentionMs, cfg.RetentionBytes = tt.retMs, tt.retBytes
			if err := l.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
			n, err := l.ApplyRetention(time.UnixMilli(tt.now))
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantDeleted || l.LogStartOffset() != tt.wantStart {
				t.Fatalf("deleted %d start %d, want %d start %d", n, l.LogStartOffset(), tt.wantDeleted, tt.wantStart)
			}
			if got := len(segFiles(t, dir, logSuffix)); got != 6-n {
				t.Fatalf("%d segment files left", got)
			}
			if _, err := l.Read(tt.wantStart-1, 100, 1<<62); tt.wantStart > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read below start: %v", err)
			}
			if got := readAll(t, l); len(got) != 12-int(tt.wantStart) {
				t.Fatalf("%d batches left", len(got))
			}
			if mustAppend(t, l, mkBatch(spec{})).BaseOffset != 12 {
				t.Fatal("append after retention")
			}
		})
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = int64(2 * len(mkBatch(spec{n: 2})))
	l := openT(t, dir, cfg)
	for i := 0; i < 6; i++ { // segments at 0, 4, 8
		mustAppend(t, l, mkBatch(spec{n: 2}))
	}
	if err := l.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 5 || len(segFiles(t, dir, logSuffix)) != 2 {
		t.Fatalf("start %d, %d segments", l.LogStartOffset(), len(segFiles(t, dir, logSuffix)))
	}
	if err := l.DeleteRecordsBefore(3); err != nil || l.LogStartOffset() != 5 {
		t.Fatalf("moving back: %v, start %d", err, l.LogStartOffset())
	}
	if err := l.DeleteRecordsBefore(13); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past end: %v", err)
	}
	// Reading at the start returns the batch that contains it.
	r, err := l.Read(5, 1, 1<<62)
	if err != nil || baseOf(r.Data) != 4 {
		t.Fatalf("read at start: %v", err)
	}
	l.Close()
	l = openT(t, dir, cfg)
	defer l.Close()
	if l.LogStartOffset() != 5 {
		t.Fatalf("log start not persisted: %d", l.LogStartOffset())
	}
}

func TestTruncateTo(t *testing.T) {
	tests := []struct {
		name    string
		to      int64
		wantLEO int64
	}{
		{"no-op at end", 24, 24},
		{"batch boundary in last segment", 20, 20},
		{"inside a batch drops it whole", 21, 20},
		{"segment boundary", 8, 8},
		{"into an earlier segment", 10, 10},
		{"to zero", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig()
			cfg.SegmentBytes = int64(2 * len(mkBatch(spec{n: 2})))
			l := openT(t, dir, cfg)
			// 12 batches of 2 records at leader epochs 1,1,1,1,2,2,...; the
			// producer's sequence continues across them.
			for i := 0; i < 12; i++ {
				mustAppend(t, l, mkBatch(spec{n: 2, leaderEpoch: int32(1 + i/4), idem: true, pid: 5, seq: int32(2 * i)}))
			}
			if err := l.TruncateTo(tt.to); err != nil {
				t.Fatal(err)
			}
			check := func(l *Log) {
				t.Helper()
				if l.LogEndOffset() != tt.wantLEO {
					t.Fatalf("leo %d, want %d", l.LogEndOffset(), tt.wantLEO)
				}
				if got := readAll(t, l); int64(len(got)) != tt.wantLEO/2 {
					t.Fatalf("%d batches", len(got))
				}
			}
			check(l)
			// Producer state follows the truncation: the next sequence
			// after the remaining batches is accepted, at the new end.
			st, ok := l.ProducerState(5)
			if tt.wantLEO > 0 && (!ok || st.LastOffset != tt.wantLEO-1) {
				t.Fatalf("producer state %+v %v", st, ok)
			}
			if tt.wantLEO < 24 {
				if _, epoch := l.OffsetForLeaderEpoch(3); tt.wantLEO <= 16 && epoch == 3 {
					t.Fatal("epoch 3 survived truncation below its start")
				}
			}
			r, err := l.Append(mkBatch(spec{n: 2, idem: true, pid: 5, seq: int32(tt.wantLEO)}))
			if err != nil || r.BaseOffset != tt.wantLEO {
				t.Fatalf("append after truncate: %+v %v", r, err)
			}
			l.Close()
			l = openT(t, dir, cfg)
			defer l.Close()
			if l.LogEndOffset() != tt.wantLEO+2 {
				t.Fatalf("after reopen leo %d", l.LogEndOffset())
			}
		})
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 1
	cfg.SegmentBytes = 1200
	l := openT(t, t.TempDir(), cfg)
	defer l.Close()
	// Batch i (3 records, offsets 3i..3i+2) has timestamps 100i+{0,10,20},
	// except batch 4 whose records are out of order.
	for i := 0; i < 8; i++ {
		d := []int64{0, 10, 20}
		if i == 4 {
			d = []int64{15, 5, 20}
		}
		mustAppend(t, l, mkBatch(spec{n: 3, ts: int64(100 * i), tsDeltas: d, valueSize: 20}))
	}
	compressed := mkBatch(spec{n: 3, ts: 1000, tsDeltas: []int64{0, 10, 20}, attrs: 1})
	mustAppend(t, l, compressed) // offsets 24..26; records unreadable without a codec
	appendTime := mkBatch(spec{n: 2, ts: 2000, attrs: protocol.AttrLogAppendTime})
	mustAppend(t, l, appendTime) // offsets 27..28
	if len(l.segs) < 2 {
		t.Fatalf("want several segments, have %d", len(l.segs))
	}
	tests := []struct {
		ts      int64
		off, at int64
		found   bool
	}{
		{-1, 0, 0, true},
		{0, 0, 0, true},
		{5, 1, 10, true},
		{10, 1, 10, true},
		{21, 3, 100, true},
		{215, 8, 220, true},
		{405, 12, 415, true}, // first record in offset order with ts >= 405
		{416, 14, 420, true},
		{720, 23, 720, true},
		{721, 24, 1020, true}, // compressed: the batch's first offset and max timestamp
		{1500, 27, 2000, true},
		{2001, -1, -1, false},
	}
	for _, tt := range tests {
		off, at, found, err := l.OffsetForTimestamp(tt.ts)
		if err != nil {
			t.Fatal(err)
		}
		if off != tt.off || at != tt.at || found != tt.found {
			t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d, %v", tt.ts, off, at, found, tt.off, tt.at, tt.found)
		}
	}
	off, ts, err := l.MaxTimestamp()
	if err != nil || off != 27 || ts != 2000 {
		t.Fatalf("MaxTimestamp = %d, %d, %v", off, ts, err)
	}
	if err := l.DeleteRecordsBefore(13); err != nil {
		t.Fatal(err)
	}
	if off, at, _, _ := l.OffsetForTimestamp(0); off != 13 || at != 405 {
		t.Fatalf("after DeleteRecords: %d, %d", off, at)
	}
}

func TestMaxTimestampExactRecord(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig())
	defer l.Close()
	if off, ts, err := l.MaxTimestamp(); off != -1 || ts != -1 || err != nil {
		t.Fatalf("empty log: %d %d %v", off, ts, err)
	}
	mustAppend(t, l, mkBatch(spec{n: 3, ts: 50}))
	mustAppend(t, l, mkBatch(spec{n: 4, ts: 100, tsDeltas: []int64{0, 30, 10, 30}}))
	mustAppend(t, l, mkBatch(spec{n: 2, ts: 120}))
	if off, ts, err := l.MaxTimestamp(); off != 4 || ts != 130 || err != nil {
		t.Fatalf("got %d %d %v, want 4 130", off, ts, err)
	}
}

func TestOffsetForLeaderEpoch(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig())
	// Epoch 2 from 0, 3 from 4, 5 from 10; batches without an epoch and a
	// stale epoch change nothing.
	for _, e := range []int32{2, 2, 3, -1, 3, 5, 4, 5} {
		mustAppend(t, l, mkBatch(spec{n: 2, leaderEpoch: e}))
	}
	tests := []struct {
		epoch     int32
		end       int64
		wantEpoch int32
	}{
		{-1, -1, -1},
		{1, 0, 1}, // older than all: start of the first known epoch
		{2, 4, 2},
		{3, 10, 3},
		{4, 10, 3}, // not an epoch of ours: the largest below it
		{5, 16, 5}, // latest: the log end
		{6, -1, -1},
	}
	check := func(l *Log) {
		for _, tt := range tests {
			end, e := l.OffsetForLeaderEpoch(tt.epoch)
			if end != tt.end || e != tt.wantEpoch {
				t.Errorf("OffsetForLeaderEpoch(%d) = %d, %d; want %d, %d", tt.epoch, end, e, tt.end, tt.wantEpoch)
			}
		}
	}
	check(l)
	l.Close()
	l = openT(t, dir, testConfig())
	defer l.Close()
	check(l)
}

func TestFatalErrorIsSticky(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig())
	mustAppend(t, l, mkBatch(spec{}))
	// Pull the file out from under the log: the next write fails.
	l.active().log.Close()
	if _, err := l.Append(mkBatch(spec{})); !errors.Is(err, ErrFatal) {
		t.Fatalf("append: %v, want ErrFatal", err)
	}
	if _, err := l.Append(mkBatch(spec{})); !errors.Is(err, ErrFatal) {
		t.Fatalf("second append: %v, want ErrFatal", err)
	}
	if _, err := l.Read(0, 100, 10); !errors.Is(err, ErrFatal) {
		t.Fatalf("read: %v", err)
	}
	if err := l.WaitDurable(t.Context(), 1); !errors.Is(err, ErrFatal) {
		t.Fatalf("wait: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrFatal) {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(l.dir, cleanShutdownFile)); err == nil {
		t.Fatal("a failed log was marked clean")
	}
}

func TestStrayFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig())
	mustAppend(t, l, mkBatch(spec{}))
	l.Close()
	for _, name := range []string{"00000000000000000099.index", "00000000000000000099.timeindex", "log-start-offset.tmp", "00000000000000000000.log.deleted"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l = openT(t, dir, testConfig())
	defer l.Close()
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{"00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex", logIDFile}
	if !equalEntries(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
}

func putBase(b []byte, off int64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(off >> (56 - 8*i))
	}
}

func TestInactiveSegmentsServeFromIndexFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.IndexIntervalBytes = 150
	cfg.SegmentBytes = 4000
	l := openT(t, dir, cfg)
	for i := 0; i < 200; i++ {
		mustAppend(t, l, mkBatch(spec{n: 2, valueSize: 30, ts: int64(10 * i)}))
	}
	check := func(l *Log) {
		t.Helper()
		if len(l.segs) < 5 {
			t.Fatalf("%d segments", len(l.segs))
		}
		for _, s := range l.segs[:len(l.segs)-1] {
			if s.idx.resident || s.idx.offsets != nil || s.idx.nOffsets == 0 || s.idx.nTimes == 0 {
				t.Fatalf("segment %d: resident %v, %d/%d file entries", s.base, s.idx.resident, s.idx.nOffsets, s.idx.nTimes)
			}
		}
		for off := int64(0); off < 400; off++ {
			r, err := l.Read(off, 1, math.MaxInt64)
			if err != nil || baseOf(r.Data) != off&^1 {
				t.Fatalf("Read(%d): %v", off, err)
			}
			if 5*off > 1990 { // past the last batch's timestamp
				continue
			}
			got, ts, found, err := l.OffsetForTimestamp(5 * off)
			if want := (5*off + 9) / 10 * 2; err != nil || !found || got != want || ts != (want/2)*10 {
				t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d", 5*off, got, ts, found, err, want)
			}
		}
	}
	check(l)
	l.Close()
	l = openT(t, dir, cfg)
	defer l.Close()
	check(l)
}

func TestDelete(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "topic-0")
	l := openT(t, dir, testConfig())
	mustAppend(t, l, mkBatch(spec{}))
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory still there: %v", err)
	}
	if _, err := l.Read(0, 10, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after delete: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestOpenTwiceRefused(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig())
	if _, err := Open(dir, testConfig(), Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	l.Close()
	l = openT(t, dir, testConfig())
	l.Close()
}
