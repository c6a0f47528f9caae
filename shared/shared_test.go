package shared

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/objstore"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

// batch encodes an uncompressed v2 batch of n records whose values are
// tag; pid < 0 makes it non-idempotent.
func batch(n int, tag string, pid int64, epoch int16, seq int32) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = []byte(tag)
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1)
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.LastOffsetDelta = int32(n - 1)
	b.FirstTimestamp, b.MaxTimestamp = now, now
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = pid, epoch, seq
	if pid < 0 {
		b.ProducerEpoch, b.FirstSequence = -1, -1
	}
	b.NumRecords = int32(n)
	b.Records = recs
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

type env struct {
	t     *testing.T
	meta  *metastore.Node
	cat   *metastore.Client
	store *objstore.Dir
	topic metastore.Topic
}

// newEnv opens a one-node metastore and a shared directory, registers
// write brokers 1 and 2 and creates topic "sh" with two partitions led
// (as placed) by broker 1.
func newEnv(t *testing.T) *env {
	t.Helper()
	cfg := metastore.Default()
	cfg.ID, cfg.DataDir, cfg.Logger = 1, t.TempDir(), zerolog.New(io.Discard)
	cfg.TickInterval = 10 * time.Millisecond
	n, err := metastore.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	store, err := objstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, meta: n, cat: n.Client(), store: store}
	top, err := e.cat.CreateTopic(e.ctx(), metastore.TopicSpec{Name: "sh", Partitions: 2, ReplicationFactor: -1,
		Assignment: [][]int32{{1, 2}, {1, 2}}, Configs: map[string]string{"replication.mode": "shared"}})
	if err != nil {
		t.Fatal(err)
	}
	e.topic = top
	return e
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// host registers broker id (a new incarnation each call, as a restart)
// and starts a Host for it with a fresh cache.
func (e *env) host(id int32, linger time.Duration, tweak ...func(*Config)) *Host {
	e.t.Helper()
	inc, err := e.cat.RegisterBroker(e.ctx(), metastore.Broker{ID: id, Role: metastore.RoleWrite})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := Config{NodeID: id, Incarnation: func() uint64 { return inc }, Store: e.store, Catalog: e.cat,
		UploadBytes: 1 << 20, Linger: linger, CacheBytes: 4 << 20, Logger: zerolog.New(io.Discard)}
	for _, f := range tweak {
		f(&cfg)
	}
	h := NewHost(cfg)
	e.t.Cleanup(func() { h.Close() })
	return h
}

func (e *env) open(h *Host, idx int32) *Partition {
	e.t.Helper()
	p, err := h.Open("sh", partition.Key{TopicID: e.topic.ID, Index: idx})
	if err != nil {
		e.t.Fatal(err)
	}
	return p.(*Partition)
}

// values reads the whole partition from offset 0 and returns each
// record's value in offset order, checking offsets are dense.
func values(t *testing.T, p *Partition) []string {
	t.Helper()
	var out []string
	off := int64(0)
	hw := p.HighWatermark()
	for off < hw {
		res, err := p.Read(off, 300)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if err := walkBatches(res.Data, func(hd *protocol.BatchHeader, b []byte) bool {
			if hd.BaseOffset != off {
				t.Fatalf("batch at %d, want %d", hd.BaseOffset, off)
			}
			if _, err := protocol.ParseBatch(b); err != nil {
				t.Fatal(err)
			}
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
			off = hd.LastOffset() + 1
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if res.NextOffset != off {
			t.Fatalf("next offset %d, walked to %d", res.NextOffset, off)
		}
	}
	return out
}

func varintLen(v int32) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], int64(v))
}

// TestSharedProduceRead: batches proposed to two partitions are batched
// into few objects, answered once committed with dense offsets, and read
// back whole: by the writer, by another broker that only reads, and by
// the writer restarted with an empty cache. A reader's Watch is signalled
// when the high watermark moves.
func TestSharedProduceRead(t *testing.T) {
	e := newEnv(t)
	h := e.host(1, 20*time.Millisecond)
	p0, p1 := e.open(h, 0), e.open(h, 1)
	const n = 60
	var props []partition.Proposal
	var want [2][]string
	for i := 0; i < n; i++ {
		p := []*Partition{p0, p1}[i%2]
		tag := string(rune('a'+i%26)) + string(rune('0'+i%10))
		recs := 1 + i%3
		pr, err := p.Propose(batch(recs, tag, -1, 0, 0), partition.AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < recs; r++ {
			want[i%2] = append(want[i%2], tag)
		}
		props = append(props, pr)
	}
	next := [2]int64{}
	for i, pr := range props {
		res, err := pr.Wait(e.ctx())
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if res.BaseOffset != next[i%2] {
			t.Fatalf("batch %d at %d, want %d", i, res.BaseOffset, next[i%2])
		}
		next[i%2] = res.LastOffset + 1
	}
	st := h.Stats()
	if st.Puts == 0 || st.Puts >= n/2 || st.Commits != st.Puts {
		t.Fatalf("%d batches took %d puts and %d commits: not batched", n, st.Puts, st.Commits)
	}
	t.Logf("%d batches in %d objects", n, st.Puts)

	reader := e.host(3, 20*time.Millisecond) // not a replica: reads only
	r0 := e.open(reader, 0)
	for i, p := range []*Partition{p0, p1} {
		if got := values(t, p); !equal(got, want[i]) {
			t.Fatalf("writer, partition %d: %v, want %v", i, got, want[i])
		}
	}
	if got := values(t, r0); !equal(got, want[0]) {
		t.Fatalf("reader: %v, want %v", got, want[0])
	}
	if r0.IsLeader() {
		t.Fatal("a broker that is no replica leads")
	}
	if reader.Stats().Gets == 0 {
		t.Fatal("the reader read no chunk from shared storage")
	}

	// A fetch waiting on the reader is woken by a commit on the writer.
	ch := make(chan struct{}, 1)
	stop := r0.Watch(ch)
	defer stop()
	pr, err := p0.Propose(batch(2, "late", -1, 0, 0), partition.AcksLeader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Wait(e.ctx()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("the reader's watch was not signalled")
	}
	want[0] = append(want[0], "late", "late")
	if hw := r0.HighWatermark(); hw != int64(len(want[0])) {
		t.Fatalf("reader's high watermark %d, want %d", hw, len(want[0]))
	}

	// Broker 1 restarted: an empty cache, the whole history served.
	h.Close()
	h2 := e.host(1, 20*time.Millisecond)
	q0 := e.open(h2, 0)
	if got := values(t, q0); !equal(got, want[0]) {
		t.Fatalf("restarted: %v, want %v", got, want[0])
	}
	if _, err := q0.Read(int64(len(want[0]))+1, 100); !errors.Is(err, partition.ErrOffsetOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSharedIdempotence: the log's producer rules on the shared write
// path. A retry of a committed batch is answered with its original
// offsets and not written again; a gap in sequences is
// OUT_OF_ORDER_SEQUENCE; an older producer epoch is fenced. A new writer
// (broker 1 restarted) rebuilds the table from shared storage and
// recognises the retry too.
func TestSharedIdempotence(t *testing.T) {
	e := newEnv(t)
	h := e.host(1, 5*time.Millisecond)
	p := e.open(h, 0)
	wait := func(pr partition.Proposal, err error) partition.ProduceResult {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		res, err := pr.Wait(e.ctx())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := wait(p.Propose(batch(3, "x", 7, 0, 0), partition.AcksAll))
	second := wait(p.Propose(batch(2, "y", 7, 0, 3), partition.AcksAll))
	dup := wait(p.Propose(batch(3, "x", 7, 0, 0), partition.AcksAll))
	if !dup.Duplicate || dup.BaseOffset != first.BaseOffset || dup.LastOffset != first.LastOffset {
		t.Fatalf("retry answered %+v, original %+v", dup, first)
	}
	if _, err := p.Propose(batch(1, "z", 7, 0, 9), partition.AcksAll); !errors.Is(err, partition.ErrOutOfOrderSequence) {
		t.Fatalf("sequence gap: %v", err)
	}
	wait(p.Propose(batch(1, "e1", 7, 1, 0), partition.AcksAll))
	if _, err := p.Propose(batch(1, "old", 7, 0, 5), partition.AcksAll); !errors.Is(err, partition.ErrInvalidProducerEpoch) {
		t.Fatalf("older producer epoch: %v", err)
	}
	if _, err := p.Propose(batch(1, "t", 8, 0, 0)[:40], partition.AcksAll); !errors.Is(err, partition.ErrCorrupt) {
		t.Fatalf("truncated batch: %v", err)
	}

	h.Close()
	h2 := e.host(1, 5*time.Millisecond)
	q := e.open(h2, 0)
	redo := wait(q.Propose(batch(1, "e1", 7, 1, 0), partition.AcksAll))
	if !redo.Duplicate || redo.BaseOffset != second.LastOffset+1 {
		t.Fatalf("retry after a new writer took over: %+v", redo)
	}
	if got := values(t, q); !equal(got, []string{"x", "x", "x", "y", "y", "e1"}) {
		t.Fatalf("partition holds %v", got)
	}
}

// TestSharedFencing: two writers of one partition. Broker 2 claims the
// partition while broker 1 still writes it: broker 1's next object is
// uploaded but its chunk is refused (an older epoch), its producer is
// answered NOT_LEADER_OR_FOLLOWER, and its next Propose is refused at once.
// Broker 2 continues from the committed end. Then broker 2's registration
// lapses: broker 1 takes the partition back by itself, and broker 2's
// next batch is refused (by its own leadership check, or by the fence on
// its stale incarnation at commit, whichever comes first). Nothing acknowledged is
// lost, nothing refused is read.
func TestSharedFencing(t *testing.T) {
	e := newEnv(t)
	h1 := e.host(1, 5*time.Millisecond)
	h2 := e.host(2, 5*time.Millisecond)
	p1 := e.open(h1, 0)
	var acked []string
	produce := func(p *Partition, tag string) error {
		pr, err := p.Propose(batch(1, tag, -1, 0, 0), partition.AcksAll)
		if err != nil {
			return err
		}
		if _, err := pr.Wait(e.ctx()); err != nil {
			return err
		}
		acked = append(acked, tag)
		return nil
	}
	for i := 0; i < 5; i++ {
		if err := produce(p1, "one"); err != nil {
			t.Fatal(err)
		}
	}
	incOf := func(id int32) uint64 {
		for _, b := range e.cat.Brokers() {
			if b.ID == id {
				return b.Incarnation
			}
		}
		t.Fatalf("broker %d not registered", id)
		return 0
	}
	top, _ := e.cat.TopicByName("sh")
	if _, err := e.cat.ClaimSharedLeader(e.ctx(), metastore.Fence{Broker: 2, Incarnation: incOf(2)}, "sh", 0, top.Partitions[0].LeaderEpoch); err != nil {
		t.Fatal(err)
	}
	if err := produce(p1, "lost"); !errors.Is(err, partition.ErrNotLeader) {
		t.Fatalf("deposed writer's batch: %v", err)
	}
	if _, err := p1.Propose(batch(1, "lost", -1, 0, 0), partition.AcksAll); !errors.Is(err, partition.ErrNotLeader) {
		t.Fatalf("deposed writer's next batch: %v", err)
	}
	p2 := e.open(h2, 0)
	if err := produce(p2, "two"); err != nil {
		t.Fatal(err)
	}
	if !p2.IsLeader() || p1.IsLeader() {
		t.Fatalf("leaders: broker 1 %v, broker 2 %v", p1.IsLeader(), p2.IsLeader())
	}

	if err := e.cat.UnregisterBroker(e.ctx(), 2, incOf(2)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !p1.IsLeader() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !p1.IsLeader() {
		t.Fatal("broker 1 did not take the partition back from the unregistered broker 2")
	}
	if err := produce(p2, "lost"); !errors.Is(err, partition.ErrNotLeader) {
		t.Fatalf("unregistered writer's batch: %v", err)
	}
	if err := produce(p1, "three"); err != nil {
		t.Fatal(err)
	}
	if got := values(t, p1); !equal(got, acked) {
		t.Fatalf("partition holds %v, acknowledged %v", got, acked)
	}
}

// TestSharedTimestamps: ListOffsets by timestamp and for the max
// timestamp answer per record in an uncompressed CreateTime batch, as a
// log does: a batch of ten records a second apart, in its second chunk.
func TestSharedTimestamps(t *testing.T) {
	e := newEnv(t)
	h := e.host(1, 5*time.Millisecond)
	p := e.open(h, 0)
	wait := func(b []byte) {
		t.Helper()
		pr, err := p.Propose(b, partition.AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pr.Wait(e.ctx()); err != nil {
			t.Fatal(err)
		}
	}
	wait(batch(3, "early", -1, 0, 0))     // offsets 0-2, timestamps now
	const base = int64(4_000_000_000_000) // after now
	var recs []byte
	for i := 0; i < 10; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta, r.TimestampDelta64 = int32(i), int64(i)*1000
		r.Value = []byte("t")
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1)
		recs = r.AppendTo(recs)
	}
	b := kmsg.NewRecordBatch()
	b.Magic, b.LastOffsetDelta, b.NumRecords = 2, 9, 10
	b.FirstTimestamp, b.MaxTimestamp = base, base+9000
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	b.Records = recs
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	wait(raw) // offsets 3-12
	for _, tc := range []struct {
		ts, off, found int64
	}{{base, 3, base}, {base + 4500, 8, base + 5000}, {base + 9000, 12, base + 9000}} {
		off, ts, ok, err := p.OffsetForTimestamp(tc.ts)
		if err != nil || !ok || off != tc.off || ts != tc.found {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d at %d", tc.ts, off, ts, ok, err, tc.off, tc.found)
		}
	}
	if _, _, ok, err := p.OffsetForTimestamp(base + 9001); ok || err != nil {
		t.Fatalf("a timestamp past the last found: %v %v", ok, err)
	}
	if off, ts, err := p.MaxTimestamp(); err != nil || off != 12 || ts != base+9000 {
		t.Fatalf("MaxTimestamp = %d, %d, %v; want 12 at %d", off, ts, err, base+9000)
	}
}
