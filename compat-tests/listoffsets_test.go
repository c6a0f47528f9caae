package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListOffsetsSemantics checks ListOffsets as Kafka answers it, at the
// highest version both sides speak: -2 is the log start, -1 the high
// watermark, -3 (v7+, KIP-734) the record with the largest timestamp, and a
// timestamp gives the earliest offset whose record timestamp is >= it
// (record-level, not batch-level), or offset -1 when there is none.
func TestListOffsetsSemantics(t *testing.T) {
	t.Parallel()
	const topic = "timestamps"
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, topic, 1, nil)

	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	at := func(ms int64) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	produce := func(tss ...int64) {
		var rs []*kgo.Record
		for _, ts := range tss {
			rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "ts+%d", ts), Timestamp: at(ts)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	produce(0, 1, 2, 3, 4)  // offsets 0-4
	produce(1000)           // offset 5: the largest timestamp, in its own batch
	produce(10, 11, 12, 13) // offsets 6-9

	c := dialRaw(t, b.KafkaAddr)
	v := pickVersion(t, c.apiVersions(), 2, 11)
	list := func(ts int64) (int64, int64, int16) {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = v
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = 0
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = ts
		rp.MaxNumOffsets = 1 // v0 only
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := c.roundTrip(req, v)
		if err != nil {
			t.Fatalf("ListOffsets v%d: %v", v, err)
		}
		r := resp.(*kmsg.ListOffsetsResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("ListOffsets v%d: %d topics in the answer", v, len(r.Topics))
		}
		p := r.Topics[0].Partitions[0]
		return p.Offset, p.Timestamp, p.ErrorCode
	}
	ms := func(d int64) int64 { return at(d).UnixMilli() }
	cases := []struct {
		name       string
		ts         int64
		wantOffset int64
		wantTS     int64 // checked when not 0
		minVersion int16
	}{
		{"earliest (-2)", -2, 0, 0, 1},
		{"latest (-1)", -1, 10, 0, 1},
		{"timestamp inside the first batch", ms(2), 2, ms(2), 1},
		{"timestamp between batches", ms(5), 5, ms(1000), 1},
		{"timestamp whose first match is an earlier, larger timestamp", ms(11), 5, ms(1000), 1},
		{"timestamp of the first record", ms(0), 0, ms(0), 1},
		{"timestamp after every record", ms(2000), -1, -1, 1},
		{"max timestamp (-3)", -3, 5, ms(1000), 7},
	}
	for _, tc := range cases {
		if v < tc.minVersion {
			continue
		}
		off, ts, ec := list(tc.ts)
		if ec != 0 || off != tc.wantOffset || (tc.wantTS != 0 && ts != tc.wantTS) {
			t.Errorf("ListOffsets v%d %s (timestamp %d): offset %d timestamp %d error %d; want offset %d timestamp %d",
				v, tc.name, tc.ts, off, ts, ec, tc.wantOffset, tc.wantTS)
		}
	}
}
