package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
)

// TestAdminLimits: CreateTopics and CreatePartitions past
// max.partitions.per.request or max.partitions, absurd replica lists and
// oversized config values are refused with Kafka's codes and a message,
// and nothing reaches the metastore.
func TestAdminLimits(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) {
		c.MaxPartitionsPerRequest = 100
		c.MaxPartitions = 150
		c.ConfigValueMaxBytes = 1024
	})
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topicCount := func() int { return len(b.srv.catalog.Topics()) }

	create := func(topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsResponse {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		req.Topics = topics
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	topic := func(name string, n int32) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, -1
		return rt
	}
	wantCode := func(what string, code int16, msg *string, want int16) {
		t.Helper()
		if code != want || msg == nil || *msg == "" {
			t.Fatalf("%s: code %d (%v), want %d with a message", what, code, msg, want)
		}
	}

	// 2^31-1 partitions, and two topics that pass the per-request cap
	// only together: every topic of the request fails.
	r := create(topic("huge", 2147483647))
	wantCode("2^31-1 partitions", r.Topics[0].ErrorCode, r.Topics[0].ErrorMessage, kerr.PolicyViolation.Code)
	r = create(topic("a", 60), topic("b", 60))
	for _, st := range r.Topics {
		wantCode("120 partitions in one request", st.ErrorCode, st.ErrorMessage, kerr.PolicyViolation.Code)
	}
	// A manual assignment counts its length.
	asg := topic("manual", -1)
	asg.ReplicationFactor = -1
	for p := int32(0); p < 101; p++ {
		asg.ReplicaAssignment = append(asg.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: p, Replicas: []int32{1}})
	}
	r = create(asg)
	wantCode("101 assigned partitions", r.Topics[0].ErrorCode, r.Topics[0].ErrorMessage, kerr.PolicyViolation.Code)
	// An absurd replica list.
	asg = topic("replicas", -1)
	asg.ReplicationFactor = -1
	asg.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: make([]int32, 100000)}}
	r = create(asg)
	wantCode("100,000 replicas", r.Topics[0].ErrorCode, r.Topics[0].ErrorMessage, kerr.InvalidReplicaAssignment.Code)
	// An oversized config value.
	big := topic("bigconfig", 1)
	big.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr(strings.Repeat("9", 2000))}}
	r = create(big)
	wantCode("2,000-byte config value", r.Topics[0].ErrorCode, r.Topics[0].ErrorMessage, kerr.InvalidConfig.Code)
	if n := topicCount(); n != 0 {
		t.Fatalf("%d topics reached the metastore", n)
	}

	// Within the caps; then the cluster cap (150).
	r = create(topic("t1", 100))
	if r.Topics[0].ErrorCode != 0 {
		t.Fatalf("100 partitions: %d", r.Topics[0].ErrorCode)
	}
	r = create(topic("t2", 40), topic("t3", 20))
	if r.Topics[0].ErrorCode != 0 {
		t.Fatalf("t2: %d", r.Topics[0].ErrorCode)
	}
	wantCode("past max.partitions", r.Topics[1].ErrorCode, r.Topics[1].ErrorMessage, kerr.PolicyViolation.Code)

	// CreatePartitions: per request, per cluster, replica lists.
	grow := func(name string, count int32, asg [][]int32) kmsg.CreatePartitionsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		for _, a := range asg {
			rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: a})
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0]
	}
	st := grow("t2", 2147483647, nil)
	wantCode("grow to 2^31-1", st.ErrorCode, st.ErrorMessage, kerr.PolicyViolation.Code)
	st = grow("t2", 51, nil) // 140 + 11 > 150
	wantCode("grow past max.partitions", st.ErrorCode, st.ErrorMessage, kerr.PolicyViolation.Code)
	st = grow("t2", 41, [][]int32{{1, 1}})
	wantCode("a broker twice", st.ErrorCode, st.ErrorMessage, kerr.InvalidReplicaAssignment.Code)
	st = grow("t2", 41, [][]int32{make([]int32, 100000)})
	wantCode("100,000 replicas", st.ErrorCode, st.ErrorMessage, kerr.InvalidReplicaAssignment.Code)
	if tt, _ := b.srv.catalog.TopicByName("t2"); len(tt.Partitions) != 40 {
		t.Fatalf("t2 has %d partitions after refused growth", len(tt.Partitions))
	}
	if st = grow("t2", 50, nil); st.ErrorCode != 0 {
		t.Fatalf("grow within the caps: %d", st.ErrorCode)
	}

	// AlterConfigs and IncrementalAlterConfigs: oversized names and
	// values, and an APPEND whose result is oversized.
	alter := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "t1"
	ar.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr(strings.Repeat("1", 5000))}}
	alter.Resources = append(alter.Resources, ar)
	aresp, err := alter.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	wantCode("AlterConfigs value", aresp.Resources[0].ErrorCode, aresp.Resources[0].ErrorMessage, kerr.InvalidConfig.Code)
	inc := func(name string, op kmsg.IncrementalAlterConfigOp, value string) kmsg.IncrementalAlterConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t1"
		rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: name, Op: op, Value: kmsg.StringPtr(value)}}
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0]
	}
	ir := inc(strings.Repeat("n", 5000), kmsg.IncrementalAlterConfigOpSet, "1")
	wantCode("IncrementalAlterConfigs name", ir.ErrorCode, ir.ErrorMessage, kerr.InvalidConfig.Code)
	if strings.Contains(*ir.ErrorMessage, "nnnn") {
		t.Fatal("the oversized name was echoed")
	}
	// cleanup.policy is a list: an APPEND of 1,500 items (3,000 bytes)
	// is refused before it is split.
	items := make([]string, 0, 1500)
	for i := 0; i < 1500; i++ {
		items = append(items, "x")
	}
	ir = inc("cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, strings.Join(items, ","))
	wantCode("APPEND of 3,000 bytes", ir.ErrorCode, ir.ErrorMessage, kerr.InvalidConfig.Code)
	if ir = inc("retention.ms", kmsg.IncrementalAlterConfigOpSet, "60000"); ir.ErrorCode != 0 {
		t.Fatalf("a normal SET: %d %v", ir.ErrorCode, ir.ErrorMessage)
	}
}

// TestConcurrentCreateTopicsPastClusterCap sends CreateTopics requests at
// once, from separate clients, each of which fits under max.partitions
// and any two of which pass it: the handler's own check sees the catalog
// before any of them is applied, so only the check where the metastore
// applies them keeps the cap. Exactly one wins; the others get
// POLICY_VIOLATION with a message, and the cluster holds no more than the
// cap.
func TestConcurrentCreateTopicsPastClusterCap(t *testing.T) {
	const cap, each, racers = 10, 6, 6
	b := startBroker(t, func(c *configs.Config) { c.MaxPartitions = cap })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients := make([]*kgo.Client, racers)
	for i := range clients {
		clients[i] = b.client(t)
		// Connected before the race, so the requests leave together.
		if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, clients[i]); err != nil {
			t.Fatal(err)
		}
	}
	start := make(chan struct{})
	results := make([]kmsg.CreateTopicsResponseTopic, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = 10000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("race-%d", i), each, -1
			req.Topics = append(req.Topics, rt)
			<-start
			resp, err := req.RequestWith(ctx, cl)
			if err == nil && len(resp.Topics) != 1 {
				err = fmt.Errorf("%d topics answered", len(resp.Topics))
			}
			if err != nil {
				errs[i] = err
				return
			}
			results[i] = resp.Topics[0]
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for i, st := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		switch st.ErrorCode {
		case 0:
			won++
		case kerr.PolicyViolation.Code:
			if st.ErrorMessage == nil || !strings.Contains(*st.ErrorMessage, "max.partitions") {
				t.Fatalf("%s: POLICY_VIOLATION without a message naming max.partitions: %v", st.Topic, st.ErrorMessage)
			}
		default:
			t.Fatalf("%s: error %d (%v)", st.Topic, st.ErrorCode, st.ErrorMessage)
		}
	}
	total := 0
	for _, tp := range b.srv.catalog.Topics() {
		total += len(tp.Partitions)
	}
	if won != 1 || total > cap {
		t.Fatalf("%d of %d CreateTopics of %d partitions won under max.partitions=%d; the cluster holds %d partitions", won, racers, each, cap, total)
	}
}
