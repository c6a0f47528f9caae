package replica

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/log"
)

// The entry cache holds nothing once every replica has an entry and it is
// applied: an idle single-voter partition keeps no entry bytes in memory.
func TestRaftEntryCacheDrainsWhenApplied(t *testing.T) {
	c := newTestCluster(t, []NodeID{1}, nil, ReplicaOptions{Mode: ModeRaft, Log: bigSegments()})
	big := strings.Repeat("v", 32<<10)
	for i := range 40 {
		c.produce(testBatch(fmt.Sprint(big, i), 1, -1, 0, 0), AcksAll)
	}
	h := c.hosts[1]
	checkFor(t, 5*time.Second, func() error {
		if n := h.EntryCacheBytes(); n != 0 {
			return fmt.Errorf("entry cache holds %d bytes after every entry was applied", n)
		}
		return nil
	})
}

// A follower that falls behind pins the leader's cached entries only up to
// the host's budget; once it catches up (reading what the cache dropped
// from the log) and has everything, the cache drains.
func TestRaftEntryCacheBudget(t *testing.T) {
	const budget = 1 << 20
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft, Log: bigSegments()}, slowElections,
		func(cfg *HostConfig) { cfg.EntryCacheBytes = budget })
	ln, _ := c.leader()
	var lagging NodeID
	for _, n := range []NodeID{1, 2, 3} {
		if n != ln {
			lagging = n
			break
		}
	}
	c.net.Cut(ln, lagging)
	h := c.hosts[ln]
	big := strings.Repeat("v", 64<<10)
	var peak int64
	for i := range 64 { // 4 MiB, four times the budget
		res := c.produce(testBatch(fmt.Sprint(big, i), 1, -1, 0, 0), AcksAll)
		if res.BaseOffset < 0 {
			t.Fatalf("batch %d: %+v", i, res)
		}
		peak = max(peak, h.EntryCacheBytes())
	}
	// One entry may pass the budget: a group keeps its newest.
	if limit := int64(budget + 70<<10); peak > limit {
		t.Errorf("entry cache peaked at %d bytes with a budget of %d", peak, budget)
	}
	if peak == 0 {
		t.Errorf("entry cache never held anything while a follower lagged")
	}
	c.net.Heal()
	c.converged(64, 20*time.Second)
	checkFor(t, 5*time.Second, func() error {
		for n, h := range c.hosts {
			if b := h.EntryCacheBytes(); b != 0 {
				return fmt.Errorf("node %d's entry cache holds %d bytes after every replica has every entry", n, b)
			}
		}
		return nil
	})
}

// bigSegments is smallLogConfig with room for the tests' 64 KiB batches.
func bigSegments() log.Config {
	cfg := smallLogConfig()
	cfg.SegmentBytes = 1 << 20
	return cfg
}

// A batch larger than segment.bytes is refused at Propose, as Kafka's
// leader refuses it; proposed, it would fail every replica's storage.
func TestRaftProposeRefusesBatchOverSegment(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft}, slowElections)
	_, r := c.leader()
	big := testBatch(strings.Repeat("v", 32<<10), 1, -1, 0, 0) // segment.bytes is 16 KiB
	if _, err := r.Propose(big, AcksAll); !errors.Is(err, log.ErrBatchTooLarge) {
		t.Fatalf("Propose of a %d-byte batch with 16 KiB segments: %v, want ErrBatchTooLarge", len(big), err)
	}
	res := c.produce(testBatch("after", 3, -1, 0, 0), AcksAll)
	c.converged(res.LastOffset+1, 10*time.Second)
}

// The raft.index records of entries applied and held by every replica
// leave memory (each group keeps its last) and are read back from the
// file: memory does not grow with what retention keeps.
func TestRaftIndexRecordsLeaveMemory(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft}, slowElections)
	_, r := c.leader()
	const n = 300
	var last ProduceResult
	for i := range n {
		last = c.produce(testBatch(fmt.Sprint("r", i), 2, -1, 0, 0), AcksAll)
	}
	c.converged(last.LastOffset+1, 20*time.Second)
	st := r.st
	checkFor(t, 5*time.Second, func() error {
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.metas) > 1 {
			return fmt.Errorf("%d index records in memory after every replica applied everything", len(st.metas))
		}
		return nil
	})
	first, _ := st.FirstIndex()
	lastIdx, _ := st.LastIndex()
	ents, err := st.Entries(first, lastIdx+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	data := 0
	for k, e := range ents {
		if e.GetIndex() != first+uint64(k) {
			t.Fatalf("entry %d has index %d", first+uint64(k), e.GetIndex())
		}
		tm, err := st.Term(e.GetIndex())
		if err != nil || tm != e.GetTerm() {
			t.Fatalf("Term(%d) = %d, %v; entry's term %d", e.GetIndex(), tm, err, e.GetTerm())
		}
		if len(e.GetData()) > 0 {
			data++
		}
	}
	if uint64(len(ents)) != lastIdx-first+1 || data != n {
		t.Fatalf("read %d entries (%d with data) of %d..%d, want %d data entries", len(ents), data, first, lastIdx, n)
	}
	if got := st.endOffsetOf(lastIdx); got != last.LastOffset+1 {
		t.Fatalf("end offset of the last entry %d, want %d", got, last.LastOffset+1)
	}
}

// A learner that stopped (a read broker gone, whose learner slots the
// metastore keeps for its learner grace) does not pin the leader's entry
// cache: once the leader has not heard from it for an election timeout,
// the entries every other member has leave memory, so that a partition
// led here does not hold maxCacheBytes for the absent broker and the
// host's budget stays with the groups that are replicating. Back, the
// learner reads what it missed from the log.
func TestRaftEntryCacheNotPinnedByStoppedLearner(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, []NodeID{4, 5}, ReplicaOptions{Mode: ModeRaft, Log: bigSegments()}, slowElections)
	c.produce(testBatch("warm", 1, -1, 0, 0), AcksAll)
	c.converged(1, 10*time.Second)
	c.stop(5)
	big := strings.Repeat("v", 64<<10)
	for i := range 64 { // 4 MiB: under a group's maxCacheBytes
		c.produce(testBatch(fmt.Sprint(big, i), 1, -1, 0, 0), AcksAll)
	}
	ln, _ := c.leader()
	h := c.hosts[ln]
	checkFor(t, 10*time.Second, func() error {
		if b := h.EntryCacheBytes(); b != 0 {
			return fmt.Errorf("the leader's entry cache holds %d bytes that every running member has", b)
		}
		return nil
	})
	c.start(5)
	c.converged(65, 20*time.Second)
	c.sameBytes()
}
