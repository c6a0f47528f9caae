package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/internal/peerlink"
	"github.com/sluice-broker/sluice/internal/raftlog"
	"github.com/sluice-broker/sluice/log"
)

// HostConfig configures a broker's raft host.
type HostConfig struct {
	// Node is this broker's id.
	Node NodeID
	// Dir holds one directory per partition, <topic>-<partition>.
	Dir string
	// Transport reaches the other brokers; the host owns it from NewHost on
	// and closes it in Close.
	Transport Transport
	// Flusher groups the logs' fsyncs (nil: each log syncs itself).
	Flusher *log.Flusher
	Logger  zerolog.Logger
	// Workers is the scheduler's pool size (default 8). Workers block in
	// fsync, so more workers than cores let more syncs be grouped.
	Workers int
	// TickInterval is raft's tick (default 200ms); ElectionTicks (default
	// 10: a follower campaigns after 2-4s without a leader) and
	// HeartbeatTicks (default 2: 400ms) are in ticks.
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int
	// MaxFollowerLag is replica.lag.time.max.ms: a follower that has not
	// caught up with the leader's log end for longer is out of the ISR
	// (Replica.InSyncReplicas) and, a voter, out of min.insync.replicas
	// (default 30s, Kafka's).
	MaxFollowerLag time.Duration
	// MemberSilence, when positive, takes a member the leader has not
	// heard from for longer out of the ISR at once, however caught up its
	// log was: the broker session timeout, after which the metastore
	// fences a broker that stopped renewing (Kafka's controller takes a
	// fenced broker out of every ISR without waiting for
	// replica.lag.time.max.ms). A dead member thus leaves the ISR the
	// leader reports within a lease, and cannot be counted in sync by an
	// async master's last report (the metastore promotes only a write
	// replica in that ISR). 0: only MaxFollowerLag applies.
	MemberSilence time.Duration
	// EntryCacheBytes bounds the raft entry cache of all groups together
	// (raft.entry.cache.max.bytes; default 32 MiB). Each group also keeps
	// at most 512 entries and 8 MiB, and drops entries every replica has.
	// The in-memory raft.index records (40 bytes each, but each group's
	// last) count in it too: over it, a group keeps only its last record
	// and reads the others from raft.index.
	EntryCacheBytes int64
	// ProducerIDExpiration is producer.id.expiration.ms: a producer whose
	// last batch in a partition is older, with no transaction open there,
	// is forgotten by that replica (Replica.ExpireProducers); 0 never.
	ProducerIDExpiration time.Duration
	// OnLeaderChange is called by a worker (raftMu held) when a replica
	// learns of a new leader or term; it must not block or call back into
	// the Replica.
	OnLeaderChange func(key Key, leader NodeID, term uint64)
	// OnISRChange is called by a worker (raftMu held) on a leader when
	// the replicas it counts in sync change, and once when it is elected
	// (term is its term; isr is the caller's, leader first). Like
	// OnLeaderChange it must not block or call back into the Replica.
	OnISRChange func(key Key, term uint64, isr []NodeID)
	// OnFailed is called once when a replica stops: its storage failed
	// (a failed write or fsync is never retried, log.ErrFatal) or raft
	// panicked. The replica is offline on this broker until it restarts;
	// the broker's other partitions go on. A replica a full disk stopped
	// is reopened from its files by the host once space is freed
	// (raft_nospace.go). Optional.
	OnFailed func(key Key, err error)
	// Assigned reports whether the metastore assigns broker n to the
	// partition key (voter, learner, reassignment target or initial
	// member). A message from outside a replica's applied configuration
	// is refused unless Assigned says yes: a replica that is behind (a
	// joining one above all) learns of newer members only from the log
	// they send it. Nil: only the applied configuration counts.
	Assigned func(key Key, n NodeID) bool
	// AsyncMaster reports the broker the metastore records as the async
	// master of partition key, when it records one, and the last
	// promotion's takeover point (nil if none was recorded): in async
	// mode a replica takes a leader's messages from it as from a voter of
	// its own configuration (mayLeadLocked), after a promotion only once
	// its log is past that takeover (it followed from it, or its
	// configuration comes from a change made after it). A replica that
	// is not is made to follow through Host.Follow instead. Nil: only
	// the applied configuration counts.
	AsyncMaster func(key Key) (NodeID, *Takeover, bool)
}

// Host owns every raft group of one broker: the scheduler's workers, one
// ticker for all groups, and the transport. Groups are added with Open.
type Host struct {
	cfg   HostConfig
	lg    zerolog.Logger
	tr    Transport
	sched *scheduler

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	cache cacheBudget // every group's entry cache

	// removeMu orders Remove and the recovery loop's reopen
	// (raft_nospace.go), so a directory is never deleted under a reopen.
	removeMu sync.Mutex

	mu      sync.RWMutex
	reps    map[Key]*Replica
	opening map[Key]chan struct{} // Opens under way
	// dirs: which key each partition directory belongs to, from the
	// start of its Open until Remove has deleted or closed it. A
	// directory is named by topic name and index, so a topic deleted and
	// created again under its name has a new key but the old one's
	// directory (claimDirLocked).
	dirs   map[string]Key
	list   []*Replica // for the ticker
	closed bool

	refused *peerlink.Refusals
	failed  atomic.Int64 // open replicas that stopped after a failure
	// semiFallbacks counts semi-sync fallbacks (raft_semisync.go).
	semiFallbacks atomic.Int64
	// truncated counts records cut from logs by a new leader's entries.
	truncated atomic.Int64
}

// TruncatedRecords counts the records (offsets) this host's replicas cut
// from their logs because a new leader's log replaced them: entries a
// leader wrote and no majority held when it lost its term. raft mode
// never answered acks=all for them; acks=1, async and a semi-sync
// fallback may have (sluice_truncated_records_total).
func (h *Host) TruncatedRecords() int64 { return h.truncated.Load() }

// DefaultEntryCacheBytes is HostConfig.EntryCacheBytes's default.
const DefaultEntryCacheBytes = 32 << 20

// EntryCacheBytes is what the entry caches and the index records of all
// groups hold now.
func (h *Host) EntryCacheBytes() int64 { return h.cache.used.Load() }

// Dir is the directory the host's partition directories live in (its log
// dir, as DescribeLogDirs reports it).
func (h *Host) Dir() string { return h.cfg.Dir }

// NewHost starts a host: workers, ticker and the transport's receiver.
func NewHost(cfg HostConfig) (*Host, error) {
	if cfg.Transport == nil {
		return nil, errors.New("replica: HostConfig.Transport is required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 200 * time.Millisecond
	}
	if cfg.ElectionTicks <= 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.HeartbeatTicks <= 0 {
		cfg.HeartbeatTicks = 2
	}
	if cfg.HeartbeatTicks >= cfg.ElectionTicks {
		return nil, fmt.Errorf("replica: heartbeat ticks %d must be below election ticks %d", cfg.HeartbeatTicks, cfg.ElectionTicks)
	}
	if cfg.MaxFollowerLag <= 0 {
		cfg.MaxFollowerLag = 30 * time.Second
	}
	if cfg.EntryCacheBytes <= 0 {
		cfg.EntryCacheBytes = DefaultEntryCacheBytes
	}
	if err := fsutil.MkdirAllSync(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	h := &Host{
		cfg:   cfg,
		lg:    cfg.Logger.With().Str("component", "raft-host").Int32("node_id", int32(cfg.Node)).Logger(),
		tr:    cfg.Transport,
		sched: newScheduler(cfg.Workers),
		reps:  map[Key]*Replica{},
	}
	h.refused = newRefusals(h.lg)
	h.cache.max = cfg.EntryCacheBytes
	h.opening = map[Key]chan struct{}{}
	h.dirs = map[string]Key{}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.tr.Handle(h.receive)
	h.wg.Add(2)
	go h.tickLoop()
	go h.recoverLoop()
	return h, nil
}

// Open opens (creating if needed) the replica of partition key of topic on
// this broker. members is the initial configuration and is used only when
// the partition has no raft state yet; afterwards the persisted
// configuration wins. A new group is campaigned for at once by its first
// voter, so the metastore's voter order places leaders. Open on an open
// partition returns the open replica (its options updated).
func (h *Host) Open(topic string, key Key, members Members, opts ReplicaOptions) (*Replica, error) {
	return h.open(topic, key, members, opts, false)
}

func (h *Host) open(topic string, key Key, members Members, opts ReplicaOptions, join bool) (*Replica, error) {
	if opts.MinInsyncReplicas <= 0 {
		opts.MinInsyncReplicas = 1
	}
	h.mu.Lock()
	for {
		if h.closed {
			h.mu.Unlock()
			return nil, ErrReplicaClosed
		}
		if r, ok := h.reps[key]; ok {
			h.mu.Unlock()
			return r, r.SetOptions(opts)
		}
		ch := h.opening[key]
		if ch == nil {
			break
		}
		h.mu.Unlock()
		<-ch
		h.mu.Lock()
	}
	if err := h.claimDirLocked(topic, key); err != nil {
		h.mu.Unlock()
		return nil, err
	}
	// The log's recovery and the raft state's fsyncs run without h.mu, so
	// opening many partitions does not hold up the others' messages and
	// ticks.
	done := make(chan struct{})
	h.opening[key] = done
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.opening, key)
		h.mu.Unlock()
		close(done)
	}()
	r, err := h.openReplica(topic, key, members, opts, join)
	if err != nil {
		h.releaseDir(topic, key)
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.releaseDirLocked(topic, key)
		h.mu.Unlock()
		r.close()
		return nil, ErrReplicaClosed
	}
	h.reps[key] = r
	h.list = append(h.list, r)
	h.mu.Unlock()
	h.sched.enqueue(r)
	if r.sole {
		// Its own election is one round of the group's worker and a
		// durable vote: wait for it (bounded), so that the first produce
		// to a new partition of a single node is not refused as
		// NOT_LEADER_OR_FOLLOWER.
		for deadline := time.Now().Add(soleElectionWait); !r.IsLeader() && r.Failed() == nil && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	return r, nil
}

// partitionDir is the directory of partition index of topic.
func (h *Host) partitionDir(topic string, index int32) string {
	return filepath.Join(h.cfg.Dir, topic+"-"+strconv.Itoa(int(index)))
}

// claimDirLocked gives key the directory of its partition, or returns
// ErrDirInUse while the replica of another key, a deleted topic of the
// same name, still has it: opened over that replica's files, the new
// partition would take the old one's records, and the old one's removal
// would delete the new one's. Callers hold h.mu.
func (h *Host) claimDirLocked(topic string, key Key) error {
	dir := h.partitionDir(topic, key.Index)
	if other, ok := h.dirs[dir]; ok && other != key {
		return fmt.Errorf("%w: %s-%d (topic id %x) is still being removed", ErrDirInUse, topic, key.Index, other.TopicID)
	}
	h.dirs[dir] = key
	return nil
}

// releaseDirLocked gives key's directory up, if key holds it. Callers
// hold h.mu.
func (h *Host) releaseDirLocked(topic string, key Key) {
	dir := h.partitionDir(topic, key.Index)
	if h.dirs[dir] == key {
		delete(h.dirs, dir)
	}
}

func (h *Host) releaseDir(topic string, key Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releaseDirLocked(topic, key)
}

// soleElectionWait bounds how long Open waits for a group's sole voter to
// be elected.
const soleElectionWait = 5 * time.Second

func (h *Host) openReplica(topic string, key Key, members Members, opts ReplicaOptions, join bool) (*Replica, error) {
	isMember := false
	for _, n := range append(append([]NodeID(nil), members.Voters...), members.Learners...) {
		isMember = isMember || n == h.cfg.Node
	}
	if !isMember && !join {
		return nil, fmt.Errorf("replica: node %d is not a member of %s-%d", h.cfg.Node, topic, key.Index)
	}
	dir := h.partitionDir(topic, key.Index)
	if err := h.removeOtherTopic(dir, key); err != nil {
		return nil, err
	}
	// Durably: a partition directory lost to a power cut would bring the
	// replica back empty, having forgotten the entries and votes it
	// acknowledged.
	if err := fsutil.MkdirAllSync(dir, 0o755); err != nil {
		return nil, err
	}
	if err := writeTopicID(dir, key.TopicID); err != nil {
		return nil, err
	}
	lg := h.lg.With().Str("topic", topic).Int32("partition", key.Index).Logger()
	l, err := log.Open(dir, opts.Log, log.Options{Logger: lg, Flusher: h.cfg.Flusher})
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", topic, key.Index, err)
	}
	_, statErr := os.Stat(filepath.Join(dir, stateFileName))
	fresh := errors.Is(statErr, os.ErrNotExist)
	// A replica joining without state waits for the group's
	// configuration (joinWait), across restarts too: marked on disk
	// before any raft state is, and unmarked once it has the group's
	// configuration (clearJoinWait).
	if fresh && join {
		if err := fsutil.WriteFileSync(dir, joiningFileName, nil); err != nil {
			l.Close()
			return nil, err
		}
	}
	_, joinErr := os.Stat(filepath.Join(dir, joiningFileName))
	joinWait := joinErr == nil
	initial := raftpb.EnsureConfState(&raftpb.ConfState{Voters: raftIDs(members.Voters), Learners: raftIDs(members.Learners)})
	st, err := openStorage(dir, l, initial, lg)
	if st != nil {
		st.truncated = &h.truncated
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("raft state of %s-%d: %w", topic, key.Index, err)
	}
	st.budget = &h.cache
	st.budget.add(st.metaBytes) // counted before the budget was known
	st.prodExpiry = h.cfg.ProducerIDExpiration
	st.expireProducers(time.Now())
	hs := st.hs
	applied := st.state.cur.applied &^ stateFlagPendingBit
	applied = max(min(applied, hs.GetCommit()), st.snapIndex)
	rc := &raft.Config{
		ID:                        raftID(h.cfg.Node),
		ElectionTick:              h.cfg.ElectionTicks,
		HeartbeatTick:             h.cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   applied,
		MaxSizePerMsg:             1 << 20,
		MaxCommittedSizePerReady:  16 << 20,
		MaxUncommittedEntriesSize: 256 << 20,
		MaxInflightMsgs:           256,
		CheckQuorum:               true,
		PreVote:                   true,
		// raft's Info (elections, term changes) at debug: thousands of
		// groups elect at start. Fatal panics like Panic, stopping only
		// this replica.
		Logger:                    raftlog.New(lg.With().Str("component", "raft").Logger(), raftlog.Options{InfoAsDebug: true}),
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		// Storage writes as messages: no worker waits for an fsync
		// (doc.go, "Ready loop").
		AsyncStorageWrites: true,
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		st.close()
		l.Close()
		return nil, err
	}
	r := &Replica{
		host: h, key: key, topic: topic, dir: dir, lg: lg, log: l, st: st,
		openMembers: members, openJoin: join,
		rn: rn, applied: applied, lastHeard: map[uint64]time.Time{}, stopped: map[uint64]time.Time{},
		heard: map[uint64]time.Time{}, openedAt: time.Now(),
		notify: make(chan struct{}), confNotify: make(chan struct{}),
	}
	r.opts.Store(&opts)
	r.leader.Store(-1)
	r.hw.Store(st.endOffsetOf(hs.GetCommit()))
	r.term.Store(hs.GetTerm())
	// A group's sole voter campaigns at once on every open (no other
	// voter can lead it; a single node's partitions take writes as soon
	// as they open instead of after an election timeout). A joining
	// replica without state is not one, whatever the initial
	// configuration says: it may be a founder that was moved away and
	// back, whose group now lives elsewhere (joinWait).
	sole := len(st.cs.GetVoters()) == 1 && st.cs.GetVoters()[0] == raftID(h.cfg.Node) && len(st.cs.GetVotersOutgoing()) == 0 &&
		!joinWait
	r.sole = sole
	r.joinWait = joinWait
	if (fresh && !join && len(members.Voters) > 0 && members.Voters[0] == h.cfg.Node) || sole {
		r.raftMu.Lock()
		_ = rn.Campaign()
		if !sole {
			r.founderTicks = h.cfg.ElectionTicks
		}
		r.raftMu.Unlock()
	}
	return r, nil
}

// removeOtherTopic deletes dir if it holds a partition of another topic
// id: a topic deleted while this broker was down or before its replica's
// removal finished, whose name a new topic (key's) took. The caller holds
// dir's claim, so no open replica uses it. RemoveStale does the same at
// start; Kafka deletes such stray logs too.
func (h *Host) removeOtherTopic(dir string, key Key) error {
	id, err := readTopicID(dir)
	if err != nil || id == key.TopicID {
		return nil // absent, or not (yet) a partition directory
	}
	h.lg.Warn().Str("dir", filepath.Base(dir)).Hex("stale_topic_id", id[:]).Hex("topic_id", key.TopicID[:]).
		Msg("removing a replica of a deleted topic of the same name")
	return os.RemoveAll(dir)
}

// Get returns an open replica.
func (h *Host) Get(key Key) (*Replica, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	r, ok := h.reps[key]
	return r, ok
}

// Replicas returns every open replica.
func (h *Host) Replicas() []*Replica {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return append([]*Replica(nil), h.list...)
}

// Remove closes the replica of key and, if deleteData, removes its
// directory (topic deletion; the raft state goes with it).
func (h *Host) Remove(key Key, deleteData bool) error {
	h.removeMu.Lock()
	defer h.removeMu.Unlock()
	h.mu.Lock()
	r, ok := h.reps[key]
	if ok {
		delete(h.reps, key)
		for i, x := range h.list {
			if x == r {
				// A new array: the tick loop ranges over the old one
				// without the lock.
				h.list = append(h.list[:i:i], h.list[i+1:]...)
				break
			}
		}
	}
	h.mu.Unlock()
	if !ok {
		return nil
	}
	err := r.close() // no failure after it
	if r.Failed() != nil {
		h.failed.Add(-1)
	}
	if deleteData {
		if rerr := os.RemoveAll(r.dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	h.releaseDir(r.topic, key)
	return err
}

// Close stops the host: the ticker, the transport, the workers (each
// finishes the group it is processing), then every replica.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	err := h.tr.Close()
	h.sched.stop()
	h.mu.Lock()
	reps := h.list
	h.reps, h.list = map[Key]*Replica{}, nil
	h.mu.Unlock()
	// Replicas close closeParallel at a time: each close syncs its log
	// and raft state, and those fsyncs overlap (one at a time, a single
	// node with 2100 partitions outlasted a 20 s stop on a loaded machine).
	errs := make([]error, len(reps))
	var closing sync.WaitGroup
	slots := make(chan struct{}, closeParallel)
	for i, r := range reps {
		slots <- struct{}{}
		closing.Add(1)
		go func() {
			defer closing.Done()
			defer func() { <-slots }()
			errs[i] = r.close()
		}()
	}
	closing.Wait()
	return errors.Join(append(errs, err)...)
}

// closeParallel is how many replicas Close closes at once.
const closeParallel = 16

// tickLoop is the host's one ticker: every TickInterval each group owes one
// more tick (at most maxTicks) and is scheduled.
func (h *Host) tickLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		h.mu.RLock()
		list := h.list
		h.mu.RUnlock()
		for _, r := range list {
			r.inMu.Lock()
			if r.in.ticks < maxTicks {
				r.in.ticks++
			}
			r.inMu.Unlock()
		}
		h.sched.enqueueAll(list)
	}
}

// Refused returns how many of the peers' messages the host refused, by
// reason (see Refusal); the transport counts its own.
func (h *Host) Refused() map[string]int64 {
	out := map[string]int64{}
	h.refused.Snapshot(out, false)
	return out
}

// FailedReplicas is the number of open replicas that stopped after a
// failure (OnFailed): partitions offline on this broker.
func (h *Host) FailedReplicas() int { return int(h.failed.Load()) }

func (h *Host) refuse(why Refusal, from NodeID, e Envelope) {
	h.refused.Add(int(why), func(ev *zerolog.Event) {
		ev.Int32("peer", int32(from)).Hex("topic_id", e.Group.TopicID[:]).Int32("partition", e.Group.Index).
			Stringer("msg_type", e.Msg.GetType()).Int32("msg_from_node", int32(nodeOf(e.Msg.GetFrom()))).Uint64("term", e.Msg.GetTerm())
	})
}

// receive takes a batch from a peer and queues each message on its group,
// after the checks that need no group state (checkEnvelope); the group's
// worker makes the others (Replica.checkLocked).
func (h *Host) receive(from NodeID, msgs []Envelope) {
	self := raftID(h.cfg.Node)
	h.mu.RLock()
	defer h.mu.RUnlock()
	var last *Replica
	for _, e := range msgs {
		if why, ok := checkEnvelope(self, from, e.Msg); !ok {
			h.refuse(why, from, e)
			continue
		}
		r := h.reps[e.Group]
		if r == nil {
			// Not open here: deleted, moved away or not opened yet (raft
			// retries; routine while a broker starts, so not logged), or
			// never assigned.
			h.refused.Count(int(RefusedGroup))
			continue
		}
		r.inMu.Lock()
		if len(r.in.msgs) < maxQueuedMsgs && !r.in.closed {
			r.in.msgs = append(r.in.msgs, e.Msg)
		}
		r.inMu.Unlock()
		if r != last && last != nil {
			h.sched.enqueue(last)
		}
		last = r
	}
	if last != nil {
		h.sched.enqueue(last)
	}
}

// send hands a Ready's messages to the transport, one batch per peer.
func (h *Host) send(r *Replica, msgs []*raftpb.Message) {
	if len(msgs) == 0 {
		return
	}
	if len(msgs) == 1 {
		m := msgs[0]
		h.tr.Send(nodeOf(m.GetTo()), []Envelope{{Group: r.key, Msg: m}})
		if m.GetType() == raftpb.MsgSnap {
			r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
		}
		return
	}
	by := map[uint64][]Envelope{}
	for _, m := range msgs {
		by[m.GetTo()] = append(by[m.GetTo()], Envelope{Group: r.key, Msg: m})
	}
	for to, envs := range by {
		h.tr.Send(nodeOf(to), envs)
	}
	for _, m := range msgs {
		if m.GetType() == raftpb.MsgSnap {
			// Snapshots are a few hundred bytes and travel like any
			// message; if one is lost the follower rejects the next
			// append and the leader sends it again.
			r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
		}
	}
}

// ErrPlainLog: a partition directory written by the plain local logs of
// earlier versions (a broker without replica.listen, `sluice dev`), which
// have no raft state. CheckDir refuses it.
var ErrPlainLog = errors.New("replica: partition directory written by a plain local log")

// CheckDir refuses a data directory that holds a partition written by a
// plain local log of earlier versions: a partition directory with record
// data but no raft state. Every partition is now a raft group (a one-voter
// group on a single node), whose offsets are those of its raft entries; a
// plain log's batches carry no raft term, so they are not taken over. It is
// called before any replica opens, so the broker refuses to start with a
// message that says what to do rather than serving without the partition.
func CheckDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var plain []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		pdir := filepath.Join(dir, e.Name())
		if _, err := readTopicID(pdir); err != nil {
			continue // not a partition directory
		}
		if _, err := os.Stat(filepath.Join(pdir, stateFileName)); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		files, err := os.ReadDir(pdir)
		if err != nil {
			return err
		}
		for _, f := range files {
			if filepath.Ext(f.Name()) != ".log" {
				continue
			}
			if fi, err := f.Info(); err == nil && fi.Size() > 0 {
				plain = append(plain, e.Name())
				break
			}
		}
	}
	if len(plain) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s holds %d partition(s) (%s) written by an earlier sluice without raft (`sluice dev` kept plain local logs; every partition is now a raft group, a one-voter group on a single node): this version does not read them. run the earlier version to copy the topics you need out with a Kafka client (MirrorMaker, kcat), then start this one on an empty data directory (the data in this one is lost)",
		ErrPlainLog, dir, len(plain), strings.Join(plain, ", "))
}
