package shared

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/objstore"
	"github.com/sluice-broker/sluice/partition"
)

// produceObject proposes one batch of n records to each of ps and waits
// for them, so they share one object; it returns the chunks committed.
func (e *env) produceObject(n int, tag string, ps ...*Partition) []partition.ProduceResult {
	e.t.Helper()
	var props []partition.Proposal
	for _, p := range ps {
		pr, err := p.Propose(batch(n, tag, -1, 0, 0), partition.AcksAll)
		if err != nil {
			e.t.Fatal(err)
		}
		props = append(props, pr)
	}
	var out []partition.ProduceResult
	for _, pr := range props {
		res, err := pr.Wait(e.ctx())
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, res)
	}
	return out
}

func (e *env) chunks(idx int32) metastore.SharedPartition {
	e.t.Helper()
	sp, err := e.cat.SharedChunks(e.ctx(), e.topic.ID, idx, 0, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return sp
}

func (e *env) exists(key string) bool {
	e.t.Helper()
	_, err := e.store.Stat(e.ctx(), key)
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		e.t.Fatal(err)
	}
	return err == nil
}

// TestSharedRetention: retention.ms (by the chunks' largest timestamps)
// and retention.bytes move the start offset of a shared partition past
// its leading chunks, on its writer only; an object is deleted once none
// of its chunks, of any partition, is live; reads below the start are
// out of range, on the writer and on a reader; the reader's start, size
// and earliest offset follow. DeleteRecords moves the start to any offset
// up to the high watermark; a deposed writer's move is fenced.
func TestSharedRetention(t *testing.T) {
	e := newEnv(t)
	h := e.host(1, 20*time.Millisecond)
	p0, p1 := e.open(h, 0), e.open(h, 1)
	e.produceObject(3, "a", p0, p1) // object A: both partitions
	e.produceObject(3, "b", p0)     // object B
	mid := time.Now()
	time.Sleep(30 * time.Millisecond)
	c := e.produceObject(3, "c", p0)[0] // object C
	sp := e.chunks(0)
	if len(sp.Chunks) != 3 || sp.EndOffset != 9 {
		t.Fatalf("partition 0: %+v", sp)
	}
	keyA, keyB, keyC := sp.Chunks[0].Key, sp.Chunks[1].Key, sp.Chunks[2].Key
	if keyA == keyB || keyB == keyC || e.chunks(1).Chunks[0].Key != keyA {
		t.Fatalf("objects: %+v, %+v", sp, e.chunks(1))
	}

	reader := e.host(3, 20*time.Millisecond)
	r0 := e.open(reader, 0)
	if got := values(t, r0); len(got) != 9 {
		t.Fatalf("reader before retention: %v", got)
	}
	cfg := partition.DefaultLogConfig()
	cfg.RetentionMs = time.Hour
	now := mid.Add(time.Hour + 10*time.Millisecond) // A and B past it, C not
	if n, err := reader.ApplyRetention(r0.key, cfg, now); err != nil || n != 0 {
		t.Fatalf("a reader applied retention: %d %v", n, err)
	}
	noDelete := cfg
	noDelete.Delete = false
	if n, err := h.ApplyRetention(p0.key, noDelete, now); err != nil || n != 0 {
		t.Fatalf("cleanup.policy without delete applied retention: %d %v", n, err)
	}
	if n, err := h.ApplyRetention(p0.key, cfg, mid); err != nil || n != 0 {
		t.Fatalf("nothing is past retention yet: %d %v", n, err)
	}
	if n, err := h.ApplyRetention(p0.key, cfg, now); err != nil || n != 2 {
		t.Fatalf("retention.ms: %d chunks, %v; want 2", n, err)
	}
	if s := p0.LogStartOffset(); s != c.BaseOffset {
		t.Fatalf("writer's start %d, want %d", s, c.BaseOffset)
	}
	if sp := e.chunks(0); sp.StartOffset != c.BaseOffset || len(sp.Chunks) != 1 || sp.Chunks[0].Key != keyC {
		t.Fatalf("after retention: %+v", sp)
	}
	if !e.exists(keyA) || e.exists(keyB) || !e.exists(keyC) {
		t.Fatalf("objects after retention.ms: A %v B %v C %v; want A (partition 1 holds it) and C", e.exists(keyA), e.exists(keyB), e.exists(keyC))
	}
	if _, err := p0.Read(0, 1000); !errors.Is(err, partition.ErrOffsetOutOfRange) {
		t.Fatalf("writer read below the start: %v", err)
	}
	time.Sleep(2 * refreshEvery)
	if s := r0.LogStartOffset(); s != c.BaseOffset {
		t.Fatalf("reader's start %d, want %d", s, c.BaseOffset)
	}
	if _, err := r0.Read(2, 1000); !errors.Is(err, partition.ErrOffsetOutOfRange) {
		t.Fatalf("reader read below the start: %v", err)
	}
	res, err := r0.Read(c.BaseOffset, 1000)
	if err != nil || res.LogStartOffset != c.BaseOffset || res.NextOffset != 9 {
		t.Fatalf("reader at the start: %+v %v", res, err)
	}
	if size, _ := r0.Size(); size != sp.Chunks[2].Len {
		t.Fatalf("reader's size %d, want the one live chunk's %d", size, sp.Chunks[2].Len)
	}

	// retention.bytes 0 on partition 1: its only chunk goes, and with it
	// the last reference to object A.
	bytesCfg := partition.DefaultLogConfig()
	bytesCfg.RetentionMs, bytesCfg.RetentionBytes = -1, 0
	if n, err := h.ApplyRetention(p1.key, bytesCfg, time.Now()); err != nil || n != 1 {
		t.Fatalf("retention.bytes: %d %v", n, err)
	}
	if sp := e.chunks(1); sp.StartOffset != 3 || sp.EndOffset != 3 || len(sp.Chunks) != 0 {
		t.Fatalf("partition 1 after retention.bytes: %+v", sp)
	}
	if e.exists(keyA) {
		t.Fatal("object A outlived its last chunk")
	}
	e.produceObject(1, "d", p1)
	r1 := e.open(reader, 1)
	if res, err := r1.Read(3, 1000); err != nil || res.LogStartOffset != 3 || res.NextOffset != 4 || res.LogEndOffset != 4 {
		t.Fatalf("partition 1 after emptying and a new batch: %+v %v", res, err)
	}

	// DeleteRecords: to an offset inside C (C stays: its tail is live),
	// then nothing below the start, then a reader and past the end.
	if low, err := p0.DeleteRecords(e.ctx(), c.BaseOffset+1); err != nil || low != c.BaseOffset+1 {
		t.Fatalf("DeleteRecords: %d %v", low, err)
	}
	if low, err := p0.DeleteRecords(e.ctx(), 1); err != nil || low != c.BaseOffset+1 {
		t.Fatalf("DeleteRecords below the start: %d %v", low, err)
	}
	if !e.exists(keyC) {
		t.Fatal("object C deleted while its chunk holds live records")
	}
	if _, err := r0.DeleteRecords(e.ctx(), 8); !errors.Is(err, partition.ErrNotLeader) {
		t.Fatalf("DeleteRecords on a reader: %v", err)
	}
	if _, err := p0.DeleteRecords(e.ctx(), 10); !errors.Is(err, partition.ErrOffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the end: %v", err)
	}
	if _, err := p0.Read(c.BaseOffset, 1000); !errors.Is(err, partition.ErrOffsetOutOfRange) {
		t.Fatalf("read below the DeleteRecords start: %v", err)
	}

	// Another broker claims partition 0: broker 1's move is fenced.
	h2 := e.host(2, 20*time.Millisecond)
	var inc2 uint64
	for _, b := range e.cat.Brokers() {
		if b.ID == 2 {
			inc2 = b.Incarnation
		}
	}
	top, _ := e.cat.TopicByName("sh")
	if _, err := e.cat.ClaimSharedLeader(e.ctx(), metastore.Fence{Broker: 2, Incarnation: inc2}, "sh", 0, top.Partitions[0].LeaderEpoch); err != nil {
		t.Fatal(err)
	}
	if _, err := p0.DeleteRecords(e.ctx(), 9); !errors.Is(err, partition.ErrNotLeader) {
		t.Fatalf("deposed writer's DeleteRecords: %v", err)
	}
	if p0.IsLeader() {
		t.Fatal("the fenced writer still writes")
	}
	if sp := e.chunks(0); sp.StartOffset != c.BaseOffset+1 {
		t.Fatalf("the fenced move applied: %+v", sp)
	}
	q0 := e.open(h2, 0)
	for deadline := time.Now().Add(10 * time.Second); !q0.IsLeader() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := h2.ApplyRetention(q0.key, bytesCfg, time.Now()); err != nil || n != 1 {
		t.Fatalf("the new writer's retention: %d %v", n, err)
	}
	if e.exists(keyC) {
		t.Fatal("object C outlived its chunk")
	}
}

// TestSharedGarbageCollection: an object a writer uploaded but never
// committed (killed between its PUT and its commit) is deleted once it is
// older than the grace period; committed objects and keys outside data/
// stay, and an object once condemned can never be committed; a deleted
// topic's objects are collected.
func TestSharedGarbageCollection(t *testing.T) {
	e := newEnv(t)
	h := e.host(1, 20*time.Millisecond)
	p0 := e.open(h, 0)
	e.produceObject(2, "x", p0)
	committed := e.chunks(0).Chunks[0].Key
	orphan := "data/1/999999/00000000000000000001" // a killed incarnation's upload
	for _, k := range []string{orphan, "other/probe"} {
		if err := e.store.PutIfAbsent(e.ctx(), k, batch(1, "orphan", -1, 0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := h.CollectGarbage(e.ctx(), time.Now()); err != nil || n != 0 {
		t.Fatalf("within the grace period: %d deleted, %v", n, err)
	}
	if !e.exists(orphan) {
		t.Fatal("the orphan went within the grace period")
	}
	if n, err := h.CollectGarbage(e.ctx(), time.Now().Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("after the grace period: %d deleted, %v", n, err)
	}
	if e.exists(orphan) || !e.exists(committed) || !e.exists("other/probe") {
		t.Fatalf("after collection: orphan %v, committed %v, other %v", e.exists(orphan), e.exists(committed), e.exists("other/probe"))
	}
	if got := values(t, p0); fmt.Sprint(got) != "[x x]" {
		t.Fatalf("partition after collection: %v", got)
	}
	// The orphan's writer coming back to commit it is fenced.
	top, _ := e.cat.TopicByName("sh")
	errs, err := e.cat.CommitSharedChunks(e.ctx(), h.fence(), []metastore.SharedChunk{{TopicID: e.topic.ID, Partition: 0,
		LeaderEpoch: top.Partitions[0].LeaderEpoch, BaseOffset: 2, LastOffset: 2, Key: orphan, Len: 10}})
	if err != nil || !errors.Is(errs[0], metastore.ErrFenced) {
		t.Fatalf("commit of a collected object: %v %v", errs, err)
	}
	// The partition goes on.
	e.produceObject(1, "y", p0)
	if got := values(t, p0); fmt.Sprint(got) != "[x x y]" {
		t.Fatalf("partition after collection: %v", got)
	}
	// A deleted topic's objects are collected too.
	if err := e.cat.DeleteTopic(e.ctx(), e.topic.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := h.CollectGarbage(e.ctx(), time.Now().Add(2*time.Hour)); err != nil || n != 2 {
		t.Fatalf("after deleting the topic: %d deleted, %v; want its 2 objects", n, err)
	}
	var left []string
	if err := e.store.List(e.ctx(), "", func(o objstore.ObjectInfo) error { left = append(left, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[other/probe]" {
		t.Fatalf("objects left: %v", left)
	}
}
