package metastore

import (
	"encoding/json"
	"reflect"
	"strings"
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
		{Seq: 4, Op: opCommitOffsets, Group: "ordered", BrokerID: 12, Inc: 1 << 33, WriteSeq: 1 << 50, Offsets: []OffsetCommit{
			{TopicPartition: TopicPartition{"t", 1}, Offset: 6, CommitTime: time.UnixMilli(1700000000000).UTC()},
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

// TestEndpointProtocolCompatible: a broker registration carries each
// listener's security protocol through the log; one written before
// endpoints had it (no Protocol field) decodes as PLAINTEXT, and a
// PLAINTEXT-less registration encodes as before.
func TestEndpointProtocolCompatible(t *testing.T) {
	b := &proposalBatch{Node: 1, Nonce: 2, Cmds: []command{{Seq: 1, Op: opRegisterBroker, Broker: &Broker{ID: 4, Role: RoleRead,
		Endpoints: []Endpoint{{Name: "CLIENT", View: "read", Host: "h", Port: 9093, Protocol: "SASL_SSL"}, {Name: "PLAIN", View: "mixed", Host: "h", Port: 9092}}}}}}
	got, err := decodeBatch(encodeBatch(b))
	if err != nil {
		t.Fatal(err)
	}
	eps := got.Cmds[0].Broker.Endpoints
	if eps[0].SecurityProtocol() != "SASL_SSL" || eps[1].SecurityProtocol() != "PLAINTEXT" {
		t.Fatalf("round trip: %+v", eps)
	}
	if js, _ := json.Marshal(eps[1]); strings.Contains(string(js), "Protocol") {
		t.Fatalf("an endpoint without a protocol encodes one: %s", js)
	}
	var old Broker
	if err := json.Unmarshal([]byte(`{"ID":1,"Role":"write","Endpoints":[{"Name":"KAFKA","View":"write","Host":"10.0.0.1","Port":9092}],"Incarnation":3}`), &old); err != nil {
		t.Fatal(err)
	}
	if ep := old.Endpoints[0]; ep.Protocol != "" || ep.SecurityProtocol() != "PLAINTEXT" || ep.Port != 9092 {
		t.Fatalf("old registration: %+v", ep)
	}
}
