package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// oneNode is a single-voter group, which leads at once.
func oneNode(t *testing.T) *testCluster {
	c := newTestCluster(t, []NodeID{1}, nil, ReplicaOptions{Mode: ModeRaft})
	c.leader()
	return c
}

type storageView struct {
	first, last uint64
	terms       []uint64
	metas       []entryMeta
	ents        []string
}

func viewOf(t *testing.T, r *Replica) storageView {
	t.Helper()
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	s := r.st
	v := storageView{}
	v.first, _ = s.FirstIndex()
	v.last, _ = s.LastIndex()
	for i := v.first - 1; i <= v.last; i++ {
		tm, err := s.Term(i)
		if err != nil {
			t.Fatalf("Term(%d): %v", i, err)
		}
		v.terms = append(v.terms, tm)
	}
	s.mu.Lock()
	ms, err := s.metasLocked(v.first, v.last+1)
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	v.metas = append([]entryMeta(nil), ms...)
	ents, err := s.Entries(v.first, v.last+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		v.ents = append(v.ents, fmt.Sprintf("%d/%d/%v/%x", e.GetIndex(), e.GetTerm(), e.GetType(), e.GetData()))
	}
	return v
}

// TestRaftStorageRecovery damages the sidecar and the state file of a
// closed replica in the ways a crash can, and checks that Open rebuilds
// the same raft log (indexes, terms, offsets, entry bytes) from the log.
// Records of raft's own entries are synced before anything after them is
// written, so a crash loses only data records after the last of them; an
// index that lost one (a deleted file) is refused, never rebuilt with
// wrong indexes.
func TestRaftStorageRecovery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		lost   bool // Open must refuse with ErrLostCommitted
	}{
		{"index-missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, indexFileName))
		}, true},
		{"index-torn", func(t *testing.T, dir string) {
			// Torn among the data records after the last raft entry's.
			p := filepath.Join(dir, indexFileName)
			b, _ := os.ReadFile(p)
			last := -1
			for i := 0; i+indexRecordSize <= len(b); i += indexRecordSize {
				if m, ok := decodeIndexRecord(b[i:]); ok && m.raft() {
					last = i
				}
			}
			if last < 0 || last+4*indexRecordSize > len(b) {
				t.Fatalf("no raft record with data records after it in %d bytes", len(b))
			}
			os.Truncate(p, int64(last+2*indexRecordSize+5))
		}, false},
		{"index-torn-into-raft-record", func(t *testing.T, dir string) {
			p := filepath.Join(dir, indexFileName)
			b, _ := os.ReadFile(p)
			last := -1
			for i := 0; i+indexRecordSize <= len(b); i += indexRecordSize {
				if m, ok := decodeIndexRecord(b[i:]); ok && m.raft() {
					last = i
				}
			}
			os.Truncate(p, int64(last+5))
		}, true},
		{"index-garbage-tail", func(t *testing.T, dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, indexFileName), os.O_WRONLY|os.O_APPEND, 0)
			f.Write(make([]byte, 3*indexRecordSize))
			f.Close()
		}, false},
		{"state-slot-torn", func(t *testing.T, dir string) {
			// The newer slot is damaged: the older one still holds a
			// valid (older) state.
			p := filepath.Join(dir, stateFileName)
			b, _ := os.ReadFile(p)
			st, _, _ := openStateFile(dir)
			seq := st.cur.seq
			st.close()
			b[int(seq%2)*stateSlotSize+20] ^= 0xff
			os.WriteFile(p, b, 0o644)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := oneNode(t)
			for i := range 25 {
				c.produce(testBatch(fmt.Sprint("r", i), 3, 3, 0, int32(i*3)), AcksAll)
				if i == 10 {
					// New terms in the log.
					c.stop(1)
					c.start(1)
					c.leader()
				}
			}
			before := viewOf(t, c.rep(1))
			hw := c.rep(1).HighWatermark()
			dir := c.rep(1).dir
			c.stop(1)
			tc.damage(t, dir)
			if tc.lost {
				h, err := NewHost(HostConfig{Node: 1, Dir: c.nodeDir(1), Transport: c.net.Transport(1), Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close()
				if _, err := h.Open(c.topic, c.key, c.members, c.opts); !errors.Is(err, ErrLostCommitted) {
					t.Fatalf("Open after %s: %v, want ErrLostCommitted", tc.name, err)
				}
				return
			}
			r := c.start(1)
			after := viewOf(t, r)
			// A restart's leader appends an empty entry; compare the
			// prefix the log had.
			if after.first != before.first || after.last < before.last ||
				!reflect.DeepEqual(after.terms[:len(before.terms)], before.terms) ||
				!reflect.DeepEqual(after.metas[:len(before.metas)], before.metas) ||
				!reflect.DeepEqual(after.ents[:len(before.ents)], before.ents) {
				t.Fatalf("raft log after recovery differs:\nbefore %+v\nafter  %+v", before, after)
			}
			c.leader()
			res := c.produce(testBatch("more", 1, 3, 0, 75), AcksAll)
			if res.Duplicate || res.BaseOffset < hw {
				t.Fatalf("after recovery: %+v, hw before %d", res, hw)
			}
		})
	}
}

// TestRaftSnapshotInstallInterrupted: a crash between recording a snapshot
// and resetting the log is finished by the next Open.
func TestRaftSnapshotInstallInterrupted(t *testing.T) {
	c := oneNode(t)
	for i := range 5 {
		c.produce(testBatch(fmt.Sprint("s", i), 2, -1, 0, 0), AcksAll)
	}
	r := c.rep(1)
	r.raftMu.Lock()
	snapIndex, _ := r.st.LastIndex()
	snapIndex += 40
	st := r.st.state.cur
	st.snapIndex, st.snapTerm, st.snapOffset = snapIndex, st.term, 1000
	st.commit = snapIndex
	st.applied = snapIndex | stateFlagPendingBit
	if err := r.st.state.save(st); err != nil {
		t.Fatal(err)
	}
	r.failed = errors.New("simulated crash") // so close saves nothing more
	r.raftMu.Unlock()
	c.stop(1)
	r = c.start(1)
	if r.LogStartOffset() != 1000 || r.LogEndOffset() < 1000 {
		t.Fatalf("log after interrupted install: start %d end %d", r.LogStartOffset(), r.LogEndOffset())
	}
	if fi, _ := r.st.FirstIndex(); fi != snapIndex+1 {
		t.Fatalf("first index %d, want %d", fi, snapIndex+1)
	}
	r.st.mu.Lock()
	pending := r.st.pendingReset()
	r.st.mu.Unlock()
	if pending {
		t.Fatal("pending flag still set")
	}
	c.leader()
	res := c.produce(testBatch("after", 1, -1, 0, 0), AcksAll)
	if res.BaseOffset < 1000 {
		t.Fatalf("produced at %d", res.BaseOffset)
	}
}

// The Storage contract's error cases.
func TestRaftStorageContract(t *testing.T) {
	c := oneNode(t)
	for i := range 3 {
		c.produce(testBatch(fmt.Sprint("k", i), 1, -1, 0, 0), AcksAll)
	}
	r := c.rep(1)
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	s := r.st
	last, _ := s.LastIndex()
	if _, err := s.Entries(0, 1, 100); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Entries(0): %v", err)
	}
	if _, err := s.Entries(1, last+2, 100); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Entries past last: %v", err)
	}
	if _, err := s.Term(last + 1); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("Term past last: %v", err)
	}
	// maxSize returns at least one entry and then stops.
	ents, err := s.Entries(1, last+1, 1)
	if err != nil || len(ents) != 1 {
		t.Fatalf("Entries with maxSize 1: %d entries, %v", len(ents), err)
	}
	// The first entry is the leader's empty entry, stored as a raft.index
	// record only (no batch, no offset) and given back empty.
	if ents[0].GetType() != raftpb.EntryNormal || len(ents[0].GetData()) != 0 {
		t.Fatalf("entry 1: %v", ents[0])
	}
	hs, cs, _ := s.InitialState()
	if hs.GetTerm() == 0 || !reflect.DeepEqual(cs.GetVoters(), []uint64{raftID(1)}) {
		t.Fatalf("initial state %v %v", hs, cs)
	}
	_ = context.Background
	_ = time.Second
}

// TestRaftLostCommittedRefused: a replica whose log lost entries below its
// persisted commit index is not opened, so it never votes on that log.
func TestRaftLostCommittedRefused(t *testing.T) {
	c := oneNode(t)
	for i := range 10 {
		c.produce(testBatch(fmt.Sprint("l", i), 2, -1, 0, 0), AcksAll)
	}
	r := c.rep(1)
	dir := r.dir
	c.stop(1) // the clean close persists commit = last index
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	fi, _ := os.Stat(segs[len(segs)-1])
	if err := os.Truncate(segs[len(segs)-1], fi.Size()-30); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, ".clean-shutdown"))
	cfg := c.cfg
	cfg.Node, cfg.Dir, cfg.Transport = 1, c.nodeDir(1), c.net.Transport(1)
	h, err := NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Open(c.topic, c.key, c.members, c.opts); !errors.Is(err, ErrLostCommitted) {
		t.Fatalf("Open after losing committed entries: %v", err)
	}
}

// TestRaftCompactionInterrupted: the log deleted segments (retention) and
// the process died before the raft log was compacted to match: Open
// compacts, and the group goes on.
func TestRaftCompactionInterrupted(t *testing.T) {
	for _, lostIndex := range []bool{false, true} {
		t.Run(fmt.Sprint("index-lost=", lostIndex), func(t *testing.T) {
			c := oneNode(t)
			for i := range 120 {
				c.produce(testBatch(fmt.Sprintf("%03d-%0300d", i, i), 2, -1, 0, 0), AcksAll)
			}
			r := c.rep(1)
			hw := r.HighWatermark()
			r.raftMu.Lock()
			if err := r.st.syncIndex(); err != nil {
				t.Fatal(err)
			}
			// The log alone, as if the compaction after it never ran.
			if err := r.log.DeleteRecordsBefore(hw - 20); err != nil {
				t.Fatal(err)
			}
			r.raftMu.Unlock()
			dir := r.dir
			c.stop(1)
			if lostIndex {
				// Without the index the raft indexes of the remaining
				// batches are unknown: the replica must not open.
				os.Remove(filepath.Join(dir, indexFileName))
				cfg := c.cfg
				cfg.Node, cfg.Dir, cfg.Transport = 1, c.nodeDir(1), c.net.Transport(1)
				h, err := NewHost(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close()
				if _, err := h.Open(c.topic, c.key, c.members, c.opts); !errors.Is(err, ErrLostCommitted) {
					t.Fatalf("Open with the log start past the index: %v", err)
				}
				return
			}
			r = c.start(1)
			fi, _ := r.st.FirstIndex()
			r.st.mu.Lock()
			so := r.st.snapOffset
			r.st.mu.Unlock()
			if fi < 50 || so > r.LogStartOffset() {
				t.Fatalf("not compacted on open: first index %d, snapshot offset %d, log start %d", fi, so, r.LogStartOffset())
			}
			c.leader()
			if res := c.produce(testBatch("next", 1, -1, 0, 0), AcksAll); res.BaseOffset < hw {
				t.Fatalf("produced at %d below old hw %d", res.BaseOffset, hw)
			}
			v := viewOf(t, r)
			if len(v.ents) == 0 {
				t.Fatal("no entries")
			}
		})
	}
}

// TestRaftLostCommittedTailAfterKill: a follower is killed (-9) while the
// group writes, and its log then loses its tail of committed, acknowledged
// batches (a damaged last segment that recovery cuts back). Its raft.state
// must know the commit index it had reached, so that Open refuses the
// replica instead of letting it vote (and help elect a leader lacking those
// batches) on the shortened log. The commit index was saved only with a
// term or vote change or an applied checkpoint (once a minute), so here it
// was the one of the election and the loss went unnoticed.
func TestRaftLostCommittedTailAfterKill(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft})
	var last ProduceResult
	for i := range 20 {
		last = c.produce(testBatch(fmt.Sprint("k", i), 2, -1, 0, 0), AcksAll)
	}
	c.converged(last.LastOffset+1, 10*time.Second)
	ln, _ := c.leader()
	f := NodeID(1 + int(ln)%3)
	image := c.kill(f)
	c.bury(f, image)
	// The damage: the last 3 batches of the segment lost.
	segs, _ := filepath.Glob(filepath.Join(c.nodeDir(f), "*", "*.log"))
	if len(segs) == 0 {
		segs, _ = filepath.Glob(filepath.Join(c.nodeDir(f), "*.log"))
	}
	if len(segs) == 0 {
		t.Fatalf("no segment under %s", c.nodeDir(f))
	}
	seg := segs[len(segs)-1]
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	bl := int64(len(testBatch("k19", 2, -1, 0, 0)))
	if err := os.Truncate(seg, fi.Size()-3*bl+bl/2); err != nil {
		t.Fatal(err)
	}
	cfg := c.cfg
	cfg.Node, cfg.Dir, cfg.Transport = f, c.nodeDir(f), c.net.Transport(f)
	cfg.Logger = testLogger(t)
	h, err := NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Open(c.topic, c.key, c.members, c.opts); !errors.Is(err, ErrLostCommitted) {
		t.Fatalf("Open after a kill and the loss of committed batches: %v, want ErrLostCommitted", err)
	}
}
