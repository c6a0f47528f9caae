package replica

import (
	"errors"
	"slices"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-broker/sluice/internal/peerlink"
	"github.com/sluice-broker/sluice/internal/raftcheck"
)

// What a peer sends is checked before raft sees it (the rules both raft
// groups share are internal/raftcheck's). etcd raft trusts its
// messages: a heartbeat whose commit index is past the receiver's log
// panics (raftLog.commitTo), a message with term 0 is taken for a local
// one and skips the term checks, and any node that names itself as From
// can bump a group's term or lead it. A message that fails a check is
// dropped and counted by reason (Host.Refused, TCPTransport.Refused); raft
// retries what an honest peer sent. The checks cover what a peer that is
// not a member, or a member sending an impossible message, can do; a
// member that forges consistent raft messages (a Byzantine peer) is out of
// raft's model and of theirs.

// Refusal is why a peer's connection, frame or message was refused.
type Refusal int

const (
	// Connections (TCPTransport).
	RefusedHandshake   Refusal = iota // not "SLRT" v1, or no hello in time
	RefusedUnknownNode                // the declared node id is not a registered broker, or is this broker
	RefusedAddress                    // the connection does not come from the declared broker's address
	RefusedBusy                       // too many connections still in their handshake
	RefusedFrame                      // a frame too large or malformed: the connection is closed
	RefusedTLS                        // TLS handshake failed: no certificate, or one the trust store did not sign
	RefusedIdentity                   // the peer's certificate does not name the node id its hello declares

	// Messages (Host).
	RefusedType       // a type no peer sends (local, proposal, read index)
	RefusedTo         // addressed to another node
	RefusedFrom       // From is not the connection's node
	RefusedTerm       // term 0, which raft takes for a local message
	RefusedGroup      // no such group open here
	RefusedNotMember  // From is not a member of the group
	RefusedCommit     // a heartbeat's commit index past this replica's log
	RefusedEntries    // MsgApp entries out of sequence, of a future term or not decodable
	RefusedSnapshot   // a snapshot that does not decode or has an impossible configuration
	RefusedAckPastLog // MsgAppResp acknowledging an index this leader does not have
	RefusedNotLeader  // a leader's message from another node than the term's leader
	// A leader's append starting below this replica's commit index that
	// disagrees with an entry this replica committed: its committed log
	// is not the leader's (divergedLocked).
	RefusedDiverged

	// A frame whose body did not arrive within frameBodyTimeout of its
	// room in the port's budget (TCPTransport): the connection is closed.
	RefusedFrameTimeout
	numRefusals
)

var refusalNames = [numRefusals]string{
	"handshake", "unknown_node", "address", "busy", "frame", "tls", "identity",
	"type", "to", "from", "term", "group", "not_member", "commit_past_log", "entries", "snapshot", "ack_past_log", "not_leader",
	"diverged", "frame_timeout",
}

func (r Refusal) String() string {
	if r < 0 || r >= numRefusals {
		return "unknown"
	}
	return refusalNames[r]
}

// newRefusals counts refusals by this package's reasons (Refusal) and
// logs the first of each burst: a hostile peer must not be able to fill
// the log.
func newRefusals(lg zerolog.Logger) *peerlink.Refusals {
	return peerlink.NewRefusals(lg, "raft: refused a peer's connection, frame or message (further refusals for 10s are only counted)",
		refusalNames[:]...)
}

// peerMsgType: the message types one raft node sends another here.
// Proposals are never forwarded (DisableProposalForwarding), read index
// is not used, and leadership transfers are started on the leader. The
// offline notice (raft_nospace.go) is this package's, never stepped.
func peerMsgType(t raftpb.MessageType) bool {
	switch t {
	case raftpb.MsgApp, raftpb.MsgAppResp, raftpb.MsgVote, raftpb.MsgVoteResp,
		raftpb.MsgPreVote, raftpb.MsgPreVoteResp, raftpb.MsgSnap,
		raftpb.MsgHeartbeat, raftpb.MsgHeartbeatResp, raftpb.MsgTimeoutNow, offlineNotice:
		return true
	}
	return false
}

// checkEnvelope is what the host checks without the group's state: the
// type, the addressee, that From is the peer the connection belongs to,
// and the term every message between nodes carries.
func checkEnvelope(self uint64, from NodeID, m *raftpb.Message) (Refusal, bool) {
	if from < 0 {
		return RefusedFrom, false
	}
	switch raftcheck.Envelope(self, raftID(from), m, peerMsgType) {
	case raftcheck.Type:
		return RefusedType, false
	case raftcheck.To:
		return RefusedTo, false
	case raftcheck.From:
		return RefusedFrom, false
	case raftcheck.Term:
		return RefusedTerm, false
	}
	return 0, true
}

// errCheckLater: the message can be judged only against raft's exact
// last index, which is known once the round's pending Ready is stored;
// the worker steps it at the start of the next round instead.
var errCheckLater = errors.New("replica: check after the pending Ready")

// checkLocked is what the replica checks against its state before Step
// (raftMu held): that From is a member and that the message cannot break
// raft's invariants. When the answer needs raft's exact last index and
// raft holds entries not stored yet, it returns errCheckLater if mayDefer,
// and otherwise stores them first (any other error is a storage failure).
func (r *Replica) checkLocked(m *raftpb.Message, mayDefer bool) (Refusal, bool, error) {
	if !r.isMember(m.GetFrom()) {
		return RefusedNotMember, false, nil
	}
	switch m.GetType() {
	case raftpb.MsgApp, raftpb.MsgHeartbeat, raftpb.MsgSnap, raftpb.MsgTimeoutNow:
		// A term has one leader: only it sends these in its term. raft
		// would take another sender for the leader (and TimeoutNow makes
		// this replica campaign at once, even from a higher term).
		bs := r.rn.BasicStatus()
		if !raftcheck.FromLeader(m, bs.GetTerm(), bs.Lead) {
			return RefusedNotLeader, false, nil
		}
		if r.opts.Load().Mode == ModeAsync && !r.mayLeadLocked(m) {
			return RefusedNotLeader, false, nil
		}
	}
	switch m.GetType() {
	case raftpb.MsgHeartbeat:
		// raft commits a heartbeat's index without checking it against
		// the log (raftLog.commitTo panics past it). An honest leader
		// sends at most what this replica acknowledged.
		c := m.GetCommit()
		if c <= r.rn.BasicStatus().GetCommit() {
			return 0, true, nil
		}
		last, err := r.lastIndexLocked(c, mayDefer)
		if err != nil {
			return 0, false, err
		}
		if c > last {
			return RefusedCommit, false, nil
		}
	case raftpb.MsgAppResp:
		// A leader's log only grows, so its stored last index is a lower
		// bound of raft's.
		if stored, _ := r.st.LastIndex(); m.GetReject() || m.GetIndex() <= stored {
			return 0, true, nil
		}
		last, err := r.lastIndexLocked(m.GetIndex(), mayDefer)
		if err != nil {
			return 0, false, err
		}
		if m.GetIndex() > last {
			return RefusedAckPastLog, false, nil
		}
	case raftpb.MsgApp:
		if !validEntries(m) {
			return RefusedEntries, false, nil
		}
		if diverged, err := r.divergedLocked(m, mayDefer); err != nil {
			return 0, false, err
		} else if diverged {
			return RefusedDiverged, false, nil
		}
	case raftpb.MsgSnap:
		if !r.validSnapshot(m) {
			return RefusedSnapshot, false, nil
		}
	}
	return 0, true, nil
}

// divergedLocked: m, a leader's append starting below this replica's
// commit index, disagrees with the log this replica committed: its
// previous entry, or one of its entries up to the commit index, is not
// the one this replica holds at that index (another term). raft answers
// an append below its commit index with an acknowledgement of that index
// without looking at its log (handleAppendEntries); the leader takes it
// for a match and, once the replica rejects the entries after it, ignores
// every rejection at or below that match as stale: the replica would never
// receive the log again, and neither side would say so above debug level.
// Only a log changed below raft can get there (an async failover's
// promotion or cut that this replica has not followed yet); refused, the
// append is logged and counted, and the leader keeps probing. Like
// lastIndexLocked, it may store the pending Ready first (errCheckLater if
// mayDefer), so that the stored log is raft's.
func (r *Replica) divergedLocked(m *raftpb.Message, mayDefer bool) (bool, error) {
	commit := r.rn.BasicStatus().GetCommit()
	prev := m.GetIndex()
	if prev >= commit {
		return false, nil
	}
	if _, err := r.lastIndexLocked(commit, mayDefer); err != nil {
		return false, err
	}
	differs := func(i, term uint64) bool {
		t, err := r.st.Term(i)
		return err == nil && t != term // compacted: raft's snapshot rules apply
	}
	if prev > 0 && differs(prev, m.GetLogTerm()) {
		return true, nil
	}
	for _, e := range m.GetEntries() {
		if e.GetIndex() > commit {
			break
		}
		if differs(e.GetIndex(), e.GetTerm()) {
			return true, nil
		}
	}
	return false, nil
}

// lastIndexLocked is raft's last index when it matters, that is when want
// is past the stored last index or raft holds entries not stored yet (they
// may extend the log or, for a follower, replace its tail): then, unless
// mayDefer (errCheckLater), the pending Ready is stored first, so that
// the stored last index is raft's. Deferring spares the round an extra
// fsync: its Ready is stored at its end anyway.
func (r *Replica) lastIndexLocked(want uint64, mayDefer bool) (uint64, error) {
	last, _ := r.st.LastIndex()
	if want <= last && !r.rn.HasReady() {
		return last, nil
	}
	if mayDefer && r.rn.HasReady() {
		return 0, errCheckLater
	}
	for i := 0; r.rn.HasReady() && i < maxReadyLoops; i++ {
		if err := r.handleReadyLocked(); err != nil {
			return 0, err
		}
	}
	last, _ = r.st.LastIndex()
	return last, nil
}

// isMember: id is in the applied configuration, or the metastore assigns
// its broker to the partition (a replica that is behind, a joining one
// above all, learns of newer members from the log they send it).
func (r *Replica) isMember(id uint64) bool {
	r.st.mu.Lock()
	cs := r.st.cs
	in := slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetLearners(), id) ||
		slices.Contains(cs.GetVotersOutgoing(), id) || slices.Contains(cs.GetLearnersNext(), id)
	r.st.mu.Unlock()
	if in {
		return true
	}
	if a := r.host.cfg.Assigned; a != nil && id > 0 {
		return a(r.key, nodeOf(id))
	}
	return false
}

// mayLeadLocked: in async mode only the voter of the replica's
// configuration leads. A promotion changes the master below raft
// (raft_failover.go): until this replica follows the new master
// (Host.Follow), its log may hold, committed, what the new master never
// received, and raft would answer the new master's probe under that commit
// index with an acknowledgement of it (handleAppendEntries), a match the
// new master then keeps after the replica cut its log: it would never send
// the replica its entries again. After following, the old master, in the
// term the takeover kept, would be taken for the leader. A replica with no
// voter in its configuration yet (raft's initial state) accepts any.
//
// A replica that is behind the log (a broker joining the partition
// starts from the group's initial configuration and learns of later
// voters only from the changes the leader sends) also takes the master
// the metastore records (AsyncMaster): without this a broker joining a
// partition whose master is no voter of the initial configuration refused
// every message from that master and never caught up (a reassignment that
// never finished, found by the nemesis). After a promotion it does so only
// once it is past the recorded takeover (pastOrFollowed): its log then
// holds nothing the masters since lack, which the log's own changes made
// (a reassignment, raft elections), never a promotion. Before, a replica
// that was down, or cut off, while a reassignment moved the master (from
// the promoted one to another write broker) kept, from its configuration,
// only the master that left as the one that may lead: it refused every
// message of the new one, which alone could send it the change, and
// followed that partition no more (a read broker restarted during a
// nemesis reassignment round; TestRaftAsyncMissedMasterMove).
func (r *Replica) mayLeadLocked(m *raftpb.Message) bool {
	id := m.GetFrom()
	r.st.mu.Lock()
	cs := r.st.cs
	r.st.mu.Unlock()
	if len(cs.GetVoters()) == 0 && len(cs.GetVotersOutgoing()) == 0 {
		return true
	}
	if slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetVotersOutgoing(), id) {
		return true
	}
	f := r.host.cfg.AsyncMaster
	if f == nil {
		return false
	}
	n, t, ok := f(r.key)
	if !ok || raftID(n) != id {
		return false
	}
	if t == nil {
		return true
	}
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	return pastOrFollowed(r.st, *t)
}

// validEntries: a MsgApp's entries are in sequence and of no future term
// (raftcheck.Entries), and each normal entry decodes as the storage will
// need it (a record batch, an empty entry, or a command).
func validEntries(m *raftpb.Message) bool {
	return raftcheck.Entries(m, func(data []byte) error {
		if isCommand(data) {
			return nil
		}
		_, err := parseBatch(data, true)
		return err
	})
}

// validSnapshot: the snapshot's metadata is one raft can install here
// (raftcheck.Snapshot) and its data is ours.
func (r *Replica) validSnapshot(m *raftpb.Message) bool {
	if !raftcheck.Snapshot(m, raftID(r.host.cfg.Node)) {
		return false
	}
	_, _, err := decodeSnapshotData(m.GetSnapshot().GetData())
	return err == nil
}
