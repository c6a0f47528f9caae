package shared

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/objstore"
	"github.com/sluice-broker/sluice/partition"
)

// pipeStore is the shared directory with a latency on each upload of a
// data object: 70 ms for odd sequences and 30 ms for even ones (50 on
// average), so an object often finishes its upload before the one cut
// before it. It counts the uploads in flight and those done; before, when
// set, runs once the latency passed and may fail the upload.
type pipeStore struct {
	*objstore.Dir
	mu                    sync.Mutex
	inFlight, maxInFlight int
	done                  []string // keys, in the order their uploads ended
	doneCh                chan struct{}
	before                func(key string) error
}

func newPipeStore(d *objstore.Dir) *pipeStore {
	return &pipeStore{Dir: d, doneCh: make(chan struct{}, 100)}
}

func objectSeq(key string) int {
	n, _ := strconv.Atoi(key[strings.LastIndexByte(key, '/')+1:])
	return n
}

func (s *pipeStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if !strings.HasPrefix(key, "data/") || strings.Contains(key, "-c/") {
		return s.Dir.PutIfAbsent(ctx, key, data)
	}
	s.mu.Lock()
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	before := s.before
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	delay := 30 * time.Millisecond
	if objectSeq(key)%2 == 1 {
		delay = 70 * time.Millisecond
	}
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	if before != nil {
		if err := before(key); err != nil {
			return err
		}
	}
	if err := s.Dir.PutIfAbsent(ctx, key, data); err != nil {
		return err
	}
	s.mu.Lock()
	s.done = append(s.done, key)
	s.mu.Unlock()
	select {
	case s.doneCh <- struct{}{}:
	default: // more than a test waits for
	}
	return nil
}

// awaitUploads waits until n uploads of data objects ended well.
func (s *pipeStore) awaitUploads(n int) error {
	for i := 0; i < n; i++ {
		select {
		case <-s.doneCh:
		case <-time.After(20 * time.Second):
			return fmt.Errorf("%d uploads of %d ended", i, n)
		}
	}
	return nil
}

// commitLog is the metastore client recording the object of each
// commit_shared_chunks, in order. before, when set, runs before a
// commit is sent; lose is the sequence of an object whose commit is
// applied but answered with an error, as one whose answer was lost (a
// timeout).
type commitLog struct {
	*metastore.Client
	mu     sync.Mutex
	keys   []string
	before func(key string)
	lose   int
}

func (c *commitLog) CommitSharedChunks(ctx context.Context, f metastore.Fence, chunks []metastore.SharedChunk) ([]error, error) {
	key := chunks[0].Key
	c.mu.Lock()
	before, lose := c.before, c.lose
	c.mu.Unlock()
	if before != nil {
		before(key)
	}
	errs, err := c.Client.CommitSharedChunks(ctx, f, chunks)
	c.mu.Lock()
	c.keys = append(c.keys, key)
	c.mu.Unlock()
	if err == nil && objectSeq(key) == lose {
		return nil, context.DeadlineExceeded
	}
	return errs, err
}

// pipeHost starts broker 1 over a pipeStore and a commitLog with
// parallel uploads of at most uploadBytes each, cut by size only.
func (e *env) pipeHost(parallel int, uploadBytes int64, linger time.Duration) (*Host, *pipeStore, *commitLog) {
	store := newPipeStore(e.store)
	cl := &commitLog{Client: e.cat}
	h := e.host(1, linger, func(c *Config) {
		c.Store, c.Catalog, c.Parallel, c.UploadBytes = store, cl, parallel, uploadBytes
	})
	return h, store, cl
}

// TestSharedPipelinedUploads: with four uploads of 50 ms in flight at
// once, batches proposed to four partitions without waiting are all
// acknowledged, each partition's at dense offsets in the order proposed,
// and read back at the offsets acknowledged; more than one upload was in
// flight at a time, objects committed in the order they were cut (their
// sequence) whatever order their uploads ended in, and each partition's
// chunks name objects in offset order.
func TestSharedPipelinedUploads(t *testing.T) {
	e := newEnv(t)
	top, err := e.cat.CreateTopic(e.ctx(), metastore.TopicSpec{Name: "pipe", Partitions: 4, ReplicationFactor: -1,
		Assignment: [][]int32{{1}, {1}, {1}, {1}}, Configs: map[string]string{"replication.mode": "shared"}})
	if err != nil {
		t.Fatal(err)
	}
	h, store, cl := e.pipeHost(4, 1024, 20*time.Millisecond)
	var parts []*Partition
	for i := int32(0); i < 4; i++ {
		p, err := h.Open("pipe", partition.Key{TopicID: top.ID, Index: i})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p.(*Partition))
	}
	const n = 64
	type sent struct {
		part int
		tag  string
		prop partition.Proposal
	}
	var all []sent
	for i := 0; i < n; i++ {
		tag := fmt.Sprintf("%02d-%s", i, strings.Repeat("v", 200))
		pr, err := parts[i%4].Propose(batch(1, tag, -1, 0, 0), partition.AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sent{i % 4, tag, pr})
	}
	next := make([]int64, 4)
	want := make([][]string, 4)
	for i, s := range all {
		res, err := s.prop.Wait(e.ctx())
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if res.BaseOffset != next[s.part] {
			t.Fatalf("batch %d of partition %d at %d, want %d", i, s.part, res.BaseOffset, next[s.part])
		}
		next[s.part]++
		want[s.part] = append(want[s.part], s.tag)
		got, err := parts[s.part].Read(res.BaseOffset, 1)
		if err != nil || len(got.Data) == 0 || !strings.Contains(string(got.Data), s.tag) {
			t.Fatalf("batch %d not read back at %d: %v", i, res.BaseOffset, err)
		}
	}
	for i, p := range parts {
		if got := values(t, p); !equal(got, want[i]) {
			t.Fatalf("partition %d holds %v, want %v", i, got, want[i])
		}
		sp, err := e.cat.SharedChunks(e.ctx(), top.ID, int32(i), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for j := 1; j < len(sp.Chunks); j++ {
			if objectSeq(sp.Chunks[j].Key) <= objectSeq(sp.Chunks[j-1].Key) {
				t.Fatalf("partition %d: chunk at %d in %s after chunk at %d in %s", i,
					sp.Chunks[j].BaseOffset, sp.Chunks[j].Key, sp.Chunks[j-1].BaseOffset, sp.Chunks[j-1].Key)
			}
		}
	}
	store.mu.Lock()
	maxIn, done := store.maxInFlight, slices.Clone(store.done)
	store.mu.Unlock()
	cl.mu.Lock()
	commits := slices.Clone(cl.keys)
	cl.mu.Unlock()
	if maxIn < 2 {
		t.Fatalf("at most %d upload in flight", maxIn)
	}
	if !slices.IsSortedFunc(commits, func(a, b string) int { return objectSeq(a) - objectSeq(b) }) {
		t.Fatalf("objects committed out of the order they were cut: %v", commits)
	}
	if st := h.Stats(); st.Puts != int64(len(done)) || st.Commits != int64(len(commits)) || st.Puts < 8 {
		t.Fatalf("stats %+v: %d uploads, %d commits", st, len(done), len(commits))
	}
	overtaken := !slices.IsSortedFunc(done, func(a, b string) int { return objectSeq(a) - objectSeq(b) })
	t.Logf("%d batches in %d objects, at most %d uploads in flight, an upload ended before an earlier one's: %v",
		n, len(commits), maxIn, overtaken)
}

// sameSize is the size of every one-record batch whose tag has two
// characters: an object of uploadBytes 2*sameSize holds two of them.
var sameSize = int64(len(batch(1, "xx", -1, 0, 0)))

// proposeAll proposes one one-record batch per tag to the partition
// named by its first letter (a: 0, b: 1), of producer pid with
// sequences counted per partition from seq (pid -1: not idempotent).
func proposeAll(t *testing.T, parts []*Partition, pid int64, tags ...string) []partition.Proposal {
	t.Helper()
	seq := map[byte]int32{}
	var out []partition.Proposal
	for _, tag := range tags {
		b := batch(1, tag, pid, 0, seq[tag[0]])
		if pid < 0 {
			b = batch(1, tag, -1, 0, 0)
		}
		seq[tag[0]]++
		if int64(len(b)) != sameSize {
			t.Fatalf("batch %s of %d bytes, want %d", tag, len(b), sameSize)
		}
		pr, err := parts[tag[0]-'a'].Propose(b, partition.AcksAll)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pr)
	}
	return out
}

// wantFailedObjectAnswers checks failedObjectEnv's answers after object
// 1 failed: partition 0's batches (a1-a3) NOT_LEADER_OR_FOLLOWER,
// partition 1's (b1-b3) committed at offsets 0-2.
func wantFailedObjectAnswers(t *testing.T, e *env, props map[string]partition.Proposal) {
	t.Helper()
	for _, tag := range []string{"a1", "a2", "a3"} {
		if _, err := props[tag].Wait(e.ctx()); !errors.Is(err, partition.ErrNotLeader) {
			t.Fatalf("%s: %v, want NOT_LEADER_OR_FOLLOWER", tag, err)
		}
	}
	for i, tag := range []string{"b1", "b2", "b3"} {
		res, err := props[tag].Wait(e.ctx())
		if err != nil || res.BaseOffset != int64(i) {
			t.Fatalf("%s: %+v, %v; want offset %d", tag, res, err, i)
		}
	}
}

// failedObjectEnv proposes, on broker 1 with four uploads in flight and
// objects cut by size alone, object 1: a1 a2 (partition 0); object 2:
// a3 (partition 0) b1 (partition 1); object 3: b2 b3 (partition 1).
func failedObjectEnv(t *testing.T, pid int64, setup func(*pipeStore, *commitLog)) (*env, []*Partition, map[string]partition.Proposal, *pipeStore) {
	e := newEnv(t)
	h, store, cl := e.pipeHost(4, 2*sameSize, time.Hour)
	setup(store, cl)
	parts := []*Partition{e.open(h, 0), e.open(h, 1)}
	tags := []string{"a1", "a2", "a3", "b1", "b2", "b3"}
	props := map[string]partition.Proposal{}
	for i, pr := range proposeAll(t, parts, pid, tags...) {
		props[tags[i]] = pr
	}
	return e, parts, props, store
}

// TestSharedPipelinedUploadFailure: the upload of object 1 fails after
// objects 2 and 3 were uploaded. Partition 0's batches in object 1 are
// answered NOT_LEADER_OR_FOLLOWER, and so is its batch in object 2,
// which is not committed: partition 0 has no chunk at all. Partition 1's
// batches in objects 2 and 3 commit. The producer's retries of partition
// 0 then commit at offsets 0 on, with no gap.
func TestSharedPipelinedUploadFailure(t *testing.T) {
	injected := errors.New("injected upload failure")
	e, parts, props, store := failedObjectEnv(t, -1, func(s *pipeStore, _ *commitLog) {
		s.before = func(key string) error {
			if objectSeq(key) != 1 {
				return nil
			}
			if err := s.awaitUploads(2); err != nil {
				return err
			}
			return injected
		}
	})
	wantFailedObjectAnswers(t, e, props)
	store.mu.Lock()
	done := slices.Clone(store.done)
	store.mu.Unlock()
	if len(done) != 2 || objectSeq(done[0]) == 1 || objectSeq(done[1]) == 1 {
		t.Fatalf("uploads done %v, want objects 2 and 3", done)
	}
	if sp := e.chunks(0); sp.EndOffset != 0 || len(sp.Chunks) != 0 {
		t.Fatalf("partition 0 after its failed upload: %+v", sp)
	}
	if got := values(t, parts[1]); !equal(got, []string{"b1", "b2", "b3"}) {
		t.Fatalf("partition 1 holds %v", got)
	}

	retry := proposeAll(t, parts, -1, "a1", "a2", "a3", "a4")
	for i, pr := range retry {
		res, err := pr.Wait(e.ctx())
		if err != nil || res.BaseOffset != int64(i) {
			t.Fatalf("retry %d: %+v, %v", i, res, err)
		}
	}
	sp, next := e.chunks(0), int64(0)
	for _, ch := range sp.Chunks {
		if ch.BaseOffset != next {
			t.Fatalf("partition 0's chunks %+v: a gap at %d", sp.Chunks, next)
		}
		next = ch.LastOffset + 1
	}
	if next != 4 || sp.EndOffset != 4 {
		t.Fatalf("partition 0's chunks %+v end at %d, end offset %d; want 4", sp.Chunks, next, sp.EndOffset)
	}
	if got := values(t, parts[0]); !equal(got, []string{"a1", "a2", "a3", "a4"}) {
		t.Fatalf("partition 0 holds %v", got)
	}
}

// TestSharedPipelinedCommitLost: object 1's commit applies but its answer
// is lost (an error), after objects 2 and 3 were uploaded. Partition 0's
// batches in object 1 are answered NOT_LEADER_OR_FOLLOWER (they did
// commit: the outcome was unknown); its batch a3 in object 2 is answered
// so too and is not committed, though the metastore would have taken it
// (its base offset is the end offset, in the same epoch). Partition 1's
// batches commit. The idempotent producer's retries are answered as
// duplicates for a1 and a2 and commit a3 once.
func TestSharedPipelinedCommitLost(t *testing.T) {
	e, parts, props, _ := failedObjectEnv(t, 7, func(s *pipeStore, cl *commitLog) {
		cl.lose = 1
		cl.before = func(key string) {
			if objectSeq(key) == 1 {
				if err := s.awaitUploads(3); err != nil {
					t.Error(err)
				}
			}
		}
	})
	wantFailedObjectAnswers(t, e, props)
	if sp := e.chunks(0); sp.EndOffset != 2 || len(sp.Chunks) != 1 || objectSeq(sp.Chunks[0].Key) != 1 {
		t.Fatalf("partition 0 after object 1's lost commit: %+v, want only object 1's chunk, end 2", sp)
	}
	retry := proposeAll(t, parts, 7, "a1", "a2", "a3", "a4")
	for i, pr := range retry {
		res, err := pr.Wait(e.ctx())
		if err != nil || res.BaseOffset != int64(i) || res.Duplicate != (i < 2) {
			t.Fatalf("retry %d: %+v, %v", i, res, err)
		}
	}
	if got := values(t, parts[0]); !equal(got, []string{"a1", "a2", "a3", "a4"}) {
		t.Fatalf("partition 0 holds %v", got)
	}
}

// TestSharedUploadBackPressure: with two objects of two batches in
// flight (uploads held back), the budget of Parallel × UploadBytes is
// full and the next Propose waits. Close answers it
// NOT_LEADER_OR_FOLLOWER at once, waits for the uploads in flight, and
// their batches commit.
func TestSharedUploadBackPressure(t *testing.T) {
	e := newEnv(t)
	gate := make(chan struct{})
	h, store, _ := e.pipeHost(2, 2*sameSize, time.Hour)
	store.before = func(string) error { <-gate; return nil }
	parts := []*Partition{e.open(h, 0), e.open(h, 1)}
	first := proposeAll(t, parts, -1, "a1", "b1", "a2", "b2")
	blocked := make(chan error, 1)
	go func() {
		_, err := parts[0].Propose(batch(1, "a3", -1, 0, 0), partition.AcksAll)
		blocked <- err
	}()
	select {
	case err := <-blocked:
		t.Fatalf("a Propose past the budget returned at once: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	closed := make(chan struct{})
	go func() {
		h.Close()
		close(closed)
	}()
	select {
	case err := <-blocked:
		if !errors.Is(err, partition.ErrPartitionClosed) {
			t.Fatalf("the waiting Propose after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not answer the waiting Propose")
	}
	select {
	case <-closed:
		t.Fatal("Close returned with uploads in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	<-closed
	for i, pr := range first {
		res, err := pr.Wait(e.ctx())
		if err != nil || res.BaseOffset != int64(i/2) {
			t.Fatalf("batch %d: %+v, %v", i, res, err)
		}
	}
}
