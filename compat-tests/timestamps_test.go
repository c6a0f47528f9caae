package compat

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTimestamps covers the broker's side of record timestamps:
//   - message.timestamp.type=LogAppendTime: the broker stamps the batch with
//     its own clock, says so in the Produce response (LogAppendTime != -1)
//     and consumers see timestamp type 1 with that time;
//   - CreateTime (default): a timestamp more than
//     message.timestamp.after.max.ms (Kafka 4 default: 1 hour) in the future
//     is refused with INVALID_TIMESTAMP (32) (KIP-937); one a day in the past
//     is accepted and kept as sent.
func TestTimestamps(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, "log-append-time", 1, map[string]*string{"message.timestamp.type": kmsg.StringPtr("LogAppendTime")})
	createTopic(ctx, t, adm, "create-time", 1, nil)

	c := dialRaw(t, b.KafkaAddr)
	pv := pickVersion(t, c.apiVersions(), 0, 12)
	sent := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	before := time.Now().Add(-time.Second).UnixMilli()
	got := produceRaw(t, c, pv, "log-append-time", 0, recordBatchAt(sent, "stamped"))
	after := time.Now().Add(time.Second).UnixMilli()
	if got.ErrorCode != 0 {
		t.Fatalf("Produce v%d to a LogAppendTime topic: error %d", pv, got.ErrorCode)
	}
	if got.LogAppendTime < before || got.LogAppendTime > after {
		t.Errorf("Produce v%d to a LogAppendTime topic: LogAppendTime %d in the response, want the broker's clock (%d..%d)", pv, got.LogAppendTime, before, after)
	}
	recs := consumeAll(ctx, t, b.KafkaAddr, "log-append-time", map[int32]int64{0: 1})[0]
	if len(recs) != 1 {
		t.Fatalf("read %d records", len(recs))
	}
	r := recs[0]
	if r.Attrs.TimestampType() != 1 || r.Timestamp.UnixMilli() < before || r.Timestamp.UnixMilli() > after {
		t.Errorf("LogAppendTime topic: record timestamp %d (type %d), want the append time (%d..%d) with type 1",
			r.Timestamp.UnixMilli(), r.Attrs.TimestampType(), before, after)
	}

	future := time.Now().Add(2 * time.Hour).UnixMilli()
	if got := produceRaw(t, c, pv, "create-time", 0, recordBatchAt(future, "from the future")); got.ErrorCode != kerr.InvalidTimestamp.Code {
		t.Errorf("Produce v%d with a timestamp 2h ahead (after.max.ms defaults to 1h): error %d (%v), want %d (INVALID_TIMESTAMP)",
			pv, got.ErrorCode, kerr.ErrorForCode(got.ErrorCode), kerr.InvalidTimestamp.Code)
	}
	past := time.Now().Add(-24 * time.Hour).UnixMilli()
	if got := produceRaw(t, c, pv, "create-time", 0, recordBatchAt(past, "yesterday")); got.ErrorCode != 0 || got.LogAppendTime != -1 {
		t.Errorf("Produce v%d with yesterday's timestamp to a CreateTime topic: error %d LogAppendTime %d, want 0 and -1", pv, got.ErrorCode, got.LogAppendTime)
	}
	recs = consumeAll(ctx, t, b.KafkaAddr, "create-time", endOffsets(ctx, t, adm, "create-time"))[0]
	if len(recs) != 1 || recs[0].Timestamp.UnixMilli() != past || recs[0].Attrs.TimestampType() != 0 {
		var ts int64
		if len(recs) > 0 {
			ts = recs[0].Timestamp.UnixMilli()
		}
		t.Errorf("CreateTime topic holds %d records (first timestamp %d), want exactly the one stamped %d with type 0", len(recs), ts, past)
	}
}
