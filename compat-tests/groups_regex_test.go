package compat

import (
	"context"
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestConsumerGroupRegexFranzGo: a KIP-848 member subscribed by regex
// (kgo.ConsumeRegex with kgo.ServerSideBalancer sends
// SubscribedTopicRegex) gets the matching topics from the broker, a topic
// created later within seconds, and never a topic its principal may not
// DESCRIBE (the authorizer is on; another principal's ACL protects
// rx.secret from ANONYMOUS). A regex that does not compile is
// INVALID_REGULAR_EXPRESSION.
func TestConsumerGroupRegexFranzGo(t *testing.T) {
	b := startBroker(t, append(authorizerArgs(), "--set", "group.consumer.heartbeat.interval.ms=500")...)
	ctx := harness.Context(t, 50*time.Second)
	adm := newAdmin(t, b.KafkaAddr)
	allowClusterAdmin(ctx, t, adm)
	createTopic(ctx, t, adm, "rx.a", 2, nil)
	createTopic(ctx, t, adm, "rx.secret", 1, nil)
	createTopic(ctx, t, adm, "other", 1, nil)
	produceN(ctx, t, b.KafkaAddr, "rx.a", "a", 4)
	produceN(ctx, t, b.KafkaAddr, "rx.secret", "s", 2)
	produceN(ctx, t, b.KafkaAddr, "other", "o", 2)
	if res, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("rx.secret").Allow("User:alice").Operations(kadm.OpRead)); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %+v", err, res)
	}

	const group = "rx-group"
	cl := newClient(t, b.KafkaAddr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(`rx\..*`), kgo.ConsumeRegex(),
		kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	got := map[string]int{}
	pollUntil := func(topic string, n int) {
		t.Helper()
		for got[topic] < n {
			if ctx.Err() != nil {
				t.Fatalf("waiting for %d records of %s: got %v", n, topic, got)
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			fs := cl.PollFetches(pctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) { got[r.Topic]++ })
		}
	}
	pollUntil("rx.a", 4)

	// A topic created after the subscription is picked up.
	start := time.Now()
	createTopic(ctx, t, adm, "rx.b", 1, nil)
	produceN(ctx, t, b.KafkaAddr, "rx.b", "b", 3)
	pollUntil("rx.b", 3)
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("rx.b was consumed %v after its creation", d)
	}
	if got["other"] != 0 || got["rx.secret"] != 0 {
		t.Fatalf("consumed topics the regex or the ACLs exclude: %v", got)
	}

	// The broker's own view: the member's assignment.
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Members) != 1 {
		t.Fatalf("ConsumerGroupDescribe: %v %+v", err, resp)
	}
	m := resp.Groups[0].Members[0]
	if m.SubscribedTopicRegex == nil {
		t.Fatal("the member has no regex subscription: kgo did not send SubscribedTopicRegex")
	}
	var topics []string
	for _, tp := range m.Assignment.TopicPartitions {
		topics = append(topics, tp.Topic)
	}
	sort.Strings(topics)
	if !slices.Equal(topics, []string{"rx.a", "rx.b"}) {
		t.Fatalf("assignment %v, want [rx.a rx.b] (regex %q)", topics, *m.SubscribedTopicRegex)
	}

	// A regex that does not compile.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = "rx-bad", "member-bad-regex-0001", 0
	hb.RebalanceTimeoutMillis = 10000
	hb.SubscribedTopicRegex = kmsg.StringPtr("rx.(")
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	hresp, err := hb.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ConsumerGroupHeartbeat: %v", err)
	}
	if err := kerr.ErrorForCode(hresp.ErrorCode); !errors.Is(err, kerr.InvalidRegularExpression) {
		t.Fatalf("bad regex: %v, want INVALID_REGULAR_EXPRESSION", err)
	}
}
