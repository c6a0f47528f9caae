package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

func TestJoinSyncSingleMember(t *testing.T) {
	e := newEnv(t)
	r := e.join(9, "g", "", nil)
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		t.Fatalf("v9 first join: code %d member %q, want MEMBER_ID_REQUIRED with an id", r.ErrorCode, r.MemberID)
	}
	id := r.MemberID
	r = e.join(9, "g", id, nil)
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != id || r.Protocol == nil || *r.Protocol != "range" ||
		r.ProtocolType == nil || *r.ProtocolType != "consumer" || len(r.Members) != 1 {
		t.Fatalf("join: %+v", r)
	}
	s := e.sync("g", id, 1, nil, map[string]string{id: "A"})
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("sync: %+v", s)
	}
	if code := e.heartbeat("g", id, 1, nil); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
}

// TestJoinVersionsMemberIDRequired: KIP-394 only from v4; older versions
// join straight away (kafka-go uses v1/v2).
func TestJoinVersionsMemberIDRequired(t *testing.T) {
	for v := int16(0); v <= 9; v++ {
		e := newEnv(t)
		r := e.join(v, "g", "", nil)
		wantRequired := v >= 4
		if got := r.ErrorCode == kerr.MemberIDRequired.Code; got != wantRequired {
			t.Errorf("v%d: MEMBER_ID_REQUIRED %v, want %v (code %d)", v, got, wantRequired, r.ErrorCode)
		}
		if !wantRequired && (r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != r.MemberID) {
			t.Errorf("v%d: first join %+v", v, r)
		}
	}
}

// joinedMember joins a dynamic member with v9 and returns its id; the join
// answer arrives on the returned channel.
func (e *env) joinNew(group string, protos ...string) (string, <-chan *kmsg.JoinGroupResponse) {
	e.t.Helper()
	r := e.join(9, group, "", nil, protos...)
	if r.ErrorCode != kerr.MemberIDRequired.Code {
		e.t.Fatalf("first join: code %d", r.ErrorCode)
	}
	return r.MemberID, e.joinAsync(9, group, r.MemberID, nil, protos...)
}

func TestRebalanceTwoMembersAndLeave(t *testing.T) {
	e := newEnv(t)
	a, ja := e.joinNew("g")
	ra := e.wait(ja)
	if ra.Generation != 1 {
		t.Fatalf("a gen %d", ra.Generation)
	}
	if s := e.sync("g", a, 1, nil, map[string]string{a: "A"}); s.ErrorCode != 0 {
		t.Fatalf("sync a: %d", s.ErrorCode)
	}
	// b joins: the group prepares a rebalance and waits for a.
	b, jb := e.joinNew("g")
	if !pending(jb) {
		t.Fatal("b's join answered before a rejoined")
	}
	if code := e.heartbeat("g", a, 1, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("a heartbeat during rebalance: %d", code)
	}
	ra = e.join(9, "g", a, nil)
	rb := e.wait(jb)
	if ra.Generation != 2 || rb.Generation != 2 || ra.LeaderID != a || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("gen 2: a %+v b %+v", ra, rb)
	}
	// b syncs first and waits for the leader.
	sb := e.syncAsync("g", b, 2, nil, nil)
	if !pending(sb) {
		t.Fatal("follower sync answered before the leader's")
	}
	sa := e.sync("g", a, 2, nil, map[string]string{a: "A2", b: "B2"})
	if string(sa.MemberAssignment) != "A2" {
		t.Fatalf("a assignment %q", sa.MemberAssignment)
	}
	if r := <-sb; string(r.MemberAssignment) != "B2" {
		t.Fatalf("b assignment %q", r.MemberAssignment)
	}
	if code := e.heartbeat("g", b, 1, nil); code != kerr.IllegalGeneration.Code {
		t.Fatalf("old generation heartbeat: %d", code)
	}
	// a leaves; b learns on its heartbeat and rejoins alone.
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version = 3
	lr.Group = "g"
	lr.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a}, {MemberID: "nobody"}}
	resp := e.c.LeaveGroup(context.Background(), lr)
	if resp.Members[0].ErrorCode != 0 || resp.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %+v", resp.Members)
	}
	if code := e.heartbeat("g", b, 2, nil); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("b heartbeat after a left: %d", code)
	}
	rb = e.join(9, "g", b, nil)
	if rb.Generation != 3 || rb.LeaderID != b {
		t.Fatalf("gen 3: %+v", rb)
	}
}

func TestRebalanceTimeoutDropsSilentMember(t *testing.T) {
	e := newEnv(t)
	a, ja := e.joinNew("g")
	e.wait(ja)
	e.sync("g", a, 1, nil, nil)
	_, jb := e.joinNew("g")
	if !pending(jb) {
		t.Fatal("b answered early")
	}
	// a never rejoins; after the rebalance timeout (20s) b gets
	// generation 2 alone. a's session (10s) does not expire a member of a
	// preparing group early because it was touched by its last heartbeat
	// only: advance past both.
	e.clock.Advance(21 * time.Second)
	rb := e.wait(jb)
	if rb.ErrorCode != 0 || rb.Generation != 2 || len(rb.Members) != 1 {
		t.Fatalf("b after the rebalance timeout: %+v", rb)
	}
	if code := e.heartbeat("g", a, 1, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("a after being dropped: %d", code)
	}
}

func TestSessionExpiry(t *testing.T) {
	e := newEnv(t)
	a, ja := e.joinNew("g")
	e.wait(ja)
	e.sync("g", a, 1, nil, nil)
	e.clock.Advance(9 * time.Second)
	if code := e.heartbeat("g", a, 1, nil); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
	e.clock.Advance(9 * time.Second) // 18s since join, 9s since heartbeat
	if code := e.heartbeat("g", a, 1, nil); code != 0 {
		t.Fatalf("heartbeat within the session: %d", code)
	}
	e.clock.Advance(11 * time.Second)
	if code := e.heartbeat("g", a, 1, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat after the session expired: %d", code)
	}
	d := e.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g"}})
	if d.Groups[0].State != "Empty" || len(d.Groups[0].Members) != 0 {
		t.Fatalf("describe after expiry: %+v", d.Groups[0])
	}
}

func TestStaticMemberReplacedAndFenced(t *testing.T) {
	e := newEnv(t, topic("t", 1, 1))
	inst := kmsg.StringPtr("i-1")
	r := e.join(9, "g", "", inst) // static members join without MEMBER_ID_REQUIRED
	if r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("static join: %+v", r)
	}
	old := r.MemberID
	if s := e.sync("g", old, 1, inst, map[string]string{old: "A"}); s.ErrorCode != 0 {
		t.Fatalf("sync: %d", s.ErrorCode)
	}
	// The same instance restarts: a new member id, no rebalance, the
	// leader told to skip the assignment, the assignment kept.
	r = e.join(9, "g", "", inst)
	if r.ErrorCode != 0 || r.MemberID == old || r.Generation != 1 || !r.SkipAssignment {
		t.Fatalf("static rejoin: %+v", r)
	}
	if code := e.heartbeat("g", old, 1, inst); code != kerr.FencedInstanceID.Code {
		t.Fatalf("old instance heartbeat: %d, want FENCED_INSTANCE_ID", code)
	}
	s := e.sync("g", r.MemberID, 1, inst, nil)
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("new instance sync: %+v", s)
	}
	oc := commitReq(7, "g", old, inst, "t", 1, 5)
	if code := e.c.OffsetCommit(context.Background(), oc).Topics[0].Partitions[0].ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Fatalf("old instance commit: %d", code)
	}
}

func TestProtocolSelection(t *testing.T) {
	e := newEnv(t)
	a, ja := e.joinNew("g", "range", "roundrobin")
	e.wait(ja)
	e.sync("g", a, 1, nil, nil)
	b, jb := e.joinNew("g", "roundrobin", "range")
	if !pending(jb) {
		t.Fatal("b answered before a rejoined")
	}
	ra := e.join(9, "g", a, nil, "range", "roundrobin")
	rb := e.wait(jb)
	if *ra.Protocol != "range" && *ra.Protocol != "roundrobin" || *ra.Protocol != *rb.Protocol {
		t.Fatalf("protocols a %q b %q", *ra.Protocol, *rb.Protocol)
	}
	_ = b
	// A member that shares no protocol is refused.
	r := e.join(9, "g", "", nil, "sticky")
	if r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("join without a common protocol: %d", r.ErrorCode)
	}
}

func commitReq(version int16, group, member string, inst *string, topic string, gen int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	req.Group, req.MemberID, req.Generation, req.InstanceID = group, member, gen, inst
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestOffsetCommitChecks(t *testing.T) {
	e := newEnv(t, topic("t", 2, 1))
	ctx := context.Background()
	code := func(req *kmsg.OffsetCommitRequest) int16 {
		return e.c.OffsetCommit(ctx, req).Topics[0].Partitions[0].ErrorCode
	}
	// Simple commits (no generation) create and use an empty group.
	if c := code(commitReq(0, "simple", "", nil, "t", -1, 3)); c != 0 {
		t.Fatalf("v0 commit: %d", c)
	}
	if c := code(commitReq(2, "simple", "", nil, "t", -1, 4)); c != 0 {
		t.Fatalf("v2 simple commit: %d", c)
	}
	// A generation for a group that does not exist.
	if c := code(commitReq(8, "nogroup", "m", nil, "t", 1, 1)); c != kerr.IllegalGeneration.Code {
		t.Fatalf("v8 unknown group: %d", c)
	}
	if c := code(commitReq(9, "nogroup", "m", nil, "t", 1, 1)); c != kerr.GroupIDNotFound.Code {
		t.Fatalf("v9 unknown group: %d", c)
	}
	if c := code(commitReq(8, "simple", "", nil, "nosuch", -1, 1)); c != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %d", c)
	}
	// Members of a live group.
	a, ja := e.joinNew("g")
	e.wait(ja)
	if c := code(commitReq(8, "g", a, nil, "t", 1, 7)); c != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit while CompletingRebalance: %d", c)
	}
	e.sync("g", a, 1, nil, nil)
	for _, tc := range []struct {
		name   string
		member string
		gen    int32
		want   int16
	}{
		{"current member", a, 1, 0},
		{"stale generation", a, 0, kerr.IllegalGeneration.Code},
		{"unknown member", "x", 1, kerr.UnknownMemberID.Code},
		{"simple commit to a non-empty group", "", -1, kerr.UnknownMemberID.Code},
	} {
		if c := code(commitReq(8, "g", tc.member, nil, "t", tc.gen, 9)); c != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, c, tc.want)
		}
	}
	// The commit is readable with every OffsetFetch shape.
	for _, v := range []int16{0, 1, 5, 7, 8, 10} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = v
		if v >= 8 {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g"
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.TopicID, gt.Partitions = "t", [16]byte{1}, []int32{0, 1}
			g.Topics = append(g.Topics, gt)
			other := kmsg.NewOffsetFetchRequestGroup()
			other.Group = "simple" // null topics: all
			req.Groups = append(req.Groups, g, other)
			resp := e.c.OffsetFetch(ctx, req)
			p := resp.Groups[0].Topics[0].Partitions
			if p[0].Offset != 9 || p[1].Offset != -1 || resp.Groups[1].Topics[0].Partitions[0].Offset != 4 {
				t.Errorf("OffsetFetch v%d: %+v", v, resp.Groups)
			}
			continue
		}
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{0, 1}
		req.Group, req.Topics = "g", []kmsg.OffsetFetchRequestTopic{rt}
		resp := e.c.OffsetFetch(ctx, req)
		p := resp.Topics[0].Partitions
		if p[0].Offset != 9 || p[1].Offset != -1 || p[0].ErrorCode != 0 {
			t.Errorf("OffsetFetch v%d: %+v", v, resp.Topics)
		}
	}
}

func TestNotCoordinatorAndRestore(t *testing.T) {
	e := newEnv(t, topic("t", 1, 1))
	e.store.owners["elsewhere"] = 2
	if r := e.join(9, "elsewhere", "", nil); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("join at a non-owner: %d", r.ErrorCode)
	}
	a, ja := e.joinNew("g")
	e.wait(ja)
	e.sync("g", a, 1, nil, map[string]string{a: "A"})
	// A new coordinator (restart) rebuilds the group from the store; the
	// member carries on with its id and generation.
	e.c.Close()
	c2 := e.newCoordinator()
	e.c = c2
	if code := e.heartbeat("g", a, 1, nil); code != 0 {
		t.Fatalf("heartbeat after restore: %d", code)
	}
	if s := e.sync("g", a, 1, nil, nil); s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("sync after restore: %+v", s)
	}
	// Unknown to the new coordinator's session timers until it heartbeats
	// again: the restored member expires like any other.
	e.clock.Advance(11 * time.Second)
	if code := e.heartbeat("g", a, 1, nil); code != kerr.UnknownMemberID.Code {
		t.Fatalf("restored member after its session: %d", code)
	}
}

func TestListDescribeDeleteGroups(t *testing.T) {
	e := newEnv(t, topic("t", 1, 1))
	ctx := context.Background()
	a, ja := e.joinNew("live")
	e.wait(ja)
	e.sync("live", a, 1, nil, nil)
	e.c.OffsetCommit(ctx, commitReq(2, "offsets-only", "", nil, "t", -1, 1))

	list := func(states, types []string) []string {
		r := e.c.ListGroups(ctx, &kmsg.ListGroupsRequest{Version: 5, StatesFilter: states, TypesFilter: types})
		var out []string
		for _, g := range r.Groups {
			out = append(out, g.Group+":"+g.GroupState+":"+g.GroupType)
		}
		return out
	}
	if got := fmt.Sprint(list(nil, nil)); got != "[live:Stable:classic offsets-only:Empty:classic]" && got != "[offsets-only:Empty:classic live:Stable:classic]" {
		t.Fatalf("list: %s", got)
	}
	if got := fmt.Sprint(list([]string{"stable"}, nil)); got != "[live:Stable:classic]" {
		t.Fatalf("list stable: %s", got)
	}
	if got := fmt.Sprint(list(nil, []string{"consumer"})); got != "[]" {
		t.Fatalf("list consumer: %s", got)
	}
	d := e.c.DescribeGroups(ctx, &kmsg.DescribeGroupsRequest{Version: 6, Groups: []string{"live", "nope"}})
	if d.Groups[0].State != "Stable" || d.Groups[0].Protocol != "range" || len(d.Groups[0].Members) != 1 ||
		d.Groups[1].State != "Dead" || d.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe: %+v", d.Groups)
	}
	del := e.c.DeleteGroups(ctx, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"live", "offsets-only", "nope"}})
	if del.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code || del.Groups[1].ErrorCode != 0 || del.Groups[2].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete: %+v", del.Groups)
	}
	if offs, _ := e.store.FetchOffsets(ctx, "offsets-only", nil); len(offs) != 0 {
		t.Fatalf("offsets survived DeleteGroups: %v", offs)
	}
	// OffsetDelete: refused for a subscribed topic of a live consumer group.
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "live"
	odt := kmsg.NewOffsetDeleteRequestTopic()
	odt.Topic = "t"
	odt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
	od.Topics = append(od.Topics, odt)
	// The test members' metadata is not a ConsumerMemberMetadata, so the
	// topic is not seen as subscribed: the delete goes through.
	if r := e.c.OffsetDelete(ctx, od); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", r)
	}
}

// TestPlacementSpreadsOverReadBrokers: FindCoordinator's claim places new
// groups on the live read brokers by rendezvous hashing, never on a
// write-only broker, and keeps an owner once recorded.
func TestPlacementSpreadsOverReadBrokers(t *testing.T) {
	e := newEnv(t)
	e.store.brokers = []metastore.Broker{{ID: 1, Role: metastore.RoleCombined}, {ID: 2, Role: metastore.RoleRead},
		{ID: 3, Role: metastore.RoleRead}, {ID: 4, Role: metastore.RoleWrite}}
	count := map[int32]int{}
	for i := 0; i < 300; i++ {
		g := fmt.Sprintf("g%d", i)
		owner, err := e.c.Claim(context.Background(), g)
		if err != nil {
			t.Fatal(err)
		}
		count[owner]++
		if again, _ := e.c.Claim(context.Background(), g); again != owner {
			t.Fatalf("%s: owner moved from %d to %d", g, owner, again)
		}
	}
	if count[4] != 0 || count[1] < 60 || count[2] < 60 || count[3] < 60 {
		t.Fatalf("placement: %v", count)
	}
	// A request for a group owned elsewhere is refused here.
	for g, o := range e.store.owners {
		if o != 1 {
			if r := e.join(3, g, "", nil); r.ErrorCode != kerr.NotCoordinator.Code {
				t.Fatalf("join at a non-owner: %d", r.ErrorCode)
			}
			break
		}
	}
}

// TestWriteOnlyBrokerPlacesButDoesNotCoordinate: a broker without the read
// role names read brokers in FindCoordinator and refuses group requests.
func TestWriteOnlyBrokerPlacesButDoesNotCoordinate(t *testing.T) {
	store := newMemStore()
	c, err := New(Config{BrokerID: 4, NoGroups: true, Store: store, Clock: NewFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Claim(context.Background(), "g"); err != ErrNoReadBroker {
		t.Fatalf("claim with no read broker: %v", err)
	}
	store.brokers = []metastore.Broker{{ID: 2, Role: metastore.RoleRead}, {ID: 4, Role: metastore.RoleWrite}}
	if owner, err := c.Claim(context.Background(), "g"); err != nil || owner != 2 {
		t.Fatalf("claim: owner %d err %v, want 2", owner, err)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g"
	if r := c.Heartbeat(context.Background(), hb); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat at a write-only broker: %d", r.ErrorCode)
	}
}

// TestInitialRebalanceDelay: the first rebalance of an empty group waits
// group.initial.rebalance.delay.ms, again while members keep arriving, so
// that a group starting up rebalances once (Kafka's InitialDelayedJoin).
func TestInitialRebalanceDelay(t *testing.T) {
	e := newEnv(t)
	e.c.Close()
	c, err := New(Config{BrokerID: 1, Store: e.store, Clock: e.clock, InitialRebalanceDelay: 3 * time.Second,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e.c = c
	_, ja := e.joinNew("g")
	if !pending(ja) {
		t.Fatal("the first member was answered before the initial delay")
	}
	e.clock.Advance(2 * time.Second)
	_, jb := e.joinNew("g") // extends the wait by another delay
	if !pending(jb) {
		t.Fatal("the second member was answered during the initial delay")
	}
	// At 3 s the first wait ends; b joined during it, so another 3 s
	// begin (until 6 s).
	e.clock.Advance(1500 * time.Millisecond)
	if !pending(ja) || !pending(jb) {
		t.Fatal("answered at the end of the first delay although a member joined during it")
	}
	e.clock.Advance(2 * time.Second)
	if !pending(ja) {
		t.Fatal("answered before the second delay ended")
	}
	e.clock.Advance(time.Second)
	ra, rb := e.wait(ja), e.wait(jb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("after the delay: %+v %+v", ra, rb)
	}
	if n := max(len(ra.Members), len(rb.Members)); n != 2 {
		t.Fatalf("the leader got %d members, want both in one rebalance", n)
	}
}
