package compat

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAcksLevels produces with acks=1 and acks=0 (both without idempotence,
// which needs acks=all) and reads everything back. acks=0 requests get no
// response at all: a broker that answered them would desynchronise the
// client's connection (kgo does not read responses for acks=0).
func TestAcksLevels(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	const n = 5000
	for _, tc := range []struct {
		name string
		acks kgo.Acks
	}{
		{"acks=1", kgo.LeaderAck()},
		{"acks=0", kgo.NoAck()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "acks-" + map[string]string{"acks=1": "one", "acks=0": "zero"}[tc.name]
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			createTopic(ctx, t, adm, topic, 2, nil)
			cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(tc.acks), kgo.DisableIdempotentWrite())
			var rs []*kgo.Record
			for i := 0; i < n; i++ {
				rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "%d", i), Value: fmt.Appendf(nil, "%s-%d", tc.name, i)})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("produce with %s: %v", tc.name, err)
			}
			// acks=0 gives no offsets and no confirmation: wait for the
			// high watermarks to account for every record.
			var ends map[int32]int64
			deadline := time.Now().Add(20 * time.Second)
			for {
				ends = endOffsets(ctx, t, adm, topic)
				if ends[0]+ends[1] >= n || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if ends[0]+ends[1] != n {
				t.Fatalf("%s: high watermarks %v add up to %d, want %d", tc.name, ends, ends[0]+ends[1], n)
			}
			got := consumeAll(ctx, t, b.KafkaAddr, topic, ends)
			seen := map[string]bool{}
			for _, p := range got {
				for _, r := range p {
					seen[string(r.Value)] = true
				}
			}
			if len(seen) != n {
				t.Errorf("%s: read %d distinct records, want %d", tc.name, len(seen), n)
			}
			// The client's connection still works after all that.
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
				t.Errorf("%s: a produce after the run failed: %v", tc.name, err)
			}
		})
	}
}

// TestLargeRecordOverPartitionMaxBytes: a consumer whose per-partition fetch
// limit (100 KiB) is smaller than a batch (~900 KiB) still gets that batch:
// Kafka (KIP-74) returns the first batch whole even when it is larger than
// the limits, so that consumers always make progress.
func TestLargeRecordOverPartitionMaxBytes(t *testing.T) {
	t.Parallel()
	const topic = "large-records"
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, topic, 1, nil)
	big := bytes.Repeat([]byte("0123456789abcdef"), 900<<10/16)
	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: big}, &kgo.Record{Value: []byte("small")}).FirstErr(); err != nil {
		t.Fatalf("produce a %d-byte record: %v", len(big), err)
	}
	consumer := newClient(t, b.KafkaAddr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxPartitionBytes(100<<10), kgo.FetchMaxBytes(100<<10), kgo.FetchMaxWait(500*time.Millisecond))
	var got []*kgo.Record
	for len(got) < 2 && ctx.Err() == nil {
		fs := consumer.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("fetch: %v", err)
			}
		})
		got = append(got, fs.Records()...)
	}
	if len(got) != 2 || !bytes.Equal(got[0].Value, big) || string(got[1].Value) != "small" {
		t.Fatalf("read %d records (want the %d-byte one, then \"small\"); a broker that returns nothing when the first batch exceeds the fetch limits stalls the consumer", len(got), len(big))
	}
}
