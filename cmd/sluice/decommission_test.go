package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterDecommission: a 4th write broker (id 6) joins the 3 meta + 3
// write + 2 read cluster and gets replicas of a new topic. While an
// idempotent acks=all producer writes and a consumer group reads through
// the read brokers, `sluice broker decommission 6` moves every replica off
// it and returns once none is left; then no partition names it, every
// acknowledged record is stored once where it was acknowledged, the
// group went on consuming during the move, broker 6 hosts no replica, a
// new topic avoids it, and a decommission that has nowhere to move is
// refused. A read broker is decommissioned (its learner replicas go) and
// both are recommissioned.
func TestClusterDecommission(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 2)
	w6 := addWriter(t, c, 6)
	w6.start(t)
	waitReady(t, w6.admin, 60*time.Second)
	const topic, group, parts = "decom", "g-decom", 8
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	adm := kadm.NewClient(wcl)
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, topic, parts)
	replicasOf := func(topic string, id int32) []int32 {
		t.Helper()
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var on []int32
		for _, p := range md.Topics[topic].Partitions {
			if slices.Contains(p.Replicas, id) {
				on = append(on, p.Partition)
			}
		}
		return on
	}
	if on := replicasOf(topic, 6); len(on) == 0 {
		t.Fatal("broker 6 holds no replica of the new topic")
	} else {
		t.Logf("broker 6 holds replicas of partitions %v", on)
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProduceRequestTimeout(10*time.Second),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var mu sync.Mutex
	acked := map[string]ackedRecord{}
	var failed []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("d%07d", i))}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				acked[string(r.Value)] = ackedRecord{r.Partition, r.Offset, string(r.Value)}
			})
		}
	}()
	// A consumer group reads through the read brokers throughout.
	var consumed []time.Time
	go func() {
		defer wg.Done()
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
		if err != nil {
			t.Error(err)
			return
		}
		defer cons.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := cons.PollFetches(pctx)
			pcancel()
			n := 0
			fs.EachRecord(func(*kgo.Record) { n++ })
			mu.Lock()
			for ; n > 0; n-- {
				consumed = append(consumed, time.Now())
			}
			mu.Unlock()
		}
	}()
	time.Sleep(2 * time.Second)

	admin := c.meta[0].admin
	started := time.Now()
	out := sluiceCmd(t, "broker", "decommission", "6", "--admin", admin, "--wait", "90s")
	took := time.Since(started)
	if !strings.Contains(out, "broker 6 holds no replica: it can be stopped") {
		t.Fatalf("sluice broker decommission 6:\n%s", out)
	}
	t.Logf("decommissioned broker 6 in %v:\n%s", took.Round(time.Millisecond), out)
	if on := replicasOf(topic, 6); len(on) != 0 {
		t.Fatalf("partitions %v still name broker 6 after the decommission returned", on)
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(failed) > 0 {
		t.Fatalf("%d sends failed during the decommission, first: %v", len(failed), failed[0])
	}
	during := 0
	for _, at := range consumed {
		if at.After(started) && at.Before(started.Add(took)) {
			during++
		}
	}
	t.Logf("%d records acknowledged; the group consumed %d records, %d of them during the move", len(acked), len(consumed), during)
	if during == 0 {
		t.Error("the consumer group read nothing while the replicas moved")
	}
	want := maps.Clone(acked)
	mu.Unlock()

	// Every acknowledged record, once, where it was acknowledged: from
	// the write brokers' leaders and from a read broker.
	for _, seeds := range [][]string{c.writeAddrs[:3], c.readAddrs[:1]} {
		readBack(ctx, t, seeds, topic, want)
	}

	// Broker 6 hosts no replica any more, and the meta node's page shows
	// it decommissioned with nothing left on it.
	eventually(t, 20*time.Second, func() error {
		for _, row := range findAll(find(fetchStatus(t, w6.admin), "table", "id", "partitions"), "tr", "data-topic", topic) {
			if s := text(find(row, "td", "class", "local")); s != "not hosted here" {
				return fmt.Errorf("broker 6 still hosts %s-%s: %s", topic, attr(row, "data-partition"), s)
			}
		}
		return nil
	})
	state := text(find(find(fetchStatus(t, admin), "tr", "data-broker", "6"), "td", "class", "state"))
	if !strings.HasPrefix(state, "decommissioned, 0 partitions") {
		t.Fatalf("broker 6 on the status page: %q", state)
	}
	// Placement leaves it out; a move with nowhere to go is refused.
	if _, err := adm.CreateTopic(ctx, 4, 3, nil, "after"); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, "after", 4)
	if on := replicasOf("after", 6); len(on) != 0 {
		t.Fatalf("new topic placed on decommissioned broker 6: partitions %v", on)
	}
	refused, err := exec.CommandContext(ctx, binPath, "broker", "decommission", "1", "--admin", admin).CombinedOutput()
	if err == nil || !strings.Contains(string(refused), "no write broker can take broker 1's replica") {
		t.Fatalf("decommissioning one of the 3 write brokers left, replication factor 3: %v\n%s", err, refused)
	}

	// A read broker: its learner replicas go, then come back.
	out = sluiceCmd(t, "broker", "decommission", "5", "--admin", admin, "--wait", "60s")
	if !strings.Contains(out, "broker 5 holds no replica") {
		t.Fatalf("sluice broker decommission 5:\n%s", out)
	}
	// New groups are placed on the read broker left (of 8, about half
	// would go to broker 5 otherwise).
	rcl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	for i := 0; i < 8; i++ {
		g := fmt.Sprintf("new-%d", i)
		for _, r := range kadm.NewClient(rcl).FindGroupCoordinators(ctx, g) {
			if r.Err != nil || r.NodeID != 4 {
				t.Fatalf("group %s placed on %d (%v) with read broker 5 decommissioned", g, r.NodeID, r.Err)
			}
		}
	}
	learners := func() map[string][]int32 {
		out := map[string][]int32{}
		for _, row := range findAll(find(fetchStatus(t, admin), "table", "id", "partitions"), "tr", "data-topic", topic) {
			out[attr(row, "data-partition")] = idList(text(find(row, "td", "class", "learners")))
		}
		return out
	}
	for p, l := range learners() {
		if !slices.Equal(l, []int32{4}) {
			t.Fatalf("after decommissioning read broker 5, partition %s has learners %v", p, l)
		}
	}
	for _, id := range []string{"5", "6"} {
		var st decommissionStatus
		if err := json.Unmarshal([]byte(sluiceCmd(t, "broker", "recommission", id, "--admin", admin, "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Decommissioned || !st.Registered {
			t.Fatalf("after recommission: %+v", st)
		}
	}
	for p, l := range learners() {
		if !slices.Equal(l, []int32{4, 5}) {
			t.Fatalf("after recommissioning read broker 5, partition %s has learners %v", p, l)
		}
	}
}

// readBack consumes topic from the start through seeds and checks that
// every record of want is read exactly once, at the partition and offset
// it was acknowledged at, in the order of those offsets.
func readBack(ctx context.Context, t *testing.T, seeds []string, topic string, want map[string]ackedRecord) {
	t.Helper()
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	found := 0
	var moved []string
	lastAcked := map[int32]int64{} // per partition, the acknowledged offset of the last record read
	deadline := time.Now().Add(60 * time.Second)
	for found < len(want) && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if seen[v] {
				t.Errorf("%v: record %s read twice", seeds, v)
			}
			seen[v] = true
			if a, ok := want[v]; ok {
				found++
				switch {
				case a.partition != r.Partition:
					t.Errorf("%v: %s acknowledged in partition %d, read from %d", seeds, v, a.partition, r.Partition)
				case a.offset != r.Offset:
					moved = append(moved, fmt.Sprintf("%s acknowledged at %d/%d, stored at %d/%d", v, a.partition, a.offset, r.Partition, r.Offset))
				}
				if last, ok := lastAcked[r.Partition]; ok && a.offset <= last {
					t.Errorf("%v: %s (acknowledged at %d) stored after a record acknowledged at %d", seeds, v, a.offset, last)
				}
				lastAcked[r.Partition] = a.offset
			}
		})
	}
	if found < len(want) {
		t.Fatalf("%v: %d of %d acknowledged records read", seeds, found, len(want))
	}
	if len(moved) > 0 {
		t.Fatalf("%v: %d acknowledged offsets differ from the stored ones, e.g. %s", seeds, len(moved), moved[0])
	}
	t.Logf("%v: all %d acknowledged records read once, where they were acknowledged", seeds, len(want))
}
