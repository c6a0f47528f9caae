package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSharedDevRetention: retention, DeleteRecords and garbage collection
// of a shared-mode topic on a real `sluice dev` process with a shared
// directory, driven by franz-go. DeleteRecords through kadm moves a
// partition's low watermark (and past the high watermark is
// OFFSET_OUT_OF_RANGE); an object planted as a writer killed between its
// upload and its commit would leave it is deleted after the grace period
// while the committed objects stay; retention.ms set small through
// IncrementalAlterConfigs moves ListOffsets earliest to the end and
// deletes the objects from the shared directory; a consumer asking for
// offset 0 gets OFFSET_OUT_OF_RANGE, resets to the start and reads what
// is produced next.
func TestSharedDevRetention(t *testing.T) {
	d := startSharedDev(t, "log.retention.check.interval.ms=500", "shared.gc.grace.ms=3000")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.DefaultProduceTopic("ret"), kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	mode := "shared"
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"replication.mode": &mode}, "ret"); err != nil {
		t.Fatal(err)
	}
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i += 100 {
			var recs []*kgo.Record
			for j := i; j < i+100 && j < from+n; j++ {
				recs = append(recs, &kgo.Record{Partition: int32(j % 2), Value: []byte(fmt.Sprintf("r-%05d", j))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	objects := func() []string {
		m, _ := filepath.Glob(filepath.Join(d.shared, "data", "*", "*", "*"))
		return m
	}
	produce(0, 1000)
	committed := objects()
	if len(committed) < 2 {
		t.Fatalf("%d objects after producing", len(committed))
	}
	ends, err := adm.ListEndOffsets(ctx, "ret")
	if err != nil {
		t.Fatal(err)
	}
	end := func(p int32) int64 { o, _ := ends.Lookup("ret", p); return o.Offset }

	// DeleteRecords on partition 1.
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "ret", Partition: 1, At: 100})
	dr, err := adm.DeleteRecords(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("ret", 1); r.Err != nil || r.LowWatermark != 100 {
		t.Fatalf("DeleteRecords to 100: %+v", r)
	}
	starts, err := adm.ListStartOffsets(ctx, "ret")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("ret", 1); o.Offset != 100 {
		t.Fatalf("earliest offset of partition 1 after DeleteRecords: %d", o.Offset)
	}
	if o, _ := starts.Lookup("ret", 0); o.Offset != 0 {
		t.Fatalf("earliest offset of partition 0: %d", o.Offset)
	}
	past := kadm.Offsets{}
	past.Add(kadm.Offset{Topic: "ret", Partition: 1, At: end(1) + 1})
	if dr, err = adm.DeleteRecords(ctx, past); err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup("ret", 1); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the high watermark: %+v", r)
	}

	// An upload whose commit never happened: gone after the grace
	// period; the committed objects stay (DeleteRecords may have deleted
	// objects holding only partition 1's first records).
	committed = objects()
	if len(committed) == 0 {
		t.Fatal("DeleteRecords to 100 deleted every object")
	}
	orphan := filepath.Join(d.shared, "data", "1", "999999", "00000000000000000001")
	if err := os.MkdirAll(filepath.Dir(orphan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("uploaded, never committed"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(orphan); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the uncommitted object is still there 30 s after it was planted (grace period 3 s)")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, o := range committed {
		if _, err := os.Stat(o); err != nil {
			t.Fatalf("committed object %s: %v", o, err)
		}
	}
	// Every record is still there.
	if got := consumeFrom(t, ctx, d.kafka, map[int32]int64{0: 0, 1: 100}, end(0)+end(1)-100); len(got) != int(end(0)+end(1)-100) {
		t.Fatalf("consumed %d records", len(got))
	}

	// retention.ms 1000: every chunk is older than that within seconds.
	ms := "1000"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &ms}}, "ret"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		starts, err := adm.ListStartOffsets(ctx, "ret")
		if err != nil {
			t.Fatal(err)
		}
		s0, _ := starts.Lookup("ret", 0)
		s1, _ := starts.Lookup("ret", 1)
		if s0.Offset == end(0) && s1.Offset == end(1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("earliest offsets %d and %d 60 s after retention.ms=1000, end offsets %d and %d", s0.Offset, s1.Offset, end(0), end(1))
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The writer deletes the objects after the start moved (ListOffsets
	// may answer in between).
	for deadline = time.Now().Add(10 * time.Second); len(objects()) != 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("objects left 10 s after retention moved the start: %v", objects())
		}
	}
	if n := metricValue(t, d.admin, "sluice_shared_deletes_total"); n < float64(len(committed)+1) {
		t.Fatalf("sluice_shared_deletes_total %v, want at least %d", n, len(committed)+1)
	}

	// A consumer from offset 0 is out of range: it resets to the start
	// and reads the records produced next, at the old end offsets.
	checkResetToStart(t, ctx, []string{d.kafka}, "ret", 2, func() { produce(1000, 10) }, 5, end)
}

// consumeFrom reads n records from the given partitions of "ret" and
// offsets, and returns their values.
func consumeFrom(t *testing.T, ctx context.Context, addr string, from map[int32]int64, n int64) []string {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p, o := range from {
		offsets[p] = kgo.NewOffset().At(o)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ret": offsets}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for int64(len(out)) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming after %d of %d records: %v", len(out), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Partition == 1 && len(out) == 0 && r.Offset < 100 {
				t.Fatalf("partition 1 served offset %d below its low watermark", r.Offset)
			}
			out = append(out, string(r.Value))
		})
	}
	return out
}

// TestSharedClusterRetention: the split cluster (3 meta, 3 write brokers,
// 1 read broker) on one shared directory. DeleteRecords through the read
// view is forwarded to the partition's writer and moves the low watermark
// the read broker answers; retention.ms set small moves every partition's
// earliest offset, as the read broker answers it, to its end, each writer
// deleting its own objects; a consumer of the read view from offset 0 is
// reset to the start and reads what is produced next.
func TestSharedClusterRetention(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	shared := t.TempDir()
	c := startTestClusterLayout(t, "shared", 1, clusterLayout{extra: fmt.Sprintf(
		"shared.storage.type: dir\nshared.storage.dir: %s\nshared.upload.linger.ms: 20\nlog.retention.check.interval.ms: 500\nshared.gc.grace.ms: 3000\n", shared)})
	const topic, parts = "ret", 3
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	wadm := kadm.NewClient(wcl)
	if _, err := wadm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, wadm, topic, parts)
	produce := func(from, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Partition: int32(i % parts), Value: []byte(fmt.Sprintf("r-%05d", i))})
		}
		if err := wcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 600)
	rcl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	radm := kadm.NewClient(rcl)
	ends, err := radm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := func(p int32) int64 { o, _ := ends.Lookup(topic, p); return o.Offset }
	if end(0) != 200 || end(1) != 200 || end(2) != 200 {
		t.Fatalf("end offsets through the read view: %v", ends)
	}
	waitStarts := func(what string, want func(p int32) int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			starts, err := radm.ListStartOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			ok := true
			for p := int32(0); p < parts; p++ {
				if o, _ := starts.Lookup(topic, p); o.Err != nil || o.Offset != want(p) {
					ok = false
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: earliest offsets through the read view %v", what, starts)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: 50})
	dr, err := radm.DeleteRecords(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup(topic, 0); r.Err != nil || r.LowWatermark != 50 {
		t.Fatalf("DeleteRecords through the read view: %+v", r)
	}
	waitStarts("after DeleteRecords", func(p int32) int64 {
		if p == 0 {
			return 50
		}
		return 0
	})

	ms := "1000"
	if _, err := wadm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &ms}}, topic); err != nil {
		t.Fatal(err)
	}
	waitStarts("after retention.ms=1000", end)
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, _ := filepath.Glob(filepath.Join(shared, "data", "*", "*", "*"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("objects left after retention: %v", left)
		}
		time.Sleep(250 * time.Millisecond)
	}

	checkResetToStart(t, ctx, c.readAddrs, topic, parts, func() { produce(600, 6) }, 2, end)
}

// checkResetToStart: a consumer of topic's partitions from offset 0, out
// of range once retention moved their start, reads nothing until produce
// writes more; then it reads perPart records of each partition, the first
// at the partition's end offset before (end): it reset to the start.
func checkResetToStart(t *testing.T, ctx context.Context, addrs []string, topic string, parts int32, produce func(), perPart int, end func(int32) int64) {
	t.Helper()
	from := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		from[p] = kgo.NewOffset().At(0)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	if fs := cons.PollFetches(pctx); fs.NumRecords() != 0 {
		t.Fatalf("read %d records from an emptied topic", fs.NumRecords())
	}
	pcancel()
	produce()
	got := map[int32][]int64{}
	for n := 0; n < perPart*int(parts); {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r.Offset)
			n++
		})
	}
	for p := int32(0); p < parts; p++ {
		if len(got[p]) != perPart || got[p][0] != end(p) {
			t.Fatalf("partition %d: read offsets %v after the reset, want %d from %d", p, got[p], perPart, end(p))
		}
	}
}
