package compat

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzGoProduceConsume100k creates a 4-partition topic with kadm,
// produces 100,000 unique records with kgo's DEFAULT producer (idempotent,
// acks=all), then consumes the topic from the start and checks it record by
// record: every acknowledged record exactly once, at the offset it was
// acknowledged with, in per-partition order, with exact key, value and headers.
func TestFranzGoProduceConsume100k(t *testing.T) {
	t.Parallel()
	const (
		topic      = "franz-100k"
		partitions = 4
		n          = 100_000
	)
	b := startBroker(t)
	ctx := context.Background()
	adm := newAdmin(t, b.KafkaAddr)

	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	createTopic(cctx, t, adm, topic, partitions, nil)
	cancel()

	type ack struct {
		partition int32
		offset    int64
		err       error
	}
	rec := func(i int) *kgo.Record {
		return &kgo.Record{
			Topic: topic,
			Key:   fmt.Appendf(nil, "key-%06d", i),
			Value: fmt.Appendf(nil, "value-%06d-%x", i, uint32(i)*2654435761),
			Headers: []kgo.RecordHeader{
				{Key: "idx", Value: fmt.Appendf(nil, "%d", i)},
				{Key: "src", Value: []byte("franz-go")},
			},
		}
	}

	// Produce. The client gets no producer options at all: the defaults are
	// what is under test.
	producer := newClient(t, b.KafkaAddr)
	acks := make([]ack, n)
	var wg sync.WaitGroup
	var failed atomic.Int64
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer pcancel()
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		producer.Produce(pctx, rec(i), func(r *kgo.Record, err error) {
			defer wg.Done()
			acks[i] = ack{r.Partition, r.Offset, err}
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := producer.Flush(pctx); err != nil {
		t.Fatalf("flush: %v (after %v)", err, time.Since(start))
	}
	wg.Wait()
	t.Logf("produced %d records in %v", n, time.Since(start).Round(time.Millisecond))
	if f := failed.Load(); f > 0 {
		for i, a := range acks {
			if a.err != nil {
				t.Fatalf("%d of %d produces failed; first: record %d: %v", f, n, i, a.err)
			}
		}
	}

	// Per partition, acknowledged offsets must grow with the send order.
	byOffset := map[int32]map[int64]int{}
	last := map[int32]int64{}
	for i, a := range acks {
		if a.partition < 0 || a.partition >= partitions {
			t.Fatalf("record %d acknowledged on partition %d of a %d-partition topic", i, a.partition, partitions)
		}
		if l, ok := last[a.partition]; ok && a.offset <= l {
			t.Fatalf("record %d acknowledged at %d/%d, not after the previous record's offset %d", i, a.partition, a.offset, l)
		}
		last[a.partition] = a.offset
		if byOffset[a.partition] == nil {
			byOffset[a.partition] = map[int64]int{}
		}
		byOffset[a.partition][a.offset] = i
	}

	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	ends := endOffsets(lctx, t, adm, topic)
	lcancel()
	if len(ends) != partitions {
		t.Fatalf("ListOffsets shows %d partitions, want %d", len(ends), partitions)
	}
	for p := int32(0); p < partitions; p++ {
		if ends[p] != int64(len(byOffset[p])) {
			t.Errorf("partition %d: high watermark %d, but %d records were acknowledged there (fresh topic, one idempotent producer)", p, ends[p], len(byOffset[p]))
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Consume from the start and compare record by record.
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Minute)
	defer ccancel()
	start = time.Now()
	got := consumeAll(cctx, t, b.KafkaAddr, topic, ends)
	t.Logf("consumed in %v", time.Since(start).Round(time.Millisecond))
	seen := make([]bool, n)
	errs := 0
	fail := func(format string, args ...any) {
		errs++
		if errs <= 20 {
			t.Errorf(format, args...)
		}
	}
	for p := int32(0); p < partitions; p++ {
		rs := got[p]
		if int64(len(rs)) != ends[p] {
			fail("partition %d: consumed %d records, want %d", p, len(rs), ends[p])
		}
		for j, r := range rs {
			if r.Offset != int64(j) {
				fail("partition %d: record #%d has offset %d, want %d (offsets of a fresh topic are dense)", p, j, r.Offset, j)
			}
			i, ok := byOffset[p][r.Offset]
			if !ok {
				fail("partition %d offset %d: no record was acknowledged there (key %q)", p, r.Offset, r.Key)
				continue
			}
			if seen[i] {
				fail("record %d consumed twice (partition %d offset %d)", i, p, r.Offset)
			}
			seen[i] = true
			want := rec(i)
			if string(r.Key) != string(want.Key) || string(r.Value) != string(want.Value) {
				fail("partition %d offset %d: key/value %q/%q, want %q/%q", p, r.Offset, r.Key, r.Value, want.Key, want.Value)
			}
			if !sameHeaders(r.Headers, want.Headers) {
				fail("partition %d offset %d: headers %s, want %s", p, r.Offset, fmtHeaders(r.Headers), fmtHeaders(want.Headers))
			}
		}
	}
	missing := 0
	for i := range seen {
		if !seen[i] {
			missing++
		}
	}
	if missing > 0 {
		fail("%d acknowledged records were not consumed", missing)
	}
	if errs > 20 {
		t.Errorf("... %d mismatches in all", errs)
	}
}
