package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/partition"
)

// Async master/replica failover (docs/replication-modes.md, "async").
//
// An async partition's raft group has one voter, the master, and every
// other replica is a learner: the master commits on its own durable write
// and stays writable with every other node down, and the learners receive
// its appends as raft streams them. raft cannot elect a learner, and it
// has no forced reconfiguration, so failover is done below raft, on the
// replicas' files, with the group closed and opened again from them (as a
// full disk's recovery reopens a replica, raft_nospace.go):
//
//   - Replica.Claim is the Takeover a learner would make: the last entry
//     it holds durably from the old master, and a term at least the old
//     master's. The caller (once the master's lease lapsed) records the
//     claim of the most caught-up write replica, then Host.Promote makes
//     that learner the sole voter of a configuration in which every other
//     member is a learner, with everything up to the claim committed
//     (anything it received after the claim cut). It campaigns at once (a
//     sole voter does) and leads in a term above the claim's.
//   - Host.Follow makes any other replica a learner of the new master: a
//     log longer than the takeover point is cut there (it holds what the
//     new master never received; the old master may have committed and
//     acknowledged it), the cut logged with its offsets and counted
//     (Host.TruncatedRecords), never left to diverge; its commit index
//     comes back to the takeover point at most (raft would panic on an
//     append that conflicts with a committed entry); its configuration
//     becomes the new master's. The new master's appends then continue
//     its log after the takeover point. The returning old master calls
//     it before it opens the partition (it would otherwise campaign as
//     the sole voter it was); the other learners call it too, so every
//     replica holds the same configuration and later membership changes,
//     which raft applies as diffs, give the same result everywhere.
//
// Both rewrite raft.state, then raft.conf, each durably (Follow brings
// the commit index back before it cuts the log, since Open refuses a log
// that ends before its commit index). A crash part-way leaves files Open
// accepts, and the caller calls again until the metastore's view and the
// replica's agree; in particular a returning old master calls Follow
// before it opens the partition, every time, since with its old
// configuration it would campaign.

// Takeover is where a promoted master's log took over its predecessor's
// (partition.Takeover).
type Takeover = partition.Takeover

// ErrNotPromotable: the replica cannot be made the sole voter here (it is
// not a member, its configuration is joint, or it does not hold its claim).
var ErrNotPromotable = errors.New("replica: cannot promote")

// DurableIndex is the last raft index this replica holds durably and the
// offset after it: what a promotion of this replica would keep. The caller
// promotes the write replica with the highest.
func (r *Replica) DurableIndex() (uint64, int64) {
	r.st.mu.Lock()
	i := min(r.st.durIdx, r.st.lastIndexLocked())
	r.st.mu.Unlock()
	return i, r.st.endOffsetOf(i)
}

// Claim is the takeover this replica would make if promoted now: its
// durable log end, in a term at least minTerm (the last term the old
// master is known to have used) and the one it knows. The caller records
// the claim (in the metastore, compare-and-set, so one replica wins it)
// before Promote, which cannot be undone.
func (r *Replica) Claim(minTerm uint64) Takeover {
	i, off := r.DurableIndex()
	return Takeover{Term: max(r.Term(), minTerm), Index: i, Offset: off}
}

// Promote makes this broker's open replica of key the sole voter of its
// group from takeover t (its Claim), every other member a learner (see
// above): entries it received after the claim are cut (logged, counted),
// the rest committed, and it campaigns in a term above t.Term. It returns
// once the replica is open again; it then leads as soon as its own
// election ran. On a replica promoted from t already it changes nothing.
func (h *Host) Promote(key Key, t Takeover) error {
	self := raftID(h.cfg.Node)
	done := func(st *raftStorage) bool { // promoted and elected already
		cs := st.cs
		return slices.Equal(cs.GetVoters(), []uint64{self}) && len(cs.GetVotersOutgoing()) == 0 && st.hs.GetTerm() > t.Term
	}
	if h.openAnd(key, done) {
		return nil
	}
	var term uint64
	if h.openAnd(key, func(st *raftStorage) bool { term = st.hs.GetTerm(); return term > t.Term }) {
		// Refused before the rewrite, which would close the replica.
		return fmt.Errorf("%w: the takeover is in term %d, this replica is in term %d", ErrNotPromotable, t.Term, term)
	}
	_, err := h.rewrite(key, "", Members{}, ReplicaOptions{}, false, func(st *raftStorage) error {
		st.mu.Lock()
		defer st.mu.Unlock()
		cs := st.cs
		if done(st) {
			return nil
		}
		if len(cs.GetVotersOutgoing()) > 0 || !slices.Contains(append(slices.Clone(cs.GetVoters()), cs.GetLearners()...), self) {
			return fmt.Errorf("%w: configuration %v", ErrNotPromotable, cs)
		}
		if term := st.hs.GetTerm(); term > t.Term {
			// A claim is taken in the replica's term or a later one, and
			// the promotion campaigns above it: a replica already past
			// t.Term has moved on from that takeover (a promotion from it
			// that ran, or raft elections since), and its log past t.Index
			// may hold acknowledged records a promotion would cut.
			return fmt.Errorf("%w: the takeover is in term %d, this replica is in term %d", ErrNotPromotable, t.Term, term)
		}
		last := st.lastIndexLocked()
		if last < t.Index || t.Index < st.snapIndex {
			return fmt.Errorf("%w: the claim is index %d, the log holds %d to %d", ErrNotPromotable, t.Index, st.snapIndex, last)
		}
		applied := max(st.state.cur.applied&^stateFlagPendingBit, st.snapIndex)
		commit := st.hs.GetCommit()
		if last > t.Index {
			// Received from the old master after the claim.
			if err := st.saveStateLocked(st.hs.GetTerm(), min(commit, t.Index), min(applied, t.Index)); err != nil {
				return err
			}
			if _, err := st.truncateFromLocked(t.Index+1, "async failover: promoted from an earlier claim; the records received after it are lost"); err != nil {
				return err
			}
			applied = min(applied, t.Index)
		}
		if err := st.rewriteLocked(soleVoter(self, cs), t.Index, max(st.hs.GetTerm(), t.Term), t.Index, applied); err != nil {
			return err
		}
		st.lg.Warn().Uint64("term", t.Term).Uint64("index", t.Index).Int64("offset", t.Offset).
			Msg("promoted to async master: sole voter from its claim; what the old master wrote after it is lost")
		return nil
	})
	return err
}

// Follow makes this broker's replica of key a learner of master, whose log
// took over at t (see above), and opens it (topic, members and opts are
// used when it is not open, as by Open). It returns the records cut from
// this replica's log, which are also counted in TruncatedRecords. On a
// replica already following master from t it changes nothing.
func (h *Host) Follow(topic string, key Key, members Members, opts ReplicaOptions, master NodeID, t Takeover) (*Replica, int64, error) {
	return h.follow(topic, key, members, opts, master, t, false)
}

// FollowJoining is Follow for a broker outside the group's initial
// configuration (as OpenJoining is Open): a read broker registered, or a
// replica reassigned here, after a promotion. Its replica starts from the
// new master's configuration as of the takeover, not from the initial
// one: the configuration changes the log holds up to the takeover are
// superseded, and the master it names leads. members are the partition's
// members now (the assignment), used when the replica is not open: the new
// master's configuration holds those it added before the takeover.
func (h *Host) FollowJoining(topic string, key Key, members Members, opts ReplicaOptions, master NodeID, t Takeover) (*Replica, int64, error) {
	return h.follow(topic, key, members, opts, master, t, true)
}

func (h *Host) follow(topic string, key Key, members Members, opts ReplicaOptions, master NodeID, t Takeover, join bool) (*Replica, int64, error) {
	if master == h.cfg.Node {
		return nil, 0, fmt.Errorf("replica: node %d cannot follow itself", master)
	}
	mid := raftID(master)
	done := func(st *raftStorage) bool { // following it already
		cs := st.cs
		return slices.Equal(cs.GetVoters(), []uint64{mid}) && len(cs.GetVotersOutgoing()) == 0 && st.hs.GetTerm() >= t.Term
	}
	if h.openAnd(key, func(st *raftStorage) bool { return done(st) || pastTakeover(st, t) }) {
		r, _ := h.Get(key)
		return r, 0, nil
	}
	var cut int64
	r, err := h.rewrite(key, topic, members, opts, join, func(st *raftStorage) error {
		st.mu.Lock()
		defer st.mu.Unlock()
		cs := st.cs
		if done(st) {
			return nil
		}
		if pastTakeover(st, t) {
			return nil
		}
		if t.Index < st.snapIndex {
			return fmt.Errorf("replica: cannot follow master %d from index %d: this replica's log starts after index %d", master, t.Index, st.snapIndex)
		}
		commit, applied := st.hs.GetCommit(), st.state.cur.applied&^stateFlagPendingBit
		// An entry after the takeover point in a term above t.Term is the
		// new master's (only it writes in those terms): the replica heard
		// from it already, and its log matches up to there.
		if last := st.lastIndexLocked(); last > t.Index {
			if m, ok := st.metaLocked(t.Index + 1); !ok || m.term <= t.Term {
				// The commit index comes back before the log is cut:
				// Open refuses a log that ends before it.
				if err := st.saveStateLocked(st.hs.GetTerm(), min(commit, t.Index), min(applied, t.Index)); err != nil {
					return err
				}
				n, err := st.truncateFromLocked(t.Index+1, "async failover: truncating to the new master's log; the records after its takeover point are lost")
				if err != nil {
					return err
				}
				cut = n
				if failoverHook != nil {
					if err := failoverHook("follow-cut"); err != nil {
						return err
					}
				}
				commit, applied = min(commit, t.Index), min(applied, t.Index)
			}
		}
		return st.rewriteLocked(soleVoter(mid, cs, raftID(h.cfg.Node)), t.Index, max(st.hs.GetTerm(), t.Term), commit, applied)
	})
	return r, cut, err
}

// pastTakeover says whether st's configuration comes from a change the log
// made after takeover t, in a term above it: the new master's era (a
// reassignment or a mode change since). The metastore keeps the last
// promotion's takeover after the master changes by other means, so such a
// replica may be asked to follow from it; forced back to a configuration
// as of the takeover, it would drop that change (a new leader demoted to
// a learner of a master that left). It is left as it is. Call with st.mu
// held.
func pastTakeover(st *raftStorage, t Takeover) bool {
	c := st.confIndex
	if c <= t.Index || c <= st.forcedAt {
		return false
	}
	m, ok := st.metaLocked(c)
	return ok && m.term > t.Term
}

// pastOrFollowed says whether st is past takeover t: it followed a master
// from t or a later takeover (its forced configuration is as of t's index
// or later, and its log was cut there), or its configuration comes from a
// change the log made after t (pastTakeover). Its log then holds nothing
// the masters since t lack. Call with st.mu held.
func pastOrFollowed(st *raftStorage, t Takeover) bool {
	return (st.forcedAt > 0 && st.forcedAt >= t.Index) || pastTakeover(st, t)
}

// failoverHook, set by tests only, runs between the steps of a rewrite;
// an error stops it there, as a crash would.
var failoverHook func(step string) error

// soleVoter is cs with voter as its only voter and every other member,
// and also, a learner.
func soleVoter(voter uint64, cs *raftpb.ConfState, also ...uint64) *raftpb.ConfState {
	var learners []uint64
	for _, ids := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext(), also} {
		for _, id := range ids {
			if id != voter && !slices.Contains(learners, id) {
				learners = append(learners, id)
			}
		}
	}
	slices.Sort(learners)
	return raftpb.EnsureConfState(&raftpb.ConfState{Voters: []uint64{voter}, Learners: learners})
}

// rewriteLocked persists term (with no vote), commit and applied, then
// that cs is the configuration as of index at (the log's configuration
// changes up to at are superseded: never applied here), then cs: the
// state a group reopened from these files starts from. The state goes
// first: a crash before cs leaves a replica in the new term with its old
// configuration (a learner stays one), which the caller's retry finishes.
func (s *raftStorage) rewriteLocked(cs *raftpb.ConfState, at, term, commit, applied uint64) error {
	if err := s.saveStateLocked(term, commit, applied); err != nil {
		return err
	}
	if at > s.forcedAt {
		if err := saveBlob(s.dir, forcedFileName, binary.BigEndian.AppendUint64(nil, at)); err != nil {
			return err
		}
		s.forcedAt = at
	}
	if err := saveConfState(s.dir, cs, at); err != nil {
		return err
	}
	s.cs, s.confIndex = cloneCS(cs), at
	return nil
}

// saveStateLocked persists term (with no vote), commit and applied.
func (s *raftStorage) saveStateLocked(term, commit, applied uint64) error {
	s.hs = &raftpb.HardState{Term: new(term), Vote: new(uint64(0)), Commit: new(commit)}
	cur := s.state.cur
	cur.term, cur.vote, cur.commit = term, 0, min(commit, s.durIdx)
	cur.applied = min(applied, cur.commit) | (cur.applied & stateFlagPendingBit)
	return s.state.save(cur)
}

// openAnd reports whether key's replica is open here and fn, called with
// its storage locked, says true.
func (h *Host) openAnd(key Key, fn func(st *raftStorage) bool) bool {
	r, ok := h.Get(key)
	if !ok || r.Failed() != nil {
		return false
	}
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	return fn(r.st)
}

// rewrite closes key's replica if it is open, runs fn on its raft storage
// with no group running over it, and opens the replica again from its
// files in its place (a replica not open is opened with topic, members and
// opts, as OpenJoining if join). Open replicas keep how they were opened. If fn fails, the replica
// is not opened (a replica that was open stays in the table, closed: its
// writes fail with ErrReplicaClosed): its files may be part-way through the
// change, which only the caller's next call finishes, and opened so a
// former master would campaign.
func (h *Host) rewrite(key Key, topic string, members Members, opts ReplicaOptions, join bool, fn func(st *raftStorage) error) (*Replica, error) {
	h.removeMu.Lock()
	defer h.removeMu.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrReplicaClosed
	}
	old, open := h.reps[key]
	if !open {
		if topic == "" {
			h.mu.Unlock()
			return nil, fmt.Errorf("replica: partition %d of topic %x is not open here", key.Index, key.TopicID)
		}
		if h.opening[key] != nil {
			h.mu.Unlock()
			return nil, fmt.Errorf("replica: %s-%d is being opened", topic, key.Index)
		}
		if err := h.claimDirLocked(topic, key); err != nil {
			h.mu.Unlock()
			return nil, err
		}
		done := make(chan struct{})
		h.opening[key] = done
		defer func() {
			h.mu.Lock()
			delete(h.opening, key)
			if h.reps[key] == nil {
				h.releaseDirLocked(topic, key)
			}
			h.mu.Unlock()
			close(done)
		}()
	}
	h.mu.Unlock()
	if open {
		topic, members, opts, join = old.topic, old.openMembers, *old.opts.Load(), old.openJoin
		if err := old.close(); err != nil && old.Failed() == nil {
			return nil, err
		}
	}
	if opts.MinInsyncReplicas <= 0 {
		opts.MinInsyncReplicas = 1
	}
	if err := h.rewriteFiles(topic, key, members, opts, fn); err != nil {
		return nil, err
	}
	r, err := h.openReplica(topic, key, members, opts, join)
	if err != nil {
		// The old replica stays in the table, closed: its writes fail
		// and Remove or a restart clears it.
		return nil, err
	}
	h.mu.Lock()
	if h.closed || (open && h.reps[key] != old) {
		h.mu.Unlock()
		_ = r.close()
		return nil, ErrReplicaClosed
	}
	if open && old.Failed() != nil {
		h.failed.Add(-1)
	}
	if open {
		h.swapLocked(old, r)
	} else {
		h.reps[key] = r
		h.list = append(h.list, r)
	}
	h.mu.Unlock()
	h.sched.enqueue(r)
	return r, nil
}

// rewriteFiles opens the log and raft storage of a replica that is not
// running, runs fn on the storage and closes both.
func (h *Host) rewriteFiles(topic string, key Key, members Members, opts ReplicaOptions, fn func(st *raftStorage) error) error {
	dir := h.partitionDir(topic, key.Index)
	lg := h.lg.With().Str("topic", topic).Int32("partition", key.Index).Logger()
	l, err := log.Open(dir, opts.Log, log.Options{Logger: lg, Flusher: h.cfg.Flusher})
	if err != nil {
		return err
	}
	initial := raftpb.EnsureConfState(&raftpb.ConfState{Voters: raftIDs(members.Voters), Learners: raftIDs(members.Learners)})
	st, err := openStorage(dir, l, initial, lg)
	if err != nil {
		l.Close()
		return err
	}
	st.truncated = &h.truncated
	err = fn(st)
	// Close syncs the log.
	return errors.Join(err, st.close(), l.Close())
}

// ErrNotCaughtUp: LeaveAsync found too few of the voters to be caught up
// with the master; try again later.
var ErrNotCaughtUp = errors.New("replica: too few voters caught up to leave async mode")

// EnterAsync moves, on the leader, the group from raft's configuration to
// the async master's: this replica the sole voter, every other voter
// demoted to a learner (one configuration change, through a joint
// configuration when more than one voter goes). From then on it commits on
// its own durable write. It returns once the change is applied here (see
// ChangeMembership).
func (r *Replica) EnterAsync(ctx context.Context) error {
	r.raftMu.Lock()
	if err := r.stoppedLocked(); err != nil {
		r.raftMu.Unlock()
		return err
	}
	r.raftMu.Unlock()
	if !r.IsLeader() {
		return r.notLeader()
	}
	r.st.mu.Lock()
	cs := soleVoter(raftID(r.host.cfg.Node), r.st.cs)
	r.st.mu.Unlock()
	return r.ChangeMembership(ctx, membersOf(cs))
}

// LeaveAsync moves, on the async master, the group back to raft's
// configuration with voters (the partition's write brokers; this replica
// must be one) as voters and every other member a learner. A voter that
// lacks committed entries would be counted by raft's quorum at once, so it
// waits for a majority of voters, this one included, to hold every entry
// this master committed (CaughtUp): then raft's commit rule holds again
// from the change on, with the stragglers catching up as followers do. It
// returns ErrNotCaughtUp while fewer are.
func (r *Replica) LeaveAsync(ctx context.Context, voters []NodeID) error {
	self := r.host.cfg.Node
	if !slices.Contains(voters, self) {
		return fmt.Errorf("replica: node %d, the master, is not among the voters %v", self, voters)
	}
	if !r.IsLeader() {
		return r.notLeader()
	}
	caught := 0
	for _, v := range voters {
		if v == self || r.CaughtUp(v) {
			caught++
		}
	}
	if caught <= len(voters)/2 {
		return fmt.Errorf("%w: %d of %d", ErrNotCaughtUp, caught, len(voters))
	}
	cur := r.Members()
	want := Members{Voters: slices.Clone(voters)}
	for _, n := range append(cur.Voters, cur.Learners...) {
		if !slices.Contains(voters, n) {
			want.Learners = append(want.Learners, n)
		}
	}
	return r.ChangeMembership(ctx, want)
}
