package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestDataSpanAndVisibleEnd(t *testing.T) {
	// Raft entries at 0 (head), 4 (middle), 8 and 9 (tail).
	offs := []int64{0, 4, 8, 9}
	for _, tc := range []struct {
		offset, upTo int64
		from, end    int64
	}{
		{0, 10, 1, 4},   // skip the head entry, stop before the middle one
		{2, 10, 2, 4},   // inside a data batch: start there
		{4, 10, 5, 8},   // at the middle entry
		{5, 10, 5, 8},   // after it
		{8, 10, 10, 10}, // only raft entries up to upTo
		{9, 10, 10, 10},
		{10, 10, 10, 10},
		{4, 7, 5, 7}, // upTo before the next raft entry
		{0, 4, 1, 4},
	} {
		from, end := dataSpan(offs, tc.offset, tc.upTo)
		if from != tc.from || end != tc.end {
			t.Errorf("dataSpan(%d, %d) = %d, %d; want %d, %d", tc.offset, tc.upTo, from, end, tc.from, tc.end)
		}
	}
	for _, tc := range []struct{ hw, start, want int64 }{
		{10, 0, 8}, // the run 8, 9 below hw
		{9, 0, 8},
		{8, 0, 8}, // 8 not committed yet: nothing to hide
		{5, 0, 4}, // the middle entry just committed
		{6, 0, 6},
		{4, 0, 4},
		{1, 0, 0},  // only the head entry
		{1, 1, 1},  // never below the log start
		{10, 9, 9}, // log start inside the tail run
	} {
		if got := visibleEnd(offs, tc.hw, tc.start); got != tc.want {
			t.Errorf("visibleEnd(hw %d, start %d) = %d, want %d", tc.hw, tc.start, got, tc.want)
		}
	}
	if got := visibleEnd(nil, 7, 0); got != 7 {
		t.Errorf("visibleEnd without raft entries = %d, want 7", got)
	}

	var r raftOffsets
	for _, o := range offs {
		r.add(o)
	}
	kept := r.load()
	r.cutFrom(8)
	if got := r.load(); !reflect.DeepEqual(got, []int64{0, 4}) {
		t.Errorf("after cutFrom(8): %v", got)
	}
	r.add(12)
	r.dropBelow(4)
	if got := r.load(); !reflect.DeepEqual(got, []int64{4, 12}) {
		t.Errorf("after add(12), dropBelow(4): %v", got)
	}
	if !reflect.DeepEqual(kept, offs) {
		t.Errorf("a slice handed to a reader changed: %v", kept)
	}
}

// raftEntriesLog builds a one-voter log whose raft entries sit at the
// head, the middle and the tail of the data: each restart makes the new
// leader store an empty entry.
//
//	0 raft | 1-3 data "a" | 4 raft | 5-7 data "b" | 8 raft
func raftEntriesLog(t *testing.T) (*testCluster, *Replica) {
	t.Helper()
	c := oneNode(t)
	restart := func() {
		c.stop(1)
		c.start(1)
		c.leader()
	}
	c.produce(testBatch("a", 3, -1, 0, 0), AcksAll)
	restart()
	c.produce(testBatch("b", 3, -1, 0, 0), AcksAll)
	restart()
	r := c.rep(1)
	checkFor(t, 10*time.Second, func() error {
		if r.HighWatermark() != 9 {
			return fmt.Errorf("high watermark %d, want 9", r.HighWatermark())
		}
		return nil
	})
	var kinds []bool
	for _, b := range batchesOf(t, logBytes(t, r)) {
		kinds = append(kinds, b.control)
	}
	if want := []bool{true, false, true, false, true}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("log layout (control?) %v, want %v", kinds, want)
	}
	return c, r
}

// controlOffsets lists the base offsets of the control batches in r's log.
func controlOffsets(t *testing.T, r *Replica) []int64 {
	var out []int64
	for _, b := range batchesOf(t, logBytes(t, r)) {
		if b.control {
			out = append(out, b.base)
		}
	}
	return out
}

// TestRaftReadRangeSkipsRaftEntries reads from every offset and checks that
// no raft entry is ever returned, that the first data batch after the
// offset always is, and what the visible high watermark says.
func TestRaftReadRangeSkipsRaftEntries(t *testing.T) {
	_, r := raftEntriesLog(t)
	if got := r.VisibleHighWatermark(); got != 8 {
		t.Fatalf("visible high watermark %d, want 8 (the raft entry at 8 hidden)", got)
	}
	for _, upTo := range []int64{9, 8} {
		for off := int64(0); off <= 9; off++ {
			for _, maxBytes := range []int{1 << 20, 1} {
				res, more, err := r.ReadRange(off, maxBytes, upTo)
				if err != nil {
					t.Fatalf("ReadRange(%d, %d, %d): %v", off, maxBytes, upTo, err)
				}
				b, err := res.Range.Bytes()
				res.Range.Release()
				if err != nil {
					t.Fatal(err)
				}
				var bases []int64
				for _, sb := range batchesOf(t, b) {
					if sb.control {
						t.Fatalf("ReadRange(%d, %d, %d) returned the control batch at %d", off, maxBytes, upTo, sb.base)
					}
					bases = append(bases, sb.base)
				}
				var want []int64
				wantMore := false
				switch {
				case off <= 3:
					want, wantMore = []int64{1}, true // stops before 4; "b" follows
				case off <= 7:
					want = []int64{5} // stops before 8; nothing follows
				}
				if !reflect.DeepEqual(bases, want) || more != wantMore {
					t.Errorf("ReadRange(%d, %d, %d): batches at %v more %v; want %v more %v", off, maxBytes, upTo, bases, more, want, wantMore)
				}
				if len(want) > 0 && res.NextOffset != want[0]+3 {
					t.Errorf("ReadRange(%d): next offset %d, want %d", off, res.NextOffset, want[0]+3)
				}
			}
		}
	}
	if _, _, err := r.ReadRange(10, 1<<20, 9); err == nil {
		t.Error("ReadRange past the log end: no error")
	}

	// Delete up to the raft entry at the tail: the visible watermark
	// never stays below the log start.
	if err := r.DeleteRecordsBefore(9); err != nil {
		t.Fatal(err)
	}
	if got := r.VisibleHighWatermark(); got != 9 {
		t.Errorf("visible high watermark after DeleteRecordsBefore(9) = %d, want 9", got)
	}
	if res, _, err := r.ReadRange(9, 1<<20, 9); err != nil || res.Range.Len != 0 {
		t.Errorf("ReadRange at the log start and end: %d bytes, %v", res.Range.Len, err)
	}
}

// TestRaftEntriesMarkedAcrossRestarts: the raft.index records mark raft's
// entries, so the set is rebuilt on open without reading the log; an
// index written before they did is classified once from the log and
// rewritten marked.
func TestRaftEntriesMarkedAcrossRestarts(t *testing.T) {
	c, r := raftEntriesLog(t)
	if got, want := r.st.raftOffs.load(), controlOffsets(t, r); !reflect.DeepEqual(got, want) || len(want) != 3 {
		t.Fatalf("raft offsets %v, control batches in the log %v", got, want)
	}
	dir := r.dir
	c.stop(1)

	// Unmark every record and clear the state's flag, as an older
	// version left them.
	p := filepath.Join(dir, indexFileName)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for i := 0; i+indexRecordSize <= len(b); i += indexRecordSize {
		m, ok := decodeIndexRecord(b[i : i+indexRecordSize])
		if !ok {
			t.Fatalf("record %d damaged", i/indexRecordSize)
		}
		if m.raft {
			marked++
		}
		m.raft = false
		encodeIndexRecord(b[i:i+indexRecordSize], m)
	}
	if marked != 3 {
		t.Fatalf("%d index records marked raft, want 3", marked)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	st, _, err := openStateFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	cur := st.cur
	cur.flags = 0
	if err := st.save(cur); err != nil {
		t.Fatal(err)
	}
	st.close()

	r = c.start(1)
	c.leader()
	want := controlOffsets(t, r) // with the new leader's empty entry
	if got := r.st.raftOffs.load(); !reflect.DeepEqual(got, want) || len(want) != 4 {
		t.Fatalf("after classifying an unmarked index: raft offsets %v, control batches in the log %v", got, want)
	}
	r.st.mu.Lock()
	flags := r.st.state.cur.flags
	var fromMetas []int64
	for _, m := range r.st.metas {
		if m.raft {
			fromMetas = append(fromMetas, m.base)
		}
	}
	r.st.mu.Unlock()
	if flags&stateFlagIndexMarksRaft == 0 || !slices.Equal(fromMetas, want) {
		t.Fatalf("state flags %b, marked metas %v", flags, fromMetas)
	}
	c.stop(1)
	b, err = os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var onDisk []int64
	for i := 0; i+indexRecordSize <= len(b); i += indexRecordSize {
		if m, ok := decodeIndexRecord(b[i : i+indexRecordSize]); ok && m.raft {
			onDisk = append(onDisk, m.base)
		}
	}
	if !slices.Equal(onDisk, want) {
		t.Fatalf("raft.index marks %v, want %v", onDisk, want)
	}
}

// BenchmarkRaftOffsetsLookup is what a fetch of a replicated partition
// adds when its range reaches no raft entry: the set's lookups, here with
// 100 raft entries in the log.
func BenchmarkRaftOffsetsLookup(b *testing.B) {
	offs := make([]int64, 100)
	for i := range offs {
		offs[i] = int64(i) * 10000
	}
	var r raftOffsets
	r.store(offs)
	for i := 0; i < b.N; i++ {
		o := r.load()
		if v := visibleEnd(o, 999_999, 0); v != 999_999 {
			b.Fatal(v)
		}
		if from, end := dataSpan(o, 555_555, 999_999); from != 555_555 || end != 560_000 {
			b.Fatal(from, end)
		}
	}
}
