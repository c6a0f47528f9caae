package metastore

import (
	"reflect"
	"testing"
	"time"
)

func TestBatchCodecRoundTrip(t *testing.T) {
	id := TopicID{1, 2, 3}
	b := &proposalBatch{Node: 3, Nonce: 0xdeadbeef, Cmds: []command{
		{Seq: 1, Op: opCommitOffsets, Group: "g", Offsets: []OffsetCommit{
			{TopicPartition: TopicPartition{"t", 7}, Offset: 1 << 40, LeaderEpoch: 3, Metadata: "meta", CommitTime: time.UnixMilli(1700000000123).UTC()},
			{TopicPartition: TopicPartition{"", -1}, Offset: -1},
		}},
		{Seq: 2, Op: opCreateTopic, Spec: &TopicSpec{Name: "x", Partitions: 3}, TopicID: &id},
		{Seq: 3, Op: opCommitOffsets, Group: "fenced", BrokerID: 12, Inc: 1 << 33, Offsets: []OffsetCommit{
			{TopicPartition: TopicPartition{"t", 0}, Offset: 5, CommitTime: time.UnixMilli(1700000000000).UTC()},
		}},
	}}
	b.Cmds[0].Offsets[1].CommitTime = time.UnixMilli(0).UTC()
	got, err := decodeBatch(encodeBatch(b))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, b)
	}
	js, err := decodeBatch(encodeBatchJSON(b))
	if err != nil || js.Cmds[1].Spec.Name != "x" {
		t.Fatalf("json format: %+v %v", js, err)
	}
	v := offsetValue{Offset: 5, LeaderEpoch: -1, Metadata: "m\x00x", CommitTime: 12}
	if got, err := decodeOffsetValue(encodeOffsetValue(v)); err != nil || got != v {
		t.Fatalf("offset value %+v %v", got, err)
	}
}

// FuzzDecodeBatch: the decoder never panics on arbitrary input, and what it
// accepts re-encodes to an entry that decodes to the same batch.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(encodeBatch(&proposalBatch{Node: 1, Nonce: 2, Cmds: []command{{Seq: 1, Op: opCommitOffsets, Group: "g",
		Offsets: []OffsetCommit{{TopicPartition: TopicPartition{"t", 1}, Offset: 9}}}}}))
	f.Add(encodeBatch(&proposalBatch{Node: 1, Nonce: 2, Cmds: []command{{Seq: 1, Op: opNoop}}}))
	f.Add([]byte{2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != entryFormatBinary {
			return
		}
		b, err := decodeBatchBinary(data)
		if err != nil {
			return
		}
		b2, err := decodeBatchBinary(encodeBatchBinary(b))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(b2.Cmds) != len(b.Cmds) || b2.Node != b.Node || b2.Nonce != b.Nonce {
			t.Fatalf("mismatch %+v %+v", b, b2)
		}
	})
}
