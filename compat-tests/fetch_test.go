package compat

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchEmptyPartitionRecordsNotNull fetches at the end of a partition by
// hand, at every Fetch version the broker and kmsg share from v4 up: the
// partition's Records must be present and empty (length 0), not null
// (length -1). Kafka always sends empty MemoryRecords; librdkafka (kcat,
// confluent-kafka-*) rejects a null record set as "invalid MessageSetSize -1",
// so a consumer never sees the end of a partition.
func TestFetchEmptyPartitionRecordsNotNull(t *testing.T) {
	t.Parallel()
	const topic = "fetch-empty"
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTopic(ctx, t, adm, topic, 1, nil)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("Metadata %q: %v %v", topic, err, td[topic].Err)
	}
	topicID := td[topic].ID

	c := dialRaw(t, b.KafkaAddr)
	versions := c.apiVersions()
	fv, ok := versions[1]
	if !ok {
		t.Fatal("broker does not advertise Fetch")
	}
	for v := max(fv.MinVersion, 4); v <= min(fv.MaxVersion, 17); v++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version = v
		req.ReplicaID = -1
		req.MaxWaitMillis = 10
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rt.TopicID = topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = 0
		rp.FetchOffset = 0
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rp.LastFetchedEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := c.roundTrip(req, v)
		if err != nil {
			t.Fatalf("Fetch v%d: %v", v, err)
		}
		r := resp.(*kmsg.FetchResponse)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Errorf("Fetch v%d: error %d, %d topics in the answer; want one topic with one partition", v, r.ErrorCode, len(r.Topics))
			continue
		}
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Errorf("Fetch v%d at offset 0 of an empty partition: error code %d", v, p.ErrorCode)
		}
		if p.HighWatermark != 0 {
			t.Errorf("Fetch v%d: high watermark %d, want 0", v, p.HighWatermark)
		}
		if p.RecordBatches == nil {
			t.Errorf("Fetch v%d: partition records are null; Kafka sends an empty record set (librdkafka: \"invalid MessageSetSize -1\")", v)
		}
	}
}
