package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterReadReplicas: on a cluster with two read brokers, a topic
// with read.replicas=1 has one read replica per partition. The read view
// of Metadata names, for each partition, the one read broker that holds
// it; only that broker has the partition's replica on disk; and a consumer
// on the read listeners reads every record. Raising read.replicas to -1
// then gives every partition both read brokers, and lowering it to 1 again
// removes one (whose copy is deleted); the consumer reads everything each
// time. Costs about 10 s (8 processes).
func TestClusterReadReplicas(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 2)
	const topic, parts, n = "rr", 4, 400
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	one := "1"
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, parts, 3, map[string]*string{"read.replicas": &one}, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, kadm.NewClient(prod), topic, parts)
	for i := 0; i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("r%04d", i))}, func(_ *kgo.Record, err error) {
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
	radm := kadm.NewClient(rcl)
	// readReplicas waits until every partition of topic lists k read
	// replicas in the read view, led by one of them, and returns them.
	readReplicas := func(k int) map[int32][]int32 {
		t.Helper()
		var last error
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			md, err := radm.Metadata(ctx, topic)
			if err != nil {
				last = err
				continue
			}
			out := map[int32][]int32{}
			for _, p := range md.Topics[topic].Partitions {
				if p.Err == nil && len(p.Replicas) == k && sameIDs(p.Replicas, p.ISR) && slices.Contains(p.Replicas, p.Leader) {
					out[p.Partition] = p.Replicas
				} else {
					last = fmt.Errorf("partition %d: leader %d replicas %v isr %v err %v", p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
				}
			}
			if len(out) == parts {
				return out
			}
		}
		t.Fatalf("read view never showed %d read replicas per partition: %v", k, last)
		return nil
	}
	holders := readReplicas(1)
	t.Logf("read replicas with read.replicas=1: %v", holders)
	readEverything(ctx, t, c.readAddrs, topic, n)
	for p, ids := range holders {
		if ids[0] != 4 && ids[0] != 5 {
			t.Fatalf("partition %d: read replica %d is not a read broker", p, ids[0])
		}
		// Only the holder (which just served the records) has a
		// replica of the partition.
		for _, r := range []int32{4, 5} {
			dir := filepath.Join(dataDir(t, c.readers[r-4]), "logs", fmt.Sprintf("%s-%d", topic, p))
			_, err := os.Stat(dir)
			if has := err == nil; has != (r == ids[0]) {
				t.Fatalf("partition %d held by %d: read broker %d has a replica directory: %v (%v)", p, ids[0], r, has, err)
			}
		}
	}

	all := "-1"
	ar, err := kadm.NewClient(prod).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "read.replicas", Value: &all}}, topic)
	if err == nil {
		err = ar[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	readReplicas(2)
	readEverything(ctx, t, c.readAddrs, topic, n)

	// Back to 1: each partition's raft leader removes one learner, and
	// that read broker deletes its copy.
	ar, err = kadm.NewClient(prod).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "read.replicas", Value: &one}}, topic)
	if err == nil {
		err = ar[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	for p, ids := range readReplicas(1) {
		other := int32(9) - ids[0] // the read broker (4 or 5) that lost it
		waitGone(t, filepath.Join(dataDir(t, c.readers[other-4]), "logs", fmt.Sprintf("%s-%d", topic, p)))
	}
	readEverything(ctx, t, c.readAddrs, topic, n)
}

// readEverything reads topic from the start through the given (read)
// listeners until n distinct records arrived, and fails on duplicates.
func readEverything(ctx context.Context, t *testing.T, addrs []string, topic string, n int) {
	t.Helper()
	if seen := readDistinct(ctx, t, addrs, topic, n, 20*time.Second); len(seen) != n {
		t.Fatalf("read %d of %d records through the read listeners", len(seen), n)
	}
}

// readDistinct reads topic from the start through addrs (with opts) until
// want distinct values arrived or wait passed, fails the test on a value
// read twice, and returns the values read.
func readDistinct(ctx context.Context, t *testing.T, addrs []string, topic string, want int, wait time.Duration, opts ...kgo.Opt) map[string]bool {
	t.Helper()
	cons, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	deadline := time.Now().Add(wait)
	for len(seen) < want && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollRecords(pctx, 500)
		pcancel()
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch %s/%d: %v", tp, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if seen[string(r.Value)] {
				t.Errorf("%s read twice", r.Value)
			}
			seen[string(r.Value)] = true
		})
	}
	return seen
}
