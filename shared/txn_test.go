package shared

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

// txnBatch is batch with the transactional attribute set.
func txnBatch(n int, tag string, pid int64, epoch int16, seq int32) []byte {
	raw := batch(n, tag, pid, epoch, seq)
	attrs := binary.BigEndian.Uint16(raw[protocol.BatchAttributesAt:]) | protocol.AttrTransactional
	binary.BigEndian.PutUint16(raw[protocol.BatchAttributesAt:], attrs)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func marker(pid int64, epoch int16, commit bool, coordEpoch int32) []byte {
	return protocol.TxnMarkerBatch(pid, epoch, commit, coordEpoch, time.Now().UnixMilli())
}

// caughtUp waits until reader r's high watermark is hw.
func caughtUp(t *testing.T, r *Partition, hw int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.HighWatermark() != hw {
		if time.Now().After(deadline) {
			t.Fatalf("reader's high watermark %d, want %d", r.HighWatermark(), hw)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSharedTransactions: transactional batches and markers commit like
// other batches; the last stable offset stops at the first offset of the
// oldest open transaction on the writer and on a broker that only reads;
// a read_committed fetch on either is told the aborted transactions of
// its range, also when the ABORT marker is in a later chunk than the
// range; a new writer that claims the partition keeps a transaction
// opened before the claim open, and its abort is reported on both; so
// does the writer restarted (a new incarnation); a marker of an older
// coordinator epoch is refused.
func TestSharedTransactions(t *testing.T) {
	e := newEnv(t)
	h1 := e.host(1, 5*time.Millisecond)
	h2 := e.host(2, 5*time.Millisecond)
	w := e.open(h1, 0)
	r := e.open(h2, 0)
	put := func(p *Partition, b []byte) partition.ProduceResult {
		t.Helper()
		return e.wait(p.Propose(b, partition.AcksAll))
	}
	putMarker := func(p *Partition, b []byte) partition.ProduceResult {
		t.Helper()
		return e.wait(p.ProposeMarker(b, 0, partition.AcksAll))
	}
	check := func(what string, lso int64, aborted map[[2]int64][]partition.AbortedTxn) {
		t.Helper()
		hw := w.HighWatermark()
		caughtUp(t, r, hw)
		for _, p := range []*Partition{w, r} {
			if got := p.LastStableOffset(); got != lso {
				t.Fatalf("%s: broker %d: last stable offset %d, want %d (high watermark %d)", what, p.h.cfg.NodeID, got, lso, hw)
			}
			for rng, want := range aborted {
				if got := p.AbortedTxns(rng[0], rng[1]); !slices.Equal(got, want) {
					t.Fatalf("%s: broker %d: aborted transactions of [%d, %d): %v, want %v", what, p.h.cfg.NodeID, rng[0], rng[1], got, want)
				}
			}
		}
	}

	put(w, batch(3, "plain", -1, 0, 0)) // 0..2
	check("no transaction", 3, nil)
	if res := put(w, txnBatch(2, "t10", 10, 0, 0)); res.BaseOffset != 3 { // 3..4
		t.Fatalf("first transactional batch at %d", res.BaseOffset)
	}
	check("one open", 3, nil)
	put(w, txnBatch(2, "t11", 11, 0, 0)) // 5..6
	if !w.InOpenTxn(10) || !w.InOpenTxn(11) || w.InOpenTxn(12) {
		t.Fatal("writer's open transactions wrong")
	}
	check("two open", 3, nil)
	putMarker(w, marker(10, 0, true, 0)) // 7: commit 10
	check("10 committed", 5, nil)
	putMarker(w, marker(11, 0, false, 0)) // 8: abort 11
	if w.InOpenTxn(10) || w.InOpenTxn(11) {
		t.Fatal("a closed transaction is still open on the writer")
	}
	a11 := partition.AbortedTxn{ProducerID: 11, FirstOffset: 5, LastOffset: 8}
	check("11 aborted", 9, map[[2]int64][]partition.AbortedTxn{
		{0, 9}: {a11},
		{0, 5}: nil,   // the transaction begins at the range's end
		{5, 6}: {a11}, // its marker is two chunks past the range
		{6, 7}: {a11},
		{9, 9}: nil, // the marker is before the range
	})

	// A transaction open when another broker claims the partition stays
	// open there: its new writer reads it from the last chunk entry.
	put(w, txnBatch(1, "t12", 12, 0, 0)) // 9
	check("12 open", 9, nil)
	top, _ := e.cat.TopicByName("sh")
	var inc2 uint64
	for _, b := range e.cat.Brokers() {
		if b.ID == 2 {
			inc2 = b.Incarnation
		}
	}
	if _, err := e.cat.ClaimSharedLeader(e.ctx(), metastore.Fence{Broker: 2, Incarnation: inc2}, "sh", 0, top.Partitions[0].LeaderEpoch); err != nil {
		t.Fatal(err)
	}
	put(r, batch(1, "plain", -1, 0, 0)) // 10, on the new writer
	if !r.IsLeader() || !r.InOpenTxn(12) {
		t.Fatalf("new writer: leader %v, transaction of 12 open %v", r.IsLeader(), r.InOpenTxn(12))
	}
	w, r = r, w // broker 2 writes, broker 1 reads
	check("12 open after the claim", 9, nil)
	putMarker(w, marker(12, 0, false, 0)) // 11: abort 12
	a12 := partition.AbortedTxn{ProducerID: 12, FirstOffset: 9, LastOffset: 11}
	check("12 aborted", 12, map[[2]int64][]partition.AbortedTxn{
		{0, 12}: {a11, a12},
		{9, 10}: {a12},
		{8, 9}:  {a11},
	})

	// A restart of the writer (a new incarnation of broker 2, a new Host
	// with an empty cache) keeps a transaction open across it too.
	put(w, txnBatch(1, "t14", 14, 0, 0)) // 12
	check("14 open", 12, nil)
	w = e.open(e.host(2, 5*time.Millisecond), 0)
	put(w, batch(1, "plain", -1, 0, 0)) // 13, on the restarted writer
	if !w.IsLeader() || !w.InOpenTxn(14) {
		t.Fatalf("restarted writer: leader %v, transaction of 14 open %v", w.IsLeader(), w.InOpenTxn(14))
	}
	check("14 open after the restart", 12, nil)
	putMarker(w, marker(14, 0, true, 0)) // 14: commit 14
	check("14 committed", 15, map[[2]int64][]partition.AbortedTxn{{12, 15}: nil})

	// The coordinator epoch rule of a log (log.ProducerEntry.CheckMarker).
	put(w, txnBatch(1, "t13", 13, 0, 0)) // 12
	putMarker(w, marker(13, 0, true, 5)) // 13
	if _, err := w.ProposeMarker(marker(13, 0, false, 3), 0, partition.AcksAll); !errors.Is(err, partition.ErrCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator epoch: %v", err)
	}
	check("13 committed", 17, map[[2]int64][]partition.AbortedTxn{{0, 17}: {a11, a12}})
}

// TestSharedTransactionsCompacted: the compactor's merged chunk keeps the
// aborted transactions of the chunks it replaces and what was open at the
// end of the last, so the last stable offset and a fetch's aborted
// transactions are the same before and after the swap.
func TestSharedTransactionsCompacted(t *testing.T) {
	e := newEnv(t)
	h1 := e.host(1, 5*time.Millisecond, func(c *Config) {
		c.Compact = CompactConfig{Chunks: 2, ChunkBytes: 1 << 20, ObjectBytes: 8 << 20}
	})
	w := e.open(h1, 0)
	put := func(b []byte) { e.wait(w.Propose(b, partition.AcksAll)) }
	put(txnBatch(1, "a", 20, 0, 0))                        // 0
	put(txnBatch(1, "b", 21, 0, 0))                        // 1
	e.wait(w.ProposeMarker(marker(20, 0, false, 0), 0, 0)) // 2: abort 20
	put(txnBatch(1, "c", 21, 0, 1))                        // 3
	put(txnBatch(1, "d", 22, 0, 0))                        // 4: 21 and 22 open
	want := []partition.AbortedTxn{{ProducerID: 20, FirstOffset: 0, LastOffset: 2}}
	if got := w.AbortedTxns(0, 5); !slices.Equal(got, want) || w.LastStableOffset() != 1 {
		t.Fatalf("before compaction: aborted %v, last stable offset %d", got, w.LastStableOffset())
	}
	if n := len(e.chunks(0).Chunks); n != 5 {
		t.Fatalf("%d chunks before compaction", n)
	}
	if n, err := h1.Compact(); err != nil || n != 1 {
		t.Fatalf("compaction: %d objects, %v", n, err)
	}
	if n := len(e.chunks(0).Chunks); n != 1 {
		t.Fatalf("%d chunks after compaction", n)
	}
	h2 := e.host(2, 5*time.Millisecond)
	r := e.open(h2, 0)
	for _, p := range []*Partition{w, r} {
		p.mu.Lock()
		p.chunks, p.lsoAt = nil, -1
		p.mu.Unlock()
		if got := p.AbortedTxns(0, 5); !slices.Equal(got, want) || p.LastStableOffset() != 1 {
			t.Fatalf("after compaction, broker %d: aborted %v, last stable offset %d", p.h.cfg.NodeID, got, p.LastStableOffset())
		}
	}
}

func TestTxnSummaryEncoding(t *testing.T) {
	for _, s := range []string{"", "o1:2;", ";a3:4:5", "o1:2,7:9;a3:4:5,6:7:8"} {
		d, err := decodeTxns(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := d.encode(); got != s {
			t.Fatalf("%q encoded back as %q", s, got)
		}
	}
	for _, s := range []string{"x", "o1;", "o1:x;", ";b1:2:3", ";a1:2"} {
		if _, err := decodeTxns(s); !errors.Is(err, partition.ErrCorrupt) {
			t.Fatalf("%q: %v", s, err)
		}
	}
}
