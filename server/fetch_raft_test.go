package server

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/replica"
)

// raftLogBroker starts a broker that hosts a one-voter raft partition
// written in three leader terms, built by restarting the replica's host
// (each new leader stores an empty entry, which takes no offset):
//
//	term e1: data 0-2 | term e2: data 3-5 | term e3 (current): no data
//
// It returns the epochs (raft terms) e1 < e2 < e3.
func raftLogBroker(t *testing.T) (addr string, topic string, epochs [3]int32) {
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
	h, r := openHost(0)
	epochs[0] = r.LeaderEpoch()
	produce(r)
	h.Close()
	h, r = openHost(3)
	epochs[1] = r.LeaderEpoch()
	produce(r)
	h.Close()
	h, r = openHost(6)
	epochs[2] = r.LeaderEpoch()
	t.Cleanup(func() { h.Close() })
	if !(epochs[0] < epochs[1] && epochs[1] < epochs[2]) || r.HighWatermark() != 6 || r.LogEndOffset() != 6 {
		t.Fatalf("epochs %v, high watermark %d, log end %d; want increasing epochs and 6, 6", epochs, r.HighWatermark(), r.LogEndOffset())
	}

	srv, err := New(Options{Config: cfg, Catalog: meta.Client(), Raft: h.Hosted(), Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addrs()[0], topic, epochs
}

// fetchRaw sends one Fetch v11 of partition 0 and returns the answer and
// the base offsets and leader epochs of its batches. It fails on a
// control batch.
func fetchRaw(t *testing.T, c *rawConn, topic string, offset int64) (kmsg.FetchResponseTopicPartition, []int64, []int32) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = offset, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c.send(req, 1)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if _, err := c.recv(resp, false); err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch at %d: %+v", offset, resp)
	}
	sp := resp.Topics[0].Partitions[0]
	var bases []int64
	var epochs []int32
	for b := sp.RecordBatches; len(b) > 0; {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("fetch at %d: bad batch: %v", offset, err)
		}
		if rb.Attributes&0x20 != 0 {
			t.Fatalf("fetch at %d returned a control batch at %d", offset, rb.FirstOffset)
		}
		bases = append(bases, rb.FirstOffset)
		epochs = append(epochs, rb.PartitionLeaderEpoch)
		b = b[12+int(rb.Length):]
	}
	return sp, bases, epochs
}

// A partition whose leader changed keeps dense offsets: Fetch, ListOffsets
// and OffsetForLeaderEpoch see data at 0..5 and nothing of raft's own
// entries.
func TestRaftPartitionOffsetsDense(t *testing.T) {
	addr, topic, ep := raftLogBroker(t)
	c := dialRaw(t, addr)
	for _, tc := range []struct {
		offset int64
		bases  []int64
	}{
		{0, []int64{0, 3}},
		{2, []int64{0, 3}}, // inside the first batch: the whole batch, as Kafka sends it
		{3, []int64{3}},
		{5, []int64{3}},
		{6, nil}, // the log end: nothing yet
	} {
		sp, bases, epochs := fetchRaw(t, c, topic, tc.offset)
		if sp.ErrorCode != 0 || fmt.Sprint(bases) != fmt.Sprint(tc.bases) {
			t.Errorf("fetch at %d: error %d, batches at %v; want %v", tc.offset, sp.ErrorCode, bases, tc.bases)
		}
		if sp.HighWatermark != 6 || sp.LastStableOffset != 6 || sp.LogStartOffset != 0 {
			t.Errorf("fetch at %d: high watermark %d, last stable %d, log start %d; want 6, 6, 0",
				tc.offset, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset)
		}
		for i, b := range bases {
			if want := ep[b/3]; epochs[i] != want {
				t.Errorf("fetch at %d: batch at %d has leader epoch %d, want %d", tc.offset, b, epochs[i], want)
			}
		}
	}
	if sp, _, _ := fetchRaw(t, c, topic, 7); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch past the log end: error %d, want OFFSET_OUT_OF_RANGE", sp.ErrorCode)
	}

	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.Version = 5
	lreq.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, ts := range []int64{-1, -2} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
		lt.Partitions = append(lt.Partitions, rp)
	}
	lreq.Topics = append(lreq.Topics, lt)
	c.send(lreq, 2)
	lresp := lreq.ResponseKind().(*kmsg.ListOffsetsResponse)
	if _, err := c.recv(lresp, false); err != nil {
		t.Fatal(err)
	}
	if ps := lresp.Topics[0].Partitions; len(ps) != 2 || ps[0].ErrorCode != 0 || ps[0].Offset != 6 || ps[0].LeaderEpoch != ep[2] || ps[1].Offset != 0 {
		t.Errorf("ListOffsets latest, earliest: %+v; want 6 (epoch %d), 0", ps, ep[2])
	}

	// Kafka's answers: the end of an epoch is the start of the next one
	// with data, the log end for the latest; an epoch without data (the
	// current one here) ends at the log end too; a future epoch is
	// unknown.
	oreq := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oreq.Version = 3
	oreq.ReplicaID = -1
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = topic
	asked := []int32{ep[0], ep[1], ep[2], ep[2] + 5}
	for _, e := range asked {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, e
		ot.Partitions = append(ot.Partitions, rp)
	}
	oreq.Topics = append(oreq.Topics, ot)
	c.send(oreq, 3)
	oresp := oreq.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	if _, err := c.recv(oresp, false); err != nil {
		t.Fatal(err)
	}
	want := [][2]int64{{3, int64(ep[0])}, {6, int64(ep[1])}, {6, int64(ep[2])}, {-1, -1}}
	ps := oresp.Topics[0].Partitions
	if len(ps) != len(want) {
		t.Fatalf("OffsetForLeaderEpoch: %+v", ps)
	}
	for i, p := range ps {
		if p.ErrorCode != 0 || p.EndOffset != want[i][0] || int64(p.LeaderEpoch) != want[i][1] {
			t.Errorf("OffsetForLeaderEpoch(%d): end %d, epoch %d, error %d; want %d, %d", asked[i], p.EndOffset, p.LeaderEpoch, p.ErrorCode, want[i][0], want[i][1])
		}
	}
}
