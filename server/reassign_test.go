package server

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// TestReassignmentAPIsErrors: the error codes of AlterPartitionReassignments,
// ListPartitionReassignments and ElectLeaders on a single broker, where
// the only valid replica list is the broker itself (it completes at once).
// The moves themselves run in cmd/sluice's real-process test.
func TestReassignmentAPIsErrors(t *testing.T) {
	b := startBroker(t, nil)
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "ra", 2, 1
	ct.Topics = append(ct.Topics, rt)
	if _, err := ct.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	// Another write broker and a read broker, registered only in the
	// metastore, to name in replica lists.
	for _, br := range []metastore.Broker{{ID: 2, Role: metastore.RoleWrite}, {ID: 3, Role: metastore.RoleRead}} {
		if _, err := b.meta.Client().RegisterBroker(ctx, br); err != nil {
			t.Fatal(err)
		}
	}

	alter := func(version int16, allowRF bool, topic string, partition int32, replicas []int32) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.Version = version
		req.AllowReplicationFactorChange = allowRF
		at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		at.Topic = topic
		ap := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		ap.Partition, ap.Replicas = partition, replicas
		at.Partitions = append(at.Partitions, ap)
		req.Topics = append(req.Topics, at)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorMessage == nil {
			return p.ErrorCode, ""
		}
		return p.ErrorCode, *p.ErrorMessage
	}
	cases := []struct {
		name      string
		version   int16
		allowRF   bool
		topic     string
		partition int32
		replicas  []int32
		want      *kerr.Error
	}{
		{"unknown topic", 0, true, "nope", 0, []int32{1}, kerr.UnknownTopicOrPartition},
		{"unknown partition", 0, true, "ra", 7, []int32{1}, kerr.UnknownTopicOrPartition},
		{"empty list", 0, true, "ra", 0, []int32{}, kerr.InvalidReplicaAssignment},
		{"duplicate", 0, true, "ra", 0, []int32{1, 1}, kerr.InvalidReplicaAssignment},
		{"unknown broker", 0, true, "ra", 0, []int32{1, 42}, kerr.InvalidReplicaAssignment},
		{"cancel, nothing in progress", 0, true, "ra", 0, nil, kerr.NoReassignmentInProgress},
		{"a read broker", 0, true, "ra", 0, []int32{1, 3}, kerr.InvalidReplicaAssignment},
		{"rf change refused (v1)", 1, false, "ra", 0, []int32{1, 2}, kerr.InvalidReplicationFactor},
		{"same replicas", 1, false, "ra", 0, []int32{1}, nil},
		// Partition 1 to brokers 1 and 2: recorded, and listed below
		// (nothing carries it out: this broker runs no raft).
		{"a move", 1, true, "ra", 1, []int32{1, 2}, nil},
	}
	for _, c := range cases {
		code, msg := alter(c.version, c.allowRF, c.topic, c.partition, c.replicas)
		want := int16(0)
		if c.want != nil {
			want = c.want.Code
		}
		if code != want {
			t.Errorf("%s: code %d (%s), want %d", c.name, code, msg, want)
		}
	}

	listed := func(topics []kmsg.ListPartitionReassignmentsRequestTopic) []kmsg.ListPartitionReassignmentsResponseTopic {
		t.Helper()
		list := kmsg.NewPtrListPartitionReassignmentsRequest()
		list.Topics = topics
		lresp, err := list.RequestWith(ctx, cl)
		if err != nil || lresp.ErrorCode != 0 {
			t.Fatalf("list: %+v %v", lresp, err)
		}
		return lresp.Topics
	}
	got := listed(nil)
	if len(got) != 1 || got[0].Topic != "ra" || len(got[0].Partitions) != 1 {
		t.Fatalf("list all: %+v", got)
	}
	if p := got[0].Partitions[0]; p.Partition != 1 || !reflect.DeepEqual(p.Replicas, []int32{1, 2}) ||
		!reflect.DeepEqual(p.AddingReplicas, []int32{2}) || len(p.RemovingReplicas) != 0 {
		t.Fatalf("listed %+v", p)
	}
	lt := kmsg.NewListPartitionReassignmentsRequestTopic()
	lt.Topic, lt.Partitions = "ra", []int32{0}
	nt := kmsg.NewListPartitionReassignmentsRequestTopic()
	nt.Topic, nt.Partitions = "nope", []int32{0}
	if got := listed([]kmsg.ListPartitionReassignmentsRequestTopic{lt, nt}); len(got) != 0 {
		t.Fatalf("partition 0 and an unknown topic: %+v", got)
	}
	// Cancel: no longer listed; a second cancel has nothing to cancel.
	if code, msg := alter(0, true, "ra", 1, nil); code != 0 {
		t.Fatalf("cancel: %d %s", code, msg)
	}
	if got := listed(nil); len(got) != 0 {
		t.Fatalf("after cancel: %+v", got)
	}
	if code, _ := alter(0, true, "ra", 1, nil); code != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("second cancel: %d", code)
	}

	elect := func(version int16, etype int8, topics []kmsg.ElectLeadersRequestTopic) *kmsg.ElectLeadersResponse {
		t.Helper()
		req := kmsg.NewPtrElectLeadersRequest()
		req.Version, req.ElectionType, req.Topics, req.TimeoutMillis = version, etype, topics, 5000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	one := func(topic string, ps ...int32) []kmsg.ElectLeadersRequestTopic {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, ps
		return []kmsg.ElectLeadersRequestTopic{rt}
	}
	for _, c := range []struct {
		version int16
		etype   int8
		topics  []kmsg.ElectLeadersRequestTopic
		want    []int16
	}{
		{0, 0, one("ra", 0, 1, 0), []int16{kerr.ElectionNotNeeded.Code, kerr.ElectionNotNeeded.Code}},
		{2, 0, one("ra", 5), []int16{kerr.UnknownTopicOrPartition.Code}},
		{2, 0, one("nope", 0), []int16{kerr.UnknownTopicOrPartition.Code}},
		{1, 1, one("ra", 0), []int16{kerr.ElectionNotNeeded.Code}},
		{2, 3, one("ra", 0), []int16{kerr.InvalidRequest.Code}},
	} {
		resp := elect(c.version, c.etype, c.topics)
		var got []int16
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				got = append(got, p.ErrorCode)
			}
		}
		if len(got) != len(c.want) {
			t.Fatalf("elect v%d type %d: %v, want %v", c.version, c.etype, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("elect v%d type %d: %v, want %v", c.version, c.etype, got, c.want)
			}
		}
	}
	// Null topics: every partition, those that need no election left out.
	if resp := elect(2, 0, nil); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("elect all: %+v", resp)
	}
}
