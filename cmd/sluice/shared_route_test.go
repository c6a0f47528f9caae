package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSharedClusterReadRoute: a shared topic is served by every read
// broker from the shared storage, so the read view routes its partitions
// over all read brokers even with read.replicas=0 (no learner placed
// anywhere): on a cluster with two read brokers both lead some of the
// topic's partitions in the read view's Metadata, a consumer on the read
// listeners reads every record, and each read broker served Fetch.
func TestSharedClusterReadRoute(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterLayout(t, "shared", 2, clusterLayout{
		extra: fmt.Sprintf("shared.storage.type: dir\nshared.storage.dir: %s\nshared.upload.linger.ms: 20\n", t.TempDir())})
	const topic, parts, n = "sroute", 4, 400
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	zero := "0"
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, parts, 3, map[string]*string{"read.replicas": &zero}, topic); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("s%04d", i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rcl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	md, err := kadm.NewClient(rcl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for _, p := range md.Topics[topic].Partitions {
		if p.Err != nil || (p.Leader != 4 && p.Leader != 5) || len(p.Replicas) != 2 || len(p.ISR) != 2 {
			t.Fatalf("read view, shared partition %d with read.replicas=0: leader %d replicas %v isr %v err %v", p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
		}
		leaders[p.Leader]++
	}
	if len(leaders) != 2 {
		t.Fatalf("read view leaders of %d shared partitions: %v, want both read brokers", parts, leaders)
	}
	readEverything(ctx, t, c.readAddrs, topic, n)
	for _, r := range c.readers {
		t.Logf("%s: Fetch %v ListOffsets %v Metadata %v", r.name, requestCount(t, r.admin, "Fetch"), requestCount(t, r.admin, "ListOffsets"), requestCount(t, r.admin, "Metadata"))
		if got := requestCount(t, r.admin, "Fetch"); got == 0 {
			t.Errorf("read broker %s served no Fetch", r.name)
		}
	}
	t.Logf("shared partitions per read broker in the read view: %v; all %d records read", leaders, n)
}
