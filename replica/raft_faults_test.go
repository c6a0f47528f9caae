package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/partition"
	"go.etcd.io/raft/v3/raftpb"
)

// copyTree copies a node's directory while its host runs: what a kill -9
// leaves (everything written is in the page cache), file by file at
// slightly different moments.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // a temporary file renamed away
			}
			return err
		}
		defer in.Close()
		o, err := os.Create(out)
		if err != nil {
			return err
		}
		_, err = io.Copy(o, in)
		if cerr := o.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (c *testCluster) nodeDir(n NodeID) string { return filepath.Join(c.root, fmt.Sprint("node", n)) }

// TestRaftLeaderCrashRestart: the leader dies (its directory as a kill -9
// leaves it), a new leader takes over, the old one restarts from disk and
// catches up; every acknowledged batch is everywhere exactly once at its
// acknowledged offsets.
func TestRaftLeaderCrashRestart(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	var acked []ackedBatch
	produceN := func(prefix string, n int) {
		for i := range n {
			b := c.idem(fmt.Sprint(prefix, i), 1+i%3)
			res := c.produce(b, AcksAll)
			acked = append(acked, ackedBatch{res, append([]byte(nil), body(b)...)})
		}
	}
	produceN("a", 30)
	old, _ := c.leader()
	image := filepath.Join(t.TempDir(), "image")
	copyTree(t, c.nodeDir(old), image)
	c.stop(old)
	if err := os.RemoveAll(c.nodeDir(old)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(image, c.nodeDir(old)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nl, _ := c.leader(old)
	t.Logf("new leader %d after %v", nl, time.Since(start))
	produceN("b", 30)
	c.start(old)
	produceN("c", 10)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 15*time.Second)
	c.checkAcked(acked)

	// And once more with every node restarted cleanly.
	for _, n := range []NodeID{1, 2, 3, 4} {
		c.stop(n)
	}
	for _, n := range []NodeID{1, 2, 3, 4} {
		c.start(n)
	}
	produceN("d", 5)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 15*time.Second)
	c.checkAcked(acked)
}

// TestRaftPartitionHeal: an isolated leader appends batches no one else
// gets; the majority elects a new leader and moves on; on heal the old
// leader's uncommitted tail is truncated and nothing diverges.
func TestRaftPartitionHeal(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft}, func(cfg *HostConfig) { cfg.ElectionTicks = 40 })
	var acked []ackedBatch
	for i := range 10 {
		b := c.idem(fmt.Sprint("a", i), 2)
		acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
	}
	old, or := c.leader()
	c.net.Partition(old)
	var lost [][]byte
	var props []partition.Proposal
	for i := range 5 {
		b := testBatch(fmt.Sprint("lost", i), 3, -1, 0, 0)
		lost = append(lost, append([]byte(nil), body(b)...))
		p, err := or.Propose(b, AcksAll)
		if err != nil {
			t.Fatalf("isolated leader refused: %v", err)
		}
		props = append(props, p)
	}
	// acks=1 is answered from the isolated leader's own log...
	p1, err := or.Propose(testBatch("lost-acks1", 1, -1, 0, 0), AcksLeader)
	if err != nil {
		t.Fatal(err)
	}
	lost = append(lost, body(testBatch("lost-acks1", 1, -1, 0, 0)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p1.Wait(ctx); err != nil {
		t.Fatalf("acks=1 on the isolated leader: %v", err)
	}
	if or.LogEndOffset() <= or.HighWatermark() {
		t.Fatalf("isolated leader has no uncommitted tail: end %d hw %d", or.LogEndOffset(), or.HighWatermark())
	}
	// ... acks=all never is: it fails when the old leader steps down.
	for _, p := range props {
		if _, err := p.Wait(ctx); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("acks=all on the isolated leader: %v, want ErrNotLeader", err)
		}
	}
	nl, _ := c.leader(old)
	t.Logf("old leader %d isolated, new leader %d", old, nl)
	for i := range 10 {
		b := c.idem(fmt.Sprint("b", i), 1)
		acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
	}
	c.net.Heal()
	c.converged(acked[len(acked)-1].res.LastOffset+1, 15*time.Second)
	c.checkAcked(acked)
	// The old leader, truncated, leads again: what it sends comes from its
	// storage (and entry cache) after the truncation.
	checkFor(t, 10*time.Second, func() error {
		_, lr := c.leader()
		if lr == or {
			return nil
		}
		if err := lr.TransferLeadership(old); err != nil {
			return err
		}
		return errors.New("transfer pending")
	})
	// A new learner, starting empty, gets the whole log from the old
	// leader.
	c.members = Members{Voters: []NodeID{1, 2, 3}, Learners: []NodeID{4, 5}}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	// A leader just elected refuses a change until its first entry
	// commits (ErrMembershipChangePending); callers try again, as the
	// reassignment loop does.
	for {
		err := or.ChangeMembership(ctx2, c.members)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrMembershipChangePending) || ctx2.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.start(5)
	for i := range 5 {
		b := c.idem(fmt.Sprint("c", i), 1)
		acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
	}
	c.converged(acked[len(acked)-1].res.LastOffset+1, 15*time.Second)
	c.checkAcked(acked)
	for n, r := range c.running() {
		for _, x := range batchesOf(t, logBytes(t, r)) {
			for _, l := range lost {
				if string(body(x.raw)) == string(l) {
					t.Fatalf("node %d still holds an uncommitted batch of the isolated leader at %d", n, x.base)
				}
			}
		}
	}
}

// TestRaftRandomFaults: messages dropped, duplicated and delayed at random
// while an idempotent producer writes with retries and a follower restarts.
func TestRaftRandomFaults(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4, 5}, ReplicaOptions{Mode: ModeRaft})
	c.leader()
	c.net.SetFaults(0.1, 0.1, 0, 15*time.Millisecond)
	var acked []ackedBatch
	seq := int32(0)
	for i := range 80 {
		n := 1 + i%4
		b := testBatch(fmt.Sprint("f", i), n, 99, 0, seq)
		seq += int32(n)
		res := c.produce(b, AcksAll)
		if res.Duplicate {
			t.Logf("batch %d answered as a duplicate at %d", i, res.BaseOffset)
		}
		acked = append(acked, ackedBatch{res, append([]byte(nil), body(b)...)})
		if i == 40 {
			ln, _ := c.leader()
			f := NodeID(1 + (int(ln))%3)
			c.stop(f)
			c.start(f)
		}
	}
	t.Logf("sent %d, dropped %d", c.net.Sent.Load(), c.net.Dropped.Load())
	c.net.Heal()
	c.converged(acked[len(acked)-1].res.LastOffset+1, 20*time.Second)
	c.checkAcked(acked)
}

// TestRaftSnapshotCatchUp: a learner that was away while every voter's log
// start moved past what it has is caught up by a snapshot: its log restarts
// at the snapshot's offset and then matches the leader byte for byte.
func TestRaftSnapshotCatchUp(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	var acked []ackedBatch
	produceN := func(prefix string, n int) {
		for i := range n {
			b := testBatch(fmt.Sprintf("%s%d-%0200d", prefix, i, i), 3, 5, 0, int32(len(acked)*3))
			acked = append(acked, ackedBatch{c.produce(b, AcksAll), append([]byte(nil), body(b)...)})
		}
	}
	produceN("a", 10)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 10*time.Second)
	c.stop(4)
	produceN("b", 150)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 10*time.Second)
	cut := acked[len(acked)-20].res.BaseOffset
	for n, r := range c.running() {
		if err := r.DeleteRecordsBefore(cut); err != nil {
			t.Fatalf("node %d: %v", n, err)
		}
		if fi, _ := r.st.FirstIndex(); fi < 100 {
			t.Fatalf("node %d: first raft index %d after deleting records before %d", n, fi, cut)
		}
	}
	r4 := c.start(4)
	produceN("c", 5)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 15*time.Second)
	r4.st.mu.Lock()
	si := r4.st.snapIndex
	r4.st.mu.Unlock()
	if r4.LogStartOffset() == 0 || si == 0 {
		t.Fatalf("learner was not caught up by a snapshot: log start %d, snapshot index %d", r4.LogStartOffset(), si)
	}
	c.checkAcked(acked)
	// The snapshot carried the producer's state: a retry of the last batch
	// is a duplicate on the learner's table too.
	last := acked[len(acked)-1]
	r4.st.mu.Lock()
	pe := r4.st.producers.seed(r4.log, 5)
	r4.st.mu.Unlock()
	h, _ := parseBatch(testBatch("x", 3, 5, 0, int32((len(acked)-1)*3)), true)
	var dup *errDuplicate
	if err := checkProducer(pe, &h, txnMarker{coordEpoch: -1}, 0); !errors.As(err, &dup) || dup.base != last.res.BaseOffset {
		t.Fatalf("learner's producer table after snapshot: %v", err)
	}
	// A restart after the snapshot keeps it.
	c.stop(4)
	c.start(4)
	produceN("d", 3)
	c.converged(acked[len(acked)-1].res.LastOffset+1, 15*time.Second)
	c.checkAcked(acked)
}

// TestRaftIdempotenceFailover: a new leader dedupes retries of batches the
// old leader wrote, and refuses sequence gaps.
func TestRaftIdempotenceFailover(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft})
	var res []ProduceResult
	for i := range 8 {
		res = append(res, c.produce(testBatch(fmt.Sprint("i", i), 2, 7, 3, int32(2*i)), AcksAll))
	}
	// A retry at the same leader.
	if r := c.produce(testBatch("i6", 2, 7, 3, 12), AcksAll); !r.Duplicate || r.BaseOffset != res[6].BaseOffset {
		t.Fatalf("retry at the leader: %+v, want duplicate of %+v", r, res[6])
	}
	old, _ := c.leader()
	c.stop(old)
	for _, i := range []int{7, 4} {
		r := c.produce(testBatch(fmt.Sprint("i", i), 2, 7, 3, int32(2*i)), AcksAll)
		if !r.Duplicate || r.BaseOffset != res[i].BaseOffset || r.LastOffset != res[i].LastOffset {
			t.Fatalf("retry of batch %d at the new leader: %+v, want %+v", i, r, res[i])
		}
	}
	if err := c.produceErr(testBatch("gap", 1, 7, 3, 20), AcksAll); !errors.Is(err, errOutOfOrder) {
		t.Fatalf("sequence gap: %v", err)
	}
	r := c.produce(testBatch("i8", 1, 7, 3, 16), AcksAll)
	if r.Duplicate || r.BaseOffset <= res[7].LastOffset {
		t.Fatalf("next batch: %+v", r)
	}
	c.start(old)
	c.converged(r.LastOffset+1, 10*time.Second)
}

// TestRaftIdempotenceFollowerRestart: a follower restarted while a
// producer had batches in flight keeps the producer's whole window. It
// opens with an empty producer table and then stores the producer's later
// batches from the leader; its table must start from the log's window of
// the earlier ones, not from those later batches alone, or, once it leads,
// a retry of an earlier batch is refused as out of sequence (and clients
// answer that by bumping their epoch and writing the batch again).
func TestRaftIdempotenceFollowerRestart(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft}, slowElections)
	batch := func(i int) []byte { return testBatch(fmt.Sprint("f", i), 2, 7, 3, int32(2*i)) }
	var res []ProduceResult
	for i := range 3 {
		res = append(res, c.produce(batch(i), AcksAll))
	}
	c.converged(res[2].LastOffset+1, 10*time.Second)
	ln, _ := c.leader()
	f := NodeID(1)
	for f == ln {
		f++
	}
	c.stop(f)
	for i := 3; i < 5; i++ {
		res = append(res, c.produce(batch(i), AcksAll))
	}
	fr := c.start(f)
	c.converged(res[4].LastOffset+1, 15*time.Second)
	// The restarted follower's table, as it would check a retry if it led.
	fr.st.mu.Lock()
	fr.st.producers.seed(fr.log, 7)
	pe := fr.st.producers.clone(7)
	fr.st.mu.Unlock()
	for i := range res {
		h, _ := parseBatch(batch(i), true)
		var dup *errDuplicate
		if err := checkProducer(pe, &h, txnMarker{coordEpoch: -1}, 0); !errors.As(err, &dup) || dup.base != res[i].BaseOffset || dup.last != res[i].LastOffset {
			t.Fatalf("restarted follower %d: retry of batch %d (offsets %d..%d): %v, want a duplicate", f, i, res[i].BaseOffset, res[i].LastOffset, err)
		}
	}
	// Once it leads, the retries are answered with the original offsets.
	checkFor(t, 15*time.Second, func() error {
		_, lr := c.leader()
		if lr == fr {
			return nil
		}
		if err := lr.TransferLeadership(f); err != nil {
			return err
		}
		return errors.New("transfer pending")
	})
	for _, i := range []int{0, 2, 4} {
		r := c.produce(batch(i), AcksAll)
		if !r.Duplicate || r.BaseOffset != res[i].BaseOffset || r.LastOffset != res[i].LastOffset {
			t.Fatalf("retry of batch %d at the restarted follower, now leader: %+v, want a duplicate of %+v", i, r, res[i])
		}
	}
	if r := c.produce(batch(5), AcksAll); r.Duplicate || r.BaseOffset <= res[4].LastOffset {
		t.Fatalf("next batch: %+v", r)
	}
}

// TestRaftIdempotenceAfterTruncation: storage that cuts a divergent tail
// and then stores a new leader's entries with batches of a producer keeps
// the producer's window of the batches before the cut (the table is reset
// by the truncation and starts again from the log's window).
func TestRaftIdempotenceAfterTruncation(t *testing.T) {
	c := oneNode(t)
	batch := func(i int, v string) []byte { return testBatch(fmt.Sprint(v, i), 2, 7, 3, int32(2*i)) }
	var res []ProduceResult
	for i := range 5 {
		res = append(res, c.produce(batch(i, "t"), AcksAll))
	}
	r := c.rep(1)
	r.raftMu.Lock()
	s := r.st
	s.mu.Lock()
	last := s.lastIndexLocked()
	lm, err := s.metaAtLocked(last)
	s.mu.Unlock()
	if err != nil || lm.base != res[4].BaseOffset {
		r.raftMu.Unlock()
		t.Fatalf("last entry %+v (%v), want the last batch at %d", lm, err, res[4].BaseOffset)
	}
	// The last two batches are replaced by the same producer's batches
	// 3 and 4 of a later term, as a new leader's log would have them.
	var ents []*raftpb.Entry
	for k, i := range []int{3, 4} {
		ents = append(ents, &raftpb.Entry{Index: new(last - 1 + uint64(k)), Term: new(lm.term + 1), Type: new(raftpb.EntryNormal), Data: batch(i, "u")})
	}
	err = s.append(ents, nil)
	s.mu.Lock()
	s.producers.seed(r.log, 7)
	pe := s.producers.clone(7)
	s.mu.Unlock()
	r.raftMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		h, _ := parseBatch(batch(i, "t"), true)
		var dup *errDuplicate
		if err := checkProducer(pe, &h, txnMarker{coordEpoch: -1}, 0); !errors.As(err, &dup) || dup.base != res[i].BaseOffset {
			t.Fatalf("after the truncation: retry of batch %d (offset %d): %v, want a duplicate", i, res[i].BaseOffset, err)
		}
	}
}

// Index records round-trip, raft's own entries with their kind and no
// offset; a filler batch spans the offsets it is given.
func TestRaftIndexRecordRoundTrip(t *testing.T) {
	for _, m := range []entryMeta{
		{index: 3, term: 4, base: 100, last: 109},
		{index: 4, term: 4, base: 110, last: 110},
		{index: 5, term: 5, base: 111, last: 110, kind: kindNoop},
		{index: 6, term: 5, base: 111, last: 110, kind: kindConfChange},
		{index: 7, term: 5, base: 111, last: 110, kind: kindConfChangeV2},
		{index: 8, term: 5, base: 111, last: 110, kind: kindCommand},
		{index: 1, term: 1, base: 0, last: -1, kind: kindNoop},
	} {
		b := make([]byte, indexRecordSize)
		encodeIndexRecord(b, m)
		got, ok := decodeIndexRecord(b)
		if !ok || got != m {
			t.Errorf("record of %+v decodes to %+v, %v", m, got, ok)
		}
	}
	// A raft record with bits outside the kind, or an unknown kind, is
	// damage, as a bad CRC is.
	for _, d := range []uint32{indexRaftBit, indexRaftBit | 5, indexRaftBit | 9, indexRaftBit | 1<<8 | 1} {
		b := make([]byte, indexRecordSize)
		encodeIndexRecord(b, entryMeta{index: 1, term: 1})
		binary.BigEndian.PutUint32(b[24:], d)
		binary.BigEndian.PutUint32(b[28:], crc32.Checksum(b[:28], crc32c))
		if m, ok := decodeIndexRecord(b); ok {
			t.Errorf("count field %#x decodes to %+v", d, m)
		}
	}
	f := fillerBatch(10, 90)
	h, err := parseBatch(f, true)
	if err != nil || h.BaseOffset != 10 || h.LastOffset() != 99 || h.RecordCount != 0 || !h.IsControl() {
		t.Fatalf("filler: %+v, %v", h, err)
	}
}

// TestRaftWipedReplicaRefusesCommitPastLog: a learner whose disk was
// wiped comes back under the same id, which raft forbids: the leader
// remembers what it had acknowledged and sends heartbeats committing
// entries the learner does not have (raft panics on them). The learner
// refuses them and counts them; no replica fails and the group goes on.
func TestRaftWipedReplicaRefusesCommitPastLog(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4}, ReplicaOptions{Mode: ModeRaft})
	for i := range 5 {
		c.produce(testBatch(fmt.Sprint("p", i), 1, -1, 0, 0), AcksAll)
	}
	c.converged(5, 10*time.Second)
	failed := make(chan error, 1)
	c.cfg.OnFailed = func(_ Key, err error) {
		select {
		case failed <- err:
		default:
		}
	}
	c.stop(4)
	if err := os.RemoveAll(c.nodeDir(4)); err != nil {
		t.Fatal(err)
	}
	c.start(4)
	checkFor(t, 10*time.Second, func() error {
		if n := c.hosts[4].Refused()["commit_past_log"]; n == 0 {
			return errors.New("no heartbeat refused yet")
		}
		return nil
	})
	c.produce(testBatch("after", 1, -1, 0, 0), AcksAll)
	select {
	case err := <-failed:
		t.Fatalf("a replica failed: %v", err)
	default:
	}
	for n, r := range c.running() {
		if err := r.Failed(); err != nil {
			t.Fatalf("node %d failed: %v", n, err)
		}
	}
}

// TestRaftSnapshotCarriesIdleProducers: a raft snapshot carries every
// producer the log holds state for, not only those the replica's table
// has seen since it opened. A producer idle since a restart was missing
// from it, and a replica caught up by that snapshot, once leader, would
// have taken a late retry of that producer's batch for a new one.
func TestRaftSnapshotCarriesIdleProducers(t *testing.T) {
	c := oneNode(t)
	for i := range 3 {
		c.produce(testBatch(fmt.Sprint("idle", i), 2, 7, 3, int32(2*i)), AcksAll)
	}
	c.stop(1)
	c.start(1)
	c.leader()
	c.produce(c.idem("busy", 2), AcksAll) // a producer the table has seen since
	r := c.rep(1)
	snap, err := r.st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	_, prods, err := decodeSnapshotData(snap.GetData())
	if err != nil {
		t.Fatal(err)
	}
	if e := prods[7]; e == nil || e.Epoch != 3 {
		t.Fatalf("the snapshot's producer 7: %+v, want epoch 3 (idle since the restart)", e)
	}
	if prods[1000] == nil {
		t.Fatal("the snapshot lacks the producer that wrote since the restart")
	}
}
