package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

func setOf(id byte, ps ...int32) tpSet {
	s := tpSet{}
	for _, p := range ps {
		s[tp{metastore.TopicID{id}, p}] = struct{}{}
	}
	return s
}

func fmtSet(s tpSet) string {
	var out []string
	for _, k := range s.sorted() {
		out = append(out, fmt.Sprintf("%d/%d", k.id[0], k.p))
	}
	return fmt.Sprint(out)
}

func TestAssignRange(t *testing.T) {
	in := assignInput{
		subs:   map[string]map[string]bool{"a": {"x": true, "y": true}, "b": {"x": true, "y": true}, "c": {"y": true}},
		topics: map[string]metastore.Topic{"x": topic("x", 5, 1), "y": topic("y", 3, 2)},
	}
	out := assignRange(in)
	for id, want := range map[string]string{
		"a": "[1/0 1/1 1/2 2/0]", // x: a gets 3 (5 = 3+2), y: one each
		"b": "[1/3 1/4 2/1]",
		"c": "[2/2]",
	} {
		if got := fmtSet(out[id]); got != want {
			t.Errorf("range %s: %s, want %s", id, got, want)
		}
	}
}

func TestAssignUniformBalancedAndSticky(t *testing.T) {
	x := topic("x", 7, 1)
	in := assignInput{
		subs:    map[string]map[string]bool{"a": {"x": true}, "b": {"x": true}},
		topics:  map[string]metastore.Topic{"x": x},
		current: map[string]tpSet{},
	}
	out := assignUniform(in)
	if n := len(out["a"]) + len(out["b"]); n != 7 || len(out["a"])-len(out["b"]) > 1 || len(out["b"])-len(out["a"]) > 1 {
		t.Fatalf("uniform: a %s b %s", fmtSet(out["a"]), fmtSet(out["b"]))
	}
	// A third member: each keeps what it can, the newcomer gets the rest.
	in.subs["c"] = map[string]bool{"x": true}
	in.current = map[string]tpSet{"a": out["a"], "b": out["b"]}
	out2 := assignUniform(in)
	moved := 0
	for _, id := range []string{"a", "b"} {
		for k := range out2[id] {
			if _, ok := out[id][k]; !ok {
				moved++
			}
		}
	}
	if moved != 0 || len(out2["c"]) < 2 || len(out2["a"]) > 3 || len(out2["b"]) > 3 {
		t.Fatalf("sticky: a %s b %s c %s (moved between old members: %d)", fmtSet(out2["a"]), fmtSet(out2["b"]), fmtSet(out2["c"]), moved)
	}
	// Every partition exactly once.
	seen := tpSet{}
	for _, s := range out2 {
		for k := range s {
			if _, dup := seen[k]; dup {
				t.Fatalf("partition %v assigned twice", k)
			}
			seen[k] = struct{}{}
		}
	}
	if len(seen) != 7 {
		t.Fatalf("%d partitions assigned, want 7", len(seen))
	}
}

func TestAssignUniformHeterogeneous(t *testing.T) {
	in := assignInput{
		subs:   map[string]map[string]bool{"a": {"x": true, "y": true}, "b": {"y": true}},
		topics: map[string]metastore.Topic{"x": topic("x", 2, 1), "y": topic("y", 4, 2)},
	}
	out := assignUniform(in)
	for k := range out["b"] {
		if k.id[0] != 2 {
			t.Fatalf("b got a partition of a topic it does not subscribe to: %s", fmtSet(out["b"]))
		}
	}
	if len(out["a"]) != 3 || len(out["b"]) != 3 {
		t.Fatalf("heterogeneous: a %s b %s", fmtSet(out["a"]), fmtSet(out["b"]))
	}
}

type cgMember struct {
	id    string
	epoch int32
	owned tpSet
}

func (e *env) cgHeartbeat(m *cgMember, topics []string, assignor string) *kmsg.ConsumerGroupHeartbeatResponse {
	e.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch = "cg", m.id, m.epoch
	if m.epoch == 0 {
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = topics
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if assignor != "" {
			req.ServerAssignor = kmsg.StringPtr(assignor)
		}
	}
	if m.owned != nil {
		for _, k := range m.owned.sorted() {
			n := len(req.Topics)
			if n == 0 || req.Topics[n-1].TopicID != k.id {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: k.id})
				n++
			}
			req.Topics[n-1].Partitions = append(req.Topics[n-1].Partitions, k.p)
		}
	}
	resp := e.c.ConsumerGroupHeartbeat(context.Background(), Client{ID: "java"}, req)
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

func noOverlap(t *testing.T, ms ...*cgMember) {
	t.Helper()
	seen := map[tp]string{}
	for _, m := range ms {
		for k := range m.owned {
			if o, dup := seen[k]; dup {
				t.Fatalf("partition %v owned by %s and %s", k, o, m.id)
			}
			seen[k] = m.id
		}
	}
}

func TestConsumerGroupReconciliation(t *testing.T) {
	e := newEnv(t, topic("x", 6, 1))
	a := &cgMember{id: "a"}
	if r := e.cgHeartbeat(a, []string{"x"}, ""); r.ErrorCode != 0 || r.MemberEpoch != 1 || len(a.owned) != 6 {
		t.Fatalf("a joins: %+v owned %s", r, fmtSet(a.owned))
	}
	b := &cgMember{id: "b"}
	r := e.cgHeartbeat(b, []string{"x"}, "")
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || len(b.owned) != 0 {
		t.Fatalf("b joins while a holds everything: %+v owned %s", r, fmtSet(b.owned))
	}
	noOverlap(t, a, b)
	// a is told to revoke half; its epoch stays until it confirms.
	r = e.cgHeartbeat(a, nil, "")
	if r.MemberEpoch != 1 || len(a.owned) != 3 {
		t.Fatalf("a revoking: epoch %d owned %s", r.MemberEpoch, fmtSet(a.owned))
	}
	if d := e.describeCG(); d.State != "Reconciling" {
		t.Fatalf("state while reconciling: %s", d.State)
	}
	// b still cannot have them: a has not confirmed.
	e.cgHeartbeat(b, nil, "")
	if len(b.owned) != 0 {
		t.Fatalf("b got partitions a still owns: %s", fmtSet(b.owned))
	}
	// a confirms (its heartbeat carries what it owns now).
	r = e.cgHeartbeat(a, nil, "")
	if r.MemberEpoch != 2 || len(a.owned) != 3 {
		t.Fatalf("a after revoking: epoch %d owned %s", r.MemberEpoch, fmtSet(a.owned))
	}
	e.cgHeartbeat(b, nil, "")
	if len(b.owned) != 3 || b.epoch != 2 {
		t.Fatalf("b after a released: epoch %d owned %s", b.epoch, fmtSet(b.owned))
	}
	noOverlap(t, a, b)
	if d := e.describeCG(); d.State != "Stable" || d.Epoch != 2 || d.AssignmentEpoch != 2 || len(d.Members) != 2 || d.AssignorName != "uniform" {
		t.Fatalf("describe: %+v", d)
	}

	// Epoch checks and commits.
	stale := &cgMember{id: "a", epoch: 1, owned: setOf(9, 0)}
	if r := e.cgHeartbeat(stale, nil, ""); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("stale epoch: %d", r.ErrorCode)
	}
	if r := e.cgHeartbeat(&cgMember{id: "ghost", epoch: 3}, nil, ""); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %d", r.ErrorCode)
	}
	commit := func(v int16, member string, epoch int32) int16 {
		return e.c.OffsetCommit(context.Background(), commitReq(v, "cg", member, nil, "x", epoch, 1)).Topics[0].Partitions[0].ErrorCode
	}
	if c := commit(9, "a", 2); c != 0 {
		t.Fatalf("commit at the member epoch: %d", c)
	}
	// KIP-1251: a's partitions were given to it at epoch 1, so a commit
	// at epoch 1 still counts; one from the future or from before the
	// assignment does not.
	if c := commit(9, "a", 1); c != 0 {
		t.Fatalf("commit at the epoch the partition was assigned at: %d", c)
	}
	if c := commit(9, "a", 3); c != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit at a future epoch: %d", c)
	}
	// b got its partitions at epoch 2; which of x it owns decides.
	for k := range b.owned {
		req := commitReq(9, "cg", "b", nil, "x", 1, 1)
		req.Topics[0].Partitions[0].Partition = k.p
		if c := e.c.OffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode; c != kerr.StaleMemberEpoch.Code {
			t.Fatalf("b commits partition %d at epoch 1, before it had it: %d", k.p, c)
		}
		break
	}
	if c := commit(8, "a", 2); c != kerr.UnsupportedVersion.Code {
		t.Fatalf("commit v8 by a consumer-protocol member: %d", c)
	}

	// The group survives a coordinator restart.
	e.c.Close()
	e.c = e.newCoordinator()
	if r := e.cgHeartbeat(a, nil, ""); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("heartbeat after restore: %+v", r)
	}

	// b leaves; a gets everything back.
	lb := &cgMember{id: "b", epoch: -1}
	if r := e.cgHeartbeat(lb, nil, ""); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	e.cgHeartbeat(a, nil, "")
	if len(a.owned) != 6 || a.epoch != 3 {
		t.Fatalf("a after b left: epoch %d owned %s", a.epoch, fmtSet(a.owned))
	}
	// a's session expires: the group empties.
	e.clock.Advance(46 * time.Second)
	if d := e.describeCG(); d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("after session expiry: %+v", d)
	}
	if r := e.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: 6, Groups: []string{"cg"}}); r.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DescribeGroups of a consumer group: %+v", r.Groups[0])
	}
}

func TestConsumerGroupRevocationTimeout(t *testing.T) {
	e := newEnv(t, topic("x", 4, 1))
	a := &cgMember{id: "a"}
	e.cgHeartbeat(a, []string{"x"}, "range")
	b := &cgMember{id: "b"}
	e.cgHeartbeat(b, []string{"x"}, "range")
	e.cgHeartbeat(a, nil, "") // told to revoke; never confirms
	// Keep b alive while a's rebalance timeout (30s) runs out.
	for i := 0; i < 4; i++ {
		e.clock.Advance(10 * time.Second)
		e.cgHeartbeat(b, nil, "")
	}
	if r := e.cgHeartbeat(a, nil, ""); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("a after its rebalance timeout: %d", r.ErrorCode)
	}
	if len(b.owned) != 4 {
		t.Fatalf("b after a was fenced: %s", fmtSet(b.owned))
	}
	if d := e.describeCG(); d.AssignorName != "range" {
		t.Fatalf("assignor %q", d.AssignorName)
	}
}

func TestConsumerGroupJoinValidation(t *testing.T) {
	e := newEnv(t, topic("x", 1, 1))
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID = "cg", "m"
	if r := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, req); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("join without a rebalance timeout: %d", r.ErrorCode)
	}
	req.RebalanceTimeoutMillis = 1000
	req.SubscribedTopicNames = []string{"x"}
	req.ServerAssignor = kmsg.StringPtr("sticky")
	if r := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, req); r.ErrorCode != kerr.UnsupportedAssignor.Code {
		t.Fatalf("unknown assignor: %d", r.ErrorCode)
	}
	// A classic group with members is not a consumer group.
	e.join(3, "classic", "", nil)
	req.Group, req.ServerAssignor = "classic", nil
	if r := e.c.ConsumerGroupHeartbeat(context.Background(), Client{}, req); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer heartbeat on a classic group: %d", r.ErrorCode)
	}
}

func (e *env) describeCG() kmsg.ConsumerGroupDescribeResponseGroup {
	e.t.Helper()
	r := e.c.ConsumerGroupDescribe(context.Background(), &kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{"cg"}})
	if r.Groups[0].ErrorCode != 0 {
		e.t.Fatalf("ConsumerGroupDescribe: %d", r.Groups[0].ErrorCode)
	}
	return r.Groups[0]
}
