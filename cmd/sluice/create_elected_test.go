package main

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterCreateTopicsElected: when CreateTopics (and CreatePartitions)
// answers, every new partition's first raft election is published, so
// the leader epoch in the metadata a client takes right after is the
// elected term, not the placeholder 0 the metastore holds before the
// election. A consumer that started on the placeholder was answered
// FENCED_LEADER_EPOCH by the read brokers' replicas (already in the
// elected term) and, with franz-go's default MetadataMinAge, read nothing
// for 5 s.
func TestClusterCreateTopicsElected(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Requests go to one broker each, the creating one and the read
	// broker, never to another one whose metastore copy may lag.
	client := func(addr string) *kgo.Broker {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl.SeedBrokers()[0]
	}
	writer, reader := client(c.writeAddrs[0]), client(c.readAddrs[0])
	epochs := func(b *kgo.Broker, topic string) []int32 {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		var out []int32
		for _, mt := range resp.Topics {
			for _, p := range mt.Partitions {
				out = append(out, p.LeaderEpoch)
			}
		}
		return out
	}
	// unelected returns how many of want partitions are missing or still
	// carry the placeholder epoch 0.
	unelected := func(es []int32, want int) int {
		n := want - len(es)
		for _, e := range es {
			if e <= 0 {
				n++
			}
		}
		return n
	}
	// check asks the broker that answered (at once) and the other one
	// (which follows the metastore by long poll: a few milliseconds
	// behind, not an election timeout).
	check := func(what string, by, other *kgo.Broker, topic string, parts int) {
		t.Helper()
		if es := epochs(by, topic); unelected(es, parts) > 0 {
			t.Fatalf("%s: the answering broker's metadata right after the answer has leader epochs %v", what, es)
		}
		var es []int32
		for deadline := time.Now().Add(500 * time.Millisecond); ; time.Sleep(20 * time.Millisecond) {
			if es = epochs(other, topic); unelected(es, parts) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the other broker's metadata 500 ms after the answer has leader epochs %v", what, es)
			}
		}
		t.Logf("%s: leader epochs %v", what, es)
	}
	// A read broker hosts no voter: its answer does not wait on any
	// election by itself. A write broker is the first voter of some
	// partitions and campaigns for them as it opens them. With a write
	// broker paused (SIGSTOP: still registered, so still placed), the
	// partitions it is the first voter of are elected by the other two
	// only after an election timeout.
	paused := c.writers[2]
	for _, tc := range []struct {
		topic     string
		by, other *kgo.Broker
		pause     bool
	}{{"elected-a", reader, writer, false}, {"elected-b", writer, reader, false}, {"elected-c", writer, reader, true}} {
		topic := tc.topic
		if tc.pause {
			if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 8, 3
		req.Topics = append(req.Topics, rt)
		started := time.Now()
		resp, err := req.RequestWith(ctx, tc.by)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
			t.Fatalf("creating %s: %v", topic, err)
		}
		t.Logf("created %s in %v", topic, time.Since(started).Round(time.Millisecond))
		check("CreateTopics "+topic, tc.by, tc.other, topic, 8)
		if tc.pause {
			if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "elected-a", 12
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("adding partitions: %v", err)
	}
	check("CreatePartitions elected-a", reader, writer, "elected-a", 12)
}
