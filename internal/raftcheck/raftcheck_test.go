package raftcheck

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

func msg(typ raftpb.MessageType, from, to, term uint64) *raftpb.Message {
	return &raftpb.Message{Type: new(typ), From: new(from), To: new(to), Term: new(term)}
}

func TestEnvelope(t *testing.T) {
	peer := func(t raftpb.MessageType) bool {
		return t == raftpb.MsgHeartbeat || t == raftpb.MsgProp || t == raftpb.MsgReadIndex
	}
	local := []raftpb.MessageType{raftpb.MsgProp, raftpb.MsgReadIndex}
	for _, tc := range []struct {
		name string
		from uint64
		m    *raftpb.Message
		want Reason
	}{
		{"heartbeat", 2, msg(raftpb.MsgHeartbeat, 2, 1, 5), OK},
		{"local type", 2, msg(raftpb.MsgHup, 2, 1, 5), Type},
		{"another addressee", 2, msg(raftpb.MsgHeartbeat, 2, 3, 5), To},
		{"another sender than the connection's", 2, msg(raftpb.MsgHeartbeat, 3, 1, 5), From},
		{"from this node", 1, msg(raftpb.MsgHeartbeat, 1, 1, 5), From},
		{"from node 0", 0, msg(raftpb.MsgHeartbeat, 0, 1, 5), From},
		{"term 0", 2, msg(raftpb.MsgHeartbeat, 2, 1, 0), Term},
		{"forwarded proposal", 2, msg(raftpb.MsgProp, 2, 1, 0), OK},
		{"forwarded proposal with a term", 2, msg(raftpb.MsgProp, 2, 1, 5), Term},
		{"read index with a term", 2, msg(raftpb.MsgReadIndex, 2, 1, 5), Term},
	} {
		if got := Envelope(1, tc.from, tc.m, peer, local...); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFromLeader(t *testing.T) {
	for _, tc := range []struct {
		name       string
		m          *raftpb.Message
		term, lead uint64
		want       bool
	}{
		{"the leader's heartbeat", msg(raftpb.MsgHeartbeat, 2, 1, 5), 5, 2, true},
		{"another member's heartbeat in the term", msg(raftpb.MsgHeartbeat, 3, 1, 5), 5, 2, false},
		{"a heartbeat from a later term", msg(raftpb.MsgHeartbeat, 3, 1, 6), 5, 2, true},
		{"no leader known", msg(raftpb.MsgApp, 3, 1, 5), 5, 0, true},
		{"timeout-now from the leader", msg(raftpb.MsgTimeoutNow, 2, 1, 5), 5, 2, true},
		{"timeout-now from a later term", msg(raftpb.MsgTimeoutNow, 2, 1, 6), 5, 2, false},
		{"a vote", msg(raftpb.MsgVote, 3, 1, 5), 5, 2, true},
	} {
		if got := FromLeader(tc.m, tc.term, tc.lead); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestEntries(t *testing.T) {
	ok := func([]byte) error { return nil }
	bad := func([]byte) error { return errors.New("no") }
	app := func(index, logTerm uint64, ents ...*raftpb.Entry) *raftpb.Message {
		m := msg(raftpb.MsgApp, 2, 1, 5)
		m.Index, m.LogTerm, m.Entries = new(index), new(logTerm), ents
		return m
	}
	ent := func(i, term uint64, data string) *raftpb.Entry {
		return &raftpb.Entry{Index: new(i), Term: new(term), Data: []byte(data)}
	}
	for _, tc := range []struct {
		name   string
		m      *raftpb.Message
		normal func([]byte) error
		want   bool
	}{
		{"in sequence", app(3, 4, ent(4, 4, "a"), ent(5, 5, "b")), ok, true},
		{"a gap", app(3, 4, ent(5, 4, "a")), ok, false},
		{"a term past the message's", app(3, 4, ent(4, 6, "a")), ok, false},
		{"terms decreasing", app(3, 4, ent(4, 5, "a"), ent(5, 4, "b")), ok, false},
		{"below the log term", app(3, 4, ent(4, 3, "a")), ok, false},
		{"log term past the term", app(3, 6), ok, false},
		{"index wrapping", app(^uint64(0), 4, ent(0, 4, "a")), ok, false},
		{"data the state machine refuses", app(3, 4, ent(4, 4, "a")), bad, false},
		{"an empty entry is not decoded", app(3, 4, ent(4, 4, "")), bad, true},
		{"a conf change that does not unmarshal", app(3, 4, &raftpb.Entry{Index: new(uint64(4)), Term: new(uint64(4)), Type: new(raftpb.EntryConfChange), Data: []byte{0xff}}), ok, false},
	} {
		if got := Entries(tc.m, tc.normal); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSnapshot(t *testing.T) {
	snap := func(index, term uint64, cs *raftpb.ConfState) *raftpb.Message {
		m := msg(raftpb.MsgSnap, 2, 1, 5)
		m.Snapshot = &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: cs}}
		return m
	}
	voters := &raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	for _, tc := range []struct {
		name string
		m    *raftpb.Message
		want bool
	}{
		{"valid", snap(100, 5, voters), true},
		{"index 0", snap(0, 5, voters), false},
		{"from a future term", snap(100, 6, voters), false},
		{"without this node", snap(100, 5, &raftpb.ConfState{Voters: []uint64{2, 3}}), false},
		{"a voter that is also a learner", snap(100, 5, &raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{3}}), false},
		{"no snapshot", msg(raftpb.MsgSnap, 2, 1, 5), false},
	} {
		if got := Snapshot(tc.m, 1); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
