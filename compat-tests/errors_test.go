package compat

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaErrorCodes asks for things Kafka refuses and checks that the
// broker refuses them with Kafka's error code: clients map codes to
// exceptions and retry decisions, so a wrong code is a behaviour change.
func TestKafkaErrorCodes(t *testing.T) {
	t.Parallel()
	const topic = "errors"
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, topic, 3, nil)

	want := func(t *testing.T, what string, got error, msg string, code *kerr.Error) {
		t.Helper()
		if !errors.Is(got, code) {
			t.Errorf("%s: got %v (%s), want %s (%d)", what, got, msg, code.Message, code.Code)
		}
	}

	t.Run("CreateTopics", func(t *testing.T) {
		// Kafka (KRaft ReplicationControlManager / ConfigurationControlManager).
		cases := []struct {
			what       string
			name       string
			partitions int32
			rf         int16
			configs    map[string]*string
			code       *kerr.Error
		}{
			{"invalid name", "bad/name", 1, 1, nil, kerr.InvalidTopicException},
			{"name too long", strings.Repeat("x", 250), 1, 1, nil, kerr.InvalidTopicException},
			{"existing topic", topic, 1, 1, nil, kerr.TopicAlreadyExists},
			{"zero partitions", "zero-partitions", 0, 1, nil, kerr.InvalidPartitions},
			{"replication factor above the broker count", "rf-three", 1, 3, nil, kerr.InvalidReplicationFactor},
			{"unparsable config value", "bad-config", 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("soon")}, kerr.InvalidConfig},
			{"unknown config name", "unknown-config", 1, 1, map[string]*string{"no.such.config": kmsg.StringPtr("1")}, kerr.InvalidConfig},
		}
		for _, c := range cases {
			resps, err := adm.CreateTopics(ctx, c.partitions, c.rf, c.configs, c.name)
			if err != nil {
				t.Errorf("CreateTopics %s: request failed: %v", c.what, err)
				continue
			}
			resp, ok := resps[c.name]
			if !ok {
				t.Errorf("CreateTopics %s: no answer for %q", c.what, c.name)
				continue
			}
			want(t, "CreateTopics "+c.what, resp.Err, resp.ErrMessage, c.code)
		}
		// None of the refused topics may exist afterwards.
		td := freshTopics(ctx, t, b.KafkaAddr)
		for _, c := range cases[3:] {
			if _, ok := td[c.name]; ok {
				t.Errorf("CreateTopics %s was refused, but topic %q exists", c.what, c.name)
			}
		}
	})

	t.Run("CreatePartitionsDecrease", func(t *testing.T) {
		resp, err := adm.UpdatePartitions(ctx, 2, topic)
		if err != nil {
			t.Fatalf("CreatePartitions: %v", err)
		}
		r := resp[topic]
		want(t, "CreatePartitions 3 -> 2", r.Err, r.ErrMessage, kerr.InvalidPartitions)
	})

	t.Run("UnknownTopic", func(t *testing.T) {
		dr, err := adm.DeleteTopics(ctx, "never-created")
		if err != nil {
			t.Fatalf("DeleteTopics: %v", err)
		}
		want(t, "DeleteTopics of a missing topic", dr["never-created"].Err, dr["never-created"].ErrMessage, kerr.UnknownTopicOrPartition)
		rcs, err := adm.DescribeTopicConfigs(ctx, "never-created")
		if err == nil {
			rc, oerr := rcs.On("never-created", nil)
			if oerr != nil {
				err = oerr
			} else {
				err = rc.Err
			}
		}
		want(t, "DescribeConfigs of a missing topic", err, "", kerr.UnknownTopicOrPartition)
	})

	t.Run("ProduceAndFetchErrors", func(t *testing.T) {
		c := dialRaw(t, b.KafkaAddr)
		versions := c.apiVersions()
		pv := pickVersion(t, versions, 0, 12)
		if got := produceRaw(t, c, pv, topic, 99, recordBatch("x")); got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("Produce v%d to partition 99 of a 3-partition topic: error %d, want %d (UNKNOWN_TOPIC_OR_PARTITION)", pv, got.ErrorCode, kerr.UnknownTopicOrPartition.Code)
		}
		// max.message.bytes defaults to 1048588: a larger batch is refused whole.
		big := recordBatch(strings.Repeat("b", 1<<20+1024))
		if got := produceRaw(t, c, pv, topic, 0, big); got.ErrorCode != kerr.MessageTooLarge.Code {
			t.Errorf("Produce v%d of a %d-byte batch: error %d, want %d (MESSAGE_TOO_LARGE)", pv, len(big), got.ErrorCode, kerr.MessageTooLarge.Code)
		}
		if got := produceRaw(t, c, pv, topic, 0, recordBatch("one", "two")); got.ErrorCode != 0 || got.BaseOffset != 0 {
			t.Fatalf("Produce v%d of a valid batch after the refusals: error %d base offset %d, want 0 and 0", pv, got.ErrorCode, got.BaseOffset)
		}

		fv := pickVersion(t, versions, 1, 12)
		fetch := func(partition int32, offset int64) kmsg.FetchResponseTopicPartition {
			t.Helper()
			req := kmsg.NewPtrFetchRequest()
			req.Version = fv
			req.ReplicaID = -1
			req.MaxWaitMillis = 100
			req.MaxBytes = 1 << 20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = partition
			rp.FetchOffset = offset
			rp.PartitionMaxBytes = 1 << 20
			rp.CurrentLeaderEpoch = -1
			rp.LastFetchedEpoch = -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := c.roundTrip(req, fv)
			if err != nil {
				t.Fatalf("Fetch v%d: %v", fv, err)
			}
			r := resp.(*kmsg.FetchResponse)
			if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
				t.Fatalf("Fetch v%d: error %d, %d topics in the answer", fv, r.ErrorCode, len(r.Topics))
			}
			return r.Topics[0].Partitions[0]
		}
		if p := fetch(0, 1000); p.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Errorf("Fetch v%d at offset 1000 of a 2-record partition: error %d, want %d (OFFSET_OUT_OF_RANGE)", fv, p.ErrorCode, kerr.OffsetOutOfRange.Code)
		}
		if p := fetch(0, 2); p.ErrorCode != 0 || p.HighWatermark != 2 || len(p.RecordBatches) != 0 {
			t.Errorf("Fetch v%d at the high watermark: error %d, high watermark %d, %d bytes; want 0, 2, 0 (an empty answer, not an error)", fv, p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
		}
		if p := fetch(99, 0); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("Fetch v%d of partition 99: error %d, want %d (UNKNOWN_TOPIC_OR_PARTITION)", fv, p.ErrorCode, kerr.UnknownTopicOrPartition.Code)
		}
	})
	requireHealthy(t, b)
}
