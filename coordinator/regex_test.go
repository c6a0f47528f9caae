package coordinator

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// regexHeartbeat is one KIP-848 heartbeat of member m of group "rg"
// subscribed to regex, as principal; it returns the topic ids assigned.
func (e *env) regexHeartbeat(m *cgMember, regex, principal string) *kmsg.ConsumerGroupHeartbeatResponse {
	e.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "rg", m.id, m.epoch
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicRegex = kmsg.StringPtr(regex)
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, k := range m.owned.sorted() {
		n := len(req.Topics)
		if n == 0 || req.Topics[n-1].TopicID != k.id {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: k.id})
			n++
		}
		req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, k.p)
	}
	resp := e.c.ConsumerGroupHeartbeat(context.Background(), Client{ID: "c", Host: "/10.0.0.1", Principal: principal}, req)
	if resp.ErrorCode == 0 {
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.owned = tpSet{}
			for _, t := range resp.Assignment.Topics {
				for _, p := range t.Partitions {
					m.owned[tp{metastore.TopicID(t.TopicID), p}] = struct{}{}
				}
			}
		}
	}
	return resp
}

func ownedTopics(m *cgMember) map[byte]int {
	out := map[byte]int{}
	for k := range m.owned {
		out[k.id[0]]++
	}
	return out
}

func TestConsumerGroupRegexSubscription(t *testing.T) {
	e := newEnv(t, topic("orders.eu", 2, 1), topic("payments", 1, 2), topic(OffsetsTopic, 3, 3), topic("orders.secret", 1, 5))
	var checks []string
	e.c.SetTopicAuthorizer(func(principal, host, topic string) bool {
		if host != "10.0.0.1" {
			t.Errorf("authorizer asked for host %q", host)
		}
		checks = append(checks, principal)
		return principal == "User:alice" && topic != "orders.secret"
	})

	// A bad regex: INVALID_REGULAR_EXPRESSION, no member created.
	bad := &cgMember{id: "bad"}
	if r := e.regexHeartbeat(bad, "orders.(", "User:alice"); r.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad regex: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// The regex matches whole names: "orders.*" reaches orders.eu but not
	// the topic alice may not describe, nor internal topics with ".*".
	m := &cgMember{id: "m1", owned: tpSet{}}
	for i := 0; i < 3; i++ {
		if r := e.regexHeartbeat(m, "orders.*|__.*", "User:alice"); r.ErrorCode != 0 {
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if got := ownedTopics(m); len(got) != 1 || got[1] != 2 {
		t.Fatalf("owned %v, want orders.eu's 2 partitions only", got)
	}

	// A topic created later is picked up by the next heartbeat.
	e.store.mu.Lock()
	e.store.topics = append(e.store.topics, topic("orders.us", 3, 4))
	e.store.mu.Unlock()
	epoch := m.epoch
	for i := 0; i < 3; i++ {
		e.regexHeartbeat(m, "", "User:alice")
	}
	if got := ownedTopics(m); got[4] != 3 || got[1] != 2 || m.epoch <= epoch {
		t.Fatalf("after orders.us was created: owned %v, epoch %d (was %d)", got, m.epoch, epoch)
	}
	// And a deleted one is dropped.
	e.store.mu.Lock()
	e.store.topics = e.store.topics[1:]
	e.store.mu.Unlock()
	for i := 0; i < 3; i++ {
		e.regexHeartbeat(m, "", "User:alice")
	}
	if got := ownedTopics(m); len(got) != 1 || got[4] != 3 {
		t.Fatalf("after orders.eu was deleted: owned %v", got)
	}

	// Another principal without DESCRIBE reaches nothing.
	b := &cgMember{id: "m2", owned: tpSet{}}
	e.regexHeartbeat(b, "orders.*", "User:bob")
	if len(b.owned) != 0 {
		t.Fatalf("bob owns %s", fmtSet(b.owned))
	}
	if len(checks) == 0 {
		t.Fatal("the authorizer was never asked")
	}
}

func TestOffsetsPartition(t *testing.T) {
	// Expected: Java's Utils.abs("...".hashCode()) % 50, computed with a JDK.
	for _, c := range []struct {
		group string
		want  int32
	}{
		{"", 0},
		{"a", 47},
		{"my-group", 12}, // negative hash
		{"console-consumer-12345", 6},
		{"polygenelubricants", 0}, // hash is Integer.MIN_VALUE
		{"grün", 49},              // non-ASCII
		{"\U0001F600group", 32},   // a surrogate pair in UTF-16
		{"kminion", 11},
	} {
		if got := OffsetsPartition(c.group, 50); got != c.want {
			t.Errorf("OffsetsPartition(%q) = %d, want %d", c.group, got, c.want)
		}
	}
}
