package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/configs"
)

// logAdminBroker starts a `sluice dev`-shaped broker with the given topics
// (name: partitions) and n records produced to partition 0 of the first.
func logAdminBroker(t *testing.T, topics map[string]int32) (*testBroker, *kgo.Client, *kadm.Client) {
	t.Helper()
	b := startBroker(t, nil)
	cl := b.client(t, kgo.DefaultProduceTopic("unused"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, n := range topics {
		if _, err := adm.CreateTopic(ctx, n, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	return b, cl, adm
}

func produceN(t *testing.T, cl *kgo.Client, topic string, partition int32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprintf("v%d", i)), Timestamp: time.UnixMilli(int64(1_700_000_000_000 + i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeleteRecordsHandler(t *testing.T) {
	_, cl, adm := logAdminBroker(t, map[string]int32{"dr": 2})
	produceN(t, cl, "dr", 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	steps := []struct {
		name      string
		topic     string
		partition int32
		offset    int64
		code      int16
		low       int64
	}{
		{"move to 4", "dr", 0, 4, 0, 4},
		{"below the log start changes nothing", "dr", 0, 2, 0, 4},
		{"past the high watermark", "dr", 0, 11, kerr.OffsetOutOfRange.Code, -1},
		{"negative other than -1", "dr", 0, -2, kerr.OffsetOutOfRange.Code, -1},
		{"-1 is the high watermark", "dr", 0, -1, 0, 10},
		{"empty partition at its high watermark", "dr", 1, 0, 0, 0},
		{"empty partition past it", "dr", 1, 1, kerr.OffsetOutOfRange.Code, -1},
		{"unknown partition", "dr", 2, 0, kerr.UnknownTopicOrPartition.Code, -1},
		{"negative partition", "dr", -1, 0, kerr.UnknownTopicOrPartition.Code, -1},
		{"unknown topic", "nope", 0, 0, kerr.UnknownTopicOrPartition.Code, -1},
	}
	for _, st := range steps {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = st.topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = st.partition, st.offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != st.code || got.LowWatermark != st.low || got.Partition != st.partition {
			t.Errorf("%s: code %d low watermark %d, want code %d low watermark %d", st.name, got.ErrorCode, got.LowWatermark, st.code, st.low)
		}
	}
	// ListOffsets earliest follows the log start; a consumer from the
	// start begins at it.
	starts, err := adm.ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("dr", 0); o.Offset != 10 || o.Err != nil {
		t.Fatalf("earliest after DeleteRecords: %+v, want 10", o)
	}
	produceN(t, cl, "dr", 0, 2)
	consumer := kgo.NewClient
	cc, err := consumer(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"dr": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	fs := cc.PollRecords(ctx, 10)
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 10 {
		t.Fatalf("consuming from the start after DeleteRecords: %d records, errors %v", len(recs), fs.Errors())
	}
}

func TestDescribeLogDirsHandler(t *testing.T) {
	b, cl, _ := logAdminBroker(t, map[string]int32{"ld": 2, "other": 1})
	produceN(t, cl, "ld", 0, 20)
	produceN(t, cl, "other", 0, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir, _ := filepath.Abs(b.srv.raft.Dir())
	onDisk := func(topic string, p int) int64 {
		files, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%s-%d", topic, p), "*.log"))
		var n int64
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		version int16
		topics  []kmsg.DescribeLogDirsRequestTopic
		want    map[string][]int32
	}{
		{"every partition, v4", 4, nil, map[string][]int32{"ld": {0, 1}, "other": {0}}},
		{"every partition, v1", 1, nil, map[string][]int32{"ld": {0, 1}, "other": {0}}},
		{"one partition", 4, []kmsg.DescribeLogDirsRequestTopic{{Topic: "ld", Partitions: []int32{1, 7}}, {Topic: "gone", Partitions: []int32{0}}}, map[string][]int32{"ld": {1}}},
		{"empty list", 4, []kmsg.DescribeLogDirsRequestTopic{}, map[string][]int32{}},
	} {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.Version = tc.version
		req.Topics = tc.topics
		resp, err := req.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(resp.Dirs) != 1 || resp.Dirs[0].Dir != dir || resp.Dirs[0].ErrorCode != 0 {
			t.Fatalf("%s: dirs %+v, want one: %s", tc.name, resp.Dirs, dir)
		}
		d := resp.Dirs[0]
		if tc.version >= 4 && (d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes) {
			t.Errorf("%s: total %d usable %d bytes", tc.name, d.TotalBytes, d.UsableBytes)
		}
		got := map[string][]int32{}
		for _, dt := range d.Topics {
			for _, dp := range dt.Partitions {
				got[dt.Topic] = append(got[dt.Topic], dp.Partition)
				if want := onDisk(dt.Topic, int(dp.Partition)); dp.Size != want {
					t.Errorf("%s: %s-%d size %d, segment files hold %d", tc.name, dt.Topic, dp.Partition, dp.Size, want)
				}
				if dp.OffsetLag != 0 || dp.IsFuture {
					t.Errorf("%s: %s-%d offset lag %d future %v", tc.name, dt.Topic, dp.Partition, dp.OffsetLag, dp.IsFuture)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: partitions %v, want %v", tc.name, got, tc.want)
		}
	}
	if onDisk("ld", 0) == 0 {
		t.Fatal("no bytes on disk for ld-0: the size check checked nothing")
	}
}

func TestDescribeProducersHandler(t *testing.T) {
	_, cl, _ := logAdminBroker(t, map[string]int32{"dp": 2})
	produceN(t, cl, "dp", 0, 7) // franz-go is idempotent by default
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "dp", Partitions: []int32{0, 1, 5}}, {Topic: "nope", Partitions: []int32{0}}}
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	ps := resp.Topics[0].Partitions
	if len(ps) != 3 || ps[0].ErrorCode != 0 || len(ps[0].ActiveProducers) != 1 {
		t.Fatalf("partition 0: %+v", ps)
	}
	ap := ps[0].ActiveProducers[0]
	if ap.ProducerID < 0 || ap.ProducerEpoch != 0 || ap.LastSequence != 6 || ap.LastTimestamp != 1_700_000_000_006 || ap.CoordinatorEpoch != -1 || ap.CurrentTxnStartOffset != -1 {
		t.Errorf("producer state %+v, want epoch 0, last sequence 6, last timestamp 1700000000006, -1s", ap)
	}
	if ps[1].ErrorCode != 0 || len(ps[1].ActiveProducers) != 0 {
		t.Errorf("partition 1 (nothing produced): %+v", ps[1])
	}
	if ps[2].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("partition 5: code %d, want UNKNOWN_TOPIC_OR_PARTITION", ps[2].ErrorCode)
	}
	if c := resp.Topics[1].Partitions[0].ErrorCode; c != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: code %d", c)
	}
}

func TestDescribeTopicPartitionsHandler(t *testing.T) {
	_, cl, _ := logAdminBroker(t, map[string]int32{"a": 3, "b": 2, "c": 4})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	describe := func(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit = limit
		req.Cursor = cursor
		for _, n := range topics {
			req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: n})
		}
		resp, err := req.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Page through everything, with limits that cut topics anywhere.
	for _, limit := range []int32{1, 2, 3, 5, 9, 2000, 0, -1} {
		var got []string
		var cursor *kmsg.DescribeTopicPartitionsRequestCursor
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatalf("limit %d: no end after 20 pages", limit)
			}
			resp := describe(limit, cursor)
			n := 0
			for _, rt := range resp.Topics {
				if rt.ErrorCode != 0 {
					t.Fatalf("limit %d: %+v", limit, rt)
				}
				for _, p := range rt.Partitions {
					got = append(got, fmt.Sprintf("%s-%d", *rt.Topic, p.Partition))
					n++
					if p.LeaderID != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.EligibleLeaderReplicas == nil || len(p.EligibleLeaderReplicas) != 0 || p.LastKnownELR == nil {
						t.Fatalf("limit %d: partition %+v", limit, p)
					}
				}
			}
			if max(limit, 1) < 2000 && n > int(max(limit, 1)) {
				t.Fatalf("limit %d: page of %d partitions", limit, n)
			}
			if resp.NextCursor == nil {
				break
			}
			cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
		}
		want := "a-0 a-1 a-2 b-0 b-1 c-0 c-1 c-2 c-3"
		if strings.Join(got, " ") != want {
			t.Errorf("limit %d: paged %v, want %s", limit, got, want)
		}
	}
	// Named topics: name order, unknown and invalid names answered.
	resp := describe(2000, nil, "c", "zz", "a", "bad/name")
	var order []string
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		order = append(order, *rt.Topic)
		codes[*rt.Topic] = rt.ErrorCode
	}
	if strings.Join(order, " ") != "a bad/name c zz" || codes["zz"] != kerr.UnknownTopicOrPartition.Code || codes["bad/name"] != kerr.InvalidTopicException.Code {
		t.Errorf("named topics: %v %v", order, codes)
	}
	// A cursor inside a named list, then invalid cursors.
	resp = describe(2, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "a", Partition: 2}, "a", "c")
	if len(resp.Topics) != 2 || resp.Topics[0].Partitions[0].Partition != 2 || resp.Topics[1].Partitions[0].Partition != 0 || resp.NextCursor == nil || resp.NextCursor.Topic != "c" || resp.NextCursor.Partition != 1 {
		t.Errorf("cursor a-2, limit 2: %+v next %+v", resp.Topics, resp.NextCursor)
	}
	for _, cur := range []kmsg.DescribeTopicPartitionsRequestCursor{{Topic: "b", Partition: 0}, {Topic: "a", Partition: -1}} {
		resp = describe(10, &cur, "a", "c")
		if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code || resp.Topics[1].ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("cursor %+v: %+v, want INVALID_REQUEST for each topic", cur, resp.Topics)
		}
	}
}

// TestLogAdminAuthorization: with the authorizer on, each log admin API
// asks for what Kafka's KafkaApis asks: DeleteRecords DELETE on the topic,
// DescribeLogDirs DESCRIBE on the cluster, DescribeProducers READ on the
// topic, DescribeTopicPartitions DESCRIBE on the topic, each refused with
// Kafka's error code (before the topic is looked up) until an ACL allows
// it. The client is User:ANONYMOUS on a PLAINTEXT listener.
func TestLogAdminAuthorization(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) {
		c.AuthorizerClassName = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		c.AutoCreateTopics = false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	grant := func(bs ...acl.Binding) {
		t.Helper()
		if err := b.meta.Client().CreateACLs(ctx, bs); err != nil {
			t.Fatal(err)
		}
	}
	// CREATE on the cluster (not ALTER, which implies DESCRIBE) and WRITE
	// on topic a (which implies DESCRIBE on it, not READ or DELETE).
	grant(anonymousACL(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, acl.OpCreate, acl.Allow),
		anonymousACL(acl.ResourceTopic, "a", acl.PatternLiteral, acl.OpWrite, acl.Allow))
	cl := b.client(t, kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("a"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, name := range []string{"a", "b"} {
		ct := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		ct.Topics = append(ct.Topics, rt)
		if r, err := ct.RequestWith(ctx, cl); err != nil || r.Topics[0].ErrorCode != 0 {
			t.Fatalf("CreateTopics %s: %v %+v", name, err, r)
		}
	}
	produceN(t, cl, "a", 0, 5)
	broker := cl.Broker(1)

	deleteRecords := func(topic string, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	describeProducers := func(topic string) kmsg.DescribeProducersResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	describeLogDirs := func() *kmsg.DescribeLogDirsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.Version = 4
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	for _, topic := range []string{"a", "nope"} {
		if sp := deleteRecords(topic, 2); sp.ErrorCode != kerr.TopicAuthorizationFailed.Code || sp.LowWatermark != -1 {
			t.Fatalf("DeleteRecords of %s without DELETE: %v, low watermark %d", topic, kerr.ErrorForCode(sp.ErrorCode), sp.LowWatermark)
		}
		if sp := describeProducers(topic); sp.ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("DescribeProducers of %s without READ: %v", topic, kerr.ErrorForCode(sp.ErrorCode))
		}
	}
	if r := describeLogDirs(); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.Dirs) != 0 {
		t.Fatalf("DescribeLogDirs without DESCRIBE on the cluster: %v, %d dirs", kerr.ErrorForCode(r.ErrorCode), len(r.Dirs))
	}

	// DescribeTopicPartitions: a is described (WRITE implies DESCRIBE);
	// b and an unknown topic are refused after it, whether or not they
	// exist; listing every topic leaves b out.
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, name := range []string{"b", "a", "nope"} {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		dtp.Topics = append(dtp.Topics, rt)
	}
	dr, err := dtp.RequestWith(ctx, broker)
	if err != nil {
		t.Fatal(err)
	}
	type topicAnswer struct {
		name string
		code int16
		ops  int32
		n    int
	}
	var got []topicAnswer
	for _, mt := range dr.Topics {
		got = append(got, topicAnswer{*mt.Topic, mt.ErrorCode, mt.AuthorizedOperations, len(mt.Partitions)})
	}
	want := []topicAnswer{
		{"a", 0, acl.OpsBits([]acl.Operation{acl.OpWrite, acl.OpDescribe}), 1},
		{"b", kerr.TopicAuthorizationFailed.Code, authorizedOperationsUnset, 0},
		{"nope", kerr.TopicAuthorizationFailed.Code, authorizedOperationsUnset, 0},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("DescribeTopicPartitions of b, a, nope: %v, want %v", got, want)
	}
	if mt := dr.Topics[1]; mt.TopicID != [16]byte{} {
		t.Fatalf("refused topic b answered with its id %x", mt.TopicID)
	}
	dtp.Topics = nil
	if dr, err := dtp.RequestWith(ctx, broker); err != nil || len(dr.Topics) != 1 || *dr.Topics[0].Topic != "a" {
		t.Fatalf("DescribeTopicPartitions of every topic: %v %+v", err, dr)
	}

	// Allowed: each API answers.
	grant(anonymousACL(acl.ResourceTopic, "a", acl.PatternLiteral, acl.OpDelete, acl.Allow),
		anonymousACL(acl.ResourceTopic, "a", acl.PatternLiteral, acl.OpRead, acl.Allow),
		anonymousACL(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, acl.OpDescribe, acl.Allow))
	if sp := deleteRecords("a", 2); sp.ErrorCode != 0 || sp.LowWatermark != 2 {
		t.Fatalf("DeleteRecords with DELETE: %v, low watermark %d", kerr.ErrorForCode(sp.ErrorCode), sp.LowWatermark)
	}
	if sp := deleteRecords("b", 0); sp.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("DeleteRecords of b, DELETE on a only: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := describeProducers("a"); sp.ErrorCode != 0 {
		t.Fatalf("DescribeProducers with READ: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := describeProducers("b"); sp.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("DescribeProducers of b, READ on a only: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	r := describeLogDirs()
	if r.ErrorCode != 0 || len(r.Dirs) != 1 || len(r.Dirs[0].Topics) != 2 {
		t.Fatalf("DescribeLogDirs with DESCRIBE on the cluster: %v %+v", kerr.ErrorForCode(r.ErrorCode), r.Dirs)
	}
}
