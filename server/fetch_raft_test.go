package server

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/replica"
)

// raftLogBroker starts a broker that hosts a one-voter raft partition
// whose log holds raft's own entries at the head, in the middle and at
// the tail of the data, built by restarting the replica's host (each new
// leader stores an empty entry):
//
//	0 raft | 1-3 data | 4 raft | 5-7 data | 8 raft
func raftLogBroker(t *testing.T) (addr string, topic string) {
	t.Helper()
	dir := t.TempDir()
	lg := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	cfg := configs.Default()
	cfg.DataDir = dir
	cfg.Listeners = []configs.Listener{{Name: "PLAINTEXT", View: "mixed", Address: "127.0.0.1:0"}}
	cfg.LogFsync = "never"
	meta := openTestMeta(t, dir, lg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b := metastore.Broker{ID: cfg.NodeID, Role: metastore.RoleCombined,
		Endpoints: []metastore.Endpoint{{Name: "PLAINTEXT", View: "mixed", Host: "127.0.0.1"}}}
	if _, err := meta.Client().RegisterBroker(ctx, b); err != nil {
		t.Fatal(err)
	}
	topic = "raftlog"
	tp, err := meta.Client().CreateTopic(ctx, metastore.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 1, Assignment: [][]int32{{cfg.NodeID}}})
	if err != nil {
		t.Fatal(err)
	}
	key := replica.Key{TopicID: tp.ID, Index: 0}
	net := replica.NewMemNetwork(1)
	openHost := func(wantHW int64) (*replica.Host, *replica.Replica) {
		h, err := replica.NewHost(replica.HostConfig{
			Node: replica.NodeID(cfg.NodeID), Dir: filepath.Join(dir, "logs"), Transport: net.Transport(replica.NodeID(cfg.NodeID)),
			TickInterval: 10 * time.Millisecond, ElectionTicks: 15, HeartbeatTicks: 2, Logger: lg,
		})
		if err != nil {
			t.Fatal(err)
		}
		r, err := h.Open(topic, key, replica.Members{Voters: []replica.NodeID{replica.NodeID(cfg.NodeID)}},
			replica.ReplicaOptions{Mode: replica.ModeRaft, Log: log.DefaultConfig()})
		if err != nil {
			t.Fatal(err)
		}
		for r.HighWatermark() < wantHW || !r.IsLeader() {
			if ctx.Err() != nil {
				t.Fatalf("no leader with high watermark %d: %d", wantHW, r.HighWatermark())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return h, r
	}
	produce := func(r *replica.Replica) {
		p, err := r.Propose(makeTestBatch(3, 10), replica.AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h, r := openHost(1)
	produce(r)
	h.Close()
	h, r = openHost(5)
	produce(r)
	h.Close()
	h, _ = openHost(9)
	t.Cleanup(func() { h.Close() })

	srv, err := New(Options{Config: cfg, Catalog: meta.Client(), Raft: h, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addrs()[0], topic
}

// fetchRaw sends one Fetch v11 of partition 0 and returns the answer, the
// base offsets of its batches and how long it took. It fails on a control
// batch.
func fetchRaw(t *testing.T, c *rawConn, topic string, offset int64, minBytes, maxWaitMs int32) (kmsg.FetchResponseTopicPartition, []int64, time.Duration) {
	t.Helper()
	return fetchRawLimit(t, c, topic, offset, minBytes, maxWaitMs, 1<<20)
}

func fetchRawLimit(t *testing.T, c *rawConn, topic string, offset int64, minBytes, maxWaitMs, partMax int32) (kmsg.FetchResponseTopicPartition, []int64, time.Duration) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWaitMs, minBytes, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = offset, partMax, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	start := time.Now()
	c.send(req, 1)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if _, err := c.recv(resp, false); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch at %d: %+v", offset, resp)
	}
	sp := resp.Topics[0].Partitions[0]
	var bases []int64
	for b := sp.RecordBatches; len(b) > 0; {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("fetch at %d: bad batch: %v", offset, err)
		}
		if rb.Attributes&0x20 != 0 {
			t.Fatalf("fetch at %d returned the control batch at %d", offset, rb.FirstOffset)
		}
		bases = append(bases, rb.FirstOffset)
		b = b[12+int(rb.Length):]
	}
	return sp, bases, took
}

func TestFetchSkipsRaftEntries(t *testing.T) {
	addr, topic := raftLogBroker(t)
	c := dialRaw(t, addr)
	for _, tc := range []struct {
		offset int64
		bases  []int64
	}{
		{0, []int64{1, 5}}, // head and middle entries skipped
		{2, []int64{1, 5}}, // inside the first batch: the whole batch, as Kafka sends it
		{4, []int64{5}},    // a position at a raft entry gets the data after it
		{5, []int64{5}},
		{8, nil}, // only a raft entry: empty, high watermark = fetch offset
	} {
		sp, bases, _ := fetchRaw(t, c, topic, tc.offset, 0, 0)
		if sp.ErrorCode != 0 || fmt.Sprint(bases) != fmt.Sprint(tc.bases) {
			t.Errorf("fetch at %d: error %d, batches at %v; want %v", tc.offset, sp.ErrorCode, bases, tc.bases)
		}
		wantHW := max(int64(8), tc.offset)
		if sp.HighWatermark != wantHW || sp.LastStableOffset != wantHW || sp.LogStartOffset != 0 {
			t.Errorf("fetch at %d: high watermark %d, last stable %d, log start %d; want %d, %d, 0",
				tc.offset, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset, wantHW, wantHW)
		}
	}
	// Offset 9 (the log end, past the last raft entry) waits for data as
	// any offset at the high watermark; 10 is past the log end.
	if sp, bases, _ := fetchRaw(t, c, topic, 9, 0, 0); sp.ErrorCode != 0 || bases != nil || sp.HighWatermark != 9 {
		t.Errorf("fetch at 9: error %d, batches %v, high watermark %d", sp.ErrorCode, bases, sp.HighWatermark)
	}
	if sp, _, _ := fetchRaw(t, c, topic, 10, 0, 0); sp.ErrorCode == 0 {
		t.Error("fetch past the log end: no error")
	}

	// MinBytes: a raft entry is no byte to a consumer at the tail, which
	// long-polls for the whole wait.
	if sp, bases, took := fetchRaw(t, c, topic, 8, 1, 300); bases != nil || took < 250*time.Millisecond {
		t.Errorf("fetch at the tail raft entry, min bytes 1: batches %v after %v (error %d); want a long poll", bases, took, sp.ErrorCode)
	}
	// Nor does one in the middle: both batches are there, and short of
	// MinBytes the fetch waits.
	if sp, bases, took := fetchRaw(t, c, topic, 0, 1<<20, 300); fmt.Sprint(bases) != "[1 5]" || took < 250*time.Millisecond {
		t.Errorf("fetch at 0, min bytes 1 MiB: batches %v after %v (error %d); want [1 5] after the wait", bases, took, sp.ErrorCode)
	}
	// A partition limit that the data past the middle raft entry does not
	// fit: the first batch, answered at once however few bytes it is (the
	// rest is there for the next fetch).
	if sp, bases, took := fetchRawLimit(t, c, topic, 0, 1<<20, 2000, 1); fmt.Sprint(bases) != "[1]" || took > time.Second {
		t.Errorf("fetch at 0, partition max bytes 1: batches %v after %v (error %d); want [1] at once", bases, took, sp.ErrorCode)
	}
}

func TestListOffsetsLatestIsVisibleHighWatermark(t *testing.T) {
	addr, topic := raftLogBroker(t)
	c := dialRaw(t, addr)
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 5
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, ts := range []int64{-1, -2} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	c.send(req, 1)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	if _, err := c.recv(resp, false); err != nil {
		t.Fatal(err)
	}
	ps := resp.Topics[0].Partitions
	if len(ps) != 2 || ps[0].ErrorCode != 0 || ps[0].Offset != 8 || ps[1].Offset != 0 {
		t.Fatalf("ListOffsets latest, earliest: %+v; want 8 (the tail raft entry hidden), 0", ps)
	}
}
