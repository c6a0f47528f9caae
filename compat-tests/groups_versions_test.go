package compat

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupAPIsEveryVersion drives every advertised version of each group
// API by hand (kmsg encodes each version, flexible or not) and checks the
// per-version semantics: FindCoordinator single and batched keys, a whole
// join/sync/heartbeat/leave cycle per JoinGroup version (MEMBER_ID_REQUIRED
// only from v4), OffsetCommit and OffsetFetch round trips at every version
// (v10 by topic id, v8+ several groups), and the describe/list/delete APIs.
func TestGroupAPIsEveryVersion(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	const topic = "grp-versions"
	createTopic(ctx, t, adm, topic, 2, nil)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("metadata: %v %v", err, td[topic].Err)
	}
	topicID := [16]byte(td[topic].ID)
	c := dialRaw(t, b.KafkaAddr)
	advertised := c.apiVersions()
	trips := 0
	defer func() { t.Logf("%d group API round trips", trips) }()
	rt := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		trips++
		resp, err := c.roundTrip(req, req.GetVersion())
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	versions := func(key int16) (int16, int16) {
		av, ok := advertised[key]
		if !ok {
			t.Fatalf("%s (key %d) is not advertised", kmsg.NameForKey(key), key)
		}
		return av.MinVersion, av.MaxVersion
	}
	host, portStr := splitHostPort(t, b.KafkaAddr)
	port, _ := strconv.Atoi(portStr)

	// FindCoordinator.
	lo, hi := versions(10)
	if lo != 0 {
		t.Errorf("FindCoordinator min version %d: librdkafka needs v0", lo)
	}
	for v := lo; v <= hi; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		if v < 4 {
			req.CoordinatorKey = "fc-group"
			r := rt(req).(*kmsg.FindCoordinatorResponse)
			if r.ErrorCode != 0 || r.Host != host || int(r.Port) != port || r.NodeID != 1 {
				t.Errorf("FindCoordinator v%d: %+v", v, r)
			}
			continue
		}
		req.CoordinatorKeys = []string{"fc-a", "fc-b"}
		r := rt(req).(*kmsg.FindCoordinatorResponse)
		if len(r.Coordinators) != 2 {
			t.Fatalf("FindCoordinator v%d: %d coordinators for 2 keys", v, len(r.Coordinators))
		}
		for i, co := range r.Coordinators {
			if co.Key != req.CoordinatorKeys[i] || co.ErrorCode != 0 || co.Host != host || int(co.Port) != port {
				t.Errorf("FindCoordinator v%d key %d: %+v", v, i, co)
			}
		}
		// A transactional id: this broker, the only write broker,
		// coordinates it; an empty one is INVALID_REQUEST.
		req.CoordinatorType = 1
		req.CoordinatorKeys = []string{"txn", ""}
		r = rt(req).(*kmsg.FindCoordinatorResponse)
		if co := r.Coordinators[0]; co.ErrorCode != 0 || co.Host != host || int(co.Port) != port || co.NodeID != 1 {
			t.Errorf("FindCoordinator v%d for a transactional id: %+v", v, co)
		}
		if co := r.Coordinators[1]; co.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("FindCoordinator v%d for an empty transactional id: error %d, want INVALID_REQUEST", v, co.ErrorCode)
		}
	}

	// One member through a whole generation, per JoinGroup version.
	_, jhi := versions(11)
	_, shi := versions(14)
	_, hhi := versions(12)
	_, lhi := versions(13)
	for v := int16(0); v <= jhi; v++ {
		group := fmt.Sprintf("raw-join-v%d", v)
		join := kmsg.NewPtrJoinGroupRequest()
		join.Version = v
		join.Group = group
		join.SessionTimeoutMillis = 10000
		join.RebalanceTimeoutMillis = 10000
		join.ProtocolType = "consumer"
		md := kmsg.NewConsumerMemberMetadata()
		md.Topics = []string{topic}
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: md.AppendTo(nil)}}
		jr := rt(join).(*kmsg.JoinGroupResponse)
		if v >= 4 {
			if jr.ErrorCode != kerr.MemberIDRequired.Code || jr.MemberID == "" {
				t.Fatalf("JoinGroup v%d first join: error %d member %q, want MEMBER_ID_REQUIRED", v, jr.ErrorCode, jr.MemberID)
			}
			join.MemberID = jr.MemberID
			jr = rt(join).(*kmsg.JoinGroupResponse)
		}
		if jr.ErrorCode != 0 || jr.Generation != 1 || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 {
			t.Fatalf("JoinGroup v%d: %+v", v, jr)
		}
		if v >= 7 && (jr.Protocol == nil || *jr.Protocol != "range" || jr.ProtocolType == nil || *jr.ProtocolType != "consumer") {
			t.Errorf("JoinGroup v%d: protocol %v type %v", v, jr.Protocol, jr.ProtocolType)
		}
		member := jr.MemberID

		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Version = min(v, shi)
		sync.Group, sync.MemberID, sync.Generation = group, member, 1
		if sync.Version >= 5 {
			sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		}
		asg := kmsg.NewConsumerMemberAssignment()
		asg.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: []int32{0, 1}}}
		sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: asg.AppendTo(nil)}}
		sr := rt(sync).(*kmsg.SyncGroupResponse)
		var got kmsg.ConsumerMemberAssignment
		if sr.ErrorCode != 0 || got.ReadFrom(sr.MemberAssignment) != nil || len(got.Topics) != 1 || len(got.Topics[0].Partitions) != 2 {
			t.Fatalf("SyncGroup v%d: %+v", sync.Version, sr)
		}

		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version = min(v, hhi)
		hb.Group, hb.MemberID, hb.Generation = group, member, 1
		if r := rt(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
			t.Errorf("Heartbeat v%d: error %d", hb.Version, r.ErrorCode)
		}
		hb.Generation = 7
		if r := rt(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != kerr.IllegalGeneration.Code {
			t.Errorf("Heartbeat v%d with a wrong generation: error %d", hb.Version, r.ErrorCode)
		}

		// A member commit (OffsetCommit v1+ carries the generation).
		oc := offsetCommitReq(min(max(v, 1), 9), group, member, 1, topic, 0, 42)
		if r := rt(oc).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Errorf("OffsetCommit v%d by the member: error %d", oc.Version, r.Topics[0].Partitions[0].ErrorCode)
		}

		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version = min(v, lhi)
		leave.Group = group
		if leave.Version < 3 {
			leave.MemberID = member
		} else {
			leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
		}
		lr := rt(leave).(*kmsg.LeaveGroupResponse)
		if lr.ErrorCode != 0 || (leave.Version >= 3 && (len(lr.Members) != 1 || lr.Members[0].ErrorCode != 0)) {
			t.Errorf("LeaveGroup v%d: %+v", leave.Version, lr)
		}
	}

	// OffsetCommit / OffsetFetch at every version, as simple commits.
	_, ochi := versions(8)
	ofLo, ofhi := versions(9)
	for v := int16(0); v <= ochi; v++ {
		group := fmt.Sprintf("raw-oc-v%d", v)
		oc := offsetCommitReq(v, group, "", -1, topic, 1, 100+int64(v))
		if v >= 10 {
			oc.Topics[0].Topic, oc.Topics[0].TopicID = "", topicID
		}
		r := rt(oc).(*kmsg.OffsetCommitResponse)
		if len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("OffsetCommit v%d: %+v", v, r)
		}
		for fv := ofLo; fv <= ofhi; fv++ {
			of := kmsg.NewPtrOffsetFetchRequest()
			of.Version = fv
			want := 100 + int64(v)
			if fv < 8 {
				of.Group = group
				of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0, 1}}}
				fr := rt(of).(*kmsg.OffsetFetchResponse)
				if fr.ErrorCode != 0 || len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].Offset != -1 || fr.Topics[0].Partitions[1].Offset != want {
					t.Errorf("OffsetFetch v%d after OffsetCommit v%d: %+v", fv, v, fr)
				}
				continue
			}
			g1 := kmsg.NewOffsetFetchRequestGroup()
			g1.Group = group
			g1.MemberEpoch = -1
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = topic, []int32{1}
			if fv >= 10 {
				gt.Topic, gt.TopicID = "", topicID
			}
			g1.Topics = []kmsg.OffsetFetchRequestGroupTopic{gt}
			g2 := kmsg.NewOffsetFetchRequestGroup()
			g2.Group = "raw-oc-v0" // null topics: everything committed
			g2.MemberEpoch = -1
			of.Groups = []kmsg.OffsetFetchRequestGroup{g1, g2}
			of.RequireStable = true
			fr := rt(of).(*kmsg.OffsetFetchResponse)
			if len(fr.Groups) != 2 || fr.Groups[0].ErrorCode != 0 || fr.Groups[0].Topics[0].Partitions[0].Offset != want ||
				len(fr.Groups[1].Topics) != 1 || fr.Groups[1].Topics[0].Partitions[0].Offset != 100 {
				t.Errorf("OffsetFetch v%d (two groups) after OffsetCommit v%d: %+v", fv, v, fr)
			}
			if fv >= 10 && fr.Groups[0].Topics[0].TopicID != topicID {
				t.Errorf("OffsetFetch v%d: topic id %x, want %x", fv, fr.Groups[0].Topics[0].TopicID, topicID)
			}
		}
	}

	// DescribeGroups, ListGroups, OffsetDelete, DeleteGroups.
	dlo, dhi := versions(15)
	for v := dlo; v <= dhi; v++ {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version = v
		req.Groups = []string{"raw-join-v3", "no-such-group"}
		r := rt(req).(*kmsg.DescribeGroupsResponse)
		if len(r.Groups) != 2 || r.Groups[0].State != "Empty" || r.Groups[0].ErrorCode != 0 || r.Groups[1].State != "Dead" {
			t.Errorf("DescribeGroups v%d: %+v", v, r.Groups)
		}
		if wantErr := v >= 6; (r.Groups[1].ErrorCode == kerr.GroupIDNotFound.Code) != wantErr {
			t.Errorf("DescribeGroups v%d of an unknown group: error %d", v, r.Groups[1].ErrorCode)
		}
	}
	llo, lhi2 := versions(16)
	for v := llo; v <= lhi2; v++ {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = v
		if v >= 4 {
			req.StatesFilter = []string{"Empty"}
		}
		if v >= 5 {
			req.TypesFilter = []string{"classic"}
		}
		r := rt(req).(*kmsg.ListGroupsResponse)
		found := map[string]bool{}
		for _, g := range r.Groups {
			found[g.Group] = true
			if v >= 4 && g.GroupState != "Empty" || v >= 5 && g.GroupType != "classic" {
				t.Errorf("ListGroups v%d: %+v", v, g)
			}
		}
		if r.ErrorCode != 0 || !found["raw-join-v0"] || !found["raw-oc-v10"] {
			t.Errorf("ListGroups v%d: error %d, groups %v", v, r.ErrorCode, found)
		}
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "raw-oc-v3"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}}
	if r := rt(od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("OffsetDelete: %+v", r)
	}
	dglo, dghi := versions(42)
	for v := dglo; v <= dghi; v++ {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version = v
		req.Groups = []string{fmt.Sprintf("raw-oc-v%d", v), "no-such-group"}
		r := rt(req).(*kmsg.DeleteGroupsResponse)
		if len(r.Groups) != 2 || r.Groups[0].ErrorCode != 0 || r.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
			t.Errorf("DeleteGroups v%d: %+v", v, r.Groups)
		}
	}

	// KIP-848 at each version: join, describe, leave.
	clo, chi := versions(68)
	for v := clo; v <= chi; v++ {
		group := fmt.Sprintf("raw-cg-v%d", v)
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version = v
		hb.Group = group
		if v >= 1 {
			hb.MemberID = fmt.Sprintf("member-%d", v) // v1: the client makes the id
		}
		hb.RebalanceTimeoutMillis = 10000
		hb.SubscribedTopicNames = []string{topic}
		hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r := rt(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 || r.MemberID == nil || *r.MemberID == "" || r.MemberEpoch < 1 || r.Assignment == nil ||
			len(r.Assignment.Topics) != 1 || len(r.Assignment.Topics[0].Partitions) != 2 || r.HeartbeatIntervalMillis <= 0 {
			t.Fatalf("ConsumerGroupHeartbeat v%d join: %+v", v, r)
		}
		dlo, dhi := versions(69)
		for dv := dlo; dv <= dhi; dv++ {
			d := kmsg.NewPtrConsumerGroupDescribeRequest()
			d.Version = dv
			d.Groups = []string{group}
			dr := rt(d).(*kmsg.ConsumerGroupDescribeResponse)
			if len(dr.Groups) != 1 || dr.Groups[0].ErrorCode != 0 || len(dr.Groups[0].Members) != 1 ||
				dr.Groups[0].Members[0].MemberEpoch != r.MemberEpoch || len(dr.Groups[0].Members[0].Assignment.TopicPartitions) != 1 ||
				dr.Groups[0].Members[0].Assignment.TopicPartitions[0].Topic != topic {
				t.Errorf("ConsumerGroupDescribe v%d: %+v", dv, dr.Groups)
			}
		}
		hb.MemberID, hb.MemberEpoch = *r.MemberID, -1
		hb.SubscribedTopicNames, hb.Topics, hb.RebalanceTimeoutMillis = nil, nil, -1
		if lr := rt(hb).(*kmsg.ConsumerGroupHeartbeatResponse); lr.ErrorCode != 0 || lr.MemberEpoch != -1 {
			t.Errorf("ConsumerGroupHeartbeat v%d leave: %+v", v, lr)
		}
	}
}

func offsetCommitReq(v int16, group, member string, gen int32, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = v
	req.Group, req.MemberID, req.Generation = group, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rp.Metadata = kmsg.StringPtr("m")
	rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	return req
}

func splitHostPort(t *testing.T, addr string) (string, string) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}
