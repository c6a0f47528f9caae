package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/protocol"
)

// TestOffsetCommitBatch: the view's batches are valid v2 batches whose
// records decode as Kafka's OffsetCommitKey v1 / OffsetCommitValue v3,
// timestamped with their commit times.
func TestOffsetCommitBatch(t *testing.T) {
	at := time.UnixMilli(1700000000000)
	cs := []metastore.GroupOffsetCommit{
		{Group: "g", OffsetCommit: metastore.OffsetCommit{TopicPartition: metastore.TopicPartition{Topic: "t", Partition: 3}, Offset: 42, LeaderEpoch: 7, Metadata: "meta", CommitTime: at.Add(5 * time.Millisecond)}},
		{Group: "h", OffsetCommit: metastore.OffsetCommit{TopicPartition: metastore.TopicPartition{Topic: "u", Partition: 0}, Offset: 0, LeaderEpoch: -1, CommitTime: at}},
	}
	raw := offsetCommitBatch(cs)
	b, err := protocol.ParseBatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	if b.RecordCount() != 2 || b.BaseTimestamp() != at.UnixMilli() || b.MaxTimestamp() != at.UnixMilli()+5 || b.ProducerID() != -1 {
		t.Fatalf("header: %d records, timestamps %d..%d, producer %d", b.RecordCount(), b.BaseTimestamp(), b.MaxTimestamp(), b.ProducerID())
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	recs := rb.Records
	for i, c := range cs {
		var r kmsg.Record
		if err := r.ReadFrom(recs); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		recs = recs[len(r.AppendTo(nil)):]
		var k kmsg.OffsetCommitKey
		var v kmsg.OffsetCommitValue
		if err := k.ReadFrom(r.Key); err != nil || k.Version != 1 || k.Group != c.Group || k.Topic != c.Topic || k.Partition != c.Partition {
			t.Fatalf("record %d key %+v %v", i, k, err)
		}
		if err := v.ReadFrom(r.Value); err != nil || v.Version != 3 || v.Offset != c.Offset || v.LeaderEpoch != c.LeaderEpoch ||
			v.Metadata != c.Metadata || v.CommitTimestamp != c.CommitTime.UnixMilli() {
			t.Fatalf("record %d value %+v %v", i, v, err)
		}
		if r.OffsetDelta != int32(i) || b.BaseTimestamp()+r.TimestampDelta64 != c.CommitTime.UnixMilli() {
			t.Fatalf("record %d: offset delta %d, timestamp delta %d", i, r.OffsetDelta, r.TimestampDelta64)
		}
	}
	if len(recs) != 0 {
		t.Fatalf("%d bytes after the records", len(recs))
	}
}

// TestOffsetsLeader: every broker picks the same leader whatever the order
// it lists brokers in; removing a broker moves only its partitions.
func TestOffsetsLeader(t *testing.T) {
	ids := []int32{4, 1, 7}
	moved := 0
	for p := int32(0); p < 50; p++ {
		l := offsetsLeader(ids, p)
		if l2 := offsetsLeader([]int32{7, 4, 1}, p); l2 != l {
			t.Fatalf("partition %d: %d or %d by order", p, l, l2)
		}
		if l3 := offsetsLeader([]int32{4, 1}, p); l != 7 && l3 != l {
			t.Fatalf("partition %d moved from %d to %d when 7 left", p, l, l3)
		} else if l == 7 {
			moved++
		}
	}
	if moved == 0 || moved == 50 {
		t.Fatalf("broker 7 led %d of 50 partitions", moved)
	}
	if offsetsLeader(nil, 0) != -1 {
		t.Fatal("a leader without brokers")
	}
}
