package replica

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/partition"
)

// Mode is a topic's replication.mode: when acks=all is answered
// (partition.Mode).
type Mode = partition.Mode

const (
	ModeRaft     = partition.ModeRaft
	ModeSemiSync = partition.ModeSemiSync
	ModeAsync    = partition.ModeAsync
)

// ParseMode reads a replication.mode config value.
func ParseMode(s string) (Mode, error) { return partition.ParseMode(s) }

// Acks is the producer's acks setting (partition.Acks).
type Acks = partition.Acks

const (
	AcksNone   = partition.AcksNone
	AcksLeader = partition.AcksLeader
	AcksAll    = partition.AcksAll
)

// Members are a partition's replicas: voters are write brokers, learners
// read brokers.
type Members = partition.Members

// ReplicaOptions are the topic settings a replica obeys.
type ReplicaOptions = partition.Options

// ProduceResult is where an acknowledged batch went.
type ProduceResult = partition.ProduceResult

// Proposal is one batch on its way through raft; see Replica.Propose.
type Proposal struct {
	r     *Replica
	batch []byte
	acks  Acks
	// txnVersion: the transaction version a marker was sent with
	// (ProposeMarker), for log.CheckMarker.
	txnVersion int8

	// Set by the raft worker (raftMu).
	index, term uint64
	persisted   bool
	// persistedAt: when the leader's write became durable (the start of
	// a semi-sync wait).
	persistedAt time.Time

	once sync.Once
	done chan struct{}
	res  ProduceResult
	err  error

	// released is closed once the replica reads batch no more.
	releaseOnce sync.Once
	released    chan struct{}

	// wait, when set, is how a local (unreplicated) partition's proposal
	// waits: it is written already, and only durability is pending.
	wait func(ctx context.Context) error

	// commit: batch is a command (raft_command.go), answered only once
	// committed and applied here, whatever the mode.
	commit bool
}

// Wait blocks until the proposal is answered as its acks ask, or ctx ends.
// After ctx ends the batch may still be committed (the client retries and
// idempotence dedupes it).
func (p *Proposal) Wait(ctx context.Context) (ProduceResult, error) {
	if p.wait != nil {
		return p.res, p.wait(ctx)
	}
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return ProduceResult{}, ctx.Err()
	}
}

// Done is closed when the proposal is answered.
func (p *Proposal) Done() <-chan struct{} { return p.done }

// BatchReleased is closed once the replica no longer reads the batch given
// to Propose: raft keeps a copy of a proposed entry, so the caller may
// reuse the batch's memory (a request frame) while the proposal waits for
// its commit.
func (p *Proposal) BatchReleased() <-chan struct{} {
	if p.released == nil {
		return closedChan
	}
	return p.released
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (p *Proposal) releaseBatch() {
	if p.released != nil {
		p.releaseOnce.Do(func() { close(p.released) })
	}
}

func (p *Proposal) complete(res ProduceResult, err error) {
	p.releaseBatch()
	p.once.Do(func() {
		p.res, p.err = res, err
		close(p.done)
	})
}

const (
	maxQueuedMsgs       = 8192 // per group; more are dropped (raft retries)
	maxPendingProposals = 4096 // per group; more get ErrBusy
	maxTicks            = 4    // ticks a slow group may owe
	maxReadyLoops       = 8    // Ready rounds per process before yielding
	campaignRetryTicks  = 2    // a new group's first voter, while no leader (founderTicks)
)

// Replica is one partition's raft group member on this broker. Its log is
// the raft log (see doc.go). All methods are safe for concurrent use.
type Replica struct {
	host  *Host
	key   Key
	topic string
	dir   string
	lg    zerolog.Logger
	log   *log.Log
	st    *raftStorage
	opts  atomic.Pointer[ReplicaOptions]

	sched schedState // guarded by host.sched.mu

	// inMu guards the inputs that wait for a worker. Leaf lock.
	inMu sync.Mutex
	in   struct {
		msgs   []*raftpb.Message
		ticks  int
		props  []*Proposal
		closed bool
	}

	// raftMu serialises everything that touches the RawNode and the
	// storage's write side; the worker holds it across a whole process
	// round (doc.go, "Locks").
	raftMu    sync.Mutex
	rn        *raft.RawNode
	inflight  []*Proposal // proposed by this leader, by index
	dupWait   []*Proposal // duplicates waiting for the high watermark
	applied   uint64
	lastHeard map[uint64]time.Time
	// stopped: members that told this replica their replica of the group
	// stopped (an offline notice, raft_nospace.go), and when; one is out
	// of the ISR until heard from after that.
	stopped map[uint64]time.Time
	// heard is lastHeard for readers without raftMu (HeardFrom), and
	// openedAt when this replica was opened.
	heardMu  sync.Mutex
	heard    map[uint64]time.Time
	openedAt time.Time
	// marks and isr: this leader's in-sync tracking (isrLocked).
	marks       [isrMarks]isrMark
	isr         []NodeID
	wasLeader   bool
	ledTerm     uint64
	leaderSince time.Time
	// electedLast is this leader's last log index when it was elected
	// (isrLocked: in async mode a member below it is out).
	electedLast uint64
	closed      bool
	failed      error
	// confPending: this leader proposed a conf change not yet applied.
	confPending bool
	// semi: this leader's semi-sync state (raft_semisync.go).
	semi semiSyncState
	// stepHook, set by tests only, runs before each peer message is
	// stepped (a fault injected inside the group's round).
	stepHook func(m *raftpb.Message)
	// recheck: messages checkLocked deferred to the next round.
	recheck []*raftpb.Message
	// dur: stored appends waiting for the log's fsync (raft_durable.go).
	dur durQueue
	// refs: batches proposed by reference, not yet in the log, by
	// sequence number (raft_ref.go).
	refs   map[uint64]*Proposal
	refSeq uint64
	// soloHint: the last round found the group solo (raft_ref.go), so
	// Propose may run the round itself.
	soloHint atomic.Bool

	hw       atomic.Int64
	fellBack atomic.Bool           // semi.fallback, for readers without raftMu
	fault    atomic.Pointer[error] // r.failed, for readers without raftMu
	// noSpaceAt: a full disk stopped the replica, and the host's
	// recovery loop reopens it from its files at this time (unix ns;
	// raft_nospace.go); noSpaceWait is that loop's backoff.
	noSpaceAt   atomic.Int64
	noSpaceWait time.Duration
	// fullHandOff is when (unix ns) this leader last tried to hand its
	// leadership away because its disk was too full for a batch
	// (handOffFull).
	fullHandOff atomic.Int64
	// fullTransferTo is the raft id of the voter handOffFull last asked
	// raft to hand leadership to (0: none); the round that sends it
	// MsgTimeoutNow stops this replica (fullHandedOffLocked).
	fullTransferTo atomic.Uint64
	// openMembers and openJoin are how the replica was opened, for a
	// reopen.
	openMembers Members
	openJoin    bool
	leader      atomic.Int32
	term        atomic.Uint64
	isLeader    atomic.Bool

	// mu guards the high-watermark and configuration notifications. Leaf
	// lock.
	mu         sync.Mutex
	notify     chan struct{}
	confNotify chan struct{}
	// sole: at open, this node was the group's only voter (Host.open
	// waits for its election).
	sole bool
	// founderTicks, while above 0, counts the ticks left in which this
	// new group's first voter campaigns again every campaignRetryTicks
	// as long as no leader is known (raftMu): its campaign at open
	// reaches no voter that has not opened the group yet, and raft alone
	// would wait a whole randomized election timeout (2-4 s) to retry.
	founderTicks int
	// joinWait: opened without state to join a running group
	// (Host.OpenJoining), this replica has not yet applied a
	// configuration change that names it nor installed a snapshot, so
	// its configuration is the group's initial one, which may list it as
	// a voter (a founder moved away and back) while the group has long
	// left it. Its raft is not ticked until then, so it never campaigns
	// in that configuration: with one voter it would elect itself on an
	// empty log (raftMu).
	joinWait bool
	watchers map[chan<- struct{}]struct{}
}

// HeardFrom is when this replica last stepped a raft message from node n
// into its group (one that passed the group's checks), or when it was
// opened if none since: an async learner that still hears from its master
// does not claim the master's place (the server's async failover).
func (r *Replica) HeardFrom(n NodeID) time.Time {
	r.heardMu.Lock()
	defer r.heardMu.Unlock()
	if at, ok := r.heard[raftID(n)]; ok {
		return at
	}
	return r.openedAt
}

// Key returns the partition's key.
func (r *Replica) Key() Key { return r.key }

// Topic returns the topic name the replica was opened with.
func (r *Replica) Topic() string { return r.topic }

// Propose hands a batch to raft. Only the leader accepts it; a follower or
// learner returns a *NotLeaderError (errors.Is ErrNotLeader) naming the
// leader it knows. batch must be exactly one v2 record batch whose framing
// and CRC the caller checked; Propose takes ownership of it (the leader
// stamps baseOffset and partitionLeaderEpoch into it in place, and raft
// keeps it as the entry). It never blocks: the batch is queued for the
// group's worker, which checks idempotence, assigns offsets and proposes in
// queue order, so proposals from one connection keep their order.
// Wait on the result for the answer acks asks for. With AcksNone nobody
// needs to wait.
func (r *Replica) Propose(batch []byte, acks Acks) (partition.Proposal, error) {
	return asProposal(r.propose(batch, 0, acks))
}

// ProposeMarker is Propose for a transaction marker that a coordinator
// sent with transaction version txnVersion (WriteTxnMarkers v2; 0
// before): the leader checks it as log.Log.AppendMarker does (a fenced
// coordinator epoch: log.ErrCoordinatorFenced; with version 2 an epoch
// not above the producer's: log.ErrInvalidProducerEpoch) before it
// becomes an entry.
func (r *Replica) ProposeMarker(batch []byte, txnVersion int8, acks Acks) (partition.Proposal, error) {
	return asProposal(r.propose(batch, txnVersion, acks))
}

// asProposal returns p as a partition.Proposal: nil (not a nil *Proposal
// in an interface) when err is set.
func asProposal(p *Proposal, err error) (partition.Proposal, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (r *Replica) propose(batch []byte, txnVersion int8, acks Acks) (*Proposal, error) {
	if err := r.Failed(); err != nil {
		return nil, err
	}
	if !r.isLeader.Load() {
		return nil, r.notLeader()
	}
	if _, err := parseBatch(batch, true); err != nil {
		return nil, err
	}
	// Refused here, before raft: once proposed, a batch every replica
	// must store.
	if err := r.log.CheckBatchSize(int64(len(batch))); err != nil {
		return nil, err
	}
	if err := checkSpace(r.dir, len(batch)); err != nil {
		go r.handOffFull()
		return nil, err
	}
	p := &Proposal{r: r, batch: batch, acks: acks, txnVersion: txnVersion, done: make(chan struct{}), released: make(chan struct{})}
	r.inMu.Lock()
	switch {
	case r.in.closed:
		r.inMu.Unlock()
		return nil, ErrReplicaClosed
	case len(r.in.props) >= maxPendingProposals:
		r.inMu.Unlock()
		return nil, ErrBusy
	}
	r.in.props = append(r.in.props, p)
	r.inMu.Unlock()
	if r.soloHint.Load() {
		// A solo group's round is a write to the log, as the plain
		// log's Append is: the caller runs it (after the round a
		// worker may be in, which waits for no fsync), and the request
		// frame is free as soon as it returns.
		r.raftMu.Lock()
		r.processLocked()
		r.raftMu.Unlock()
		return p, nil
	}
	r.host.sched.enqueue(r)
	return p, nil
}

func (r *Replica) notLeader() error {
	return &NotLeaderError{Leader: NodeID(r.leader.Load()), Term: r.term.Load()}
}

// HighWatermark is the offset after the last committed entry: readers see
// offsets below it. It never moves back on one replica.
func (r *Replica) HighWatermark() int64 { return r.hw.Load() }

// LastStableOffset is the high watermark or, if lower, the first offset
// of the earliest open transaction. Every replica, learners included,
// rebuilds the open transactions from the batches it stores, so a read
// broker answers the same last stable offset as the leader at the same
// high watermark.
func (r *Replica) LastStableOffset() int64 { return lastStable(r.hw.Load(), r.log) }

// LogStartOffset and LogEndOffset are the log's.
func (r *Replica) LogStartOffset() int64 { return r.log.LogStartOffset() }
func (r *Replica) LogEndOffset() int64   { return r.log.LogEndOffset() }

// Leader is the raft leader this replica knows of, -1 if none.
func (r *Replica) Leader() NodeID { return NodeID(r.leader.Load()) }

// IsLeader says whether this replica is the leader.
func (r *Replica) IsLeader() bool { return r.isLeader.Load() }

// Term is the raft term this replica is in.
func (r *Replica) Term() uint64 { return r.term.Load() }

// LeaderEpoch is the Kafka leader epoch: the raft term.
func (r *Replica) LeaderEpoch() int32 { return int32(r.term.Load()) }

// ReadRange returns committed batches from offset, below upTo (at most
// the high watermark), as a file range (log.Log.ReadRange). The log holds
// data batches only: raft's own entries have no batch.
func (r *Replica) ReadRange(offset int64, maxBytes int, upTo int64) (log.RangeResult, error) {
	return r.log.ReadRange(offset, maxBytes, min(upTo, r.hw.Load()))
}

// Read returns whole committed batches from offset (see log.Log.Read).
func (r *Replica) Read(offset int64, maxBytes int) (log.ReadResult, error) {
	return r.log.Read(offset, maxBytes, r.hw.Load())
}

// OffsetForLeaderEpoch answers from the batches' partitionLeaderEpoch
// fields, which carry raft terms. A term in which no data was written has
// no batch: an epoch after every batch's, up to the current term, ends at
// the log end, as Kafka's leader answers for its own epoch before it
// wrote in it.
func (r *Replica) OffsetForLeaderEpoch(epoch int32) (int64, int32) {
	end, ep := r.log.OffsetForLeaderEpoch(epoch)
	if end < 0 && epoch >= 0 && uint64(epoch) <= r.term.Load() {
		// Newer than every batch's epoch (or no batch at all).
		return r.log.LogEndOffset(), epoch
	}
	return end, ep
}

// Log exposes the log for lookups that need no commit bound (timestamps,
// producer state). Never write to it.
func (r *Replica) Log() *log.Log { return r.log }

// Storage is the replica's log as partition.Storage.
func (r *Replica) Storage() partition.Storage { return r.log }

// SetOptions changes the mode or min.insync.replicas (topic config change).
func (r *Replica) SetOptions(o ReplicaOptions) error {
	if err := r.log.SetConfig(o.Log); err != nil {
		return err
	}
	r.opts.Store(&o)
	return nil
}

// Changed returns a channel closed at the next high watermark move or when
// the replica closes. Take it before checking the state it guards.
func (r *Replica) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.notify
}

// Watch sends on ch (without blocking; give it a buffer of one) whenever
// the high watermark moves or the replica closes, until stop is called.
func (r *Replica) Watch(ch chan<- struct{}) (stop func()) {
	r.mu.Lock()
	if r.watchers == nil {
		r.watchers = make(map[chan<- struct{}]struct{})
	}
	r.watchers[ch] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.watchers, ch)
		r.mu.Unlock()
	}
}

// WaitCommitted blocks until every offset below end is committed.
func (r *Replica) WaitCommitted(ctx context.Context, end int64) error {
	for {
		ch := r.Changed()
		if r.hw.Load() >= end {
			return nil
		}
		r.inMu.Lock()
		closed := r.in.closed
		r.inMu.Unlock()
		if closed {
			return ErrReplicaClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *Replica) setHW(o int64) {
	if o <= r.hw.Load() {
		return
	}
	r.mu.Lock()
	r.hw.Store(o)
	r.wakeLocked()
	r.mu.Unlock()
}

func (r *Replica) wakeLocked() {
	close(r.notify)
	r.notify = make(chan struct{})
	for ch := range r.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// InSyncVoters counts the voters in sync as min.insync.replicas means it
// (the leader included); 0 on a non-leader.
func (r *Replica) InSyncVoters() int {
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	if r.stoppedLocked() != nil || r.rn.BasicStatus().RaftState != raft.StateLeader {
		return 0
	}
	return r.inSyncVotersLocked(time.Now())
}

// InSyncReplicas returns the replicas, voters and learners, that this
// leader counts in sync (isrLocked), the leader first; nil on a
// non-leader.
func (r *Replica) InSyncReplicas() []NodeID {
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	if r.stoppedLocked() != nil || r.rn.BasicStatus().RaftState != raft.StateLeader {
		return nil
	}
	isr, _ := r.isrLocked(time.Now())
	return isr
}

func (r *Replica) inSyncVotersLocked(now time.Time) int {
	_, voters := r.isrLocked(now)
	return voters
}

// isrMarks is how many (index, time) marks a leader keeps over
// MaxFollowerLag to tell when a follower that is behind last caught up.
const isrMarks = 8

// isrMark records that the leader's log ended at index at time at.
type isrMark struct {
	index uint64
	at    time.Time
}

// markLocked returns the leader's last log index and records it as a
// mark if the newest mark is older than MaxFollowerLag/isrMarks. The
// leader calls it every round, so the marks stay that dense whether or
// not anything asks for the ISR meanwhile.
func (r *Replica) markLocked(now time.Time) uint64 {
	r.st.mu.Lock()
	last := r.st.lastIndexLocked()
	r.st.mu.Unlock()
	newest, oldest := &r.marks[0], &r.marks[0]
	for i := range r.marks {
		if r.marks[i].at.After(newest.at) {
			newest = &r.marks[i]
		}
		if r.marks[i].at.Before(oldest.at) {
			oldest = &r.marks[i]
		}
	}
	if newest.at.IsZero() || now.Sub(newest.at) >= r.host.cfg.MaxFollowerLag/isrMarks {
		*oldest = isrMark{index: last, at: now}
	}
	return last
}

// isrLocked computes, on the leader, the replicas in sync the way Kafka
// computes its ISR with replica.lag.time.max.ms (MaxFollowerLag): a
// follower is in sync while it last caught up with the leader's log end
// within the lag. A follower whose match reaches the log end caught up
// when it was last heard from; one that is behind caught up at the newest
// mark (the log end the leader recorded at some moment) its match reaches,
// so a follower that keeps fetching but trails by more than about the lag,
// one that is down, and one being sent a snapshot all leave the ISR, and
// return once caught up. A new leader has heard from nobody yet: like
// Kafka's new leader, which inherits the ISR and shrinks it only after the
// lag, it counts every follower caught up at its election. Learners (read
// brokers) follow the same rule. A member not heard from for
// MemberSilence (the broker session) is out whatever its log: its broker
// is fenced by then. In async mode, where the ISR decides who may take
// the master's place, there is no benefit of the doubt: a member is in
// sync only once this leader replicates to it and its log reaches what
// the leader held when elected. It returns the in-sync replicas, the
// leader first and then in raft's configuration order, and how many of
// them are voters (min.insync.replicas).
func (r *Replica) isrLocked(now time.Time) ([]NodeID, int) {
	self := raftID(r.host.cfg.Node)
	lag := r.host.cfg.MaxFollowerLag
	async := r.opts.Load().Mode == ModeAsync
	last := r.markLocked(now)
	isr := []NodeID{r.host.cfg.Node}
	voters := 1
	r.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if id == self || pr.State == tracker.StateSnapshot || r.stoppedPeerLocked(id) {
			return
		}
		if now.Sub(r.caughtUpLocked(id, pr.Match, last)) > lag {
			return
		}
		if silence := r.host.cfg.MemberSilence; silence > 0 && now.Sub(r.heardSinceElectedLocked(id)) > silence {
			return
		}
		if async && (pr.State != tracker.StateReplicate || pr.Match < r.electedLast) {
			// In async mode the ISR decides who may take the master's
			// place (the metastore's clean election), so no member
			// gets the benefit of the doubt a new leader gives: one
			// counts only once this leader has confirmed its log
			// (raft replicates to it) up to at least what the leader
			// held when elected. A replica that was down while the old
			// master acknowledged, or that the master cannot reach
			// after a restart, is never reported in sync.
			return
		}
		isr = append(isr, nodeOf(id))
		if typ != raft.ProgressTypeLearner {
			voters++
		}
	})
	return isr, voters
}

// heardSinceElectedLocked is when this leader last heard from member id,
// or when it was elected if it has not heard from it since.
func (r *Replica) heardSinceElectedLocked(id uint64) time.Time {
	heard, ok := r.lastHeard[id]
	if !ok || heard.Before(r.leaderSince) {
		return r.leaderSince
	}
	return heard
}

// caughtUpLocked is when, as far as the leader can tell, member id (whose
// log matches the leader's up to match) last had every entry of the
// leader's log (which ends at last): when it was last heard from if it has
// them all; otherwise at the newest mark its match reaches, and never
// later than it was last heard from; never before this leader's election
// (isrLocked explains why). The ISR and the members' lag in time use it.
func (r *Replica) caughtUpLocked(id, match, last uint64) time.Time {
	heard := r.heardSinceElectedLocked(id)
	var caught time.Time
	if match >= last {
		caught = heard
	} else {
		for _, m := range r.marks {
			if m.index <= match && m.at.After(caught) {
				caught = m.at
			}
		}
		if caught.After(heard) {
			caught = heard
		}
	}
	if caught.Before(r.leaderSince) {
		caught = r.leaderSince
	}
	return caught
}

// process is one scheduler round: step the queued messages, apply ticks,
// propose, and handle Readys until none is left (doc.go).
func (r *Replica) process() {
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	r.processLocked()
}

// processLocked is process with raftMu held.
func (r *Replica) processLocked() {
	r.inMu.Lock()
	msgs, ticks, props := r.in.msgs, r.in.ticks, r.in.props
	r.in.msgs, r.in.ticks, r.in.props = nil, 0, nil
	r.inMu.Unlock()
	defer func() {
		// raft panics when its invariants break (a log lost, a node id
		// reused after its disk was wiped, a bug). That is fatal for this
		// group, not for the broker's other partitions: the replica stops.
		// Its state may be half-changed, so nothing touches the RawNode
		// again (stoppedLocked).
		if p := recover(); p != nil {
			r.lg.Error().Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg("raft panicked in this partition's group")
			r.failLocked(fmt.Errorf("raft panic: %v", p))
			for _, pr := range props {
				pr.complete(ProduceResult{}, r.failed)
			}
		}
	}()
	if r.closed || r.failed != nil {
		err := error(ErrReplicaClosed)
		if r.failed != nil {
			err = r.failed
		}
		for _, p := range props {
			p.complete(ProduceResult{}, err)
		}
		return
	}
	if err := r.durableLocked(); err != nil {
		r.failLocked(err)
		for _, p := range props {
			p.complete(ProduceResult{}, r.failed)
		}
		return
	}
	if len(msgs) > 0 || len(r.recheck) > 0 {
		now := time.Now()
		// Messages deferred by the last round come first; they are not
		// deferred again.
		again := len(r.recheck)
		msgs = append(r.recheck, msgs...)
		r.recheck = nil
		var later []*raftpb.Message
		for i, m := range msgs {
			why, ok, err := r.checkLocked(m, i >= again)
			if errors.Is(err, errCheckLater) {
				later = append(later, m)
				continue
			}
			if err != nil {
				r.failLocked(err)
				for _, p := range props {
					p.complete(ProduceResult{}, r.failed)
				}
				return
			}
			if !ok {
				r.host.refuse(why, nodeOf(m.GetFrom()), Envelope{Group: r.key, Msg: m})
				continue
			}
			if m.GetType() == offlineNotice {
				// Not raft's: the sender's replica stopped.
				r.stopped[m.GetFrom()] = now
				continue
			}
			if r.stepHook != nil {
				r.stepHook(m)
			}
			r.lastHeard[m.GetFrom()] = now
			r.heardMu.Lock()
			r.heard[m.GetFrom()] = now
			r.heardMu.Unlock()
			if err := r.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
				r.lg.Debug().Err(err).Stringer("msg_type", m.GetType()).Msg("raft step")
			}
		}
		if len(later) > 0 {
			r.recheck = later
			r.host.sched.enqueue(r)
		}
	}
	for range ticks {
		if r.joinWait {
			break
		}
		r.rn.Tick()
		if r.founderTicks > 0 {
			r.founderTicks--
			if r.founderTicks%campaignRetryTicks == 0 {
				if st := r.rn.BasicStatus(); st.Lead == raft.None && st.RaftState != raft.StateLeader {
					_ = r.rn.Campaign()
				} else {
					r.founderTicks = 0
				}
			}
		}
	}
	if len(props) > 0 {
		if err := r.proposeLocked(props); err != nil {
			r.failLocked(err)
			return
		}
	}
	for i := 0; r.rn.HasReady(); i++ {
		if i == maxReadyLoops {
			r.host.sched.enqueue(r)
			break
		}
		if err := r.handleReadyLocked(); err != nil {
			r.failLocked(err)
			return
		}
	}
	r.afterProcessLocked()
}

// proposeLocked assigns offsets and proposes. It first persists every
// Ready pending, so raft's log has no unstable tail and the next entry's
// index and offset are the storage's last index and next offset plus one.
// One Ready is not enough: its Advance can append an entry (raft leaving
// a joint configuration by itself once it applied it), and a batch
// proposed behind that entry would be told the entry's index and offset.
func (r *Replica) proposeLocked(props []*Proposal) error {
	for r.rn.HasReady() {
		if err := r.handleReadyLocked(); err != nil {
			for _, p := range props {
				p.complete(ProduceResult{}, err)
			}
			return err
		}
	}
	bs := r.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader {
		err := &NotLeaderError{Leader: leaderOf(bs.Lead), Term: bs.GetTerm()}
		for _, p := range props {
			p.complete(ProduceResult{}, err)
		}
		return nil
	}
	opts := r.opts.Load()
	now := time.Now()
	inSync := -1
	term := bs.GetTerm()
	st := r.st
	st.mu.Lock()
	idx, next := st.lastIndexLocked(), st.nextOffsetLocked()
	st.mu.Unlock()
	scratch := map[int64]*prodEntry{}
	solo := r.soloLocked()
	for _, p := range props {
		if p.commit {
			// A command (raft_command.go): no producer, no stamp, and,
			// like raft's own entries, no Kafka offset (the storage keeps
			// its record and data beside the log): next stays.
			if err := r.rn.Propose(p.batch); err != nil {
				p.complete(ProduceResult{}, fmt.Errorf("%w: %v", ErrProposalDropped, err))
				continue
			}
			idx++
			p.index, p.term = idx, term
			p.res = ProduceResult{BaseOffset: next, LastOffset: next - 1}
			r.inflight = append(r.inflight, p)
			continue
		}
		h, _ := parseBatch(p.batch, true) // checked by Propose
		if p.acks == AcksAll && opts.Mode == ModeRaft && opts.MinInsyncReplicas > 1 {
			if inSync < 0 {
				inSync = r.inSyncVotersLocked(now)
			}
			if inSync < opts.MinInsyncReplicas {
				p.complete(ProduceResult{}, fmt.Errorf("%w: %d in sync, min.insync.replicas %d", ErrNotEnoughReplicas, inSync, opts.MinInsyncReplicas))
				continue
			}
		}
		var pe *prodEntry
		mk := markerOf(p.batch, &h)
		if h.ProducerID >= 0 {
			pe = scratch[h.ProducerID]
			if pe == nil {
				st.mu.Lock()
				st.producers.seed(r.log, h.ProducerID)
				pe = st.producers.clone(h.ProducerID)
				st.mu.Unlock()
			}
			if err := checkProducer(pe, &h, mk, p.txnVersion); err != nil {
				var dup *errDuplicate
				if errors.As(err, &dup) {
					r.answerDuplicateLocked(p, dup, opts.Mode)
					continue
				}
				p.complete(ProduceResult{}, err)
				continue
			}
		}
		h.BaseOffset, h.LeaderEpoch = next, int32(term)
		stamp(p.batch, next, int32(term))
		var err error
		if solo {
			// The batch goes when the log has it (raft_ref.go).
			err = r.proposeRefLocked(p)
		} else {
			err = r.rn.Propose(p.batch)
			p.releaseBatch() // raft appended a copy (raft.appendEntry clones)
		}
		if err != nil {
			p.complete(ProduceResult{}, fmt.Errorf("%w: %v", ErrProposalDropped, err))
			continue
		}
		idx++
		p.index, p.term = idx, term
		p.res = ProduceResult{BaseOffset: next, LastOffset: h.LastOffset()}
		next = h.LastOffset() + 1
		if h.ProducerID >= 0 {
			scratch[h.ProducerID] = updateEntry(pe, &h, mk)
		}
		if p.acks == AcksNone {
			continue
		}
		r.inflight = append(r.inflight, p)
	}
	return nil
}

func (r *Replica) answerDuplicateLocked(p *Proposal, dup *errDuplicate, mode Mode) {
	res := ProduceResult{BaseOffset: dup.base, LastOffset: dup.last, Duplicate: true}
	// The original may not be committed yet: acks=all in raft mode waits
	// for the high watermark to pass it, and so does semi-sync outside a
	// fallback (a commit has the original on a majority of voters, as
	// many as one other voter of three; the original's own answer may
	// wait for more), and async (on the sole voter the commit is its own
	// durable write, the original's answer; with other voters the
	// original is answered at commit too, asyncAnswersOnWriteLocked).
	if p.acks == AcksAll && (mode == ModeRaft || mode == ModeAsync || (mode == ModeSemiSync && !r.semi.fallback)) && r.hw.Load() <= dup.last {
		p.res = res
		r.dupWait = append(r.dupWait, p)
		return
	}
	p.complete(res, nil)
}

func leaderOf(id uint64) NodeID {
	if id == raft.None {
		return -1
	}
	return nodeOf(id)
}

// handleReadyLocked handles one Ready (doc.go, "Ready loop"). raft runs
// with AsyncStorageWrites: the Ready's messages to peers go out at once,
// its writes are stored here (storageAppendLocked) and the messages that
// depend on their durability (acknowledgements, votes, raft's own
// MsgStorageAppendResp) wait in r.dur until the log's Flusher has synced
// them, while the worker goes on to other groups. Committed entries, which
// raft hands out only once stable here, are applied at once.
func (r *Replica) handleReadyLocked() error {
	rd := r.rn.Ready()
	var app, apply *raftpb.Message
	peers := make([]*raftpb.Message, 0, len(rd.Messages))
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			app = m
		case raft.LocalApplyThread:
			apply = m
		default:
			peers = append(peers, m)
		}
	}
	// Step 2 for what depends on nothing unsynced: appends and heartbeats
	// of a leader (its own acknowledgement is counted only once its
	// append is durable), vote requests.
	for _, m := range peers {
		if hasRef(m) {
			return fmt.Errorf("replica: raft entry by reference in a message to node %d", m.GetTo())
		}
	}
	r.host.send(r, peers)
	if app != nil {
		if err := r.storageAppendLocked(app); err != nil {
			return err
		}
	}
	if apply != nil {
		if err := r.storageApplyLocked(apply); err != nil {
			return err
		}
	}
	r.trimCacheLocked()
	return r.fullHandedOffLocked(peers)
}

// storageAppendLocked is step 1 for one MsgStorageAppend: the snapshot,
// the entries (written to the page cache; raft's own entries' records
// synced at once) and the hard state (synced when term or vote changed).
// Its Responses are delivered once the entries are durable: at once when
// the log already covers them and nothing earlier is waiting, otherwise
// by the durability waiter (r.dur) and the group's next round.
func (r *Replica) storageAppendLocked(m *raftpb.Message) error {
	if err := r.followerSpaceLocked(m); err != nil {
		return err
	}
	var hs *raftpb.HardState
	if m.Term != nil {
		hs = &raftpb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
	}
	if snap := m.GetSnapshot(); snap != nil && !raft.IsEmptySnap(snap) {
		if err := r.st.applySnapshot(snap, hs); err != nil {
			return fmt.Errorf("install snapshot: %w", err)
		}
		si := snap.GetMetadata().GetIndex()
		r.applied = si
		r.clearJoinWait() // the snapshot's configuration is the group's
		r.setHW(r.st.endOffsetOf(si))
		r.lg.Info().Uint64("index", si).Int64("offset", r.log.LogStartOffset()).Msg("installed raft snapshot")
	}
	ents := m.GetEntries()
	w := &durWait{resps: m.GetResponses()}
	var first uint64
	if len(ents) > 0 {
		first = ents[0].GetIndex()
		if err := r.st.append(ents, r.refBatch); err != nil {
			return err
		}
		r.releaseRefsLocked(ents)
		w.last = ents[len(ents)-1].GetIndex()
		for _, e := range ents {
			if e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0 {
				w.raftMark = true
			}
		}
	}
	if hs != nil {
		if err := r.st.saveHardState(hs, r.applied, false); err != nil {
			return fmt.Errorf("save hard state: %w", err)
		}
	}
	w.end = r.log.LogEndOffset()
	return r.dur.add(r, w, first)
}

// storageApplyLocked is step 3 for one MsgStorageApply. The log already
// holds the committed batches, so applying is moving the high watermark
// (and conf changes); the MsgStorageApplyResp is stepped at once.
func (r *Replica) storageApplyLocked(m *raftpb.Message) error {
	ents := m.GetEntries()
	if n := len(ents); n > 0 {
		deleteTo := int64(-1)
		for _, e := range ents {
			if err := r.applyConfChangeLocked(e); err != nil {
				return err
			}
			if off, ok := deleteRecordsOf(e.GetData()); ok && e.GetType() == raftpb.EntryNormal {
				deleteTo = max(deleteTo, off)
			}
		}
		last := ents[n-1].GetIndex()
		r.applied = last
		r.setHW(r.st.endOffsetOf(last))
		if deleteTo >= 0 {
			// Before the proposals are answered, so DeleteRecords reports
			// the new log start. Later entries only append, so applying
			// it after the round's other entries changes nothing.
			if err := r.deleteRecordsLocked(deleteTo); err != nil {
				return fmt.Errorf("delete records before %d: %w", deleteTo, err)
			}
		}
		r.completeCommittedLocked(last)
		if err := r.st.maybeCheckpoint(last, time.Now()); err != nil {
			return fmt.Errorf("checkpoint applied index: %w", err)
		}
	}
	r.deliverLocked(m.GetResponses())
	return nil
}

// deliverLocked steps the responses of a local storage message addressed
// to this node and sends the rest (acknowledgements, votes) to peers.
func (r *Replica) deliverLocked(resps []*raftpb.Message) {
	self := raftID(r.host.cfg.Node)
	var out []*raftpb.Message
	for _, m := range resps {
		if m.GetTo() != self {
			out = append(out, m)
			continue
		}
		if err := r.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
			r.lg.Debug().Err(err).Stringer("msg_type", m.GetType()).Msg("raft step local")
		}
	}
	r.host.send(r, out)
}

// durableLocked finishes the appends the log's fsync now covers, in
// order: the raft mark and the persisted index are noted, acks=1 writes
// answered, and the responses delivered (step 2 after step 1).
func (r *Replica) durableLocked() error {
	for _, w := range r.dur.takeDone() {
		if w.err != nil {
			return w.err
		}
		if w.last > 0 {
			r.st.setDurable(w.last)
		}
		if w.raftMark {
			if err := r.st.saveRaftMark(w.last); err != nil {
				return fmt.Errorf("save raft entry mark: %w", err)
			}
		}
		if w.last > 0 {
			r.persistedLocked(w.last)
		}
		r.deliverLocked(w.resps)
	}
	return nil
}

// trimCacheLocked drops the cached entries no one will read from memory:
// those applied here that every other replica (voters and learners) has
// too, as far as a leader knows; a follower only serves its cache if it
// becomes leader, when a miss costs a read from the page cache. A member
// the leader has not heard from for an election timeout (a read broker
// that stopped, a voter that is down) is not waited for: it would
// otherwise pin up to maxCacheBytes of every partition it is a member of
// for as long as it is away (a read broker's learner slots are kept for
// the metastore's learner grace), and once that exceeds the host's budget
// every group on the host, the healthy ones included, loses its cache and
// reads what it sends and applies back from the log. A member that comes
// back reads what it missed from the log, as a lagging one always has.
func (r *Replica) trimCacheLocked() {
	upTo := r.applied
	if r.isLeader.Load() {
		self := raftID(r.host.cfg.Node)
		now := time.Now()
		away := time.Duration(r.host.cfg.ElectionTicks) * r.host.cfg.TickInterval
		r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id == self || pr.Match >= upTo {
				return
			}
			if r.stoppedPeerLocked(id) || now.Sub(r.heardSinceElectedLocked(id)) > away {
				return
			}
			upTo = pr.Match
		})
	}
	r.st.mu.Lock()
	r.st.cacheTrimLocked(upTo)
	r.st.mu.Unlock()
}

func (r *Replica) applyConfChangeLocked(e *raftpb.Entry) error {
	var cc raftpb.ConfChangeI
	switch e.GetType() {
	case raftpb.EntryConfChange:
		var c raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &c); err != nil {
			return fmt.Errorf("conf change at %d: %w", e.GetIndex(), err)
		}
		cc = &c
	case raftpb.EntryConfChangeV2:
		var c raftpb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &c); err != nil {
			return fmt.Errorf("conf change at %d: %w", e.GetIndex(), err)
		}
		cc = &c
	default:
		return nil
	}
	r.endSoloLocked()
	if r.joinWait {
		self := raftID(r.host.cfg.Node)
		for _, c := range cc.AsV2().Changes {
			if c.GetNodeId() == self {
				r.clearJoinWait()
				break
			}
		}
	}
	r.st.mu.Lock()
	forced := e.GetIndex() <= r.st.forcedAt
	held := e.GetIndex() <= r.st.confIndex
	cs := cloneCS(r.st.cs)
	r.st.mu.Unlock()
	if forced {
		// Superseded by the configuration an async failover forced
		// (raft_failover.go): applying its diff to that one would be
		// wrong.
		return nil
	}
	if !held {
		cs = r.rn.ApplyConfChange(cc)
		if err := r.st.setConfState(cs, e.GetIndex()); err != nil {
			return err
		}
	}
	// Otherwise the saved configuration, which raft restarted from,
	// holds this change already: raft hands out again, after a restart,
	// the committed entries after the last applied index saved (a
	// checkpoint), and applying a change twice is wrong (entering a joint
	// configuration twice makes raft panic).
	if len(cs.GetVotersOutgoing()) == 0 {
		r.confPending = false
	}
	r.mu.Lock()
	close(r.confNotify)
	r.confNotify = make(chan struct{})
	r.mu.Unlock()
	return nil
}

// persistedLocked notes that entries up to last are durable here: acks=1,
// and acks=all in async mode while this replica is its group's sole voter
// (asyncAnswersOnWriteLocked), are answered.
func (r *Replica) persistedLocked(last uint64) {
	if len(r.inflight) == 0 {
		return
	}
	mode := r.opts.Load().Mode
	if mode == ModeAsync && !r.asyncAnswersOnWriteLocked() {
		mode = ModeRaft // answered at commit
	}
	now := time.Now()
	keep := r.inflight[:0]
	for _, p := range r.inflight {
		if p.index > last || p.persisted {
			keep = append(keep, p)
			continue
		}
		r.st.mu.Lock()
		m, ok := r.st.metaLocked(p.index)
		r.st.mu.Unlock()
		if !ok || m.term != p.term {
			p.complete(ProduceResult{}, r.notLeader())
			continue
		}
		p.persisted = true
		p.persistedAt = now
		p.res.BaseOffset, p.res.LastOffset = m.base, m.last
		if !p.commit && (p.acks == AcksLeader || (p.acks == AcksAll && mode == ModeAsync)) {
			p.complete(p.res, nil)
			continue
		}
		keep = append(keep, p)
	}
	clear(r.inflight[len(keep):])
	r.inflight = keep
}

// asyncAnswersOnWriteLocked says whether acks=all in async mode may be
// answered on this replica's own durable write: only while it is the sole
// voter of its group (the async master's configuration, where its write
// is the commit). With other voters (a topic just created or changed to
// async, before the leader moved the group to the master's configuration,
// or while it leaves it) an entry only the leader holds is not committed:
// an election won by another voter, which a loaded machine or a pause
// brings about without any broker failing, would cut it from the leader's
// log, acknowledged. Such writes are answered at commit, as in raft mode.
func (r *Replica) asyncAnswersOnWriteLocked() bool {
	r.st.mu.Lock()
	cs := r.st.cs
	sole := len(cs.GetVoters()) == 1 && cs.GetVoters()[0] == raftID(r.host.cfg.Node) && len(cs.GetVotersOutgoing()) == 0
	r.st.mu.Unlock()
	return sole
}

// completeCommittedLocked answers everything committed up to last, but
// for semi-sync acks=all writes: the number of voters they wait for is
// semi.sync.wait.replicas, not a majority (semiSyncLocked answers them).
func (r *Replica) completeCommittedLocked(last uint64) {
	semi := r.opts.Load().Mode == ModeSemiSync
	keep := r.inflight[:0]
	for _, p := range r.inflight {
		if p.index > last || (semi && p.acks == AcksAll && !p.commit && p.persisted) {
			keep = append(keep, p)
			continue
		}
		t, err := r.st.Term(p.index)
		if err == nil && t == p.term {
			p.complete(p.res, nil)
		} else {
			p.complete(ProduceResult{}, r.notLeader())
		}
	}
	clear(r.inflight[len(keep):])
	r.inflight = keep
	if len(r.dupWait) > 0 {
		hw := r.hw.Load()
		keep := r.dupWait[:0]
		for _, p := range r.dupWait {
			if p.res.LastOffset < hw {
				p.complete(p.res, nil)
			} else {
				keep = append(keep, p)
			}
		}
		clear(r.dupWait[len(keep):])
		r.dupWait = keep
	}
}

// afterProcessLocked publishes the raft status, fails the writes of a
// leader that lost its term, and answers semi-sync writes.
func (r *Replica) afterProcessLocked() {
	bs := r.rn.BasicStatus()
	isLeader := bs.RaftState == raft.StateLeader
	lead := leaderOf(bs.Lead)
	if r.wasLeader && (!isLeader || bs.GetTerm() != r.ledTerm) {
		err := &NotLeaderError{Leader: lead, Term: bs.GetTerm()}
		for _, p := range r.inflight {
			p.complete(ProduceResult{}, err)
		}
		for _, p := range r.dupWait {
			p.complete(ProduceResult{}, err)
		}
		r.inflight, r.dupWait = nil, nil
		r.confPending = false
	}
	if isLeader && (!r.wasLeader || bs.GetTerm() != r.ledTerm) {
		r.leaderSince = time.Now()
		r.st.mu.Lock()
		r.electedLast = r.st.lastIndexLocked()
		r.st.mu.Unlock()
		r.marks = [isrMarks]isrMark{}
		r.isr = nil
		// A new term starts semi-synchronous.
		r.semi = semiSyncState{}
		r.fellBack.Store(false)
	}
	changed := NodeID(r.leader.Load()) != lead || r.term.Load() != bs.GetTerm()
	r.wasLeader, r.ledTerm = isLeader, bs.GetTerm()
	r.leader.Store(int32(lead))
	r.term.Store(bs.GetTerm())
	r.isLeader.Store(isLeader)
	if changed && r.host.cfg.OnLeaderChange != nil {
		r.host.cfg.OnLeaderChange(r.key, lead, bs.GetTerm())
	}
	if isLeader && r.host.cfg.OnISRChange == nil {
		r.markLocked(time.Now())
	}
	if isLeader && r.host.cfg.OnISRChange != nil {
		// Like Kafka's AlterPartition: the leader reports its ISR when it
		// changes (and once per term).
		if isr, _ := r.isrLocked(time.Now()); r.isr == nil || !sameMembers(isr, r.isr) {
			if r.isr != nil {
				// As Kafka's leader logs "Shrinking ISR" and
				// "Expanding ISR": a lagging or lost replica is
				// visible in this leader's log.
				r.lg.Info().Ints32("from", nodeIDs(r.isr)).Ints32("to", nodeIDs(isr)).Msg("ISR changed")
			}
			r.isr = isr
			r.host.cfg.OnISRChange(r.key, bs.GetTerm(), slices.Clone(isr))
		}
	}
	if isLeader {
		r.semiSyncLocked(time.Now())
	} else if r.semi != (semiSyncState{}) {
		r.semi = semiSyncState{}
		r.fellBack.Store(false)
	}
}

// failLocked stops the replica after a storage failure (a failed write
// or sync is never retried, log.ErrFatal) or a raft panic: it
// leaves its group (steps nothing, sends nothing), fails its writes, and
// the broker answers KAFKA_STORAGE_ERROR for the partition and no longer
// names itself its leader. The broker's other partitions go on; a restart
// reopens the replica from its files, and so does the host once space is
// freed when the failure was a full disk (raft_nospace.go).
func (r *Replica) failLocked(err error) {
	if r.failed != nil {
		return
	}
	if r.host.ctx.Err() != nil {
		err = ErrReplicaClosed
	} else {
		// The cause is text only: whatever it was (a closed or failed
		// log, a panic), the partition is a failed replica to callers.
		full := isNoSpace(err)
		err = fmt.Errorf("%w: %v", ErrReplicaFailed, err)
		if full {
			r.lg.Error().Err(err).Hex("topic_id", r.key.TopicID[:]).Msg("raft replica stopped on a full disk; the partition is offline on this broker until space is freed, then reopened from its files")
			r.noSpaceAt.Store(time.Now().Add(noSpaceRetry).UnixNano())
		} else {
			r.lg.Error().Err(err).Hex("topic_id", r.key.TopicID[:]).Msg("raft replica failed; the partition is offline on this broker")
		}
		r.fault.Store(&err)
		r.host.failed.Add(1)
		if r.host.cfg.OnFailed != nil {
			r.host.cfg.OnFailed(r.key, err)
		}
	}
	r.failed = err
	for _, p := range r.inflight {
		p.complete(ProduceResult{}, err)
	}
	for _, p := range r.dupWait {
		p.complete(ProduceResult{}, err)
	}
	r.inflight, r.dupWait = nil, nil
	r.dropRefsLocked()
	r.tellStoppedLocked()
	r.isLeader.Store(false)
	r.leader.Store(-1)
	// Fetches waiting for the high watermark look again and see the
	// failure.
	r.mu.Lock()
	r.wakeLocked()
	r.mu.Unlock()
}

// Failed returns the failure that stopped the replica (wrapping
// ErrReplicaFailed), nil while it serves.
func (r *Replica) Failed() error {
	if p := r.fault.Load(); p != nil {
		return *p
	}
	return nil
}

// stoppedLocked is the error for a call on a closed or failed replica,
// whose RawNode must not be touched (raftMu held).
func (r *Replica) stoppedLocked() error {
	if r.failed != nil {
		return r.failed
	}
	if r.closed {
		return ErrReplicaClosed
	}
	return nil
}

// ApplyRetention applies the topic's retention to the log and compacts the
// raft log to match: entries wholly below the new log start leave the
// index, and a replica that needs them gets a snapshot.
func (r *Replica) ApplyRetention(now time.Time) (int, error) {
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	if err := r.stoppedLocked(); err != nil {
		return 0, err
	}
	if err := r.st.syncIndex(); err != nil {
		return 0, err
	}
	n, err := r.log.ApplyRetention(now)
	if err != nil || n == 0 {
		return n, err
	}
	return n, r.st.compact(r.applied)
}

// ExpireProducers forgets the producers whose last batch here is older
// than producer.id.expiration.ms (HostConfig.ProducerIDExpiration) at now,
// by this replica's clock, unless they have a transaction open here, and
// returns how many entries were dropped. The broker runs it every
// producer.id.expiration.check.interval.ms; a closed replica drops none.
func (r *Replica) ExpireProducers(now time.Time) int {
	return r.st.expireProducers(now)
}

// DeleteRecordsBefore moves this replica's log start to offset (at most the
// high watermark) and compacts the raft log to match. It is local: only
// this replica moves (DeleteRecords moves every replica).
func (r *Replica) DeleteRecordsBefore(offset int64) error {
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	if err := r.stoppedLocked(); err != nil {
		return err
	}
	if hw := r.hw.Load(); offset > hw {
		return fmt.Errorf("%w: offset %d past high watermark %d", log.ErrOffsetOutOfRange, offset, hw)
	}
	return r.deleteRecordsLocked(offset)
}

func (r *Replica) deleteRecordsLocked(offset int64) error {
	if err := r.st.syncIndex(); err != nil {
		return err
	}
	if err := r.log.DeleteRecordsBefore(offset); err != nil {
		return err
	}
	return r.st.compact(r.applied)
}

// DeleteRecords moves the log start of every replica of the partition to
// offset, as Kafka's DeleteRecords: only the leader accepts it, offset must
// be at most the high watermark (log.ErrOffsetOutOfRange otherwise), and it
// travels through raft as one command entry that each voter
// and learner applies when it commits, so every replica moves its log
// start identically and no data offset changes. It returns once the entry
// is committed and applied here, with the leader's new log start (Kafka's
// low watermark).
func (r *Replica) DeleteRecords(ctx context.Context, offset int64) (int64, error) {
	if err := r.Failed(); err != nil {
		return 0, err
	}
	if !r.isLeader.Load() {
		return 0, r.notLeader()
	}
	if hw := r.hw.Load(); offset > hw || offset < 0 {
		return 0, fmt.Errorf("%w: offset %d, high watermark %d", log.ErrOffsetOutOfRange, offset, hw)
	}
	if offset <= r.log.LogStartOffset() {
		return r.log.LogStartOffset(), nil // nothing to move: no entry
	}
	p := &Proposal{r: r, batch: deleteRecordsCmd(offset), acks: AcksAll, commit: true, done: make(chan struct{}), released: make(chan struct{})}
	r.inMu.Lock()
	switch {
	case r.in.closed:
		r.inMu.Unlock()
		return 0, ErrReplicaClosed
	case len(r.in.props) >= maxPendingProposals:
		r.inMu.Unlock()
		return 0, ErrBusy
	}
	r.in.props = append(r.in.props, p)
	r.inMu.Unlock()
	r.host.sched.enqueue(r)
	if _, err := p.Wait(ctx); err != nil {
		return 0, err
	}
	return r.log.LogStartOffset(), nil
}

// close stops the replica: queued and in-flight writes fail with
// ErrReplicaClosed, the hard state is saved with the applied index, and
// the files are closed. The host's workers must not be processing it.
func (r *Replica) close() error {
	r.inMu.Lock()
	r.in.closed = true
	props := r.in.props
	r.in.props = nil
	r.inMu.Unlock()
	for _, p := range props {
		p.complete(ProduceResult{}, ErrReplicaClosed)
	}
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	for _, p := range r.inflight {
		p.complete(ProduceResult{}, ErrReplicaClosed)
	}
	for _, p := range r.dupWait {
		p.complete(ProduceResult{}, ErrReplicaClosed)
	}
	r.inflight, r.dupWait = nil, nil
	r.dropRefsLocked()
	r.isLeader.Store(false)
	var errs []error
	if r.failed == nil {
		errs = append(errs, r.st.saveHardState(nil, r.applied, true))
	}
	errs = append(errs, r.st.close())
	if err := r.log.Close(); err != nil && !errors.Is(err, log.ErrClosed) {
		errs = append(errs, err)
	}
	r.dur.wg.Wait() // the closed log released its waiter
	r.mu.Lock()
	r.wakeLocked()
	r.mu.Unlock()
	return errors.Join(errs...)
}

// sameMembers reports whether a and b hold the same ids in any order.
func sameMembers(a, b []NodeID) bool {
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}

func nodeIDs(ids []NodeID) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// proposeReserve is the room a leader keeps free on its file system: a
// batch is proposed only if the file system has room for it and this
// much more (index records, a new segment's index files, raft.state).
const proposeReserve = 1 << 20

// checkSpace refuses a batch, before raft, when the file system holding
// dir is about full. Once proposed, an entry must be stored: a write that
// finds the disk full fails the replica until space is freed and the host
// reopens it (raft_nospace.go), while
// a batch refused here (log.ErrNoSpace: KAFKA_STORAGE_ERROR, which
// clients retry) leaves the partition serving, and producing resumes as
// soon as space is freed, without a restart. It is a check, not a
// reservation: concurrent batches and other writers (the metastore) can
// still fill the disk between the check and the write.
func checkSpace(dir string, n int) error {
	if free := usableBytes(dir); free >= 0 && free < int64(n)+proposeReserve {
		return fmt.Errorf("%w: %d bytes free in %s, a batch of %d bytes needs %d more kept free", log.ErrNoSpace, free, dir, n, proposeReserve)
	}
	return nil
}
