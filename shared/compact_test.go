package shared

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/objstore"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

// objects lists the keys under data/.
func (e *env) objects() []string {
	e.t.Helper()
	var out []string
	if err := e.store.List(e.ctx(), "data/", func(o objstore.ObjectInfo) error { out = append(out, o.Key); return nil }); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) wait(pr partition.Proposal, err error) partition.ProduceResult {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := pr.Wait(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// TestSharedCompaction: many small objects, each holding a chunk of both
// partitions, are merged per partition into one object each; a broker
// with an empty cache reads the same records at the same offsets; a
// reader that knew the old chunks before they were collected looks the
// offsets up again; the old objects are unreferenced and garbage
// collection deletes them after the grace period; a new writer rebuilds
// the idempotent producer table from the merged chunks; a run no longer
// than shared.compact.chunks is left alone, and big chunks break runs.
func TestSharedCompaction(t *testing.T) {
	e := newEnv(t)
	h := e.host(1, 5*time.Millisecond)
	h.cfg.Compact.Chunks = 4
	p0, p1 := e.open(h, 0), e.open(h, 1)
	var last partition.ProduceResult
	for i := range 20 {
		// Each round is its own object, holding both partitions.
		pr0, err := p0.Propose(batch(1+i%3, fmt.Sprintf("a%d", i), 7, 0, int32(seqOf(i))), partition.AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		pr1, err := p1.Propose(batch(2, fmt.Sprintf("b%d", i), -1, 0, 0), partition.AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		last = e.wait(pr0, nil)
		e.wait(pr1, nil)
	}
	want0, want1 := values(t, p0), values(t, p1)
	before := e.objects()
	c0, c1 := e.chunks(0).Chunks, e.chunks(1).Chunks
	if len(c0) < 10 || len(c1) < 10 || len(before) < 10 {
		t.Fatalf("setup: %d and %d chunks in %d objects, want many small ones", len(c0), len(c1), len(before))
	}
	// A reader on broker 2 that knows the old chunks (and then loses its
	// cached bytes, as a bounded cache does).
	h2 := e.host(2, 5*time.Millisecond)
	stale := e.open(h2, 0)
	if got := values(t, stale); !equal(got, want0) {
		t.Fatalf("reader before: %v", got)
	}

	n, err := h.Compact()
	if err != nil || n != 2 {
		t.Fatalf("compact: %d merged, %v; want one per partition", n, err)
	}
	a0, a1 := e.chunks(0), e.chunks(1)
	if len(a0.Chunks) != 1 || len(a1.Chunks) != 1 || a0.EndOffset != c0[len(c0)-1].LastOffset+1 ||
		a0.Chunks[0].BaseOffset != 0 || a0.Chunks[0].LastOffset != a0.EndOffset-1 || !strings.Contains(a0.Chunks[0].Key, "-c/") {
		t.Fatalf("after compaction: %+v / %+v", a0, a1)
	}
	if st := h.Stats(); st.Compactions != 2 || st.CompactedChunks != int64(len(c0)+len(c1)) {
		t.Fatalf("stats %+v", st)
	}
	// Nothing new to merge: a second pass does nothing.
	if n, err := h.Compact(); err != nil || n != 0 {
		t.Fatalf("second pass: %d, %v", n, err)
	}

	// A broker with an empty cache reads the same records at the same
	// offsets (values checks every offset is the one expected).
	fresh := e.host(2, 5*time.Millisecond)
	if got := values(t, e.open(fresh, 0)); !equal(got, want0) {
		t.Fatalf("partition 0 after compaction: %v, want %v", got, want0)
	}
	if got := values(t, e.open(fresh, 1)); !equal(got, want1) {
		t.Fatalf("partition 1 after compaction: %v, want %v", got, want1)
	}

	// The old objects are collected after the grace period; the merged
	// ones stay.
	if got, err := h.CollectGarbage(e.ctx(), time.Now()); err != nil || got != 0 {
		t.Fatalf("within the grace period: %d, %v", got, err)
	}
	if got, err := h.CollectGarbage(e.ctx(), time.Now().Add(2*time.Hour)); err != nil || got != len(before) {
		t.Fatalf("collected %d of %d old objects, %v", got, len(before), err)
	}
	after := e.objects()
	if len(after) != 2 || after[0] != a0.Chunks[0].Key && after[1] != a0.Chunks[0].Key {
		t.Fatalf("objects after collection: %v", after)
	}
	t.Logf("objects: %d before compaction, %d after", len(before), len(after))

	// The reader that knew the old chunks finds the merged one.
	stale.h.cache = newCache(4 << 20)
	if got := values(t, stale); !equal(got, want0) {
		t.Fatalf("stale reader after collection: %v", got)
	}

	// A new writer (broker 1 restarted) rebuilds the producer table from
	// the merged chunk: a retry of the last batch is a duplicate.
	h.Close()
	h1 := e.host(1, 5*time.Millisecond)
	q := e.open(h1, 0)
	redo := e.wait(q.Propose(batch(1+19%3, "a19", 7, 0, int32(seqOf(19))), partition.AcksAll))
	if !redo.Duplicate || redo.BaseOffset != last.BaseOffset || redo.LastOffset != last.LastOffset {
		t.Fatalf("retry after compaction: %+v, original %+v", redo, last)
	}

	// Runs: three small chunks, a big one, five small ones. With
	// shared.compact.chunks 4 only the five merge.
	h1.cfg.Compact.Chunks = 4
	h1.cfg.Compact.ChunkBytes = 200
	for i, n := range []int{1, 1, 1, 40, 1, 1, 1, 1, 1} {
		e.wait(q.Propose(batch(n, fmt.Sprintf("r%d", i), -1, 0, 0), partition.AcksAll))
	}
	wantR := values(t, q)
	before0 := e.chunks(0).Chunks
	if n, err := h1.Compact(); err != nil || n != 1 {
		t.Fatalf("runs: %d merged, %v", n, err)
	}
	got0 := e.chunks(0).Chunks
	if len(got0) != len(before0)-4 || got0[len(got0)-1].BaseOffset != before0[len(before0)-5].BaseOffset {
		t.Fatalf("runs: before %d chunks, after %d: %+v", len(before0), len(got0), got0)
	}
	if got := values(t, e.open(e.host(2, 5*time.Millisecond), 0)); !equal(got, wantR) {
		t.Fatalf("after merging the run: %v", got)
	}
}

// seqOf is the first sequence of round i's batch of 1+i%3 records.
func seqOf(i int) int {
	s := 0
	for j := 0; j < i; j++ {
		s += 1 + j%3
	}
	return s
}

// TestSharedCompactionFailure: whatever happens between a merged object's
// upload and its swap (the broker dies, another broker claims the
// partition, retention moves the start past a merged chunk), the swap is
// not applied or refused as a whole: the partition reads the same, and
// the merged object, never referenced, is collected after the grace
// period while the chunks' objects stay. The next pass merges.
func TestSharedCompactionFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(e *env, h, h2 *Host, p *Partition) error
		want  error
	}{
		{"the broker dies before the swap", func(*env, *Host, *Host, *Partition) error {
			return errors.New("killed")
		}, nil},
		{"another broker claims the partition", func(e *env, h, h2 *Host, p *Partition) error {
			top, _ := e.cat.TopicByName("sh")
			_, err := e.cat.ClaimSharedLeader(e.ctx(), h2.fence(), "sh", 0, top.Partitions[0].LeaderEpoch)
			return err
		}, metastore.ErrFenced},
		{"retention moves the start", func(e *env, h, h2 *Host, p *Partition) error {
			_, err := p.DeleteRecords(e.ctx(), 2)
			return err
		}, metastore.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			h := e.host(1, 5*time.Millisecond)
			h2 := e.host(2, 5*time.Millisecond)
			p := e.open(h, 0)
			for i := range 12 {
				e.produceObject(1, fmt.Sprintf("v%d", i), p)
			}
			want := values(t, p)
			objs := e.objects()
			var merged string
			h.compactFault = func(key string) error {
				merged = key
				err := tc.fault(e, h, h2, p)
				if tc.want == nil && err == nil {
					err = errors.New("injected")
				}
				return err
			}
			if tc.want == nil {
				if _, err := h.Compact(); err == nil {
					t.Fatal("compaction with a fault succeeded")
				}
			} else if _, err := h.Compact(); !errors.Is(err, tc.want) {
				t.Fatalf("compaction: %v, want %v", err, tc.want)
			}
			if merged == "" || !e.exists(merged) {
				t.Fatalf("merged object %q not uploaded", merged)
			}
			sp := e.chunks(0)
			if len(sp.Chunks) < 10 {
				t.Fatalf("chunks after the failed swap: %d", len(sp.Chunks))
			}
			for _, ch := range sp.Chunks {
				if ch.Key == merged {
					t.Fatal("the merged object is referenced")
				}
			}
			reader := e.open(e.host(3, 5*time.Millisecond), 0)
			var got []string
			if tc.name == "retention moves the start" {
				want = want[2:]
				got = values2(t, reader, 2)
			} else {
				got = values(t, reader)
			}
			if !equal(got, want) {
				t.Fatalf("after the failed swap: %v, want %v", got, want)
			}
			n, err := h.CollectGarbage(e.ctx(), time.Now().Add(2*time.Hour))
			if err != nil || e.exists(merged) {
				t.Fatalf("collection: %d, %v; merged object left: %v", n, err, e.exists(merged))
			}
			for _, ch := range sp.Chunks {
				if !e.exists(ch.Key) {
					t.Fatalf("live object %s collected", ch.Key)
				}
			}
			t.Logf("%d objects before, %d collected", len(objs), n)
			if tc.want == nil {
				// The same broker's next pass merges.
				h.compactFault = nil
				if n, err := h.Compact(); err != nil || n != 1 {
					t.Fatalf("next pass: %d, %v", n, err)
				}
				if got := values(t, e.open(e.host(3, 5*time.Millisecond), 0)); !equal(got, want) {
					t.Fatalf("after the next pass: %v", got)
				}
			}
		})
	}
}

// values2 is values from offset from.
func values2(t *testing.T, p *Partition, from int64) []string {
	t.Helper()
	var out []string
	res, err := p.Read(from, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := walkBatches(res.Data, func(hd *protocol.BatchHeader, b []byte) bool {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		recs := rb.Records
		for i := int32(0); i < rb.NumRecords; i++ {
			var r kmsg.Record
			if err := r.ReadFrom(recs); err != nil {
				t.Fatal(err)
			}
			recs = recs[r.Length+int32(varintLen(r.Length)):]
			out = append(out, string(r.Value))
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSharedCompactionReaderView: a reader that knows some of the old
// chunks (a lookup fetches 64) and reads past them after a compaction
// finds the merged chunk, with the chunks it knew forgotten as the
// merged one overlaps them.
func TestSharedCompactionReaderView(t *testing.T) {
	e := newEnv(t)
	h := e.host(1, 2*time.Millisecond)
	p := e.open(h, 0)
	for i := range lookupChunks + 6 {
		e.produceObject(1, fmt.Sprintf("v%d", i), p)
	}
	want := values(t, p)
	reader := e.open(e.host(2, 5*time.Millisecond), 0)
	if _, err := reader.Read(0, 100); err != nil {
		t.Fatal(err)
	}
	reader.mu.Lock()
	known := len(reader.chunks)
	reader.mu.Unlock()
	if known != lookupChunks {
		t.Fatalf("reader knows %d chunks, want %d", known, lookupChunks)
	}
	if n, err := h.Compact(); err != nil || n != 1 {
		t.Fatalf("compact: %d, %v", n, err)
	}
	if got := values(t, reader); !equal(got, want) {
		t.Fatalf("reader after compaction: %v, want %v", got, want)
	}
}
