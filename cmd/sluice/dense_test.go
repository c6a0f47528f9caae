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

// TestClusterDenseOffsets: raft's own entries (a new leader's empty entry,
// membership changes) take no Kafka offset, so a fresh replication factor
// 3 topic on the 3+3+2 cluster acknowledges offsets 0..n-1, keeps them
// contiguous across a kill -9 of its leader and the election after it, and
// a consumer of a read broker reads 0..m-1 with no gap.
func TestClusterDenseOffsets(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 2)
	const topic = "dense"
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProduceRequestTimeout(5*time.Second), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	adm := kadm.NewClient(prod)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	leader := waitLeaders(t, adm, topic, 1)[0]

	// produce writes n records in batches of up to 7 (idempotent acks=all,
	// retried by the client until acknowledged) and checks that their
	// offsets continue exactly where the last acknowledged one ended.
	next := int64(0)
	produce := func(stage string, n int) {
		t.Helper()
		for i := 0; i < n; {
			k := min(7, n-i)
			rs := make([]*kgo.Record, k)
			for j := range rs {
				rs[j] = &kgo.Record{Value: []byte(fmt.Sprintf("v%06d", next+int64(j)))}
			}
			if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("%s: produce at %d: %v", stage, next, err)
			}
			for j, r := range rs {
				if r.Partition != 0 || r.Offset != next+int64(j) {
					t.Fatalf("%s: record %d acknowledged at %d/%d, want 0/%d (offsets not dense)", stage, next+int64(j), r.Partition, r.Offset, next+int64(j))
				}
			}
			next += int64(k)
			i += k
		}
	}
	produce("fresh topic", 100)

	c.writers[leader-1].kill()
	t.Logf("killed broker %d, leader of %s/0, after offsets 0..%d", leader, topic, next-1)
	// At once: the client retries until the new leader takes the writes.
	produce("after the leader's kill", 100)
	newLeader := waitLeaders(t, adm, topic, 1)[0]
	if newLeader == leader {
		t.Fatalf("broker %d, killed, still leads", leader)
	}
	// The killed broker comes back and catches up as a follower; its log
	// must agree on every offset (the read broker follows the same group).
	c.writers[leader-1].start(t)
	waitReady(t, c.writers[leader-1].admin, 60*time.Second)
	produce("after the restart", 50)
	t.Logf("new leader %d; acknowledged offsets 0..%d, no gap", newLeader, next-1)

	// The read view sends the consumer to the read broker that serves
	// the partition (a raft learner).
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	want := int64(0)
	deadline := time.Now().Add(30 * time.Second)
	for want < next && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != want || string(r.Value) != fmt.Sprintf("v%06d", want) {
				t.Fatalf("read broker: record %q at offset %d, want v%06d at %d", r.Value, r.Offset, want, want)
			}
			want++
		})
	}
	if want != next {
		t.Fatalf("read broker: read offsets 0..%d of 0..%d", want-1, next-1)
	}
	t.Logf("the read broker serves offsets 0..%d with no gap", next-1)
}
