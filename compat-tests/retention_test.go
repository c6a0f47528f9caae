package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRetentionByTime: with retention.ms=60000 and segment.ms=100, batches
// whose record timestamps are two hours old each roll a segment and are
// deleted by the retention check (run every 200ms here), while a fresh batch
// stays. The log start offset moves past the deleted records (ListOffsets
// earliest), a consumer starting at the beginning gets only what is left,
// and a Fetch below the log start is OFFSET_OUT_OF_RANGE, as in Kafka.
func TestRetentionByTime(t *testing.T) {
	t.Parallel()
	const topic = "retained-briefly"
	b := startBroker(t, "--set", "log.retention.check.interval.ms=200")
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, topic, 1, map[string]*string{
		"retention.ms": kmsg.StringPtr("60000"),
		"segment.ms":   kmsg.StringPtr("100"),
	})

	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	old := time.Now().Add(-2 * time.Hour)
	for i := 0; i < 3; i++ { // three old batches, a second apart in record time
		r := &kgo.Record{Value: fmt.Appendf(nil, "old-%d", i), Timestamp: old.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce old-%d: %v", i, err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("fresh"), Timestamp: time.Now()}).FirstErr(); err != nil {
		t.Fatalf("produce fresh: %v", err)
	}

	deadline := time.Now().Add(20 * time.Second)
	var start int64
	for {
		so, err := adm.ListStartOffsets(ctx, topic)
		if err != nil || so.Error() != nil {
			t.Fatalf("ListOffsets(earliest): %v %v", err, so.Error())
		}
		o, _ := so.Lookup(topic, 0)
		start = o.Offset
		if start == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if start != 3 {
		t.Fatalf("log start offset %d 20s after producing expired batches, want 3 (the three old one-record segments deleted, the fresh one kept)", start)
	}
	got := consumeAll(ctx, t, b.KafkaAddr, topic, map[int32]int64{0: 4})[0]
	if len(got) != 1 || string(got[0].Value) != "fresh" || got[0].Offset != 3 {
		t.Errorf("consuming from the start after retention: %d records (first %q), want only \"fresh\" at offset 3", len(got), firstValue(got))
	}

	c := dialRaw(t, b.KafkaAddr)
	fv := pickVersion(t, c.apiVersions(), 1, 12)
	req := kmsg.NewPtrFetchRequest()
	req.Version = fv
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = 0
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LastFetchedEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.roundTrip(req, fv)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.OffsetOutOfRange.Code || (fv >= 5 && p.LogStartOffset != 3) {
		t.Errorf("Fetch v%d at offset 0 below the log start: error %d log start %d, want %d (OFFSET_OUT_OF_RANGE) and 3",
			fv, p.ErrorCode, p.LogStartOffset, kerr.OffsetOutOfRange.Code)
	}
}

func firstValue(rs []*kgo.Record) string {
	if len(rs) == 0 {
		return ""
	}
	return string(rs[0].Value)
}
