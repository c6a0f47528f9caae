package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// ErrMembershipChangePending: a configuration change is still being
// applied (or the group is in a joint configuration); try again later.
var ErrMembershipChangePending = errors.New("replica: a membership change is pending")

// Members returns the configuration this replica has applied.
func (r *Replica) Members() Members {
	r.st.mu.Lock()
	cs := r.st.cs
	r.st.mu.Unlock()
	return membersOf(cs)
}

func membersOf(cs *raftpb.ConfState) Members {
	var m Members
	for _, id := range cs.GetVoters() {
		m.Voters = append(m.Voters, nodeOf(id))
	}
	for _, id := range cs.GetLearners() {
		m.Learners = append(m.Learners, nodeOf(id))
	}
	slices.Sort(m.Voters)
	slices.Sort(m.Learners)
	return m
}

// confChangeFor is the single raft configuration change from cur to m:
// new voters are added (a learner named as a voter is promoted), new
// learners added (a voter named as a learner is demoted), and everyone else
// removed. With more than one voter changing, raft goes through a joint
// configuration and leaves it by itself (ConfChangeTransitionAuto).
func confChangeFor(cur *raftpb.ConfState, m Members) *raftpb.ConfChangeV2 {
	has := func(ids []uint64, id uint64) bool { return slices.Contains(ids, id) }
	cc := &raftpb.ConfChangeV2{Transition: new(raftpb.ConfChangeTransitionAuto)}
	add := func(t raftpb.ConfChangeType, id uint64) {
		cc.Changes = append(cc.Changes, &raftpb.ConfChangeSingle{Type: new(t), NodeId: new(id)})
	}
	want := map[uint64]bool{}
	for _, v := range m.Voters {
		id := raftID(v)
		want[id] = true
		if !has(cur.GetVoters(), id) {
			add(raftpb.ConfChangeAddNode, id)
		}
	}
	for _, l := range m.Learners {
		id := raftID(l)
		want[id] = true
		if !has(cur.GetLearners(), id) {
			add(raftpb.ConfChangeAddLearnerNode, id)
		}
	}
	for _, id := range append(append([]uint64(nil), cur.GetVoters()...), cur.GetLearners()...) {
		if !want[id] {
			add(raftpb.ConfChangeRemoveNode, id)
		}
	}
	return cc
}

// ChangeMembership moves the partition's raft group to members (placement
// changes: a read broker joins or leaves, a reassignment). Only the leader
// accepts it (*NotLeaderError otherwise). It returns once this replica has
// applied the final configuration, or ctx ends (the change may still
// complete). A broker being added opens the partition with Host.Open and
// the new members; it then receives the log from the leader (a snapshot if
// the leader's log no longer starts at the beginning). A removed broker
// stops receiving and should Host.Remove the partition.
func (r *Replica) ChangeMembership(ctx context.Context, m Members) error {
	if len(m.Voters) == 0 {
		return errors.New("replica: a configuration needs a voter")
	}
	for _, v := range m.Voters {
		if slices.Contains(m.Learners, v) {
			return fmt.Errorf("replica: node %d is both voter and learner", v)
		}
	}
	want := Members{Voters: slices.Sorted(slices.Values(m.Voters)), Learners: slices.Sorted(slices.Values(m.Learners))}
	r.raftMu.Lock()
	if err := r.stoppedLocked(); err != nil {
		r.raftMu.Unlock()
		return err
	}
	bs := r.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader {
		r.raftMu.Unlock()
		return &NotLeaderError{Leader: leaderOf(bs.Lead), Term: bs.GetTerm()}
	}
	// A new leader treats everything in its log at election as possibly
	// holding a configuration change, and raft silently turns a change
	// proposed before it applied that far into an empty entry; confPending
	// would then never clear. Applying an entry of its own term (the empty
	// entry it appended at election, or later) means it is past that point.
	if t, err := r.st.Term(bs.Applied); err != nil || t != bs.GetTerm() {
		r.raftMu.Unlock()
		return ErrMembershipChangePending
	}
	r.st.mu.Lock()
	cur := cloneCS(r.st.cs)
	r.st.mu.Unlock()
	if len(cur.GetVotersOutgoing()) > 0 || r.confPending {
		r.raftMu.Unlock()
		return ErrMembershipChangePending
	}
	cc := confChangeFor(cur, want)
	if len(cc.Changes) == 0 {
		r.raftMu.Unlock()
		return nil
	}
	r.endSoloLocked()
	if err := r.rn.ProposeConfChange(cc); err != nil {
		r.raftMu.Unlock()
		return fmt.Errorf("%w: %v", ErrProposalDropped, err)
	}
	r.confPending = true
	r.raftMu.Unlock()
	r.host.sched.enqueue(r)
	for {
		r.mu.Lock()
		ch := r.confNotify
		r.mu.Unlock()
		got := r.Members()
		r.st.mu.Lock()
		joint := len(r.st.cs.GetVotersOutgoing()) > 0
		r.st.mu.Unlock()
		if !joint && slices.Equal(got.Voters, want.Voters) && slices.Equal(got.Learners, want.Learners) {
			return nil
		}
		if !r.isLeader.Load() {
			return r.notLeader()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TransferLeadership asks the leader to hand leadership to voter to (the
// metastore's preferred leader, ElectLeaders). It returns at once; raft
// brings to up to date and makes it campaign, and gives up after an
// election timeout. Proposals are refused while the transfer runs, so a
// target this leader has not heard from within the last election timeout
// is refused at once (ErrTransferTargetInactive).
func (r *Replica) TransferLeadership(to NodeID) error {
	r.raftMu.Lock()
	if err := r.stoppedLocked(); err != nil {
		r.raftMu.Unlock()
		return err
	}
	bs := r.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader {
		r.raftMu.Unlock()
		return &NotLeaderError{Leader: leaderOf(bs.Lead), Term: bs.GetTerm()}
	}
	r.st.mu.Lock()
	isVoter := slices.Contains(r.st.cs.GetVoters(), raftID(to))
	r.st.mu.Unlock()
	if !isVoter {
		r.raftMu.Unlock()
		return fmt.Errorf("replica: node %d is not a voter", to)
	}
	// A voter cut off from this leader, or down while its broker lease
	// has not lapsed yet, would never campaign: raft would drop every
	// proposal for an election timeout and give up, and a caller that
	// retries (the preferred-leader rebalance) would stall the partition
	// again each time. RecentActive is reset every election timeout
	// (CheckQuorum) and set by any message from the voter.
	if pr, ok := r.rn.Status().Progress[raftID(to)]; !ok || !pr.RecentActive || r.stoppedPeerLocked(raftID(to)) {
		r.raftMu.Unlock()
		return fmt.Errorf("%w: node %d", ErrTransferTargetInactive, to)
	}
	r.rn.TransferLeader(raftID(to))
	r.raftMu.Unlock()
	r.host.sched.enqueue(r)
	return nil
}

// MembershipSettled returns the applied configuration and whether it is
// final: not joint and with no configuration change of this leader still
// pending. A reassignment is recorded complete only on a settled one.
func (r *Replica) MembershipSettled() (Members, bool) {
	r.raftMu.Lock()
	pending := r.confPending
	r.raftMu.Unlock()
	r.st.mu.Lock()
	joint := len(r.st.cs.GetVotersOutgoing()) > 0
	r.st.mu.Unlock()
	return r.Members(), !pending && !joint
}

// CaughtUp reports, on the leader, whether member id has every entry the
// leader has committed: a learner that is about to be promoted to voter
// then does not stall commits while it copies the log. False on a
// non-leader or for a node that is not a member.
func (r *Replica) CaughtUp(id NodeID) bool {
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	if r.stoppedLocked() != nil {
		return false
	}
	st := r.rn.Status()
	if st.RaftState != raft.StateLeader {
		return false
	}
	pr, ok := st.Progress[raftID(id)]
	return ok && pr.State == tracker.StateReplicate && pr.Match >= st.GetCommit()
}

// OpenJoining opens the replica of a partition this broker joins after
// its raft group was created (a reassignment adds it, or it is a read
// broker that registered later). initial must be the configuration the
// group was created with, whatever it is now: the configuration changes
// in the log are diffs against it, and this replica replays them as the
// leader sends it the log (or takes the configuration from a snapshot).
// Starting from the current configuration instead would apply those diffs
// twice; a voter that is added as a learner first would be demoted, and a
// group with one voter left with none. The replica neither campaigns nor
// needs to be in initial; it learns its role from the log. With raft state
// on disk, as with Open, the persisted configuration wins.
func (h *Host) OpenJoining(topic string, key Key, initial Members, opts ReplicaOptions) (*Replica, error) {
	return h.open(topic, key, initial, opts, true)
}

// RemoveStale deletes the directories of partitions that are not open here
// and for which live is false: a topic deleted, or a partition reassigned
// away, while this broker was down (a running broker removes those with
// Remove). Call it at start, before opening the partitions.
func (h *Host) RemoveStale(live func(id [16]byte, index int32) bool) error {
	entries, err := os.ReadDir(h.cfg.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(h.cfg.Dir, e.Name())
		id, err := readTopicID(dir)
		if err != nil {
			continue // not a partition directory
		}
		i := strings.LastIndexByte(e.Name(), '-')
		if i < 0 {
			continue
		}
		idx, err := strconv.Atoi(e.Name()[i+1:])
		if err != nil {
			continue
		}
		if _, open := h.Get(Key{TopicID: id, Index: int32(idx)}); open || live(id, int32(idx)) {
			continue
		}
		h.lg.Info().Str("dir", e.Name()).Msg("removing a replica of a partition no longer assigned here")
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}
