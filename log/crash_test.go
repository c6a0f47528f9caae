package log

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/protocol"
)

// writeCrashLog appends n batches across several segments, "crashes" and
// returns the batches as stored and the config.
func writeCrashLog(t *testing.T, dir string, n int) ([][]byte, Config) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 100
	cfg.SegmentBytes = int64(4 * len(mkBatch(spec{n: 3, valueSize: 64})))
	l := openT(t, dir, cfg)
	var out [][]byte
	for i := 0; i < n; i++ {
		b := mkBatch(spec{n: 3, valueSize: 64, ts: int64(1000 + i), idem: true, pid: 1, seq: int32(3 * i), leaderEpoch: 1})
		mustAppend(t, l, b)
		out = append(out, b)
	}
	crash(t, l)
	return out, cfg
}

func lastSegment(t *testing.T, dir string) string {
	logs := segFiles(t, dir, logSuffix)
	return logs[len(logs)-1]
}

// checkRecovered reopens dir and checks that exactly want[:keep] survived,
// the log end offset is right, and appends continue after it, also with the
// producer's next sequence.
func checkRecovered(t *testing.T, dir string, cfg Config, want [][]byte, keep int) {
	t.Helper()
	l := openT(t, dir, cfg)
	got := readAll(t, l)
	if len(got) != keep {
		t.Fatalf("recovered %d batches, want %d", len(got), keep)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs after recovery", i)
		}
	}
	leo := int64(3 * keep)
	if l.LogEndOffset() != leo {
		t.Fatalf("leo %d, want %d", l.LogEndOffset(), leo)
	}
	r, err := l.Append(mkBatch(spec{n: 3, idem: true, pid: 1, seq: int32(3 * keep)}))
	if err != nil || r.BaseOffset != leo {
		t.Fatalf("append after recovery: %+v %v", r, err)
	}
	// An index rebuilt by recovery must serve reads at every offset.
	for off := int64(0); off < leo; off++ {
		res, err := l.Read(off, 1, 1<<62)
		if err != nil || baseOf(res.Data) != off/3*3 {
			t.Fatalf("read %d after recovery: %v", off, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// And a second open (clean this time) agrees.
	l = openT(t, dir, cfg)
	defer l.Close()
	if got := readAll(t, l); len(got) != keep+1 {
		t.Fatalf("second open: %d batches", len(got))
	}
}

func TestCrashTornTail(t *testing.T) {
	for _, cut := range []int{1, 30, 61, 100} {
		dir := t.TempDir()
		want, cfg := writeCrashLog(t, dir, 10) // segments hold 4: 0-3, 4-7, 8-9
		seg := lastSegment(t, dir)
		st, _ := os.Stat(seg)
		if err := os.Truncate(seg, st.Size()-int64(cut)); err != nil {
			t.Fatal(err)
		}
		checkRecovered(t, dir, cfg, want, 9)
	}
}

func TestCrashTornTailOnly(t *testing.T) {
	// A tail that is only a piece of a header.
	dir := t.TempDir()
	want, cfg := writeCrashLog(t, dir, 9) // last segment holds batch 8 only
	seg := lastSegment(t, dir)
	st, _ := os.Stat(seg)
	os.Truncate(seg, st.Size()-int64(len(want[8]))+20)
	checkRecovered(t, dir, cfg, want, 8)
}

func TestCrashFlippedByte(t *testing.T) {
	for _, where := range []string{"records", "header attributes", "crc"} {
		t.Run(where, func(t *testing.T) {
			dir := t.TempDir()
			want, cfg := writeCrashLog(t, dir, 10)
			seg := lastSegment(t, dir)
			data, _ := os.ReadFile(seg)
			last := int64(len(data)) - int64(len(want[9]))
			var at int64
			switch where {
			case "records":
				at = last + 80
			case "header attributes":
				at = last + protocol.BatchAttributesAt + 1
			case "crc":
				at = last + protocol.BatchCRCAt
			}
			data[at] ^= 0x40
			if err := os.WriteFile(seg, data, 0o644); err != nil {
				t.Fatal(err)
			}
			checkRecovered(t, dir, cfg, want, 9)
		})
	}
}

func TestCrashBadBatchInMiddleOfLastSegment(t *testing.T) {
	dir := t.TempDir()
	want, cfg := writeCrashLog(t, dir, 11) // last segment holds 8, 9, 10
	seg := lastSegment(t, dir)
	data, _ := os.ReadFile(seg)
	data[len(want[8])+70] ^= 1 // inside batch 9
	os.WriteFile(seg, data, 0o644)
	checkRecovered(t, dir, cfg, want, 9)
}

func TestCrashIndexFiles(t *testing.T) {
	damage := map[string]func(t *testing.T, path string){
		"missing": func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		},
		"garbage": func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte{0xff, 0x13, 0x00}, 40), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"plausible but wrong": func(t *testing.T, path string) {
			// Whole entries that point at no batch start.
			b := make([]byte, 24)
			for i := range b {
				b[i] = byte(i)
			}
			os.WriteFile(path, b, 0o644)
		},
		"truncated": func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			if st.Size() > 0 {
				os.Truncate(path, st.Size()-3)
			}
		},
	}
	for name, fn := range damage {
		for _, which := range []string{indexSuffix, timeIndexSuffix} {
			for _, segNo := range []int{0, 2} { // an old segment and the last
				t.Run(name+which, func(t *testing.T) {
					dir := t.TempDir()
					want, cfg := writeCrashLog(t, dir, 10)
					logs := segFiles(t, dir, logSuffix)
					path := logs[segNo][:len(logs[segNo])-len(logSuffix)] + which
					fn(t, path)
					checkRecovered(t, dir, cfg, want, 10)
					// The index file was rewritten from the segment.
					if _, err := os.Stat(path); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

func TestCrashTimeIndexStillAnswers(t *testing.T) {
	dir := t.TempDir()
	_, cfg := writeCrashLog(t, dir, 10)
	for _, p := range segFiles(t, dir, timeIndexSuffix) {
		os.WriteFile(p, []byte("nonsense"), 0o644)
	}
	l := openT(t, dir, cfg)
	defer l.Close()
	for i := int64(0); i < 10; i++ {
		off, ts, found, err := l.OffsetForTimestamp(1000 + i)
		if err != nil || !found || off != 3*i || ts != 1000+i {
			t.Fatalf("ts %d: %d %d %v %v", 1000+i, off, ts, found, err)
		}
	}
}

func TestCrashEmptyAndMissingSegments(t *testing.T) {
	dir := t.TempDir()
	want, cfg := writeCrashLog(t, dir, 8) // segments 0 (0-3), 12 (4-7)
	// A crash right after a roll can leave an empty last segment.
	empty := filepath.Join(dir, segmentName(24, logSuffix))
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	checkRecovered(t, dir, cfg, want, 8)
}

// TestCrashMissingMiddleSegment: a segment lost from the middle of a log
// that is never compacted leaves offsets no batch holds. Recovery keeps
// what precedes the gap and deletes the rest, as for damage in an older
// segment, instead of serving the next segment's batches for the missing
// offsets. In a compacted log the cleaner deletes segments it emptied, so
// there a gap is accepted.
func TestCrashMissingMiddleSegment(t *testing.T) {
	dir := t.TempDir()
	want, cfg := writeCrashLog(t, dir, 10) // segments 0 (0-3), 12 (4-7), 24 (8-9)
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := os.Remove(filepath.Join(dir, segmentName(12, suf))); err != nil {
			t.Fatal(err)
		}
	}
	checkRecovered(t, dir, cfg, want, 4)
	if _, err := os.Stat(filepath.Join(dir, segmentName(24, logSuffix))); !os.IsNotExist(err) {
		t.Fatalf("the segment after the gap is still there: %v", err)
	}

	dir = t.TempDir()
	_, cfg = writeCrashLog(t, dir, 10)
	cfg.Compact = true
	if err := os.Remove(filepath.Join(dir, segmentName(12, logSuffix))); err != nil {
		t.Fatal(err)
	}
	l := openT(t, dir, cfg)
	defer l.Close()
	if l.LogEndOffset() != 30 {
		t.Fatalf("compacted log end %d after a gap, want 30", l.LogEndOffset())
	}
}

func TestCrashDamageInOlderSegment(t *testing.T) {
	// Segments 0 (batches 0-3), 12 (4-7), 24 (8-9). A torn batch 5 in the
	// middle segment cannot come from a crash (rolled segments are synced),
	// but if the disk returns it, recovery keeps what precedes it and, like
	// Kafka, deletes every later segment rather than leave a gap.
	dir := t.TempDir()
	want, cfg := writeCrashLog(t, dir, 10)
	mid := segFiles(t, dir, logSuffix)[1]
	if err := os.Truncate(mid, int64(len(want[4])+len(want[5])/2)); err != nil {
		t.Fatal(err)
	}
	checkRecovered(t, dir, cfg, want, 5)
	if n := len(segFiles(t, dir, logSuffix)); n != 2 {
		t.Fatalf("%d segments left", n)
	}
}

func TestCrashOverlappingSegmentDropped(t *testing.T) {
	dir := t.TempDir()
	want, cfg := writeCrashLog(t, dir, 6) // segments 0 (batches 0-3), 12 (4-5)
	// A segment named inside the first one's range can only be debris.
	data, _ := os.ReadFile(segFiles(t, dir, logSuffix)[1])
	os.Remove(segFiles(t, dir, logSuffix)[1])
	os.Remove(filepath.Join(dir, segmentName(12, indexSuffix)))
	os.Remove(filepath.Join(dir, segmentName(12, timeIndexSuffix)))
	if err := os.WriteFile(filepath.Join(dir, segmentName(6, logSuffix)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	checkRecovered(t, dir, cfg, want, 4)
}

// TestCrashMidClean kills a cleaning pass at each step of a segment swap
// (a .cleaned file written, renamed to .swap, renamed over the .log with
// the index files not rebuilt yet, every segment swapped but the
// checkpoint not written), and also at the second segment of a pass, then
// reopens the files as a restarted process would. Nothing may be lost or
// duplicated: every record read back is an original record at its
// original offset, in offset order, the latest record of every key is
// there, and a later pass cleans to exactly the survivors.
func TestCrashMidClean(t *testing.T) {
	for _, tc := range []struct {
		stage string
		nth   int  // crash at the nth time the stage is reached
		merge bool // in a second pass, which merges the small cleaned segments
	}{
		{"cleaned", 1, false}, {"swap", 1, false}, {"renamed", 1, false}, {"cleaned", 2, false}, {"renamed", 3, false}, {"checkpoint", 1, false},
		{"cleaned", 1, true}, {"swap", 1, true}, {"merged", 1, true}, {"renamed", 1, true}, {"checkpoint", 1, true},
	} {
		name := fmt.Sprintf("%s-%d", tc.stage, tc.nth)
		if tc.merge {
			name += "-merging"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := compactConfig()
			cfg.SegmentBytes = 600
			l := openT(t, dir, cfg)
			var orig []got
			for round := 0; round < 6; round++ {
				for k := 0; k < 8; k += 2 {
					s := keyedSpec{recs: []kv{rec(fmt.Sprint("k", k), fmt.Sprint("r", round)), rec(fmt.Sprint("k", k+1), fmt.Sprint("r", round))}}
					if round == 5 && k == 0 {
						s.recs[0] = tomb("k0")
					}
					mustAppend(t, l, mkKeyed(t, s))
				}
			}
			roll(t, l)
			segsBefore := 0
			if tc.merge {
				// A first pass leaves small segments; one more round
				// makes the log dirty again.
				cleanT(t, l, time.Now(), 1<<20, false)
				for k := 0; k < 8; k += 2 {
					mustAppend(t, l, mkKeyed(t, keyedSpec{recs: []kv{rec(fmt.Sprint("k", k), "r6"), rec(fmt.Sprint("k", k+1), "r6")}}))
				}
				roll(t, l)
				segsBefore = len(segFiles(t, dir, logSuffix))
			}
			orig, _ = readRecords(t, l)
			leo := l.LogEndOffset()
			if n := len(segFiles(t, dir, logSuffix)); n < 4 {
				t.Fatalf("only %d segments", n)
			}
			seen := 0
			cleanCrashAt = func(stage string) bool {
				if stage == tc.stage {
					seen++
					return seen == tc.nth
				}
				return false
			}
			defer func() { cleanCrashAt = func(string) bool { return false } }()
			_, _, err := l.clean(cleanOptions{now: time.Now(), limit: math.MaxInt64, m: newOffsetMap(1 << 20)})
			if !errors.Is(err, errCrashed) {
				t.Fatalf("pass ended with %v, not at the crash", err)
			}
			cleanCrashAt = func(string) bool { return false }
			crash(t, l)

			l = openT(t, dir, cfg)
			defer l.Close()
			if l.LogEndOffset() != leo {
				t.Fatalf("log end %d after the crash, want %d", l.LogEndOffset(), leo)
			}
			byOffset := map[int64]got{}
			latest := map[string]got{}
			for _, r := range orig {
				byOffset[r.off] = r
				latest[r.key] = r
			}
			after, _ := readRecords(t, l)
			prev := int64(-1)
			have := map[int64]bool{}
			for _, r := range after {
				o, ok := byOffset[r.off]
				if !ok || o.String() != r.String() || r.off <= prev {
					t.Fatalf("after the crash: record %s is not the original at its offset (or out of order)", r)
				}
				prev = r.off
				have[r.off] = true
			}
			for k, r := range latest {
				if !have[r.off] {
					t.Fatalf("after the crash: latest record of %s (%s) lost", k, r)
				}
			}
			for _, f := range append(segFiles(t, dir, cleanedSuffix), segFiles(t, dir, swapSuffix)...) {
				t.Fatalf("file %s left after Open", f)
			}
			// A full pass now reaches exactly the survivors.
			cleanT(t, l, time.Now(), 1<<20, false)
			final, _ := readRecords(t, l)
			var want []string
			for _, r := range orig {
				if latest[r.key].off == r.off {
					want = append(want, r.String())
				}
			}
			if g := recordsString(final); g != strings.Join(want, " ") {
				t.Fatalf("after cleaning again:\n got %s\nwant %s", g, strings.Join(want, " "))
			}
			if n := len(segFiles(t, dir, logSuffix)); tc.merge && n >= segsBefore {
				t.Fatalf("%d segments after the second pass, %d before: none merged", n, segsBefore)
			}
		})
	}
}
