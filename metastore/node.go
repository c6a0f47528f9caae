package metastore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/internal/raftlog"
)

// Node is one voter of the metadata raft group: etcd raft's Node driven by
// the Ready loop in raftnode.go, with its log, hard state, applied state and
// snapshots in one bbolt file.
type Node struct {
	cfg   Config
	lg    zerolog.Logger
	id    uint64
	nonce uint64 // random per process: tells our proposals from others'
	db    *bolt.DB
	rn    raft.Node
	ms    *raft.MemoryStorage
	tr    Transport
	view  *view

	seq atomic.Uint64
	// leaseWarned: a configured broker lease other than the recorded one was logged.
	leaseWarned atomic.Bool
	// propc queues commands for proposeLoop by pointer: a buffered
	// channel of command values (about 450 bytes each) held 3.6 MiB of
	// heap for its 8,192 slots from the start, live heap that the
	// collector's goal doubled on a broker of tens of MiB.
	propc   chan *command
	waitMu  sync.Mutex
	waiters map[uint64]chan result

	// Applied index, with a channel closed and replaced on every advance.
	appliedMu sync.Mutex
	applied   uint64
	appliedCh chan struct{}

	// Ready-loop-owned state.
	confState *pb.ConfState
	snapIndex uint64
	isLeader  bool
	// removedSelf: an applied entry removed this node; it stops unless
	// entries committed after it add it back (stopIfRemoved).
	removedSelf bool

	leader atomic.Uint64
	term   atomic.Uint64

	membersMu sync.RWMutex
	members   map[uint64]string

	// Watch history: events with Rev > histFloor are all in hist.
	histMu    sync.Mutex
	hist      []event
	histFloor uint64
	histRev   uint64 // applied index the history is complete up to
	histMax   int
	// histWeight is the sum of the history's event weights, at most
	// histMaxWeight (view.go).
	histWeight int
	histCh     chan struct{}

	// ReadIndex batching (read.go).
	readMu     sync.Mutex
	readNext   *readWaiter
	readReqc   chan struct{}
	readStatec chan raft.ReadState

	leases leaseTracker
	guard  guard // checks of peers' raft messages (guard.go)
	stats  nodeStats
	confMu sync.Mutex // one membership change at a time (handle.go)

	stopOnce sync.Once
	stopc    chan struct{}
	wg       sync.WaitGroup
	closeErr error
}

const dbFileName = "meta.db"

// Open opens (or creates) the node's data directory and starts it. On the
// first start of an empty directory it bootstraps raft with the configured
// peers (or, with Join, waits to be added); afterwards it restarts from disk.
// A single-voter node campaigns at once, so it is usable within
// milliseconds; Open waits for it to be ready.
func Open(cfg Config) (*Node, error) {
	cfg.fillDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Peers) == 0 && !cfg.Join {
		cfg.Peers = map[uint64]string{cfg.ID: cfg.Listen}
	}
	if err := fsutil.MkdirAllSync(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("metastore: %w", err)
	}
	dbPath := filepath.Join(cfg.DataDir, dbFileName)
	_, dbErr := os.Stat(dbPath)
	db, err := bolt.Open(dbPath, 0o600, &bolt.Options{
		Timeout:         5 * time.Second,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 64 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("metastore: open db: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		// A database written before the object reference counts
		// existed gets them from its chunk entries, once.
		noRefs := tx.Bucket(bucketSharedRefs) == nil
		if err := ensureBuckets(tx); err != nil {
			return err
		}
		if noRefs {
			if err := rebuildSharedRefs(tx); err != nil {
				return err
			}
		}
		// The data dir belongs to one raft id forever.
		rb := tx.Bucket(bucketRaft)
		if v := rb.Get(keyNodeID); v != nil && getU64(v) != cfg.ID {
			return fmt.Errorf("data dir %s belongs to node %d, not %d", cfg.DataDir, getU64(v), cfg.ID)
		}
		return rb.Put(keyNodeID, u64(cfg.ID))
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("metastore: init db: %w", err)
	}
	fsutil.Synced(dbPath)
	// Images a crash left behind while a peer's snapshot was checked
	// (guard.go).
	left, _ := filepath.Glob(filepath.Join(cfg.DataDir, "snapshot.check-*"))
	for _, f := range left {
		_ = os.Remove(f)
	}
	// bbolt syncs the file it creates but not its directory entry: without
	// this a power cut after the first start could lose the database while
	// raft had already voted from it.
	if errors.Is(dbErr, os.ErrNotExist) {
		if err := fsutil.SyncDir(cfg.DataDir); err != nil {
			db.Close()
			return nil, fmt.Errorf("metastore: %w", err)
		}
	}
	disk, err := loadRaftState(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("metastore: load raft state: %w", err)
	}
	ms, err := disk.newMemoryStorage()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("metastore: rebuild log: %w", err)
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	n := &Node{
		cfg:        cfg,
		lg:         cfg.Logger.With().Str("component", "metastore").Uint64("meta_id", cfg.ID).Logger(),
		id:         cfg.ID,
		nonce:      binary.BigEndian.Uint64(nonce[:]),
		db:         db,
		ms:         ms,
		view:       newView(),
		propc:      make(chan *command, 8192),
		waiters:    map[uint64]chan result{},
		appliedCh:  make(chan struct{}),
		members:    map[uint64]string{},
		histCh:     make(chan struct{}),
		readReqc:   make(chan struct{}, 1),
		readStatec: make(chan raft.ReadState, 64),
		stopc:      make(chan struct{}),
	}
	n.leases.init()
	{
		last, _ := ms.LastIndex()
		var commit uint64
		if disk.hs != nil {
			commit = disk.hs.GetCommit()
		}
		n.guard.init(n.lg, last, commit)
	}

	// State machine image and members from disk.
	var img *image
	_ = db.View(func(tx *bolt.Tx) error {
		img = loadImage(tx)
		if v := tx.Bucket(bucketMeta).Get(keyMembers); v != nil {
			mustUnmarshal(v, &n.members)
		}
		return nil
	})
	n.view.loadImage(img)
	n.applied = disk.applied
	n.histFloor = disk.applied
	n.histRev = disk.applied
	n.histMax = cfg.WatchHistory
	if disk.snap != nil {
		n.snapIndex = disk.snap.GetIndex()
		n.confState = proto.Clone(disk.snap.GetConfState()).(*pb.ConfState)
	} else {
		n.confState = &pb.ConfState{}
	}

	rcfg := &raft.Config{
		ID:                        cfg.ID,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   ms,
		Applied:                   n.snapIndex, // entries after the snapshot are replayed; apply skips those <= applied (cindex)
		MaxSizePerMsg:             1 << 20,
		MaxCommittedSizePerReady:  8 << 20,
		MaxUncommittedEntriesSize: 64 << 20,
		MaxInflightMsgs:           256,
		CheckQuorum:               true,
		PreVote:                   true,
		StepDownOnRemoval:         true,
		Logger:                    raftlog.New(n.lg, raftlog.Options{ExitOnFatal: true}),
	}
	fresh := disk.hs == nil && disk.snap == nil && len(disk.ents) == 0
	switch {
	case fresh && !cfg.Join:
		var peers []raft.Peer
		for _, id := range sortedIDs(cfg.Peers) {
			ctx, _ := json.Marshal(memberContext{Addr: cfg.Peers[id]})
			peers = append(peers, raft.Peer{ID: id, Context: ctx})
		}
		n.rn = raft.StartNode(rcfg, peers)
	default:
		n.rn = raft.RestartNode(rcfg)
	}

	if n.tr = cfg.Transport; n.tr == nil && cfg.Listen != "" {
		tr := NewTCPTransport(cfg.ID, cfg.Listen, cfg.Logger)
		tr.SetTLS(cfg.TLS)
		n.tr = tr
	}
	if n.tr == nil {
		n.tr = nopTransport{}
	}
	peers := map[uint64]string{}
	for id, a := range cfg.Peers {
		peers[id] = a
	}
	for id, a := range n.members {
		peers[id] = a
	}
	for id, a := range peers {
		if id != n.id {
			n.tr.AddPeer(id, a)
		}
	}
	if err := n.tr.Start(n); err != nil {
		n.rn.Stop()
		db.Close()
		return nil, fmt.Errorf("metastore: transport: %w", err)
	}

	// A group whose only voter is this node (sluice dev) campaigns at once
	// instead of waiting an election timeout. Membership on disk wins over
	// the configured peers (it may have changed with AddVoter).
	voters := len(cfg.Peers)
	if len(n.members) > 0 {
		voters = len(n.members)
		if _, ok := n.members[n.id]; !ok {
			voters = 0
		}
	}
	single := !cfg.Join && voters == 1
	n.wg.Add(4)
	go n.run()
	go n.proposeLoop()
	go n.readLoop()
	go n.leaseLoop()

	if single {
		_ = n.rn.Campaign(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.WaitReady(ctx); err != nil {
			n.Close()
			return nil, fmt.Errorf("metastore: single node did not become ready: %w", err)
		}
	}
	n.lg.Info().Uint64("applied", n.appliedIndex()).Bool("fresh", fresh).Msg("metastore node started")
	return n, nil
}

// WaitReady blocks until the node knows a leader and the cluster id is set.
func (n *Node) WaitReady(ctx context.Context) error {
	for {
		if n.leader.Load() != 0 && n.view.ClusterID() != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stopc:
			return ErrStopped
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Close stops the node: raft, the loops, the transport and the database.
// Pending requests fail with ErrStopped.
func (n *Node) Close() error {
	n.stopOnce.Do(func() {
		close(n.stopc)
		n.rn.Stop()
		n.tr.Close()
		n.wg.Wait()
		n.closeErr = n.db.Close()
	})
	return n.closeErr
}

// Addr is the internal listener's address (useful with port 0), or "" for
// a node without one.
func (n *Node) Addr() string {
	if t, ok := n.tr.(*TCPTransport); ok {
		return t.Addr()
	}
	return ""
}

// ID is this node's raft id.
func (n *Node) ID() uint64 { return n.id }

// Refused returns what this node refused from peers, by reason
// (RefusalReasons): raft messages (guard.go) and, with the TCP
// transport, connections and frames (TCPTransport.Refused).
func (n *Node) Refused() map[string]int64 {
	out := map[string]int64{}
	n.guard.refused.Snapshot(out, true)
	if t, ok := n.tr.(*TCPTransport); ok {
		t.refused.Snapshot(out, true)
	}
	return out
}

// Leader is the raft leader this node knows of (0: none).
func (n *Node) Leader() uint64 { return n.leader.Load() }

// Status describes a node for admin endpoints and tests.
type Status struct {
	ID        uint64            `json:"id"`
	Leader    uint64            `json:"leader"`
	Term      uint64            `json:"term"`
	Applied   uint64            `json:"applied"`
	Commit    uint64            `json:"commit"`
	Snapshot  uint64            `json:"snapshot"`
	FirstLog  uint64            `json:"first_log"`
	Voters    []uint64          `json:"voters"`
	Learners  []uint64          `json:"learners"`
	Members   map[uint64]string `json:"members"`
	ClusterID string            `json:"cluster_id"`
}

// Status returns this node's view of the group.
func (n *Node) Status() Status {
	st := n.rn.Status()
	first, _ := n.ms.FirstIndex()
	s := Status{
		ID: n.id, Leader: st.Lead, Term: st.GetTerm(), Applied: n.appliedIndex(), Commit: st.GetCommit(),
		FirstLog: first, ClusterID: n.view.ClusterID(),
	}
	for id := range st.Config.Voters.IDs() {
		s.Voters = append(s.Voters, id)
	}
	for id := range st.Config.Learners {
		s.Learners = append(s.Learners, id)
	}
	s.Members = n.Members()
	s.Snapshot = first - 1
	return s
}

// Members returns the raft members and their internal addresses.
func (n *Node) Members() map[uint64]string {
	n.membersMu.RLock()
	defer n.membersMu.RUnlock()
	out := make(map[uint64]string, len(n.members))
	for k, v := range n.members {
		out[k] = v
	}
	return out
}

// Client returns a client that uses this node directly (no network): the
// embedded form, as `sluice dev` runs it. Its cache is the node's own view.
func (n *Node) Client() *Client {
	return newClient(localBackend{n}, n.view, nil)
}

func (n *Node) appliedIndex() uint64 {
	n.appliedMu.Lock()
	defer n.appliedMu.Unlock()
	return n.applied
}

func (n *Node) setApplied(i uint64) {
	n.appliedMu.Lock()
	if i > n.applied {
		n.applied = i
		close(n.appliedCh)
		n.appliedCh = make(chan struct{})
	}
	n.appliedMu.Unlock()
}

// waitApplied blocks until the applied index reached i.
func (n *Node) waitApplied(ctx context.Context, i uint64) error {
	for {
		n.appliedMu.Lock()
		cur, ch := n.applied, n.appliedCh
		n.appliedMu.Unlock()
		if cur >= i {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.stopc:
			return ErrStopped
		}
	}
}

// propose hands cmd to the batcher and waits for its result. The caller's
// context bounds the wait; when it ends before the entry was applied the
// outcome is unknown (ErrTimeout).
func (n *Node) propose(ctx context.Context, cmd command) (result, error) {
	seq := n.seq.Add(1)
	cmd.Seq = seq
	ch := make(chan result, 1)
	n.waitMu.Lock()
	n.waiters[seq] = ch
	n.waitMu.Unlock()
	drop := func() {
		n.waitMu.Lock()
		delete(n.waiters, seq)
		n.waitMu.Unlock()
	}
	select {
	case n.propc <- &cmd:
	case <-ctx.Done():
		drop()
		return result{}, ctx.Err()
	case <-n.stopc:
		drop()
		return result{}, ErrStopped
	}
	select {
	case r := <-ch:
		return r, codeErr(r.Err)
	case <-ctx.Done():
		drop()
		return result{}, ErrTimeout
	case <-n.stopc:
		// It may have been proposed and may yet apply elsewhere.
		drop()
		return result{}, ErrTimeout
	}
}

// proposeLoop groups queued commands into one raft entry (group commit):
// while one proposal is being handed to raft, the next batch accumulates.
func (n *Node) proposeLoop() {
	defer n.wg.Done()
	for {
		var first *command
		select {
		case first = <-n.propc:
		case <-n.stopc:
			return
		}
		b := &proposalBatch{Node: n.id, Nonce: n.nonce, Cmds: []command{*first}}
		size := cmdSize(first)
	drain:
		for len(b.Cmds) < n.cfg.MaxBatchCommands && size < maxBatchBytes {
			select {
			case c := <-n.propc:
				b.Cmds = append(b.Cmds, *c)
				size += cmdSize(c)
			default:
				break drain
			}
		}
		n.proposeBatch(encodeBatch(b), b)
	}
}

// maxBatchBytes bounds one entry's estimated size (group blobs can be
// large); a single bigger command still goes alone.
const maxBatchBytes = 1 << 20

func cmdSize(c *command) int {
	sz := 128 + len(c.State) + len(c.Group)
	for _, o := range c.Offsets {
		sz += 24 + len(o.Topic) + len(o.Metadata)
	}
	if c.Spec != nil {
		sz += 64 * int(max(c.Spec.Partitions, 1))
	}
	return sz
}

func (n *Node) proposeBatch(data []byte, b *proposalBatch) {
	deadline := time.Now().Add(n.cfg.RequestTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
		err := n.rn.Propose(ctx, data)
		cancel()
		if err == nil {
			return
		}
		if errors.Is(err, raft.ErrStopped) {
			return
		}
		// Dropped (no leader yet, or flow control): it was never
		// appended, so proposing again cannot apply it twice.
		if time.Now().After(deadline) {
			n.failBatch(b, ErrNotLeader)
			return
		}
		select {
		case <-n.stopc:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (n *Node) failBatch(b *proposalBatch, err error) {
	n.waitMu.Lock()
	for _, c := range b.Cmds {
		if ch, ok := n.waiters[c.Seq]; ok {
			ch <- result{Err: errCode(err)}
			delete(n.waiters, c.Seq)
		}
	}
	n.waitMu.Unlock()
}

func (n *Node) deliver(seq uint64, r result) {
	n.waitMu.Lock()
	ch, ok := n.waiters[seq]
	delete(n.waiters, seq)
	n.waitMu.Unlock()
	if ok {
		ch <- r
	}
}

// ReportUnreachable implements Handler.
func (n *Node) ReportUnreachable(id uint64) { n.rn.ReportUnreachable(id) }

// ReportSnapshot implements Handler.
func (n *Node) ReportSnapshot(id uint64, ok bool) {
	if ok {
		n.rn.ReportSnapshot(id, raft.SnapshotFinish)
	} else {
		n.rn.ReportSnapshot(id, raft.SnapshotFailure)
	}
}

// nopTransport serves a single node with no listener.
type nopTransport struct{}

func (nopTransport) Start(Handler) error    { return nil }
func (nopTransport) Send([]*pb.Message)     {}
func (nopTransport) AddPeer(uint64, string) {}
func (nopTransport) RemovePeer(uint64)      {}
func (nopTransport) Close() error           { return nil }
func (nopTransport) Call(context.Context, uint64, *Request) (*Response, error) {
	return nil, ErrUnreachable
}

// memberContext is the Context of a conf change: the member's address and,
// for changes proposed through AddVoter/RemoveVoter, who waits for it.
type memberContext struct {
	Addr  string `json:"addr,omitempty"`
	Node  uint64 `json:"n,omitempty"`
	Nonce uint64 `json:"x,omitempty"`
	Seq   uint64 `json:"s,omitempty"`
}

type nodeStats struct {
	readies, readyNanos, txNanos, entriesApplied, cmdsApplied atomic.Int64
	leasesExpired                                             atomic.Int64
}

// Stats are counters for metrics: Ready batches handled, time spent in
// them and in their bbolt transactions, entries and commands applied.
type Stats struct {
	Readies        int64
	ReadyTime      time.Duration
	TxTime         time.Duration
	EntriesApplied int64
	CmdsApplied    int64
	// LeasesExpired counts the broker leases this node, as leader,
	// expired (committed expire_broker commands it proposed).
	LeasesExpired int64
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{
		Readies: n.stats.readies.Load(), ReadyTime: time.Duration(n.stats.readyNanos.Load()),
		TxTime: time.Duration(n.stats.txNanos.Load()), EntriesApplied: n.stats.entriesApplied.Load(),
		CmdsApplied: n.stats.cmdsApplied.Load(), LeasesExpired: n.stats.leasesExpired.Load(),
	}
}
