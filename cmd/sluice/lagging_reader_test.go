package main

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterLaggingReadBrokerKeepsPosition: a consumer that read a
// partition through one read broker and is then routed to another that
// lags behind the leader must not be sent back. The lagging read broker
// (read-2, cut off from the write brokers while the producer writes on,
// reachable by the client and the metastore) used to answer the
// consumer's OffsetForLeaderEpoch for the current epoch with its own log
// end, below the consumer's position; franz-go took that for a truncated
// log (ErrDataLoss) and reset the position to it, so the records between
// were read twice. Only the leader knows where the latest epoch ends.
//
// read-1 leads the partition in the read view while both read brokers
// are registered; killing it moves the partition to read-2 once read-1's
// lease lapses, and the consumer validates its position there (KIP-320).
func TestClusterLaggingReadBrokerKeepsPosition(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	// "writers": read-2 reaches no write broker at all, so it cannot ask
	// the leader either and must refuse (retriably) until the cut heals.
	// "replication": only read-2's replication address is cut, so its
	// log stays behind while it can still ask the leader over Kafka.
	for _, cut := range []string{"writers", "replication"} {
		t.Run(cut, func(t *testing.T) { testLaggingReadBroker(t, cut) })
	}
}

func testLaggingReadBroker(t *testing.T, cut string) {
	lab := newNetLab(t)
	writers := []string{"write-1", "write-2", "write-3"}
	for _, name := range append([]string{"meta-1", "meta-2", "meta-3", "read-1", "read-2"}, writers...) {
		lab.host(t, name)
	}
	// read-2 replicates on an address of its own, which the
	// "replication" cut takes away.
	replAddr := lab.addAddr(t, "read-2")
	ports := map[string]string{"meta": "9391", "kafka": "9092", "admin": "9644", "replica": "9491"}
	c := startTestClusterLayout(t, "raft", 2, clusterLayout{
		addr: func(name, socket string) string {
			if name == "read-2" && socket == "replica" {
				return net.JoinHostPort(replAddr, ports[socket])
			}
			return net.JoinHostPort(lab.hosts[name].addr, ports[socket])
		},
		prefix: lab.exec,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	const topic, parts = "lagging", 2
	const read1, read2 = int32(4), int32(5)

	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	adm := kadm.NewClient(wcl)
	mode := "raft"
	if _, err := adm.CreateTopic(ctx, parts, 3, map[string]*string{"replication.mode": &mode}, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, topic, parts)

	// The partition read-1 leads in the read view while both read
	// brokers are registered.
	rcl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	part := int32(-1)
	for deadline := time.Now().Add(60 * time.Second); part < 0; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the read view never named both read brokers as leaders")
		}
		leaders, err := metadataLeaders(ctx, rcl, topic)
		if err != nil || len(leaders) != parts {
			continue
		}
		for p, l := range leaders {
			if l == read1 && leaders[1-p] == read2 {
				part = p
			}
		}
	}
	produce := func(n int, from int) {
		t.Helper()
		for i := range n {
			r := &kgo.Record{Partition: part, Value: []byte("r" + strconv.Itoa(from+i))}
			if err := wcl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("producing record %d: %v", from+i, err)
			}
		}
	}
	const before, during, after = 50, 300, 50
	produce(before, 0)
	// read-2 holds the first records, then is cut off from the write
	// brokers: it keeps its lease (the metastore reaches it) and its
	// clients, and stops replicating.
	r2, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs[1]), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if hws, err := replicaHWs(ctx, r2, topic, parts); err == nil && hws[part] == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("read-2 did not catch up before the cut")
		}
	}
	healCut := func() {
		lab.healAddrs(t, replAddr)
		if cut == "writers" {
			lab.healFrom(t, "read-2", writers...)
		}
	}
	lab.cutAddrs(t, replAddr)
	if cut == "writers" {
		lab.cutFrom(t, "read-2", writers...)
	}
	healed := false
	defer func() {
		if !healed {
			healCut()
		}
	}()
	produce(during, before)

	// The consumer reads everything through read-1.
	ccl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.MetadataMaxAge(time.Second),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer ccl.Close()
	next := int64(0)
	var problems []string
	poll := func(until func() bool, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !until() && time.Now().Before(deadline) {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := ccl.PollFetches(pctx)
			pcancel()
			fs.EachError(func(_ string, _ int32, err error) {
				if dl := (*kgo.ErrDataLoss)(nil); errors.As(err, &dl) {
					problems = append(problems, err.Error())
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next {
					problems = append(problems, "offset "+strconv.FormatInt(r.Offset, 10)+" read after "+strconv.FormatInt(next-1, 10))
				}
				next = r.Offset + 1
			})
		}
	}
	poll(func() bool { return next >= before+during }, 60*time.Second)
	if next != before+during {
		t.Fatalf("the consumer read up to %d through read-1, want %d (problems: %v)", next, before+during, problems)
	}

	// read-1 dies; once its lease lapses the read view names read-2,
	// still lagging, and the consumer validates its position there.
	c.readers[0].kill()
	movedAt := time.Time{}
	poll(func() bool {
		if movedAt.IsZero() {
			if l, err := metadataLeaders(ctx, r2, topic); err == nil && l[part] == read2 {
				movedAt = time.Now()
			}
		}
		return !movedAt.IsZero() && time.Since(movedAt) > 8*time.Second
	}, 60*time.Second)
	if movedAt.IsZero() {
		t.Fatal("the read view never moved the partition to read-2")
	}
	if hws, err := replicaHWs(ctx, r2, topic, parts); err == nil {
		t.Logf("read-2 holds %d records of %d while it leads the partition in the read view", hws[part], before+during)
	}

	// Heal: read-2 catches up and the consumer goes on from where it was.
	if cut == "replication" {
		// read-2 answered the consumer with the leader's answer.
		asked := 0.0
		for _, w := range c.writers {
			asked += requestCount(t, w.admin, "OffsetForLeaderEpoch")
		}
		if asked == 0 {
			t.Error("no write broker was asked OffsetForLeaderEpoch while read-2 lagged")
		}
	}
	healCut()
	healed = true
	produce(after, before+during)
	poll(func() bool { return next >= before+during+after }, 60*time.Second)
	if next != before+during+after {
		problems = append(problems, "the consumer ended at "+strconv.FormatInt(next, 10)+", want "+strconv.Itoa(before+during+after))
	}
	for _, p := range problems {
		t.Error(p)
	}
}
