package coordinator

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

func (e *env) shareHeartbeat(group, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	return e.c.ShareGroupHeartbeat(context.Background(), Client{ID: "cl", Host: "/127.0.0.1"}, req)
}

func TestShareGroupMembersShareEveryPartition(t *testing.T) {
	e := newEnv(t, topic("t", 2, 1))
	ctx := context.Background()
	if r := e.shareHeartbeat("g", "m1", 0); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("join without topics: %d", r.ErrorCode)
	}
	r1 := e.shareHeartbeat("g", "m1", 0, "t")
	r2 := e.shareHeartbeat("g", "m2", 0, "t")
	for _, r := range []*kmsg.ShareGroupHeartbeatResponse{r1, r2} {
		if r.ErrorCode != 0 || r.Assignment == nil || len(r.Assignment.TopicPartitions) != 1 ||
			!slices.Equal(r.Assignment.TopicPartitions[0].Partitions, []int32{0, 1}) {
			t.Fatalf("heartbeat: %+v", r)
		}
	}
	if r := e.shareHeartbeat("g", "m1", r1.MemberEpoch); r.ErrorCode != 0 || r.Assignment != nil {
		t.Fatalf("steady heartbeat: %+v", r)
	}
	if r := e.shareHeartbeat("g", "m1", r1.MemberEpoch+5); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("wrong epoch: %d", r.ErrorCode)
	}
	// A consumer group of the same name is refused.
	creq := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	creq.Group, creq.MemberID, creq.SubscribedTopicNames, creq.Version = "g", "x", []string{"t"}, 1
	creq.RebalanceTimeoutMillis = 1000
	if r := e.c.ConsumerGroupHeartbeat(ctx, Client{}, creq); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer heartbeat on a share group: %d", r.ErrorCode)
	}
	d := kmsg.NewPtrShareGroupDescribeRequest()
	d.GroupIDs = []string{"g", "nope"}
	dr := e.c.ShareGroupDescribe(ctx, d)
	if g := dr.Groups[0]; g.ErrorCode != 0 || g.GroupState != "Stable" || len(g.Members) != 2 || g.Members[0].Assignment.TopicPartitions[0].Topic != "t" {
		t.Fatalf("describe: %+v", g)
	}
	if dr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe unknown: %d", dr.Groups[1].ErrorCode)
	}
	// Two members fetching one partition get disjoint records; m1's
	// session timing out gives its records to m2 at once.
	k := ShareKey{topic("t", 2, 1).ID, 0}
	for _, m := range []string{"m1", "m2"} {
		if _, code := e.c.ShareSession(ctx, "g", m, 0, true, []ShareKey{k}, nil, false, 0); code != 0 {
			t.Fatalf("open session: %d", code)
		}
	}
	off, ok, _, code := e.c.ShareFetchOffset(ctx, "g", "m1", k, 0, 10)
	if code != 0 || ok || off != 10 {
		t.Fatalf("latest reset: off %d ok %v code %d", off, ok, code)
	}
	got1 := e.c.ShareAcquire(ctx, "g", "m1", k, 10, 15, 0)
	got2 := e.c.ShareAcquire(ctx, "g", "m2", k, 10, 15, 0)
	if !slices.Equal(got1, []AcquiredRange{{10, 14, 1}}) || got2 != nil {
		t.Fatalf("acquire: %v %v", got1, got2)
	}
	if code := e.c.ShareAcknowledge(ctx, "g", "m1", k, []AckBatch{{10, 11, []int8{AckAccept}}}, false); code != 0 {
		t.Fatalf("ack: %d", code)
	}
	e.clock.Advance(e.c.cfg.ShareSessionTimeout)
	if r := e.shareHeartbeat("g", "m1", r1.MemberEpoch); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member: %d", r.ErrorCode)
	}
	// m2 timed out too: it rejoins.
	if r := e.shareHeartbeat("g", "m2", 0, "t"); r.ErrorCode != 0 {
		t.Fatalf("rejoin: %d", r.ErrorCode)
	}
	if _, code := e.c.ShareSession(ctx, "g", "m2", 0, true, []ShareKey{k}, nil, false, 0); code != 0 {
		t.Fatal(code)
	}
	if got := e.c.ShareAcquire(ctx, "g", "m2", k, 10, 15, 0); !slices.Equal(got, []AcquiredRange{{12, 14, 2}}) {
		t.Fatalf("after m1 left: %v", got)
	}

	// A new coordinator on the same store (a restart, or another broker)
	// never delivers the acknowledged records again.
	e.c.Close()
	e.c = e.newCoordinator()
	r := e.shareHeartbeat("g", "m3", 0, "t")
	if r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	if _, code := e.c.ShareSession(ctx, "g", "m3", 0, true, []ShareKey{k}, nil, false, 0); code != 0 {
		t.Fatal(code)
	}
	if off, ok, _, _ := e.c.ShareFetchOffset(ctx, "g", "m3", k, 0, 15); off != 12 || !ok {
		t.Fatalf("after restart: off %d ok %v", off, ok)
	}
	// 12-14 were stored released once (m1 left); m2's acquisition was
	// in memory only, so they come back with delivery count 2.
	if got := e.c.ShareAcquire(ctx, "g", "m3", k, 10, 15, 0); !slices.Equal(got, []AcquiredRange{{12, 14, 2}}) {
		t.Fatalf("after restart: %v", got)
	}
}

func TestShareSessionEpochs(t *testing.T) {
	e := newEnv(t, topic("t", 1, 1))
	ctx := context.Background()
	e.shareHeartbeat("g", "m", 0, "t")
	k := ShareKey{topic("t", 1, 1).ID, 0}
	if _, code := e.c.ShareSession(ctx, "g", "m", 1, true, nil, nil, false, 0); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %d", code)
	}
	if _, code := e.c.ShareSession(ctx, "g", "m", 0, true, []ShareKey{k}, nil, true, 0); code != kerr.InvalidRequest.Code {
		t.Fatalf("acks on open: %d", code)
	}
	if _, code := e.c.ShareSession(ctx, "g", "m", 0, false, nil, nil, false, 0); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("ShareAcknowledge epoch 0: %d", code)
	}
	parts, code := e.c.ShareSession(ctx, "g", "m", 0, true, []ShareKey{k}, nil, false, 0)
	if code != 0 || len(parts) != 1 {
		t.Fatalf("open: %v %d", parts, code)
	}
	if _, code := e.c.ShareSession(ctx, "g", "m", 2, true, nil, nil, false, 0); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("skipped epoch: %d", code)
	}
	if parts, code := e.c.ShareSession(ctx, "g", "m", 1, true, nil, []ShareKey{k}, false, 0); code != 0 || len(parts) != 0 {
		t.Fatalf("forget: %v %d", parts, code)
	}
	if _, code := e.c.ShareSession(ctx, "x", "m", 0, true, nil, nil, false, 0); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown group: %d", code)
	}
	if _, code := e.c.ShareSession(ctx, "g", "other", 0, true, nil, nil, false, 0); code != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %d", code)
	}
}

func TestShareGroupAdmin(t *testing.T) {
	e := newEnv(t, topic("t", 1, 1))
	ctx := context.Background()
	e.shareHeartbeat("g", "m", 0, "t")
	k := ShareKey{topic("t", 1, 1).ID, 0}
	e.c.ShareSession(ctx, "g", "m", 0, true, []ShareKey{k}, nil, false, 0)
	e.c.ShareFetchOffset(ctx, "g", "m", k, 0, 0) // initializes and saves the partition state

	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version, lr.TypesFilter = 5, []string{"Share"}
	l := e.c.ListGroups(ctx, lr)
	if len(l.Groups) != 1 || l.Groups[0].GroupType != "share" || l.Groups[0].ProtocolType != "share" || l.Groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups: %+v", l.Groups)
	}
	dr := kmsg.NewPtrDescribeGroupsRequest()
	dr.Version, dr.Groups = 6, []string{"g"}
	if d := e.c.DescribeGroups(ctx, dr); d.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code || d.Groups[0].State != "Dead" {
		t.Fatalf("DescribeGroups: %+v", d.Groups[0])
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	if d := e.c.DeleteGroups(ctx, del); d.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("deleting a group with members: %d", d.Groups[0].ErrorCode)
	}
	if r := e.shareHeartbeat("g", "m", -1); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	if got, _ := e.store.LoadShareStates(ctx, "g"); len(got) != 1 {
		t.Fatalf("share states before delete: %d", len(got))
	}
	if d := e.c.DeleteGroups(ctx, del); d.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: %d", d.Groups[0].ErrorCode)
	}
	if got, _ := e.store.LoadShareStates(ctx, "g"); len(got) != 0 {
		t.Fatalf("share states after delete: %d", len(got))
	}
	// JoinGroup on a share group is refused.
	e.shareHeartbeat("g2", "m", 0, "t")
	if jr := e.join(4, "g2", "", nil, "range"); jr.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("JoinGroup on a share group: %d", jr.ErrorCode)
	}
}

func TestShareGroupConfigs(t *testing.T) {
	e := newEnv(t, topic("t", 1, 1))
	conf := map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}
	e.c.Close()
	c, err := New(Config{BrokerID: 1, Store: e.store, Clock: e.clock, ShareCheckMembers: true,
		GroupConfig: func(group, key string) (string, bool) { v, ok := conf[key]; return v, ok && group == "g" }})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	defer c.Close()
	ctx := context.Background()
	e.shareHeartbeat("g", "m", 0, "t")
	k := ShareKey{topic("t", 1, 1).ID, 0}
	c.ShareSession(ctx, "g", "m", 0, true, []ShareKey{k}, nil, false, 0)
	if off, ok, _, _ := c.ShareFetchOffset(ctx, "g", "m", k, 3, 10); off != 3 || !ok {
		t.Fatalf("earliest: off %d ok %v", off, ok)
	}
	if d := c.ShareLockDuration("g"); d != 20*time.Second {
		t.Fatalf("lock duration %v", d)
	}
	if d := c.ShareLockDuration("other"); d != 30*time.Second {
		t.Fatalf("default lock duration %v", d)
	}
	c.ShareAcquire(ctx, "g", "m", k, 3, 10, 0)
	e.clock.Advance(20*time.Second - time.Millisecond)
	if off, ok, _, _ := c.ShareFetchOffset(ctx, "g", "m", k, 3, 10); ok {
		t.Fatalf("locks expired early: off %d", off)
	}
	e.clock.Advance(time.Millisecond)
	if off, ok, _, _ := c.ShareFetchOffset(ctx, "g", "m", k, 3, 10); off != 3 || !ok {
		t.Fatalf("after the group's lock duration: off %d ok %v", off, ok)
	}
}

func TestShareConnClosedReleases(t *testing.T) {
	e := newEnv(t, topic("t", 1, 1))
	ctx := context.Background()
	e.shareHeartbeat("g", "m1", 0, "t")
	e.shareHeartbeat("g", "m2", 0, "t")
	k := ShareKey{topic("t", 1, 1).ID, 0}
	for i, m := range []string{"m1", "m2"} {
		if _, code := e.c.ShareSession(ctx, "g", m, 0, true, []ShareKey{k}, nil, false, uint64(7+i)); code != 0 {
			t.Fatal(code)
		}
	}
	e.c.ShareFetchOffset(ctx, "g", "m1", k, 0, 0)
	if got := e.c.ShareAcquire(ctx, "g", "m1", k, 0, 5, 0); !slices.Equal(got, []AcquiredRange{{0, 4, 1}}) {
		t.Fatalf("acquire: %v", got)
	}
	e.c.ShareAcknowledge(ctx, "g", "m1", k, []AckBatch{{0, 0, []int8{AckAccept}}}, false)
	// m2's connection closing leaves m1's records alone.
	if code := e.c.ShareConnClosed(ctx, "g", "m1", 8); code != 0 {
		t.Fatal(code)
	}
	if got := e.c.ShareAcquire(ctx, "g", "m2", k, 0, 5, 0); got != nil {
		t.Fatalf("m1's records taken while its connection is open: %v", got)
	}
	// m1's does: its records come back at once (no lock expiry), and its
	// session is gone.
	if code := e.c.ShareConnClosed(ctx, "g", "m1", 7); code != 0 {
		t.Fatal(code)
	}
	if got := e.c.ShareAcquire(ctx, "g", "m2", k, 0, 5, 0); !slices.Equal(got, []AcquiredRange{{1, 4, 2}}) {
		t.Fatalf("after m1's connection closed: %v", got)
	}
	if _, code := e.c.ShareSession(ctx, "g", "m1", 1, true, nil, nil, false, 0); code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("m1's session after its connection closed: %d", code)
	}
	// The member stays in the group: it opens a new session.
	if _, code := e.c.ShareSession(ctx, "g", "m1", 0, true, []ShareKey{k}, nil, false, 9); code != 0 {
		t.Fatalf("reopen: %d", code)
	}
}

func TestShareGroupOffsetsAdmin(t *testing.T) {
	e := newEnv(t, topic("t", 2, 1))
	ctx := context.Background()
	id := topic("t", 2, 1).ID
	k := ShareKey{id, 0}
	if _, code := e.c.ShareGroupOffsets(ctx, "g"); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("offsets of a group that does not exist: %d", code)
	}
	if _, code := e.c.ShareDeleteOffsets(ctx, "g", []metastore.TopicID{id}); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete in a group that does not exist: %d", code)
	}
	// Alter creates the group.
	if code := e.c.ShareAlterOffsets(ctx, "g", map[ShareKey]int64{k: 5}); code != 0 {
		t.Fatalf("alter: %d", code)
	}
	if got, code := e.c.ShareGroupOffsets(ctx, "g"); code != 0 || len(got) != 1 || got[k] != (ShareOffset{5, 0}) {
		t.Fatalf("offsets after alter: %v %d", got, code)
	}
	e.shareHeartbeat("g", "m", 0, "t")
	e.c.ShareSession(ctx, "g", "m", 0, true, []ShareKey{k}, nil, false, 0)
	if off, ok, _, _ := e.c.ShareFetchOffset(ctx, "g", "m", k, 0, 10); off != 5 || !ok {
		t.Fatalf("fetch after alter: %d %v", off, ok)
	}
	e.c.ShareAcquire(ctx, "g", "m", k, 5, 10, 0)
	e.c.ShareAcknowledge(ctx, "g", "m", k, []AckBatch{{6, 7, []int8{AckAccept}}}, false)
	if got, _ := e.c.ShareGroupOffsets(ctx, "g"); got[k] != (ShareOffset{5, 2}) {
		t.Fatalf("offsets with 6-7 accepted: %v", got[k])
	}
	if code := e.c.ShareAlterOffsets(ctx, "g", map[ShareKey]int64{k: 0}); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with a member: %d", code)
	}
	if _, code := e.c.ShareDeleteOffsets(ctx, "g", []metastore.TopicID{id}); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %d", code)
	}
	e.shareHeartbeat("g", "m", -1)
	if had, code := e.c.ShareDeleteOffsets(ctx, "g", []metastore.TopicID{id}); code != 0 || !had[id] {
		t.Fatalf("delete: %v %d", had, code)
	}
	if had, _ := e.c.ShareDeleteOffsets(ctx, "g", []metastore.TopicID{id}); had[id] {
		t.Fatal("deleted twice")
	}
	// A restarted coordinator reads the deleted state as uninitialized.
	e.c.Close()
	e.c = e.newCoordinator()
	if got, code := e.c.ShareGroupOffsets(ctx, "g"); code != 0 || len(got) != 0 {
		t.Fatalf("offsets after delete and restart: %v %d", got, code)
	}
	// A consumer group is not a share group.
	e.join(4, "cg", "", nil, "range")
	if code := e.c.ShareAlterOffsets(ctx, "cg", map[ShareKey]int64{k: 0}); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("alter of a classic group with a member: %d", code)
	}
}

func TestShareLeaveKeepsOpenSession(t *testing.T) {
	e := newEnv(t, topic("t", 1, 1))
	ctx := context.Background()
	e.shareHeartbeat("g", "m1", 0, "t")
	e.shareHeartbeat("g", "m2", 0, "t")
	k := ShareKey{topic("t", 1, 1).ID, 0}
	for _, m := range []string{"m1", "m2"} {
		e.c.ShareSession(ctx, "g", m, 0, true, []ShareKey{k}, nil, false, 0)
	}
	e.c.ShareFetchOffset(ctx, "g", "m1", k, 0, 0)
	if got := e.c.ShareAcquire(ctx, "g", "m1", k, 0, 4, 0); !slices.Equal(got, []AcquiredRange{{0, 3, 1}}) {
		t.Fatalf("acquire: %v", got)
	}
	// m1 leaves the group with its session open (librdkafka's order on
	// close): its records stay its own until the session closes.
	if r := e.shareHeartbeat("g", "m1", -1); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	if got := e.c.ShareAcquire(ctx, "g", "m2", k, 0, 4, 0); got != nil {
		t.Fatalf("m2 took the records of m1's open session: %v", got)
	}
	if got := e.c.ShareAcquire(ctx, "g", "m1", k, 4, 6, 0); got != nil {
		t.Fatalf("m1 acquired after leaving: %v", got)
	}
	if _, code := e.c.ShareSession(ctx, "g", "m1", 0, true, []ShareKey{k}, nil, false, 0); code != kerr.UnknownMemberID.Code {
		t.Fatalf("m1 opened a session after leaving: %d", code)
	}
	// Its closing acknowledgement (ShareAcknowledge epoch -1) applies.
	if _, code := e.c.ShareSession(ctx, "g", "m1", -1, false, nil, nil, true, 0); code != 0 {
		t.Fatalf("closing session after leaving: %d", code)
	}
	if code := e.c.ShareAcknowledge(ctx, "g", "m1", k, []AckBatch{{0, 1, []int8{AckAccept}}}, false); code != 0 {
		t.Fatalf("ack after leaving: %d", code)
	}
	if code := e.c.ShareCloseSession(ctx, "g", "m1"); code != 0 {
		t.Fatalf("close: %d", code)
	}
	// The rest is released; what it accepted is not delivered again.
	if got := e.c.ShareAcquire(ctx, "g", "m2", k, 0, 4, 0); !slices.Equal(got, []AcquiredRange{{2, 3, 2}}) {
		t.Fatalf("after m1's session closed: %v", got)
	}
	if _, code := e.c.ShareSession(ctx, "g", "m1", 1, true, nil, nil, false, 0); code != kerr.UnknownMemberID.Code {
		t.Fatalf("m1 after its session closed: %d", code)
	}
}
