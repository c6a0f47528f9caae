package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/protocol"
)

// testBatch encodes one v2 batch of n records whose values are value-i,
// with base offset 0 and a valid CRC. pid < 0 makes it non-idempotent.
func testBatch(value string, n int, pid int64, epoch int16, seq int32) []byte {
	var recs []byte
	for i := range n {
		var r []byte
		r = append(r, 0)
		r = binary.AppendVarint(r, int64(i))
		r = binary.AppendVarint(r, int64(i))
		r = binary.AppendVarint(r, -1)
		v := fmt.Sprintf("%s-%d", value, i)
		r = binary.AppendVarint(r, int64(len(v)))
		r = append(r, v...)
		r = binary.AppendVarint(r, 0)
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	if pid < 0 {
		epoch, seq = -1, -1
	}
	h := protocol.BatchHeader{
		Size:            int64(protocol.BatchHeaderSize + len(recs)),
		LeaderEpoch:     -1,
		LastOffsetDelta: int32(n - 1),
		BaseTimestamp:   1700000000000,
		MaxTimestamp:    1700000000000 + int64(n-1),
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		BaseSequence:    seq,
		RecordCount:     int32(n),
	}
	b := make([]byte, protocol.BatchHeaderSize, protocol.BatchHeaderSize+len(recs))
	h.Put(b)
	b = append(b, recs...)
	protocol.Batch(b).SetCRC()
	return b
}

// body is what identifies a batch independent of its offset and epoch.
func body(b []byte) []byte { return b[protocol.BatchMagicAt:] }

type testCluster struct {
	t       *testing.T
	net     *MemNetwork
	root    string
	key     Key
	topic   string
	members Members
	opts    ReplicaOptions
	cfg     HostConfig // template

	// wal runs every node's logs under a group-commit Flusher with the
	// broker-wide write-ahead log (kept in the node's directory, beside the
	// partition directories).
	wal bool
	// joining: nodes that start with Host.OpenJoining (members is then
	// the group's initial configuration, which they are not in).
	joining map[NodeID]bool
	// master: the async master the test records, as the metastore does
	// once a master is its partition's sole voter (0: none recorded).
	master NodeID
	// takeover: the last promotion's takeover point the test records
	// with master (nil: no promotion).
	takeover *Takeover

	mu       sync.Mutex
	seq      int32 // next sequence of the idem producer
	hosts    map[NodeID]*Host
	reps     map[NodeID]*Replica
	flushers map[NodeID]*log.Flusher
}

func testLogger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
}

func smallLogConfig() log.Config {
	c := log.DefaultConfig()
	c.SegmentBytes = 16 << 10
	c.IndexIntervalBytes = 512
	return c
}

func newTestCluster(t *testing.T, voters, learners []NodeID, opts ReplicaOptions, tweak ...func(*HostConfig)) *testCluster {
	t.Helper()
	if opts.Log.SegmentBytes == 0 {
		opts.Log = smallLogConfig()
	}
	c := &testCluster{
		t: t, net: NewMemNetwork(uint64(time.Now().UnixNano())), root: t.TempDir(),
		key:     Key{TopicID: [16]byte{1, 2, 3}, Index: 7},
		topic:   "t",
		members: Members{Voters: voters, Learners: learners},
		opts:    opts,
		cfg: HostConfig{
			TickInterval:   10 * time.Millisecond,
			ElectionTicks:  15,
			HeartbeatTicks: 2,
			Workers:        4,
			MaxFollowerLag: 500 * time.Millisecond,
			Logger:         testLogger(t),
		},
		hosts:    map[NodeID]*Host{},
		reps:     map[NodeID]*Replica{},
		flushers: map[NodeID]*log.Flusher{},
	}
	// As the metastore does for a broker: the group's members, and the
	// nodes the test adds.
	c.cfg.Assigned = func(_ Key, n NodeID) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, running := c.hosts[n]
		return running || c.joining[n] || slices.Contains(c.members.Voters, n) || slices.Contains(c.members.Learners, n)
	}
	c.cfg.AsyncMaster = func(Key) (NodeID, *Takeover, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.master, c.takeover, c.master != 0
	}
	for _, f := range tweak {
		f(&c.cfg)
	}
	return c.startAll()
}

// slowElections keeps a leader in place on a loaded machine for tests that
// hold on to one leader (election timeout 1-2s instead of 150-300ms).
func slowElections(cfg *HostConfig) { cfg.ElectionTicks = 100 }

func (c *testCluster) startAll() *testCluster {
	t := c.t
	for _, n := range append(append([]NodeID(nil), c.members.Voters...), c.members.Learners...) {
		c.start(n)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes() {
			c.stop(n)
		}
	})
	return c
}

// newWALCluster is newTestCluster with the log's write-ahead log on.
func newWALCluster(t *testing.T, voters, learners []NodeID, opts ReplicaOptions) *testCluster {
	c := newTestCluster(t, nil, nil, opts)
	c.members = Members{Voters: voters, Learners: learners}
	c.wal = true
	return c.startAll()
}

func (c *testCluster) nodes() []NodeID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []NodeID
	for n := range c.hosts {
		out = append(out, n)
	}
	return out
}

func (c *testCluster) start(n NodeID) *Replica {
	c.t.Helper()
	cfg := c.cfg
	cfg.Node = n
	cfg.Dir = filepath.Join(c.root, fmt.Sprint("node", n))
	cfg.Transport = c.net.Transport(n)
	cfg.Logger = cfg.Logger.With().Int32("node", int32(n)).Logger()
	if c.wal {
		f, err := log.OpenFlusher(log.FlusherConfig{Policy: log.FlushGroup, Dir: filepath.Join(cfg.Dir, "wal"), Logger: cfg.Logger})
		if err != nil {
			c.t.Fatal(err)
		}
		f.Start()
		cfg.Flusher = f
		c.mu.Lock()
		c.flushers[n] = f
		c.mu.Unlock()
	}
	h, err := NewHost(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	open := h.Open
	if c.joining[n] {
		open = h.OpenJoining
	}
	r, err := open(c.topic, c.key, c.members, c.opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.hosts[n], c.reps[n] = h, r
	c.mu.Unlock()
	return r
}

func (c *testCluster) stop(n NodeID) {
	c.mu.Lock()
	h, f := c.hosts[n], c.flushers[n]
	delete(c.hosts, n)
	delete(c.reps, n)
	delete(c.flushers, n)
	c.mu.Unlock()
	if h != nil {
		if err := h.Close(); err != nil {
			c.t.Errorf("closing host %d: %v", n, err)
		}
	}
	if f != nil {
		f.Close()
	}
}

func (c *testCluster) rep(n NodeID) *Replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reps[n]
}

func (c *testCluster) running() map[NodeID]*Replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[NodeID]*Replica{}
	for n, r := range c.reps {
		out[n] = r
	}
	return out
}

// checkFor polls fn until it returns nil or timeout passes.
func checkFor(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = fn(); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out after %v: %v", timeout, err)
}

// leader waits for a leader among the running replicas, optionally one that
// is not `not`.
func (c *testCluster) leader(not ...NodeID) (NodeID, *Replica) {
	c.t.Helper()
	var ln NodeID
	var lr *Replica
	checkFor(c.t, 10*time.Second, func() error {
	next:
		for n, r := range c.running() {
			for _, x := range not {
				if x == n {
					continue next
				}
			}
			if r.IsLeader() {
				ln, lr = n, r
				return nil
			}
		}
		return errors.New("no leader")
	})
	return ln, lr
}

// produce proposes batch at the current leader until it is answered,
// retrying on leadership changes. It returns the result and the batch
// as stored.
func (c *testCluster) produce(batch []byte, acks Acks) ProduceResult {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		_, r := c.leader()
		b := append([]byte(nil), batch...)
		p, err := r.Propose(b, acks)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			var res ProduceResult
			res, err = p.Wait(ctx)
			cancel()
			if err == nil {
				return res
			}
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrProposalDropped) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrReplicaClosed) {
			c.t.Fatalf("produce: %v", err)
		}
		c.t.Logf("produce: retrying after %v", err)
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("produce: no answer in 20s")
	return ProduceResult{}
}

// idem returns the next batch of the cluster's idempotent producer, so
// that produce's retries (after a leadership change or a timeout) are
// deduplicated and an acknowledged batch must be stored exactly once.
func (c *testCluster) idem(value string, n int) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := testBatch(value, n, 1000, 0, c.seq)
	c.seq += int32(n)
	return b
}

// produceErr is produce for a batch expected to be refused: it retries
// leadership changes and returns the refusal.
func (c *testCluster) produceErr(batch []byte, acks Acks) error {
	c.t.Helper()
	for range 100 {
		_, r := c.leader()
		p, err := r.Propose(append([]byte(nil), batch...), acks)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = p.Wait(ctx)
			cancel()
		}
		if !errors.Is(err, ErrNotLeader) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("no leader kept its term long enough")
	return nil
}

// logBytes reads a replica's whole log, from its start to its end,
// committed or not.
func logBytes(t testing.TB, r *Replica) []byte {
	t.Helper()
	var out []byte
	off := r.LogStartOffset()
	end := r.LogEndOffset()
	for off < end {
		rr, err := r.Log().Read(off, 1<<20, end)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		if len(rr.Data) == 0 {
			break
		}
		out = append(out, rr.Data...)
		off = rr.NextOffset
	}
	return out
}

type storedBatch struct {
	base, last int64
	epoch      int32
	control    bool
	raw        []byte
}

func batchesOf(t testing.TB, b []byte) []storedBatch {
	t.Helper()
	var out []storedBatch
	for len(b) > 0 {
		h, err := parseBatch(b, false)
		if err != nil || h.Size > int64(len(b)) {
			t.Fatalf("bad batch in log: %v", err)
		}
		out = append(out, storedBatch{base: h.BaseOffset, last: h.LastOffset(), epoch: h.LeaderEpoch, control: h.IsControl(), raw: b[:h.Size]})
		b = b[h.Size:]
	}
	return out
}

// converged waits until every running replica has the same high watermark
// (at least minHW) and byte-identical logs, checked from the latest log
// start among them.
func (c *testCluster) converged(minHW int64, timeout time.Duration) {
	c.t.Helper()
	checkFor(c.t, timeout, func() error {
		reps := c.running()
		var hw int64 = -1
		var first NodeID = -1
		for n, r := range reps {
			if hw == -1 {
				hw, first = r.HighWatermark(), n
			}
			if r.HighWatermark() != hw {
				return fmt.Errorf("node %d hw %d, node %d hw %d", n, r.HighWatermark(), first, hw)
			}
			if r.LogEndOffset() != hw {
				return fmt.Errorf("node %d log end %d, hw %d", n, r.LogEndOffset(), hw)
			}
		}
		if hw < minHW {
			return fmt.Errorf("hw %d < %d", hw, minHW)
		}
		return nil
	})
	c.sameBytes()
	c.dense()
}

// dense checks that every running replica's log holds data batches only,
// at contiguous offsets from its start to its end: raft's own entries
// take no offset.
func (c *testCluster) dense() {
	c.t.Helper()
	for n, r := range c.running() {
		if err := denseLog(c.t, r); err != nil {
			c.t.Fatalf("node %d: %v", n, err)
		}
	}
}

func denseLog(t testing.TB, r *Replica) error {
	start, end := r.LogStartOffset(), r.LogEndOffset()
	next := start
	for i, x := range batchesOf(t, logBytes(t, r)) {
		if x.control {
			return fmt.Errorf("control batch at offset %d", x.base)
		}
		if (i == 0 && (x.base > start || x.last < start)) || (i > 0 && x.base != next) {
			return fmt.Errorf("batch %d at offsets %d..%d, expected one at %d (log %d..%d)", i, x.base, x.last, next, start, end)
		}
		next = x.last + 1
	}
	if next != end {
		return fmt.Errorf("batches end at %d, log end %d", next, end)
	}
	return nil
}

func (c *testCluster) sameBytes() {
	c.t.Helper()
	reps := c.running()
	var start int64
	for _, r := range reps {
		start = max(start, r.LogStartOffset())
	}
	var ref []byte
	var refN NodeID
	for n, r := range reps {
		all := batchesOf(c.t, logBytes(c.t, r))
		var b []byte
		for _, x := range all {
			if x.base >= start {
				b = append(b, x.raw...)
			}
		}
		if ref == nil {
			ref, refN = b, n
			continue
		}
		if !bytes.Equal(ref, b) {
			c.t.Fatalf("logs of node %d (%d bytes) and node %d (%d bytes) differ from offset %d", refN, len(ref), n, len(b), start)
		}
	}
}

var errOutOfOrder = log.ErrOutOfOrderSequence

func marshalForTest(m *raftpb.ConfChange) ([]byte, error) { return proto.Marshal(m) }

// promote promotes n's replica from takeover tk (Host.Promote) and takes
// the new replica as the cluster's replica of n.
func (c *testCluster) promote(n NodeID, tk Takeover) {
	c.t.Helper()
	if err := c.hosts[n].Promote(c.key, tk); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.reps[n], _ = c.hosts[n].Get(c.key)
	c.mu.Unlock()
}

// follow makes n's replica follow master from takeover tk (Host.Follow),
// takes the new replica as the cluster's replica of n, and returns how
// many records it cut.
func (c *testCluster) follow(n, master NodeID, tk Takeover) int64 {
	c.t.Helper()
	r, cut, err := c.hosts[n].Follow(c.topic, c.key, c.members, c.opts, master, tk)
	if err != nil {
		c.t.Fatalf("node %d following %d: %v", n, master, err)
	}
	c.mu.Lock()
	c.reps[n] = r
	c.mu.Unlock()
	return cut
}
