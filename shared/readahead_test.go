package shared

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/partition"
)

// TestSharedReadahead: a reader replaying history in small reads finds the
// chunks after the one it read in its cache, read ahead in the background
// (shared.readahead.chunks), and no chunk is read twice; with read-ahead
// off nothing is read beyond what was asked; the records are the same.
func TestSharedReadahead(t *testing.T) {
	e := newEnv(t)
	w := e.host(1, time.Millisecond)
	p := e.open(w, 0)
	const n = 8
	var want []string
	for i := 0; i < n; i++ {
		// Each batch waited for: one object, one chunk each.
		tag := fmt.Sprintf("c%d", i)
		pr, err := p.Propose(batch(2, tag, -1, 0, 0), partition.AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pr.Wait(e.ctx()); err != nil {
			t.Fatal(err)
		}
		want = append(want, tag, tag)
	}
	for _, ahead := range []int{0, 2} {
		r := e.host(3, time.Millisecond, func(c *Config) { c.Readahead = ahead })
		rp := e.open(r, 0)
		res, err := rp.Read(0, 1) // the first batch only
		if err != nil {
			t.Fatal(err)
		}
		rp.mu.Lock()
		chunks := append(rp.chunks[:0:0], rp.chunks...)
		rp.mu.Unlock()
		if len(chunks) < 3 {
			t.Fatalf("reader knows %d chunks", len(chunks))
		}
		cached := func(i int) bool {
			_, ok := r.cache.get(chunks[i].Key, chunks[i].Pos)
			return ok
		}
		deadline := time.Now().Add(10 * time.Second)
		for ahead > 0 && !(cached(1) && cached(2)) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := cached(1) && cached(2); got != (ahead > 0) {
			t.Fatalf("readahead %d: chunks 1 and 2 cached after reading chunk 0: %v", ahead, got)
		}
		if ahead > 0 && cached(3) {
			t.Fatalf("readahead %d: chunk 3 read ahead too", ahead)
		}
		if res.NextOffset != 2 {
			t.Fatalf("first read ended at %d", res.NextOffset)
		}
		if got := values(t, rp); !equal(got, want) {
			t.Fatalf("readahead %d: %v, want %v", ahead, got, want)
		}
		r.Close() // waits for read-aheads in flight
		st := r.Stats()
		if ahead == 0 && st.Readaheads != 0 {
			t.Fatalf("read-ahead off: %d chunks read ahead", st.Readaheads)
		}
		if ahead > 0 && st.Readaheads < 2 {
			t.Fatalf("read-ahead %d: %d chunks read ahead", ahead, st.Readaheads)
		}
		if st.Gets != int64(len(chunks)) {
			t.Fatalf("read-ahead %d: %d GETs for %d chunks: a chunk read twice", ahead, st.Gets, len(chunks))
		}
		t.Logf("read-ahead %d: %d GETs for %d chunks, %d read ahead", ahead, st.Gets, len(chunks), st.Readaheads)
	}
}

// TestSharedKnownChunksBound: a reader walking a history longer than
// maxKnownChunks keeps at most that many chunk entries, and reads every
// record in order, forward and again from the start (chunks it forgot
// looked up again).
func TestSharedKnownChunksBound(t *testing.T) {
	old := maxKnownChunks
	maxKnownChunks = 8
	defer func() { maxKnownChunks = old }()
	e := newEnv(t)
	p := e.open(e.host(1, time.Millisecond), 0)
	var want []string
	for i := 0; i < 3*lookupChunks/2; i++ {
		tag := fmt.Sprintf("k%d", i)
		e.produceObject(1, tag, p)
		want = append(want, tag)
	}
	r := e.open(e.host(2, time.Millisecond), 0)
	for round := 0; round < 2; round++ {
		if got := values(t, r); !equal(got, want) {
			t.Fatalf("round %d: %d records, want %d", round, len(got), len(want))
		}
		r.mu.Lock()
		known := len(r.chunks)
		r.mu.Unlock()
		if known > maxKnownChunks {
			t.Fatalf("round %d: the reader keeps %d chunk entries, bound %d", round, known, maxKnownChunks)
		}
	}
}
