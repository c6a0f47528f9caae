package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCleanRestartKeepsData: records produced before a SIGTERM (which must
// end the process with status 0) are all there after a restart, byte for
// byte, and new records continue at the old high watermark (offsets are
// never reused).
func TestCleanRestartKeepsData(t *testing.T) {
	t.Parallel()
	const (
		topic      = "clean-restart"
		partitions = 3
		n          = 10_000
	)
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, topic, partitions, nil)

	value := func(i int) string { return fmt.Sprintf("clean-%05d", i) }
	produce := func(from, to int) map[int32][]string {
		t.Helper()
		cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
		defer cl.Close()
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte(value(i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		out := map[int32][]string{}
		for _, r := range rs {
			out[r.Partition] = append(out[r.Partition], string(r.Value))
		}
		return out
	}
	before := produce(0, n)
	endsBefore := endOffsets(ctx, t, adm, topic)

	if err := b.Stop(); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
	b.Restart()
	adm = newAdmin(t, b.KafkaAddr)
	if got := endOffsets(ctx, t, adm, topic); fmt.Sprint(got) != fmt.Sprint(endsBefore) {
		t.Errorf("high watermarks after a clean restart %v, before %v", got, endsBefore)
	}
	after := produce(n, n+1000)
	ends := endOffsets(ctx, t, adm, topic)
	got := consumeAll(ctx, t, b.KafkaAddr, topic, ends)
	for p := int32(0); p < partitions; p++ {
		want := append(append([]string(nil), before[p]...), after[p]...)
		if len(got[p]) != len(want) {
			t.Errorf("partition %d: %d records after the restart, want %d", p, len(got[p]), len(want))
			continue
		}
		for i, r := range got[p] {
			if string(r.Value) != want[i] || r.Offset != int64(i) {
				t.Errorf("partition %d: offset %d holds %q, want %q at offset %d", p, r.Offset, r.Value, want[i], i)
				break
			}
		}
	}
}
