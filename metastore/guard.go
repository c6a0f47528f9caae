package metastore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/internal/peerlink"
	"github.com/sluice-broker/sluice/internal/raftcheck"
)

// A raft message from a peer is checked before raft's Step sees it: etcd
// raft trusts its messages, and this node's raft exits the process on a
// fatal error. A heartbeat committing past the log, an acknowledgement
// past the leader's log, a snapshot with a configuration raft cannot
// restore, or an entry the apply loop cannot decode (a failed apply is
// fatal too) would otherwise end the process. The rules both raft groups
// share are internal/raftcheck's; what needs this node's state is here. A
// refused message is dropped and counted by reason (Refused, the metric
// sluice_metastore_refused_total), with at most one warning per 10 s;
// raft retries what an honest peer sent. As for the partitions' raft, a
// member that forges consistent raft messages (a Byzantine peer) is out
// of raft's model and of these checks.

// The message refusal reasons, in msgRefusalNames' order.
const (
	refusedType       = iota // a type no peer sends
	refusedTo                // addressed to another node
	refusedFrom              // From is this node, 0, or not a member
	refusedTerm              // term 0 on a type that carries one
	refusedCommit            // a heartbeat's commit index past this node's log
	refusedEntries           // entries out of sequence, of a future term, or that do not decode
	refusedSnapshot          // a snapshot with impossible metadata or an image that does not open
	refusedAckPastLog        // MsgAppResp acknowledging an index this leader does not have
	refusedNotLeader         // a leader's message from another node than the term's leader
)

var msgRefusalNames = []string{"type", "to", "from", "term", "commit_past_log", "entries", "snapshot", "ack_past_log", "not_leader"}

// guard is the node's state for the checks: the refusal counters and a
// lower bound of the last index of raft's log (raft.Node does not tell
// it), the floor.
//
// Raft's log (stored and not yet stored entries) grows by proposals and
// appends, and shrinks only by a peer's MsgApp or MsgSnap of the node's
// term or a later one (a conflicting tail cut, a snapshot restored), which
// are stepped here, one at a time (stepMu). After one, raft's last index is at least the message's last
// entry (accepted) or unchanged (rejected), and never below the commit
// index: the floor is lowered to that, and cuts counted, both before the
// message is handed to raft and again after. A Ready holds the effect of
// every message handed to raft before the Ready loop received it. When
// it is received, and again once it is stored, the floor is raised to
// raft's last index as the Ready shows it (its last entry; once stored,
// the stored log), unless cuts changed since the loop began waiting for
// the Ready: a message handed to raft after the Ready was received
// counted a cut (the second count, if not the first) by then, and lowers
// the floor after any raise. Checks run with stepMu held, so none sees
// the floor between a raise and the lowering that follows it.
type guard struct {
	refused *peerlink.Refusals

	// stepMu serialises the peer messages checked and stepped.
	stepMu sync.Mutex

	floorMu sync.Mutex
	floor   uint64
	cuts    atomic.Uint64
	// commit is a lower bound of raft's commit index (the last hard
	// state's), hence of its last index.
	commit atomic.Uint64
}

func (g *guard) init(lg zerolog.Logger, last, commit uint64) {
	g.refused = peerlink.NewRefusals(lg, "metastore: refused a peer's raft message (further refusals for 10s are only counted)", msgRefusalNames...)
	g.floor = max(last, commit)
	g.commit.Store(commit)
}

// lastFloor is the current lower bound of raft's last index.
func (g *guard) lastFloor() uint64 {
	g.floorMu.Lock()
	defer g.floorMu.Unlock()
	return max(g.floor, g.commit.Load())
}

// raise is the Ready loop's: raft's last index was last when it made the
// Ready the loop began waiting for when cuts was cutsBefore.
func (g *guard) raise(last, cutsBefore uint64) {
	g.floorMu.Lock()
	if last > g.floor && g.cuts.Load() == cutsBefore {
		g.floor = last
	}
	g.floorMu.Unlock()
}

// readyReceived is the Ready loop's, as it receives rd.
func (g *guard) readyReceived(rd *raft.Ready, cutsBefore uint64) {
	if hs := rd.HardState; hs != nil && hs.GetCommit() > g.commit.Load() {
		g.commit.Store(hs.GetCommit())
	}
	var last uint64
	if n := len(rd.Entries); n > 0 {
		last = rd.Entries[n-1].GetIndex()
	} else if !raft.IsEmptySnap(rd.Snapshot) {
		last = rd.Snapshot.GetMetadata().GetIndex()
	}
	g.raise(last, cutsBefore)
}

// cut is told, with stepMu held, before and after a message that may
// shorten raft's log is stepped.
func (g *guard) cut(m *pb.Message) {
	var at uint64
	switch m.GetType() {
	case pb.MsgApp:
		if len(m.GetEntries()) == 0 {
			return // nothing to conflict with the log
		}
		at = m.GetIndex() + uint64(len(m.GetEntries()))
	case pb.MsgSnap:
		at = m.GetSnapshot().GetMetadata().GetIndex()
	default:
		return
	}
	g.floorMu.Lock()
	g.cuts.Add(1)
	g.floor = min(g.floor, max(at, g.commit.Load()))
	g.floorMu.Unlock()
}

// peerMsgType: the message types one metastore member sends another.
// Followers forward proposals and read-index requests to the leader
// (with term 0); leadership transfers are not used.
func peerMsgType(t pb.MessageType) bool {
	switch t {
	case pb.MsgApp, pb.MsgAppResp, pb.MsgVote, pb.MsgVoteResp, pb.MsgPreVote, pb.MsgPreVoteResp,
		pb.MsgSnap, pb.MsgHeartbeat, pb.MsgHeartbeatResp, pb.MsgTimeoutNow,
		pb.MsgProp, pb.MsgReadIndex, pb.MsgReadIndexResp:
		return true
	}
	return false
}

// decodeEntry: a normal entry's data is one the apply loop can decode
// (applyEntries fails, fatally, on one it cannot).
func decodeEntry(data []byte) error {
	_, err := decodeBatch(data)
	return err
}

// isMember: a member of the group as this node knows it, or one of the
// configured peers (a new group's members before its first conf changes
// apply).
func (n *Node) isMember(id uint64) bool {
	n.membersMu.RLock()
	_, ok := n.members[id]
	n.membersMu.RUnlock()
	if ok {
		return true
	}
	_, ok = n.cfg.Peers[id]
	return ok
}

// checkMessage is what needs no lock: the envelope, membership, and what
// a message carries (entries, a snapshot's metadata and image).
func (n *Node) checkMessage(m *pb.Message) int {
	switch raftcheck.Envelope(n.id, m.GetFrom(), m, peerMsgType, pb.MsgProp, pb.MsgReadIndex) {
	case raftcheck.Type:
		return refusedType
	case raftcheck.To:
		return refusedTo
	case raftcheck.From:
		return refusedFrom
	case raftcheck.Term:
		return refusedTerm
	}
	if !n.isMember(m.GetFrom()) {
		return refusedFrom
	}
	switch m.GetType() {
	case pb.MsgApp:
		if !raftcheck.Entries(m, decodeEntry) {
			return refusedEntries
		}
	case pb.MsgReadIndex, pb.MsgReadIndexResp:
		// One entry, the request's context (raft indexes it unchecked).
		if len(m.GetEntries()) != 1 {
			return refusedEntries
		}
	case pb.MsgProp:
		// Forwarded proposals: commands only (membership changes are
		// proposed on the leader, handle.go), at least one (raft panics
		// on none).
		if len(m.GetEntries()) == 0 {
			return refusedEntries
		}
		for _, e := range m.GetEntries() {
			if e.GetType() != pb.EntryNormal || !raftcheck.Entry(e, decodeEntry) {
				return refusedEntries
			}
		}
	case pb.MsgSnap:
		if !raftcheck.Snapshot(m, n.id) {
			return refusedSnapshot
		}
		if err := n.checkImage(m.GetSnapshot()); err != nil {
			return refusedSnapshot
		}
	}
	return -1
}

// checkState is what needs the node's state, with stepMu held; it
// returns the message to step (a heartbeat's commit may be lowered).
func (n *Node) checkState(m *pb.Message) (int, *pb.Message) {
	if !raftcheck.FromLeader(m, n.term.Load(), n.leader.Load()) {
		return refusedNotLeader, m
	}
	switch m.GetType() {
	case pb.MsgReadIndexResp:
		// The answer to a read-index request this node forwarded to its
		// leader.
		if l := n.leader.Load(); l != 0 && l != m.GetFrom() {
			return refusedNotLeader, m
		}
	case pb.MsgHeartbeat:
		// raft commits a heartbeat's index without checking it against
		// the log (raftLog.commitTo panics past it). An honest leader
		// sends at most what this node acknowledged, which it had
		// stored: past the stored log is a forgery. Between the floor and
		// the stored log, raft's log may have been cut by a message
		// stepped since: the heartbeat is stepped with its commit
		// lowered to the floor, which commits less for now but still
		// answers the leader (and its read-index context).
		c := m.GetCommit()
		floor := n.guard.lastFloor()
		if c <= floor {
			return -1, m
		}
		if last, _ := n.ms.LastIndex(); c > last {
			return refusedCommit, m
		}
		m = proto.Clone(m).(*pb.Message)
		m.Commit = new(floor)
	case pb.MsgAppResp:
		// An acknowledgement past the leader's log becomes its match,
		// and the commit index it computes from it panics raft. What an
		// honest follower acknowledges the leader sent from a Ready the
		// loop received, which raised the floor to its last entry (a
		// leader steps no message that cuts its log, which would keep
		// the floor low). Refused, not waited for: the leader's other
		// peers must not wait behind a forgery.
		if i := m.GetIndex(); !m.GetReject() && i > n.guard.lastFloor() {
			return refusedAckPastLog, m
		}
	}
	return -1, m
}

// checkImage: a snapshot's data is a bbolt image that installSnapshot can
// install: it opens, has the meta bucket, and was applied at least up to
// the snapshot's index. Snapshots are rare (a member far behind): the
// image is written and opened once more here, off the Ready loop.
func (n *Node) checkImage(s *pb.Snapshot) error {
	f, err := os.CreateTemp(n.cfg.DataDir, "snapshot.check-*")
	if err != nil {
		return err
	}
	path := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return viewImage(path, s.GetData(), func(tx *bolt.Tx) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("snapshot image: %v", r)
			}
		}()
		if _, err := imageApplied(tx, s.GetMetadata().GetIndex()); err != nil {
			return err
		}
		if v := tx.Bucket(bucketMeta).Get(keyMembers); v != nil {
			var m map[uint64]string
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
		}
		loadImage(tx) // what the install reads (it panics on a corrupt value)
		return nil
	})
}

// HandleRaft implements Handler: a peer's message is checked, then
// stepped.
func (n *Node) HandleRaft(m *pb.Message) {
	if why := n.checkMessage(m); why >= 0 {
		n.refuseMsg(why, m)
		return
	}
	g := &n.guard
	g.stepMu.Lock()
	defer g.stepMu.Unlock()
	why, m := n.checkState(m)
	if why >= 0 {
		n.refuseMsg(why, m)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// A MsgApp or MsgSnap of a term below this node's (a deposed
	// leader's, delivered late) is answered without touching the log:
	// it cuts nothing. Counted as a cut, it would lower the floor under
	// entries the log has, and an honest acknowledgement of them would
	// be refused until the next Ready. n.term is the last hard state's,
	// at most raft's own.
	cuts := m.GetTerm() >= n.term.Load()
	if cuts {
		g.cut(m)
	}
	_ = n.rn.Step(ctx, m)
	if cuts {
		g.cut(m)
	}
}

func (n *Node) refuseMsg(why int, m *pb.Message) {
	n.guard.refused.Add(why, func(e *zerolog.Event) {
		e.Stringer("type", m.GetType()).Uint64("from", m.GetFrom()).Uint64("to", m.GetTo()).
			Uint64("term", m.GetTerm()).Uint64("index", m.GetIndex()).Uint64("commit", m.GetCommit())
	})
}
