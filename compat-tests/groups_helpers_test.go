package compat

import (
	"context"
	"fmt"
	"strconv"
	"testing"

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
