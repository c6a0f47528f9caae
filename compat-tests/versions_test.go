package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEveryAdvertisedVersion sends, for each API below, a small valid
// request at every version the broker advertises in ApiVersions (and kmsg
// knows), and checks that the answer decodes at that version, has no bytes
// left over, and says what Kafka would say. "Advertise honestly, and serve
// every version you advertise": clients pick the highest common version, and
// older clients pin old ones (librdkafka 2.0.2 Metadata <= v4, kafkajs
// non-flexible versions, kafka-go v0-v2). Produce v0-2 are skipped (Kafka 4
// advertises them but rejects them).
func TestEveryAdvertisedVersion(t *testing.T) {
	t.Parallel()
	const topic = "sweep"
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, topic, 1, nil)
	createTopic(ctx, t, adm, "sweep-grow", 1, nil)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("Metadata: %v %v", err, td[topic].Err)
	}
	topicID := td[topic].ID
	leaderEpoch := td[topic].Partitions[0].LeaderEpoch

	c := dialRaw(t, b.KafkaAddr)
	advertised := c.apiVersions()
	var records int64 // records in topic/0 so far

	sweep := func(key, floor int16, build func(v int16) kmsg.Request, check func(v int16, resp kmsg.Response) string) {
		av, ok := advertised[key]
		name := kmsg.NameForKey(key)
		if !ok {
			t.Logf("%s (key %d) not advertised; skipped", name, key)
			return
		}
		kmax := kmsg.RequestForKey(key).MaxVersion()
		for v := max(av.MinVersion, floor); v <= min(av.MaxVersion, kmax); v++ {
			req := build(v)
			resp, err := c.roundTrip(req, v)
			if err != nil {
				t.Errorf("%s v%d: %v", name, v, err)
				c = dialRaw(t, b.KafkaAddr) // the broker may have closed the connection
				continue
			}
			if re := resp.AppendTo(nil); len(re) != len(c.lastBody) {
				t.Errorf("%s v%d: response body is %d bytes, but what kmsg decoded from it re-encodes to %d (misaligned or trailing fields)",
					name, v, len(c.lastBody), len(re))
			}
			if msg := check(v, resp); msg != "" {
				t.Errorf("%s v%d: %s", name, v, msg)
			}
		}
		t.Logf("%s: advertised v%d-v%d, swept v%d-v%d", name, av.MinVersion, av.MaxVersion, max(av.MinVersion, floor), min(av.MaxVersion, kmax))
	}
	errf := func(code int16) string {
		if code == 0 {
			return ""
		}
		return fmt.Sprintf("error %d (%v)", code, kerr.ErrorForCode(code))
	}

	sweep(18, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version = v
		r.ClientSoftwareName, r.ClientSoftwareVersion = "sluice-compat", "0.1"
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.ApiVersionsResponse)
		if r.ErrorCode != 0 || len(r.ApiKeys) < 5 {
			return fmt.Sprintf("error %d with %d keys", r.ErrorCode, len(r.ApiKeys))
		}
		return ""
	})

	sweep(3, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		r.Version = v
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		r.Topics = append(r.Topics, rt)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.MetadataResponse)
		if len(r.Brokers) != 1 || len(r.Topics) != 1 {
			return fmt.Sprintf("%d brokers and %d topics, want 1 and 1", len(r.Brokers), len(r.Topics))
		}
		tp := r.Topics[0]
		if tp.ErrorCode != 0 || len(tp.Partitions) != 1 || tp.Partitions[0].ErrorCode != 0 || tp.Partitions[0].Leader != r.Brokers[0].NodeID {
			return fmt.Sprintf("topic error %d, %d partitions (%+v)", tp.ErrorCode, len(tp.Partitions), tp.Partitions)
		}
		if v >= 10 && tp.TopicID != topicID {
			return fmt.Sprintf("topic id %x, want %x", tp.TopicID, topicID)
		}
		return ""
	})

	sweep(0, 3, func(v int16) kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.Version = v
		r.Acks = -1
		r.TimeoutMillis = 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rt.TopicID = topicID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recordBatch(fmt.Sprintf("produce-v%d", v))
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.ProduceResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return fmt.Sprintf("%d topics in the answer", len(r.Topics))
		}
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != records {
			return fmt.Sprintf("error %d base offset %d, want 0 and %d", p.ErrorCode, p.BaseOffset, records)
		}
		records++
		return ""
	})

	sweep(1, 4, func(v int16) kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.Version = v
		r.ReplicaID = -1
		r.MaxWaitMillis = 100
		r.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rt.TopicID = topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rp.LastFetchedEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.FetchResponse)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return fmt.Sprintf("error %d, %d topics", r.ErrorCode, len(r.Topics))
		}
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != records || len(p.RecordBatches) == 0 {
			return fmt.Sprintf("error %d high watermark %d with %d bytes of records; want 0, %d, some", p.ErrorCode, p.HighWatermark, len(p.RecordBatches), records)
		}
		return ""
	})

	sweep(2, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrListOffsetsRequest()
		r.Version = v
		r.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rp.MaxNumOffsets = 1
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.ListOffsetsResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return fmt.Sprintf("%d topics", len(r.Topics))
		}
		p := r.Topics[0].Partitions[0]
		got := p.Offset
		if v == 0 {
			if len(p.OldStyleOffsets) != 1 {
				return fmt.Sprintf("v0 offsets %v, want [%d]", p.OldStyleOffsets, records)
			}
			got = p.OldStyleOffsets[0]
		}
		if p.ErrorCode != 0 || got != records {
			return fmt.Sprintf("error %d offset %d, want 0 and %d", p.ErrorCode, got, records)
		}
		return ""
	})

	sweep(22, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.Version = v
		r.TransactionTimeoutMillis = 60_000
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.InitProducerIDResponse)
		if r.ErrorCode != 0 || r.ProducerID < 0 {
			return fmt.Sprintf("error %d producer id %d", r.ErrorCode, r.ProducerID)
		}
		return ""
	})

	sweep(23, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.Version = v
		r.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch = -1
		rp.LeaderEpoch = leaderEpoch
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.OffsetForLeaderEpochResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return fmt.Sprintf("%d topics", len(r.Topics))
		}
		p := r.Topics[0].Partitions[0]
		if leaderEpoch >= 0 && (p.ErrorCode != 0 || p.EndOffset != records) {
			return fmt.Sprintf("for the current leader epoch %d: error %d end offset %d, want 0 and %d (the log end)", leaderEpoch, p.ErrorCode, p.EndOffset, records)
		}
		return ""
	})

	sweep(32, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.Version = v
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		rr.ResourceName = topic
		r.Resources = append(r.Resources, rr)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.DescribeConfigsResponse)
		if len(r.Resources) != 1 || r.Resources[0].ErrorCode != 0 {
			return fmt.Sprintf("%d resources (%+v)", len(r.Resources), r.Resources)
		}
		for _, c := range r.Resources[0].Configs {
			if c.Name == "retention.ms" {
				return ""
			}
		}
		return "no retention.ms among the topic's configs"
	})

	// On a PLAINTEXT listener SASL requests are answered
	// ILLEGAL_SASL_STATE, as Kafka's KafkaApis does (the SASL_* listeners
	// are tested in security_test.go).
	sweep(17, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Version, r.Mechanism = v, "PLAIN"
		return r
	}, func(v int16, resp kmsg.Response) string {
		if r := resp.(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
			return fmt.Sprintf("error %d, want ILLEGAL_SASL_STATE", r.ErrorCode)
		}
		return ""
	})
	sweep(36, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.Version, r.SASLAuthBytes = v, []byte("\x00u\x00p")
		return r
	}, func(v int16, resp kmsg.Response) string {
		if r := resp.(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
			return fmt.Sprintf("error %d, want ILLEGAL_SASL_STATE", r.ErrorCode)
		}
		return ""
	})
	sweep(51, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		r.Version = v
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = "sweep-user", 2, 4096, []byte("salt"), make([]byte, 64)
		r.Upsertions = append(r.Upsertions, u)
		return r
	}, func(v int16, resp kmsg.Response) string {
		if r := resp.(*kmsg.AlterUserSCRAMCredentialsResponse); len(r.Results) != 1 || r.Results[0].ErrorCode != 0 {
			return fmt.Sprintf("results %+v", r.Results)
		}
		return ""
	})
	sweep(50, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		r.Version = v
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
		if r.ErrorCode != 0 || len(r.Results) != 1 || r.Results[0].User != "sweep-user" || len(r.Results[0].CredentialInfos) != 1 ||
			r.Results[0].CredentialInfos[0].Mechanism != 2 || r.Results[0].CredentialInfos[0].Iterations != 4096 {
			return fmt.Sprintf("error %d, results %+v", r.ErrorCode, r.Results)
		}
		return ""
	})
	sweep(60, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrDescribeClusterRequest()
		r.Version = v
		r.EndpointType = 1
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.DescribeClusterResponse)
		if r.ErrorCode != 0 || len(r.Brokers) != 1 {
			return fmt.Sprintf("error %d with %d brokers", r.ErrorCode, len(r.Brokers))
		}
		return ""
	})

	// The log admin APIs: DeleteRecords at the log start (moves nothing),
	// DescribeLogDirs of the topic, DescribeProducers and
	// DescribeTopicPartitions of partition 0.
	sweep(21, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrDeleteRecordsRequest()
		r.Version, r.TimeoutMillis = v, 10_000
		r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: topic, Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.DeleteRecordsResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return "no partition in the answer"
		}
		if p := r.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 0 {
			return fmt.Sprintf("error %d, low watermark %d", p.ErrorCode, p.LowWatermark)
		}
		return ""
	})
	sweep(35, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrDescribeLogDirsRequest()
		r.Version = v
		r.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: topic, Partitions: []int32{0}}}
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.DescribeLogDirsResponse)
		if len(r.Dirs) != 1 || r.Dirs[0].ErrorCode != 0 || len(r.Dirs[0].Topics) != 1 || len(r.Dirs[0].Topics[0].Partitions) != 1 {
			return fmt.Sprintf("dirs %+v", r.Dirs)
		}
		if d := r.Dirs[0]; v >= 4 && (d.TotalBytes <= 0 || d.UsableBytes < 0) {
			return fmt.Sprintf("total %d usable %d bytes", d.TotalBytes, d.UsableBytes)
		}
		return ""
	})
	sweep(61, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrDescribeProducersRequest()
		r.Version = v
		r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: topic, Partitions: []int32{0}}}
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.DescribeProducersResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return "no partition in the answer"
		}
		return errf(r.Topics[0].Partitions[0].ErrorCode)
	})
	sweep(75, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrDescribeTopicPartitionsRequest()
		r.Version = v
		r.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: topic}}
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.DescribeTopicPartitionsResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.NextCursor != nil {
			return fmt.Sprintf("topics %+v next %+v", r.Topics, r.NextCursor)
		}
		return errf(r.Topics[0].ErrorCode)
	})

	partitions := int32(1)
	sweep(37, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.Version = v
		r.TimeoutMillis = 10_000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic = "sweep-grow"
		rt.Count = partitions + 1
		r.Topics = append(r.Topics, rt)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.CreatePartitionsResponse)
		if len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
			return fmt.Sprintf("answer %+v", r.Topics)
		}
		partitions++
		return ""
	})

	sweep(44, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.Version = v
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		rr.ResourceName = topic
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name = "retention.ms"
		rc.Op = kmsg.IncrementalAlterConfigOpSet
		rc.Value = kmsg.StringPtr(fmt.Sprint(3_600_000 + int(v)))
		rr.Configs = append(rr.Configs, rc)
		r.Resources = append(r.Resources, rr)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.IncrementalAlterConfigsResponse)
		if len(r.Resources) != 1 {
			return fmt.Sprintf("%d resources", len(r.Resources))
		}
		return errf(r.Resources[0].ErrorCode)
	})

	// Placement APIs on one broker: the preferred replica leads already,
	// and there is no reassignment to cancel or list.
	sweep(43, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrElectLeadersRequest()
		r.Version = v
		r.TimeoutMillis = 5000
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		r.Topics = append(r.Topics, rt)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.ElectLeadersResponse)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return fmt.Sprintf("error %d with %d topics", r.ErrorCode, len(r.Topics))
		}
		if code := r.Topics[0].Partitions[0].ErrorCode; code != kerr.ElectionNotNeeded.Code {
			return fmt.Sprintf("want ELECTION_NOT_NEEDED, got %s", errf(code))
		}
		return ""
	})
	sweep(45, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		r.Version = v
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		rt.Partitions = append(rt.Partitions, kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()) // null replicas: cancel
		r.Topics = append(r.Topics, rt)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return fmt.Sprintf("error %d with %d topics", r.ErrorCode, len(r.Topics))
		}
		if code := r.Topics[0].Partitions[0].ErrorCode; code != kerr.NoReassignmentInProgress.Code {
			return fmt.Sprintf("want NO_REASSIGNMENT_IN_PROGRESS, got %s", errf(code))
		}
		return ""
	})
	sweep(46, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrListPartitionReassignmentsRequest()
		r.Version = v
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.ListPartitionReassignmentsResponse)
		if r.ErrorCode != 0 || len(r.Topics) != 0 {
			return fmt.Sprintf("error %d with %d topics", r.ErrorCode, len(r.Topics))
		}
		return ""
	})

	sweep(33, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrAlterConfigsRequest()
		r.Version = v
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeTopic
		rr.ResourceName = topic
		rc := kmsg.NewAlterConfigsRequestResourceConfig()
		rc.Name = "retention.ms"
		rc.Value = kmsg.StringPtr(fmt.Sprint(7_200_000 + int(v)))
		rr.Configs = append(rr.Configs, rc)
		r.Resources = append(r.Resources, rr)
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.AlterConfigsResponse)
		if len(r.Resources) != 1 {
			return fmt.Sprintf("%d resources", len(r.Resources))
		}
		return errf(r.Resources[0].ErrorCode)
	})

	created := map[int16]string{}
	sweep(19, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrCreateTopicsRequest()
		r.Version = v
		r.TimeoutMillis = 10_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = fmt.Sprintf("sweep-created-v%d", v)
		rt.NumPartitions = 1
		rt.ReplicationFactor = 1
		r.Topics = append(r.Topics, rt)
		created[v] = rt.Topic
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.CreateTopicsResponse)
		if len(r.Topics) != 1 || r.Topics[0].Topic != created[v] {
			return fmt.Sprintf("answer %+v", r.Topics)
		}
		return errf(r.Topics[0].ErrorCode)
	})

	toDelete := []string{}
	for v := int16(0); v < 64; v++ {
		if n, ok := created[v]; ok {
			toDelete = append(toDelete, n)
		}
	}
	sweep(20, 0, func(v int16) kmsg.Request {
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.Version = v
		r.TimeoutMillis = 10_000
		if len(toDelete) == 0 {
			toDelete = append(toDelete, "sweep-nonexistent")
		}
		name := toDelete[0]
		toDelete = toDelete[1:]
		r.TopicNames = []string{name}
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(name)
		r.Topics = []kmsg.DeleteTopicsRequestTopic{dt}
		return r
	}, func(v int16, resp kmsg.Response) string {
		r := resp.(*kmsg.DeleteTopicsResponse)
		if len(r.Topics) != 1 {
			return fmt.Sprintf("%d topics in the answer", len(r.Topics))
		}
		if r.Topics[0].Topic == nil || *r.Topics[0].Topic == "sweep-nonexistent" {
			return ""
		}
		return errf(r.Topics[0].ErrorCode)
	})
}
