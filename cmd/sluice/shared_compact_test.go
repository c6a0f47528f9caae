package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSharedDevCompaction: a real `sluice dev` process on a shared
// directory, its compactor on (shared.compact.interval.ms=300,
// shared.compact.chunks=4) while franz-go produces many small batches
// (each its own object) to a shared topic. The broker is killed with
// SIGKILL in the middle of that, restarted, and produced to again. Then
// the compactor and garbage collection (grace 3 s) shrink the shared
// directory to a few merged objects, and the broker restarted once more,
// with an empty chunk cache, serves every acknowledged record at the
// offset it was acknowledged at, and nothing else.
func TestSharedDevCompaction(t *testing.T) {
	d := startSharedDev(t, "shared.compact.interval.ms=300", "shared.compact.chunks=4", "shared.gc.grace.ms=3000")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(d.kafka))
	if err != nil {
		t.Fatal(err)
	}
	mode := "shared"
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 2, 1, map[string]*string{"replication.mode": &mode}, "cmp"); err != nil {
		t.Fatal(err)
	}
	adm.Close()

	objects := func() (uploads, merged int) {
		m, _ := filepath.Glob(filepath.Join(d.shared, "data", "*", "*", "*"))
		for _, p := range m {
			if strings.HasSuffix(filepath.Dir(p), "-c") {
				merged++
			} else {
				uploads++
			}
		}
		return uploads, merged
	}
	acked := map[int32]map[int64]string{0: {}, 1: {}}
	// rounds produces n rounds of a few records to both partitions, one
	// ProduceSync each, so each round is an object of its own; a failed
	// round (the broker killed) is left out of acked. Cancelling pctx
	// fails what is in flight.
	rounds := func(pctx context.Context, tag string, n int) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.DefaultProduceTopic("cmp"),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(5*time.Second))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		for i := 0; i < n; i++ {
			if pctx.Err() != nil {
				return
			}
			var recs []*kgo.Record
			for j := 0; j < 1+i%4; j++ {
				recs = append(recs, &kgo.Record{Partition: int32(j % 2), Value: []byte(fmt.Sprintf("%s-%d-%d", tag, i, j))})
			}
			for _, r := range cl.ProduceSync(pctx, recs...) {
				if r.Err == nil {
					acked[r.Record.Partition][r.Record.Offset] = string(r.Record.Value)
				}
			}
		}
	}

	// Produce, and kill the broker with SIGKILL while it produces and
	// compacts.
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rounds(pctx, "a", 1000) }()
	time.Sleep(4 * time.Second)
	d.kill9()
	stop()
	up, mg := objects()
	t.Logf("killed; objects: %d uploads, %d merged", up, mg)
	// The round in flight is retried by the idempotent producer once the
	// broker is back.
	d.start(t)
	<-done
	if len(acked[0]) < 20 {
		t.Fatalf("only %d records acknowledged before the kill", len(acked[0]))
	}
	rounds(ctx, "b", 120)
	up, mg = objects()
	peak := up + mg
	t.Logf("after producing again: %d uploads, %d merged", up, mg)

	// The compactor merges and garbage collection deletes the old
	// objects (and any merged object the kill left unswapped).
	deadline := time.Now().Add(60 * time.Second)
	for {
		up, mg = objects()
		if mg > 0 && up+mg <= 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("objects did not shrink: %d uploads, %d merged (peak %d)", up, mg, peak)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("objects: %d at the peak, %d uploads and %d merged after compaction and collection", peak, up, mg)

	// A restart empties the chunk cache: everything is read back from
	// the merged objects.
	d.kill9()
	d.start(t)
	got := consumeAll(t, ctx, d.kafka, "cmp", 2)
	for p, m := range acked {
		if len(got[p]) < len(m) {
			t.Fatalf("partition %d: %d records read, %d acknowledged", p, len(got[p]), len(m))
		}
		for off, v := range m {
			if got[p][off] != v {
				t.Fatalf("partition %d offset %d: read %q, acknowledged %q", p, off, got[p][off], v)
			}
		}
		t.Logf("partition %d: %d records read, %d acknowledged (the rest were in flight at the kill)", p, len(got[p]), len(m))
	}
}
