// Package raftcheck holds the rules a raft message from a peer must meet
// before etcd raft sees it, shared by the two raft groups a Sluice node
// runs: the metastore quorum's and the partitions'. etcd raft trusts its
// messages: a heartbeat whose commit index is past the receiver's log
// panics it (raftLog.commitTo), a message with term 0 is taken for a
// local one and skips the term checks, a snapshot whose configuration it
// cannot restore panics it, and any node that names itself as From can
// bump a term or lead it. Each transport counts a refusal under its own
// reason names; the rules that need the group's state (the log's last
// index, the commit index, membership) stay with the caller, which knows
// how to read them consistently.
package raftcheck

import (
	"slices"

	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// Reason is which rule a message broke (OK: none).
type Reason int

const (
	OK   Reason = iota
	Type        // a type no peer sends
	To          // addressed to another node
	From        // From is not the connection's node, or is this node
	Term        // term 0, which raft takes for a local message (or a term on a message raft forwards without one)
)

// Envelope checks what needs no group state: the type (peerType says
// which a peer may send), the addressee, that From is the node the
// connection belongs to (from) and not this one (self), and the term
// every message between nodes carries. localTerm lists the types a peer
// sends with term 0 (raft forwards proposals and read-index requests so):
// those must have none, as raft takes one for a term to follow and, on a
// follower forwarding it to its leader, panics sending it.
func Envelope(self, from uint64, m *raftpb.Message, peerType func(raftpb.MessageType) bool, localTerm ...raftpb.MessageType) Reason {
	switch {
	case !peerType(m.GetType()):
		return Type
	case m.GetTo() != self:
		return To
	case m.GetFrom() != from || from == 0 || from == self:
		return From
	case (m.GetTerm() == 0) != slices.Contains(localTerm, m.GetType()):
		return Term
	}
	return OK
}

// FromLeader: a term has one leader, and only it sends MsgApp,
// MsgHeartbeat, MsgSnap and MsgTimeoutNow in its term; term and lead are
// the receiver's (lead 0: none known). raft would take another sender of
// these for the leader, and MsgTimeoutNow makes the receiver campaign at
// once, even from a higher term. Other types pass.
func FromLeader(m *raftpb.Message, term, lead uint64) bool {
	switch m.GetType() {
	case raftpb.MsgApp, raftpb.MsgHeartbeat, raftpb.MsgSnap:
		return m.GetTerm() != term || lead == 0 || lead == m.GetFrom()
	case raftpb.MsgTimeoutNow:
		return m.GetTerm() == term && lead == m.GetFrom()
	}
	return true
}

// Entries: a MsgApp's entries follow its index one by one, their terms do
// not decrease from its log term and none is past its term or 0, and each
// decodes as the state machine will need it: a configuration change that
// unmarshals, or a normal entry normal accepts (it is given the data of a
// non-empty one).
func Entries(m *raftpb.Message, normal func(data []byte) error) bool {
	term, prev := m.GetTerm(), m.GetLogTerm()
	if prev > term {
		return false
	}
	idx := m.GetIndex()
	for _, e := range m.GetEntries() {
		idx++
		if idx == 0 || e.GetIndex() != idx || e.GetTerm() < prev || e.GetTerm() > term || e.GetTerm() == 0 {
			return false
		}
		prev = e.GetTerm()
		if !Entry(e, normal) {
			return false
		}
	}
	return true
}

// Entry: e's data decodes for its type (see Entries).
func Entry(e *raftpb.Entry, normal func(data []byte) error) bool {
	switch e.GetType() {
	case raftpb.EntryNormal:
		if len(e.GetData()) > 0 && normal(e.GetData()) != nil {
			return false
		}
	case raftpb.EntryConfChange:
		if err := proto.Unmarshal(e.GetData(), &raftpb.ConfChange{}); err != nil {
			return false
		}
	case raftpb.EntryConfChangeV2:
		if err := proto.Unmarshal(e.GetData(), &raftpb.ConfChangeV2{}); err != nil {
			return false
		}
	default:
		return false
	}
	return true
}

// Snapshot: a MsgSnap's metadata is one raft can install on self: an
// index and a term, not from a future term, and a configuration raft can
// restore (it panics on one it cannot) that holds self. The data is the
// caller's to check.
func Snapshot(m *raftpb.Message, self uint64) bool {
	s := m.GetSnapshot()
	md := s.GetMetadata()
	if s == nil || md.GetIndex() == 0 || md.GetTerm() == 0 || md.GetTerm() > m.GetTerm() {
		return false
	}
	cs := md.GetConfState()
	if !slices.Contains(cs.GetVoters(), self) && !slices.Contains(cs.GetLearners(), self) && !slices.Contains(cs.GetVotersOutgoing(), self) {
		return false
	}
	// What raft does with it (raft.restore), which panics where this
	// returns false: rebuild the configuration and compare.
	cfg, prs, err := confchange.Restore(confchange.Changer{
		Tracker:   tracker.MakeProgressTracker(1, 0),
		LastIndex: md.GetIndex(),
	}, cs)
	if err != nil {
		return false
	}
	pt := tracker.ProgressTracker{Config: cfg, Progress: prs}
	return raftpb.EnsureConfState(cs).Equivalent(pt.ConfState()) == nil
}
