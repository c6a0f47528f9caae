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
// kadm computes them (OffsetFetch against ListOffsets).
func groupLag(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string) (map[int32]int64, int64) {
	t.Helper()
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
