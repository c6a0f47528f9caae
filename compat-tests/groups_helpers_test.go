package compat

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceN writes n records with values "<prefix>-<i>" spread round-robin
// over the topic's partitions and waits for every ack.
func produceN(ctx context.Context, t *testing.T, addr, topic, prefix string, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	defer cl.Close()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Value: []byte(prefix + "-" + strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing %d records to %q: %v", n, topic, err)
	}
}

// groupLag returns the group's committed offsets and total lag on topic as
// kadm computes them (DescribeGroups, OffsetFetch and ListOffsets). kadm's
// Lag describes classic groups only, as Kafka 4 answers DescribeGroups for a
// KIP-848 group with GROUP_ID_NOT_FOUND; for those, lag is computed from
// kadm's FetchOffsets and ListEndOffsets after DescribeConsumerGroups.
func groupLag(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string) (map[int32]int64, int64) {
	t.Helper()
	if dg, err := adm.DescribeConsumerGroups(ctx, group); err == nil && dg[group].Err == nil {
		return consumerGroupLag(ctx, t, adm, group, topic)
	}
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		t.Fatalf("kadm Lag %q: %v", group, err)
	}
	dl, ok := lags[group]
	if !ok {
		t.Fatalf("kadm Lag: group %q missing", group)
	}
	if dl.Error() != nil {
		t.Fatalf("kadm Lag %q: %v", group, dl.Error())
	}
	committed := map[int32]int64{}
	var total int64
	for _, l := range dl.Lag[topic] {
		if l.Err != nil {
			t.Fatalf("kadm Lag %q %s/%d: %v", group, topic, l.Partition, l.Err)
		}
		committed[l.Partition] = l.Commit.At
		total += l.Lag
	}
	return committed, total
}

func fmtOffsets(m map[int32]int64) string {
	return fmt.Sprint(m)
}

func consumerGroupLag(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string) (map[int32]int64, int64) {
	t.Helper()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("kadm FetchOffsets %q: %v", group, err)
	}
	if err := offs.Error(); err != nil {
		t.Fatalf("kadm FetchOffsets %q: %v", group, err)
	}
	ends := endOffsets(ctx, t, adm, topic)
	committed := map[int32]int64{}
	var total int64
	for p, e := range ends {
		c := int64(-1)
		if o, ok := offs.Lookup(topic, p); ok {
			c = o.At
		}
		committed[p] = c
		if c < 0 {
			total += e // nothing committed: the whole partition is lag
		} else {
			total += e - c
		}
	}
	return committed, total
}

// sumCommitted adds the committed offsets, skipping partitions without one.
func sumCommitted(m map[int32]int64) int64 {
	var s int64
	for _, v := range m {
		if v > 0 {
			s += v
		}
	}
	return s
}

// groupConsumeFunc consumes exactly n records of topic as a member of group
// (committing what it processed, after processing) and returns them in the
// order processed; the consumer is closed when it returns.
type groupConsumeFunc func(ctx context.Context, t *testing.T, addr, group, topic string, n int) []tpo

// testGroupResume is the scenario every client runs: 90 records on three
// partitions; the client consumes 50 and commits; kadm's lag must be 40;
// the broker restarts; the client consumes the other 40, resuming at the
// committed offsets; nothing is read twice or skipped and the lag is 0.
func testGroupResume(t *testing.T, name string, consume groupConsumeFunc) {
	topic, group := "grp-"+name, "grp-"+name+"-g"
	const produced, firstRun = 90, 50
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, topic, 3, nil)
	produceN(ctx, t, b.KafkaAddr, topic, name, produced)

	seen := map[tpo]int{}
	got := consume(ctx, t, b.KafkaAddr, group, topic, firstRun)
	for _, r := range got {
		seen[r]++
	}
	committed, lag := groupLag(ctx, t, adm, group, topic)
	if sumCommitted(committed) != firstRun || lag != produced-firstRun {
		t.Fatalf("%s consumed %d records and committed %v (sum %d), lag %d; want sum %d and lag %d",
			name, len(got), committed, sumCommitted(committed), lag, firstRun, produced-firstRun)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	adm = newAdmin(t, b.KafkaAddr)
	got = consume(ctx, t, b.KafkaAddr, group, topic, produced-firstRun)
	first := map[int32]int64{}
	for _, r := range got {
		seen[r]++
		if _, ok := first[r.p]; !ok {
			first[r.p] = r.o
		}
	}
	for p, o := range first {
		if want := max(committed[p], 0); o != want {
			t.Errorf("%s after restart resumed partition %d at %d, committed %d", name, p, o, committed[p])
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s: partition %d offset %d consumed %d times", name, k.p, k.o, n)
		}
	}
	if len(seen) != produced {
		t.Errorf("%s consumed %d distinct records in all, want %d", name, len(seen), produced)
	}
	if committed, lag = groupLag(ctx, t, adm, group, topic); lag != 0 || sumCommitted(committed) != produced {
		t.Errorf("%s at the end: commits %v lag %d, want %d committed and lag 0", name, committed, lag, produced)
	}
}
