package server

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/replica"
)

// TestOfflineReplica: the storage of one raft partition fails under the
// broker (its log is closed beneath the replica, so the next write
// fails). That partition is offline here: Produce and Fetch answer
// KAFKA_STORAGE_ERROR, as Kafka does for a replica on a failed log
// directory, and Metadata names no leader (LEADER_NOT_AVAILABLE), this
// broker as an offline replica and an empty ISR. The broker's other
// partition goes on serving.
func TestOfflineReplica(t *testing.T) {
	dir := t.TempDir()
	lg := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.Disabled)
	cfg := configs.Default()
	cfg.DataDir = dir
	cfg.Listeners = []configs.Listener{{Name: "PLAINTEXT", View: "mixed", Address: "127.0.0.1:0"}}
	cfg.LogFsync = "never"
	meta := openTestMeta(t, dir, lg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := meta.Client().RegisterBroker(ctx, metastore.Broker{ID: cfg.NodeID, Role: metastore.RoleCombined,
		Endpoints: []metastore.Endpoint{{Name: "PLAINTEXT", View: "mixed", Host: "127.0.0.1"}}}); err != nil {
		t.Fatal(err)
	}
	const topic = "offline"
	tp, err := meta.Client().CreateTopic(ctx, metastore.TopicSpec{Name: topic, Partitions: 2, ReplicationFactor: 1, Assignment: [][]int32{{cfg.NodeID}, {cfg.NodeID}}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := replica.NewHost(replica.HostConfig{
		Node: replica.NodeID(cfg.NodeID), Dir: filepath.Join(dir, "logs"), Transport: replica.NewMemNetwork(1).Transport(replica.NodeID(cfg.NodeID)),
		TickInterval: 10 * time.Millisecond, ElectionTicks: 15, HeartbeatTicks: 2, Logger: lg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	var reps []*replica.Replica
	for i := range int32(2) {
		r, err := h.Open(topic, replica.Key{TopicID: tp.ID, Index: i}, replica.Members{Voters: []replica.NodeID{replica.NodeID(cfg.NodeID)}},
			replica.ReplicaOptions{Mode: replica.ModeRaft, Log: log.DefaultConfig()})
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	srv, err := New(Options{Config: cfg, Catalog: meta.Client(), Raft: h.Hosted(), Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	produce := func(p int32) int16 {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = topic, tp.ID // the client picks the version
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, makeTestBatch(1, 10)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	for !reps[0].IsLeader() || !reps[1].IsLeader() {
		if ctx.Err() != nil {
			t.Fatal("no leaders")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for p := range int32(2) {
		if code := produce(p); code != 0 {
			t.Fatalf("partition %d: %v", p, kerr.ErrorForCode(code))
		}
	}

	// The storage of partition 0 fails: the write that finds it so is
	// refused, and the replica stops.
	reps[0].Log().Close()
	produce(0)
	for reps[0].Failed() == nil {
		if ctx.Err() != nil {
			t.Fatal("replica 0 did not fail")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code := produce(0); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the failed partition: %v", kerr.ErrorForCode(code))
	}
	if code := produce(1); code != 0 {
		t.Fatalf("produce to the healthy partition: %v", kerr.ErrorForCode(code))
	}
	if h.FailedReplicas() != 1 {
		t.Fatalf("FailedReplicas() = %d", h.FailedReplicas())
	}

	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	parts := mresp.Topics[0].Partitions
	slices.SortFunc(parts, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
	self := cfg.NodeID
	if p := parts[0]; p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1 || !slices.Equal(p.OfflineReplicas, []int32{self}) || len(p.ISR) != 0 {
		t.Fatalf("failed partition's metadata: error %d leader %d offline %v isr %v", p.ErrorCode, p.Leader, p.OfflineReplicas, p.ISR)
	}
	if p := parts[1]; p.ErrorCode != 0 || p.Leader != self || len(p.OfflineReplicas) != 0 || !slices.Equal(p.ISR, []int32{self}) {
		t.Fatalf("healthy partition's metadata: error %d leader %d offline %v isr %v", p.ErrorCode, p.Leader, p.OfflineReplicas, p.ISR)
	}

	freq := kmsg.NewPtrFetchRequest()
	freq.Version, freq.ReplicaID, freq.MaxBytes, freq.SessionEpoch = 11, -1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, tp.ID
	for p := range int32(2) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = p, 1<<20, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
	}
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, fp := range fresp.Topics[0].Partitions {
		want := int16(0)
		if fp.Partition == 0 {
			want = kerr.KafkaStorageError.Code
		}
		if fp.ErrorCode != want {
			t.Fatalf("fetch partition %d: %v, want %v", fp.Partition, kerr.ErrorForCode(fp.ErrorCode), kerr.ErrorForCode(want))
		}
	}
}
