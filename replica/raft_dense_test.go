package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-broker/sluice/log"
)

// denseStore is a raftStorage over a log of its own in dir, driven
// directly (no RawNode) to check how raft's entries are stored.
type denseStore struct {
	t   *testing.T
	dir string
	l   *log.Log
	s   *raftStorage
}

func openDenseStore(t *testing.T, dir string) (*denseStore, error) {
	t.Helper()
	l, err := log.Open(dir, smallLogConfig(), log.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := openStorage(dir, l, &raftpb.ConfState{Voters: []uint64{1}}, testLogger(t))
	if err != nil {
		l.Close()
		return nil, err
	}
	return &denseStore{t: t, dir: dir, l: l, s: s}, nil
}

func (d *denseStore) close() {
	d.t.Helper()
	if err := d.s.close(); err != nil {
		d.t.Fatal(err)
	}
	if err := d.l.Close(); err != nil {
		d.t.Fatal(err)
	}
}

func (d *denseStore) reopen() *denseStore {
	d.t.Helper()
	d.close()
	n, err := openDenseStore(d.t, d.dir)
	if err != nil {
		d.t.Fatal(err)
	}
	return n
}

func (d *denseStore) append(ents ...*raftpb.Entry) {
	d.t.Helper()
	if err := d.s.append(ents, nil); err != nil {
		d.t.Fatal(err)
	}
}

// entries reads every entry back from storage (the cache dropped first, so
// they come from the log, raft.index and raft.confs).
func (d *denseStore) entries() []string {
	d.t.Helper()
	d.s.mu.Lock()
	d.s.cacheCutLocked(0)
	d.s.mu.Unlock()
	first, _ := d.s.FirstIndex()
	last, _ := d.s.LastIndex()
	ents, err := d.s.Entries(first, last+1, 1<<30)
	if err != nil {
		d.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, describeEntry(e))
	}
	return out
}

func describeEntry(e *raftpb.Entry) string {
	data := string(e.GetData())
	if e.GetType() == raftpb.EntryNormal && len(data) > 0 {
		h, _ := parseBatch(e.GetData(), true)
		data = fmt.Sprintf("batch@%d-%d/%d %x", h.BaseOffset, h.LastOffset(), h.LeaderEpoch, body(e.GetData()))
	}
	return fmt.Sprintf("%d/%d/%v/%s", e.GetIndex(), e.GetTerm(), e.GetType(), data)
}

func noopEntry(i, term uint64) *raftpb.Entry {
	return &raftpb.Entry{Index: new(i), Term: new(term), Type: new(raftpb.EntryNormal)}
}

func dataEntry(i, term uint64, value string, n int) *raftpb.Entry {
	return &raftpb.Entry{Index: new(i), Term: new(term), Type: new(raftpb.EntryNormal), Data: testBatch(value, n, -1, 0, 0)}
}

func ccEntry(t *testing.T, i, term, node uint64) *raftpb.Entry {
	b, err := marshalForTest(&raftpb.ConfChange{Type: new(raftpb.ConfChangeAddLearnerNode), NodeId: new(node)})
	if err != nil {
		t.Fatal(err)
	}
	return &raftpb.Entry{Index: new(i), Term: new(term), Type: new(raftpb.EntryConfChange), Data: b}
}

func ccV2Entry(t *testing.T, i, term, node uint64) *raftpb.Entry {
	b, err := marshalV2(&raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: new(raftpb.ConfChangeAddNode), NodeId: new(node)}}})
	if err != nil {
		t.Fatal(err)
	}
	return &raftpb.Entry{Index: new(i), Term: new(term), Type: new(raftpb.EntryConfChangeV2), Data: b}
}

// offsets lists each entry's Kafka offsets as base..last, "-" for raft's own.
func (d *denseStore) offsets() string {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	var out []string
	ms, err := d.s.metasLocked(d.s.snapIndex+1, d.s.lastIndexLocked()+1)
	if err != nil {
		return err.Error()
	}
	for _, m := range ms {
		if m.raft() {
			out = append(out, fmt.Sprintf("%d:-@%d", m.index, m.base))
		} else {
			out = append(out, fmt.Sprintf("%d:%d..%d", m.index, m.base, m.last))
		}
	}
	return strings.Join(out, " ")
}

// TestRaftDenseStorage: raft's own entries are stored with no batch and
// no offset, read back the same (configuration changes with their data),
// across a reopen, a truncated tail, a lost index tail, and a damaged
// raft.confs.
func TestRaftDenseStorage(t *testing.T) {
	dir := t.TempDir()
	d, err := openDenseStore(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	d.append(noopEntry(1, 1), dataEntry(2, 1, "a", 3), ccEntry(t, 3, 1, 7), dataEntry(4, 1, "b", 2))
	d.append(noopEntry(5, 2), ccV2Entry(t, 6, 2, 8), dataEntry(7, 2, "c", 1))
	const want = "1:-@0 2:0..2 3:-@3 4:3..4 5:-@5 6:-@5 7:5..5"
	if got := d.offsets(); got != want {
		t.Fatalf("offsets %s, want %s", got, want)
	}
	if d.l.LogEndOffset() != 6 {
		t.Fatalf("log end %d, want 6: only data takes offsets", d.l.LogEndOffset())
	}
	if end := d.s.endOffsetOf(1); end != 0 {
		t.Fatalf("end offset of the first (empty) entry %d, want 0", end)
	}
	if end := d.s.endOffsetOf(6); end != 5 {
		t.Fatalf("end offset of entry 6 %d, want 5", end)
	}
	before := d.entries()
	if len(before) != 7 || !strings.Contains(before[1], "batch@0-2/1") || !strings.Contains(before[6], "batch@5-5/2") ||
		!strings.HasPrefix(before[2], "3/1/EntryConfChange/") || !strings.HasPrefix(before[5], "6/2/EntryConfChangeV2/") {
		t.Fatalf("entries: %q", before)
	}

	d = d.reopen()
	if got, after := d.offsets(), d.entries(); got != want || !reflect.DeepEqual(after, before) {
		t.Fatalf("after reopen: offsets %s, entries %q; want %s, %q", got, after, want, before)
	}

	// Records of data entries after the last raft entry are rebuilt from
	// the log (a crash before the unsynced index reached the disk).
	d.close()
	if err := os.Truncate(filepath.Join(dir, indexFileName), 6*indexRecordSize); err != nil {
		t.Fatal(err)
	}
	if d, err = openDenseStore(t, dir); err != nil {
		t.Fatal(err)
	}
	if got, after := d.offsets(), d.entries(); got != want || !reflect.DeepEqual(after, before) {
		t.Fatalf("after losing the last index record: offsets %s, entries %q", got, after)
	}

	// A new leader's entries replace the uncommitted tail from entry 3
	// (a conf change): the log is cut at its offset, 3, raft.confs
	// forgets it, and raft.state's mark of the last raft entry known
	// durable goes back below the cut first.
	if err := d.s.saveRaftMark(^uint64(0)); err != nil || d.s.state.cur.lastRaft != 6 {
		t.Fatalf("raft mark %d, %v; want 6", d.s.state.cur.lastRaft, err)
	}
	d.append(noopEntry(3, 3), dataEntry(4, 3, "d", 4))
	if d.s.state.cur.lastRaft != 1 || d.s.lastRaft != 3 {
		t.Fatalf("after truncation: raft mark %d saved, %d held; want 1, 3", d.s.state.cur.lastRaft, d.s.lastRaft)
	}
	const want2 = "1:-@0 2:0..2 3:-@3 4:3..6"
	if got := d.offsets(); got != want2 || d.l.LogEndOffset() != 7 {
		t.Fatalf("after truncation: offsets %s, log end %d; want %s, 7", got, d.l.LogEndOffset(), want2)
	}
	if n := len(d.s.ccs.recs); n != 0 {
		t.Fatalf("raft.confs holds %d records after its entries were truncated", n)
	}
	d.append(ccEntry(t, 5, 3, 9))
	truncated := d.entries()
	d = d.reopen()
	if got, after := d.offsets(), d.entries(); got != want2+" 5:-@7" || !reflect.DeepEqual(after, truncated) {
		t.Fatalf("after truncation and reopen: offsets %s, entries %q", got, after)
	}
	d.close()

	// raft.confs without the record of a conf change the index holds.
	if err := os.Truncate(filepath.Join(dir, ccFileName), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := openDenseStore(t, dir); err == nil || !strings.Contains(err.Error(), ccFileName) {
		t.Fatalf("open with a damaged %s: %v", ccFileName, err)
	}
}

// TestRaftOldFormatRefused: a directory written when raft's entries took
// Kafka offsets (raft.state without the dense flag) is not opened.
func TestRaftOldFormatRefused(t *testing.T) {
	dir := t.TempDir()
	d, err := openDenseStore(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	d.append(noopEntry(1, 1), dataEntry(2, 1, "a", 1))
	cur := d.s.state.cur
	cur.flags = 1 // what earlier versions wrote
	if err := d.s.state.save(cur); err != nil {
		t.Fatal(err)
	}
	d.close()
	_, err = openDenseStore(t, dir)
	if !errors.Is(err, ErrOldFormat) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("open of an old directory: %v, want ErrOldFormat naming it", err)
	}
}

// TestRaftLostRaftRecordRefused: once the record of one of raft's own
// entries is known durable (raft.state's mark), an index that lost it is
// refused: its entries cannot be rebuilt from the log, and rebuilding the
// batches after it would give them wrong indexes.
func TestRaftLostRaftRecordRefused(t *testing.T) {
	dir := t.TempDir()
	d, err := openDenseStore(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	d.append(noopEntry(1, 1), dataEntry(2, 1, "a", 2), ccEntry(t, 3, 1, 5), dataEntry(4, 1, "b", 2))
	if err := d.s.saveRaftMark(^uint64(0)); err != nil {
		t.Fatal(err)
	}
	if d.s.state.cur.lastRaft != 3 {
		t.Fatalf("raft mark %d, want 3", d.s.state.cur.lastRaft)
	}
	d.close()
	idx := filepath.Join(dir, indexFileName)
	saved, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		records int
		lost    bool
	}{{3, false}, {2, true}, {0, true}} {
		if err := os.WriteFile(idx, saved[:tc.records*indexRecordSize], 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := openDenseStore(t, dir)
		if tc.lost {
			if !errors.Is(err, ErrLostCommitted) {
				t.Fatalf("index of %d records: %v, want ErrLostCommitted", tc.records, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("index of %d records: %v", tc.records, err)
		}
		if got := d.offsets(); got != "1:-@0 2:0..1 3:-@2 4:2..3" {
			t.Fatalf("index of %d records rebuilt as %s", tc.records, got)
		}
		d.close()
	}
}

// TestRaftDenseOffsetsAcrossChanges: one group through every event that
// adds raft entries of its own or moves them — a leadership transfer, a
// leader stopped (election), a learner added, a learner promoted and a
// voter removed (joint consensus), an isolated leader's uncommitted tail
// truncated, every node restarted, a learner caught up by a snapshot —
// acknowledges offsets 0..n-1 with no gap, and every voter and learner
// holds the same dense log, answering OffsetForLeaderEpoch alike.
func TestRaftDenseOffsetsAcrossChanges(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	var acked []ackedBatch
	produceN := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			b := c.idem(fmt.Sprint(prefix, i), 1+i%3)
			acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
		}
		checkDenseAcks(t, acked)
	}
	change := func(m Members) {
		t.Helper()
		checkFor(t, 10*time.Second, func() error {
			_, lr := c.leader()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			return lr.ChangeMembership(ctx, m)
		})
		c.mu.Lock()
		c.members = m
		c.mu.Unlock()
	}
	end := func() int64 { return acked[len(acked)-1].res.LastOffset + 1 }

	produceN("fresh", 5)
	if acked[0].res.BaseOffset != 0 {
		t.Fatalf("first batch of a fresh group at %d", acked[0].res.BaseOffset)
	}

	// Leadership transfer.
	ln, lr := c.leader()
	to := NodeID(1 + int(ln)%3)
	checkFor(t, 10*time.Second, func() error {
		if c.rep(to).IsLeader() {
			return nil
		}
		if err := lr.TransferLeadership(to); err != nil {
			return err
		}
		return errors.New("transfer pending")
	})
	produceN("transferred", 5)

	// The leader stops: an election.
	ln, _ = c.leader()
	c.stop(ln)
	produceN("elected", 5)
	c.start(ln)
	produceN("rejoined", 3)
	c.converged(end(), 15*time.Second)

	// A learner joins; then it is promoted and a voter leaves.
	change(Members{Voters: []NodeID{1, 2, 3}, Learners: []NodeID{4, 5}})
	c.start(5)
	produceN("learner", 5)
	ln, _ = c.leader()
	gone := NodeID(1 + int(ln)%3)
	voters := []NodeID{5}
	for _, v := range []NodeID{1, 2, 3} {
		if v != gone {
			voters = append(voters, v)
		}
	}
	change(Members{Voters: voters, Learners: []NodeID{4}})
	c.stop(gone)
	produceN("promoted", 5)
	c.converged(end(), 15*time.Second)

	// An isolated leader appends a tail no one else gets; it is truncated
	// on heal.
	old, or := c.leader()
	c.net.Partition(old)
	for i := range 3 {
		if _, err := or.Propose(testBatch(fmt.Sprint("lost", i), 2, -1, 0, 0), AcksNone); err != nil {
			t.Fatalf("isolated leader refused: %v", err)
		}
	}
	checkFor(t, 5*time.Second, func() error {
		if or.LogEndOffset() <= end() {
			return fmt.Errorf("isolated leader's log ends at %d", or.LogEndOffset())
		}
		return nil
	})
	c.leader(old)
	// Until it steps down (check quorum) the old leader still takes
	// writes and would refuse the producer's next sequence.
	checkFor(t, 10*time.Second, func() error {
		if or.IsLeader() {
			return errors.New("isolated leader has not stepped down")
		}
		return nil
	})
	produceN("majority", 5)
	c.net.Heal()
	c.converged(end(), 15*time.Second)

	// Every node restarts.
	for _, n := range c.nodes() {
		c.stop(n)
	}
	for _, n := range append(append([]NodeID(nil), voters...), 4) {
		c.start(n)
	}
	produceN("restarted", 3)
	c.converged(end(), 15*time.Second)
	c.sameEpochEnds(end())

	// The learner is away while the log start moves past what it has: a
	// snapshot catches it up.
	c.stop(4)
	produceN("away", 30)
	c.converged(end(), 15*time.Second)
	cut := acked[len(acked)-10].res.BaseOffset
	for n, r := range c.running() {
		if err := r.DeleteRecordsBefore(cut); err != nil {
			t.Fatalf("node %d: %v", n, err)
		}
	}
	r4 := c.start(4)
	produceN("back", 3)
	c.converged(end(), 15*time.Second)
	r4.st.mu.Lock()
	si := r4.st.snapIndex
	r4.st.mu.Unlock()
	if si == 0 || r4.LogStartOffset() != cut {
		t.Fatalf("learner not caught up by a snapshot: snapshot index %d, log start %d (want %d)", si, r4.LogStartOffset(), cut)
	}
	c.checkAcked(acked)

	c.sameEpochEnds(end())
	t.Logf("%d batches at offsets 0..%d", len(acked), end()-1)
}

// sameEpochEnds checks that every running replica's log ends at end and
// that all answer OffsetForLeaderEpoch alike for every epoch in their
// logs and the current term.
func (c *testCluster) sameEpochEnds(end int64) {
	t := c.t
	t.Helper()
	var epochs []int32
	for _, r := range c.running() {
		for _, x := range batchesOf(t, logBytes(t, r)) {
			if len(epochs) == 0 || epochs[len(epochs)-1] != x.epoch {
				epochs = append(epochs, x.epoch)
			}
		}
		epochs = append(epochs, int32(r.Term()))
		break
	}
	var ref []int64
	var refN NodeID
	for n, r := range c.running() {
		if r.LogEndOffset() != end {
			t.Fatalf("node %d: log end %d, want %d", n, r.LogEndOffset(), end)
		}
		var got []int64
		for _, e := range epochs {
			off, ep := r.OffsetForLeaderEpoch(e)
			got = append(got, off, int64(ep))
		}
		if ref == nil {
			ref, refN = got, n
		} else if !reflect.DeepEqual(got, ref) {
			t.Fatalf("OffsetForLeaderEpoch of epochs %v: node %d %v, node %d %v", epochs, n, got, refN, ref)
		}
	}
	t.Logf("epochs %v end at %v", epochs, ref)
}
