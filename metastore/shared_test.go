package metastore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// sharedSetup opens a one-node metastore with topic "sh" (two partitions,
// write replicas 1 and 2), registers brokers 1 and 2 and returns their
// fences.
func sharedSetup(t *testing.T, dir string) (*Node, *Client, TopicID, Fence, Fence) {
	t.Helper()
	n := openSingle(t, dir)
	c := n.Client()
	ctx := ctxT(t)
	top, err := c.CreateTopic(ctx, TopicSpec{Name: "sh", Partitions: 2, ReplicationFactor: -1,
		Assignment: [][]int32{{1, 2}, {2, 1}}, Configs: map[string]string{"replication.mode": "shared"}})
	if err != nil {
		t.Fatal(err)
	}
	var f [2]Fence
	for i, id := range []int32{1, 2} {
		inc, err := c.RegisterBroker(ctx, Broker{ID: id, Role: RoleWrite})
		if err != nil {
			t.Fatal(err)
		}
		f[i] = Fence{Broker: id, Incarnation: inc}
	}
	return n, c, top.ID, f[0], f[1]
}

func chunk(id TopicID, p, epoch int32, base, last int64, key string) SharedChunk {
	return SharedChunk{TopicID: id, Partition: p, LeaderEpoch: epoch, BaseOffset: base, LastOffset: last,
		Key: key, Pos: base * 10, Len: (last - base + 1) * 10, MaxTimestamp: 1000 + last}
}

// TestSharedCommit: claim_shared_leader is a compare-and-set on the leader
// epoch by a registered voter; commit_shared_chunks refuses, chunk by
// chunk, a chunk of an older epoch or of a broker that is not the leader
// (ErrFenced), one whose base offset is not the end offset
// (ErrInvalidRequest) and one of an unknown partition, commits the rest
// and moves the end offset; a stale incarnation fences the whole command.
func TestSharedCommit(t *testing.T) {
	dir := t.TempDir()
	n, c, id, f1, f2 := sharedSetup(t, dir)
	ctx := ctxT(t)
	e0 := func(p int32) int32 {
		top, _ := c.TopicByName("sh")
		return top.Partitions[p].LeaderEpoch
	}
	if _, err := c.ClaimSharedLeader(ctx, Fence{Broker: 3, Incarnation: 1}, "sh", 0, e0(0)); !errors.Is(err, ErrFenced) {
		t.Fatalf("unregistered broker claimed: %v", err)
	}
	if _, err := c.ClaimSharedLeader(ctx, Fence{Broker: 1, Incarnation: f1.Incarnation + 100}, "sh", 0, e0(0)); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale incarnation claimed: %v", err)
	}
	if _, err := c.ClaimSharedLeader(ctx, f1, "sh", 0, e0(0)+1); !errors.Is(err, ErrFenced) {
		t.Fatalf("claim against an epoch the partition does not have: %v", err)
	}
	ep1, err := c.ClaimSharedLeader(ctx, f1, "sh", 0, e0(0))
	if err != nil {
		t.Fatal(err)
	}
	if top, _ := c.TopicByName("sh"); top.Partitions[0].Leader != 1 || top.Partitions[0].LeaderEpoch != ep1 {
		t.Fatalf("after the claim: partition %+v, epoch %d", top.Partitions[0], ep1)
	}
	ep1p1, err := c.ClaimSharedLeader(ctx, f1, "sh", 1, e0(1))
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		f      Fence
		chunks []SharedChunk
		want   []error
		end0   int64
	}{
		{"first chunks", f1, []SharedChunk{chunk(id, 0, ep1, 0, 9, "o1"), chunk(id, 0, ep1, 10, 14, "o1"), chunk(id, 1, ep1p1, 0, 0, "o1")},
			[]error{nil, nil, nil}, 15},
		{"gap", f1, []SharedChunk{chunk(id, 0, ep1, 16, 20, "o2")}, []error{ErrInvalidRequest}, 15},
		{"overlap", f1, []SharedChunk{chunk(id, 0, ep1, 14, 20, "o2")}, []error{ErrInvalidRequest}, 15},
		{"old epoch", f1, []SharedChunk{chunk(id, 0, ep1-1, 15, 20, "o2")}, []error{ErrFenced}, 15},
		{"not the leader", f2, []SharedChunk{chunk(id, 0, ep1, 15, 20, "o2")}, []error{ErrFenced}, 15},
		{"unknown partition", f1, []SharedChunk{chunk(id, 7, ep1, 0, 1, "o2"), chunk(TopicID{9}, 0, ep1, 0, 1, "o2")},
			[]error{ErrUnknownTopic, ErrUnknownTopic}, 15},
		{"empty chunk", f1, []SharedChunk{{TopicID: id, Partition: 0, LeaderEpoch: ep1, BaseOffset: 15, LastOffset: 15, Key: "o2"}},
			[]error{ErrInvalidRequest}, 15},
		{"mixed", f1, []SharedChunk{chunk(id, 0, ep1, 99, 100, "o3"), chunk(id, 0, ep1, 15, 29, "o3")}, []error{ErrInvalidRequest, nil}, 30},
	} {
		errs, err := c.CommitSharedChunks(ctx, tc.f, tc.chunks)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i := range tc.want {
			if !errors.Is(errs[i], tc.want[i]) || (tc.want[i] == nil) != (errs[i] == nil) {
				t.Fatalf("%s: chunk %d: %v, want %v", tc.name, i, errs[i], tc.want[i])
			}
		}
		sp, err := c.SharedChunks(ctx, id, 0, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if sp.EndOffset != tc.end0 {
			t.Fatalf("%s: end offset %d, want %d", tc.name, sp.EndOffset, tc.end0)
		}
	}
	if _, err := c.CommitSharedChunks(ctx, Fence{Broker: 1, Incarnation: f1.Incarnation + 100}, []SharedChunk{chunk(id, 0, ep1, 30, 31, "o4")}); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit under a stale incarnation: %v", err)
	}

	// Leadership moves to broker 2: broker 1's next commit is fenced.
	ep2, err := c.ClaimSharedLeader(ctx, f2, "sh", 0, ep1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ClaimSharedLeader(ctx, f1, "sh", 0, ep1); !errors.Is(err, ErrFenced) {
		t.Fatalf("a second claim of the same epoch won: %v", err)
	}
	errs, err := c.CommitSharedChunks(ctx, f1, []SharedChunk{chunk(id, 0, ep1, 30, 31, "o5")})
	if err != nil || !errors.Is(errs[0], ErrFenced) {
		t.Fatalf("deposed leader's commit: %v %v", err, errs)
	}
	errs, err = c.CommitSharedChunks(ctx, f2, []SharedChunk{chunk(id, 0, ep2, 30, 31, "o6")})
	if err != nil || errs[0] != nil {
		t.Fatalf("new leader's commit: %v %v", err, errs)
	}

	// Floor lookups, and the state after a restart.
	for round := 0; round < 2; round++ {
		for _, tc := range []struct {
			from  int64
			max   int
			bases []int64
		}{
			{0, 10, []int64{0, 10, 15, 30}},
			{9, 1, []int64{0}},
			{10, 2, []int64{10, 15}},
			{14, 10, []int64{10, 15, 30}},
			{29, 1, []int64{15}},
			{31, 5, []int64{30}},
			{32, 5, nil},
			{1000, 5, nil},
			{-5, 1, []int64{0}},
		} {
			sp, err := c.SharedChunks(ctx, id, 0, tc.from, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			var bases []int64
			for _, ch := range sp.Chunks {
				bases = append(bases, ch.BaseOffset)
			}
			if fmt.Sprint(bases) != fmt.Sprint(tc.bases) || sp.StartOffset != 0 || sp.EndOffset != 32 {
				t.Fatalf("round %d: from %d max %d: %+v, want bases %v", round, tc.from, tc.max, sp, tc.bases)
			}
		}
		sp, err := c.SharedChunks(ctx, id, 1, 0, 10)
		if err != nil || sp.EndOffset != 1 || len(sp.Chunks) != 1 || sp.Chunks[0] != chunk(id, 1, ep1p1, 0, 0, "o1") {
			t.Fatalf("partition 1: %+v %v", sp, err)
		}
		if round == 0 {
			n.Close()
			n = openSingle(t, dir)
			c = n.Client()
		}
	}

	// Deleting the topic drops its chunks.
	if err := c.DeleteTopic(ctx, id); err != nil {
		t.Fatal(err)
	}
	if sp, err := c.SharedChunks(ctx, id, 0, 0, 10); err != nil || sp.EndOffset != 0 || len(sp.Chunks) != 0 {
		t.Fatalf("after deletion: %+v %v", sp, err)
	}
	n.Close()
}

// TestSharedCommitRace: two writers that both believe they lead a
// partition (the old leader has not noticed the new one's claim) commit
// concurrently, each a run of chunks at the offsets it assigned: the
// offsets go to exactly one of them, the deposed one's commits are all
// fenced, and the committed chunks are dense.
func TestSharedCommitRace(t *testing.T) {
	n, c, id, f1, f2 := sharedSetup(t, t.TempDir())
	defer n.Close()
	ctx := ctxT(t)
	top, _ := c.TopicByName("sh")
	ep1, err := c.ClaimSharedLeader(ctx, f1, "sh", 0, top.Partitions[0].LeaderEpoch)
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 40
	type outcome struct{ committed, fenced, other int }
	var out [2]outcome
	var wg sync.WaitGroup
	start := make(chan struct{})
	tenth := make(chan struct{})
	for w, f := range []Fence{f1, f2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			epoch := ep1
			if w == 1 {
				// Broker 2 takes over once broker 1 has committed ten
				// chunks; broker 1 keeps writing in the epoch it had.
				<-tenth
				e, err := c.ClaimSharedLeader(ctx, f, "sh", 0, ep1)
				if err != nil {
					t.Error(err)
					return
				}
				epoch = e
			}
			next := int64(0)
			for r := 0; r < rounds; r++ {
				// Each writer assigns offsets from the end it last saw.
				if sp, err := c.SharedChunks(ctx, id, 0, 0, 1); err == nil {
					next = sp.EndOffset
				}
				errs, err := c.CommitSharedChunks(ctx, f, []SharedChunk{chunk(id, 0, epoch, next, next+4, fmt.Sprintf("w%d-%d", w, r))})
				switch {
				case err != nil:
					out[w].other++
				case errs[0] == nil:
					out[w].committed++
					next += 5
					if w == 0 && out[w].committed == 10 {
						close(tenth)
					}
				case errors.Is(errs[0], ErrFenced):
					out[w].fenced++
				default:
					out[w].other++
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	sp, err := c.SharedChunks(ctx, id, 0, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	owners := map[string]int{}
	for _, ch := range sp.Chunks {
		if ch.BaseOffset != want {
			t.Fatalf("chunks not dense: %d after %d", ch.BaseOffset, want)
		}
		want = ch.LastOffset + 1
		owners[ch.Key[:2]]++
	}
	if sp.EndOffset != want {
		t.Fatalf("end %d, chunks end at %d", sp.EndOffset, want)
	}
	if out[1].committed != rounds || out[1].other != 0 {
		t.Fatalf("the new leader: %+v", out[1])
	}
	if owners["w1"] != rounds || owners["w0"] != out[0].committed || out[0].committed+out[0].fenced != rounds || out[0].committed < 10 {
		t.Fatalf("owners %v, old leader %+v", owners, out[0])
	}

	// Eight commits of one leader racing for the same base offset (a
	// retry racing its original): one wins each round.
	ep2 := sp.Chunks[len(sp.Chunks)-1].LeaderEpoch
	for r := 0; r < 10; r++ {
		base := want
		var wins sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for g := 0; g < 8; g++ {
			wins.Add(1)
			go func() {
				defer wins.Done()
				errs, err := c.CommitSharedChunks(ctx, f2, []SharedChunk{chunk(id, 0, ep2, base, base+2, fmt.Sprintf("r%d-%d", r, g))})
				if err != nil {
					t.Error(err)
					return
				}
				if errs[0] == nil {
					mu.Lock()
					won++
					mu.Unlock()
				} else if !errors.Is(errs[0], ErrInvalidRequest) {
					t.Errorf("round %d: %v", r, errs[0])
				}
			}()
		}
		wins.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d commits won base offset %d", r, won, base)
		}
		want = base + 3
	}
	if sp, err := c.SharedChunks(ctx, id, 0, 0, 1); err != nil || sp.EndOffset != want {
		t.Fatalf("end %+v %v, want %d", sp, err, want)
	}
	t.Logf("old leader committed %d before it was fenced, fenced %d times; new leader committed %d", out[0].committed, out[0].fenced, out[1].committed)
}

// TestSharedStartAndCondemn: advance_shared_start moves a partition's
// start offset only for its write leader in its current epoch, refuses an
// offset past the end, drops the chunk entries wholly below the new start
// and names their objects; condemn_shared_objects answers the objects no
// chunk references (an object still holding another partition's live
// chunk is not one) and refuses every later commit naming one of them,
// or an older object of the same writer. State survives a restart, and an
// old end-offset value (no stored start) still decodes.
func TestSharedStartAndCondemn(t *testing.T) {
	dir := t.TempDir()
	n, c, id, f1, f2 := sharedSetup(t, dir)
	ctx := ctxT(t)
	epoch := func(p int32) int32 {
		top, _ := c.TopicByName("sh")
		return top.Partitions[p].LeaderEpoch
	}
	ep0, err := c.ClaimSharedLeader(ctx, f1, "sh", 0, epoch(0))
	if err != nil {
		t.Fatal(err)
	}
	ep1, err := c.ClaimSharedLeader(ctx, f1, "sh", 1, epoch(1))
	if err != nil {
		t.Fatal(err)
	}
	key := func(seq int) string { return fmt.Sprintf("data/1/%d/%020d", f1.Incarnation, seq) }
	commit := func(chs ...SharedChunk) []error {
		t.Helper()
		errs, err := c.CommitSharedChunks(ctx, f1, chs)
		if err != nil {
			t.Fatal(err)
		}
		return errs
	}
	// Object 1 holds partition 0's 0..9 and partition 1's 0..4; object 2
	// partition 0's 10..19.
	if errs := commit(chunk(id, 0, ep0, 0, 9, key(1)), chunk(id, 1, ep1, 0, 4, key(1))); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if errs := commit(chunk(id, 0, ep0, 10, 19, key(2))); errs[0] != nil {
		t.Fatal(errs)
	}
	// An old state: partition 0's end offset stored as 8 bytes decodes
	// with the start at the first chunk.
	if sp, err := c.SharedChunks(ctx, id, 0, 0, 10); err != nil || sp.StartOffset != 0 || sp.EndOffset != 20 || len(sp.Chunks) != 2 {
		t.Fatalf("before: %+v %v", sp, err)
	}

	for _, tc := range []struct {
		name  string
		f     Fence
		epoch int32
		off   int64
		want  error
	}{
		{"not the leader", f2, ep0, 5, ErrFenced},
		{"an old epoch", f1, ep0 - 1, 5, ErrFenced},
		{"a stale incarnation", Fence{Broker: 1, Incarnation: f1.Incarnation + 1}, ep0, 5, ErrFenced},
		{"past the end", f1, ep0, 21, ErrInvalidRequest},
	} {
		if _, _, err := c.AdvanceSharedStart(ctx, tc.f, id, 0, tc.epoch, tc.off); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	start, keys, err := c.AdvanceSharedStart(ctx, f1, id, 0, ep0, 15)
	if err != nil || start != 15 || fmt.Sprint(keys) != fmt.Sprint([]string{key(1)}) {
		t.Fatalf("advance to 15: %d %v %v", start, keys, err)
	}
	if sp, err := c.SharedChunks(ctx, id, 0, 0, 10); err != nil || sp.StartOffset != 15 || sp.EndOffset != 20 ||
		len(sp.Chunks) != 1 || sp.Chunks[0].BaseOffset != 10 {
		t.Fatalf("after advancing to 15: %+v %v", sp, err)
	}
	// Object 1 still holds partition 1's chunk; object 3 (a writer died
	// before committing it) and object 2's sibling are not referenced.
	unref, err := c.UnreferencedSharedObjects(ctx, []string{key(1), key(2), key(3), "data/x", key(3)})
	if err != nil || fmt.Sprint(unref) != fmt.Sprint([]string{key(3)}) {
		t.Fatalf("unreferenced: %v %v", unref, err)
	}
	got, err := c.CondemnSharedObjects(ctx, []string{key(1), key(2), key(3), "data/x", "other/1/1/1", key(3)})
	if err != nil || fmt.Sprint(got) != fmt.Sprint([]string{key(3)}) {
		t.Fatalf("condemn: %v %v", got, err)
	}
	// A commit naming a condemned object, or an older one of the same
	// writer, is fenced; a newer one commits.
	if errs := commit(chunk(id, 0, ep0, 20, 21, key(3))); !errors.Is(errs[0], ErrFenced) {
		t.Fatalf("commit of a condemned object: %v", errs)
	}
	if errs := commit(chunk(id, 1, ep1, 5, 6, fmt.Sprintf("data/1/%d/%d", f1.Incarnation, 2))); !errors.Is(errs[0], ErrFenced) {
		t.Fatalf("commit of an older object: %v", errs)
	}
	if errs := commit(chunk(id, 0, ep0, 20, 29, key(4))); errs[0] != nil {
		t.Fatal(errs)
	}
	// Partition 1 moves past object 1: now no chunk references it.
	if _, keys, err := c.AdvanceSharedStart(ctx, f1, id, 1, ep1, 5); err != nil || fmt.Sprint(keys) != fmt.Sprint([]string{key(1)}) {
		t.Fatalf("advance partition 1: %v %v", keys, err)
	}
	if got, err := c.CondemnSharedObjects(ctx, []string{key(1)}); err != nil || fmt.Sprint(got) != fmt.Sprint([]string{key(1)}) {
		t.Fatalf("condemn object 1: %v %v", got, err)
	}
	if sp, err := c.SharedChunks(ctx, id, 1, 0, 10); err != nil || sp.StartOffset != 5 || sp.EndOffset != 5 || len(sp.Chunks) != 0 {
		t.Fatalf("partition 1 emptied: %+v %v", sp, err)
	}
	// The start stays where it was moved after the partition emptied
	// and after later commits; an offset below it changes nothing.
	if start, keys, err := c.AdvanceSharedStart(ctx, f1, id, 0, ep0, 30); err != nil || start != 30 || len(keys) != 2 {
		t.Fatalf("advance to the end: %d %v %v", start, keys, err)
	}
	if errs := commit(chunk(id, 0, ep0, 30, 31, key(5))); errs[0] != nil {
		t.Fatal(errs)
	}
	n.Close()
	n = openSingle(t, dir)
	c = n.Client()
	if start, keys, err := c.AdvanceSharedStart(ctx, f1, id, 0, ep0, 12); err != nil || start != 30 || len(keys) != 0 {
		t.Fatalf("advance below the start: %d %v %v", start, keys, err)
	}
	if sp, err := c.SharedChunks(ctx, id, 0, 0, 10); err != nil || sp.StartOffset != 30 || sp.EndOffset != 32 || len(sp.Chunks) != 1 {
		t.Fatalf("after restart: %+v %v", sp, err)
	}
	if errs := commit(chunk(id, 1, ep1, 5, 6, key(3))); !errors.Is(errs[0], ErrFenced) {
		t.Fatalf("condemned after restart: %v", errs)
	}
	n.Close()
}

// sharedRefs reads the stored reference counts and recounts them from the
// chunk entries.
func sharedRefs(t *testing.T, n *Node) (stored, counted map[string]uint64) {
	t.Helper()
	stored, counted = map[string]uint64{}, map[string]uint64{}
	err := n.db.View(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketSharedRefs).ForEach(func(k, v []byte) error {
			stored[string(k)] = getU64(v)
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketSharedChunks).ForEach(func(_, v []byte) error {
			var ch SharedChunk
			mustUnmarshal(v, &ch)
			counted[ch.Key]++
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return stored, counted
}

// TestSharedReferenceCounts: every command that adds or drops chunk
// entries (commit, retention's start move, a replacement, deleting the
// topic) keeps each object's reference count equal to the number of
// entries naming it, in the same apply; an object whose count reached
// zero has none and is answered unreferenced by a lookup of its own key.
func TestSharedReferenceCounts(t *testing.T) {
	dir := t.TempDir()
	n, c, id, f1, _ := sharedSetup(t, dir)
	defer func() { n.Close() }()
	ctx := ctxT(t)
	epoch := func(p int32) int32 {
		top, _ := c.TopicByName("sh")
		return top.Partitions[p].LeaderEpoch
	}
	ep0, err := c.ClaimSharedLeader(ctx, f1, "sh", 0, epoch(0))
	if err != nil {
		t.Fatal(err)
	}
	ep1, err := c.ClaimSharedLeader(ctx, f1, "sh", 1, epoch(1))
	if err != nil {
		t.Fatal(err)
	}
	key := func(seq int) string { return fmt.Sprintf("data/1/%d/%020d", f1.Incarnation, seq) }
	merged := func(seq int) string { return fmt.Sprintf("data/1/%d-c/%020d", f1.Incarnation, seq) }
	commit := func(chs ...SharedChunk) error {
		errs, err := c.CommitSharedChunks(ctx, f1, chs)
		if err != nil {
			return err
		}
		return errors.Join(errs...)
	}
	c0 := func(base, last int64, k string) SharedChunk { return chunk(id, 0, ep0, base, last, k) }
	steps := []struct {
		name string
		do   func() error
		want map[string]uint64
	}{
		{"two partitions in one object", func() error { return commit(c0(0, 9, key(1)), chunk(id, 1, ep1, 0, 4, key(1))) },
			map[string]uint64{key(1): 2}},
		{"more objects", func() error {
			if err := commit(c0(10, 19, key(2))); err != nil {
				return err
			}
			return commit(c0(20, 29, key(3)), chunk(id, 1, ep1, 5, 9, key(3)))
		}, map[string]uint64{key(1): 2, key(2): 1, key(3): 2}},
		{"a refused commit counts nothing", func() error {
			if err := commit(c0(5, 40, key(4))); !errors.Is(err, ErrInvalidRequest) {
				return fmt.Errorf("commit below the end: %v", err)
			}
			return nil
		}, map[string]uint64{key(1): 2, key(2): 1, key(3): 2}},
		{"retention drops partition 0's first chunk", func() error {
			_, _, err := c.AdvanceSharedStart(ctx, f1, id, 0, ep0, 10)
			return err
		}, map[string]uint64{key(1): 1, key(2): 1, key(3): 2}},
		{"a replacement moves the references", func() error {
			return c.ReplaceSharedChunks(ctx, f1, []SharedChunk{c0(10, 19, key(2)), c0(20, 29, key(3))},
				SharedChunk{TopicID: id, Partition: 0, LeaderEpoch: ep0, BaseOffset: 10, LastOffset: 29, Key: merged(1), Len: 200})
		}, map[string]uint64{key(1): 1, key(3): 1, merged(1): 1}},
		{"deleting the topic drops every reference", func() error { return c.DeleteTopic(ctx, id) },
			map[string]uint64{}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		stored, counted := sharedRefs(t, n)
		if fmt.Sprint(stored) != fmt.Sprint(counted) || fmt.Sprint(stored) != fmt.Sprint(st.want) {
			t.Fatalf("%s: stored %v, counted from the chunks %v, want %v", st.name, stored, counted, st.want)
		}
	}
	unref, err := c.UnreferencedSharedObjects(ctx, []string{key(1), merged(1), key(9)})
	if err != nil || fmt.Sprint(unref) != fmt.Sprint([]string{key(1), merged(1), key(9)}) {
		t.Fatalf("unreferenced after the delete: %v %v", unref, err)
	}
}

// TestSharedReferenceCountsRebuilt: a database from before the reference
// counts (no shared_refs bucket) gets them from its chunk entries when it
// is opened, and garbage collection's lookups answer from them.
func TestSharedReferenceCountsRebuilt(t *testing.T) {
	dir := t.TempDir()
	n, c, id, f1, _ := sharedSetup(t, dir)
	ctx := ctxT(t)
	top, _ := c.TopicByName("sh")
	ep0, err := c.ClaimSharedLeader(ctx, f1, "sh", 0, top.Partitions[0].LeaderEpoch)
	if err != nil {
		t.Fatal(err)
	}
	key := func(seq int) string { return fmt.Sprintf("data/1/%d/%020d", f1.Incarnation, seq) }
	for i := range 5 {
		if errs, err := c.CommitSharedChunks(ctx, f1, []SharedChunk{chunk(id, 0, ep0, int64(i*10), int64(i*10+9), key(1+i/2))}); err != nil || errs[0] != nil {
			t.Fatal(errs, err)
		}
	}
	want := map[string]uint64{key(1): 2, key(2): 2, key(3): 1}
	if stored, _ := sharedRefs(t, n); fmt.Sprint(stored) != fmt.Sprint(want) {
		t.Fatalf("before: %v", stored)
	}
	// Make it an old database: no reference counts.
	if err := n.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketSharedRefs) }); err != nil {
		t.Fatal(err)
	}
	n.Close()
	n = openSingle(t, dir)
	defer n.Close()
	c = n.Client()
	stored, counted := sharedRefs(t, n)
	if fmt.Sprint(stored) != fmt.Sprint(want) || fmt.Sprint(counted) != fmt.Sprint(want) {
		t.Fatalf("rebuilt: %v, counted %v, want %v", stored, counted, want)
	}
	unref, err := c.UnreferencedSharedObjects(ctx, []string{key(1), key(3), key(4)})
	if err != nil || fmt.Sprint(unref) != fmt.Sprint([]string{key(4)}) {
		t.Fatalf("unreferenced: %v %v", unref, err)
	}

	// A backup taken by such a version, restored: the counts are
	// rebuilt by the restore (which creates every bucket, so the open
	// that follows finds one).
	backup := filepath.Join(t.TempDir(), "meta.backup")
	f, err := os.Create(backup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Backup(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	deleteBucket(t, backup, bucketSharedRefs)
	rdir := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(backup, rdir, 7, "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	r, err := Open(testConfig(t, 7, rdir))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if stored, _ := sharedRefs(t, r); fmt.Sprint(stored) != fmt.Sprint(want) {
		t.Fatalf("restored: %v, want %v", stored, want)
	}

	// A snapshot image from such a version, installed (the backup is a
	// copy of the database, as an image is).
	image, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ReadBackup(backup)
	if err != nil {
		t.Fatal(err)
	}
	idb, err := installImage(t, image, info.Applied)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	if err := idb.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSharedRefs).ForEach(func(k, v []byte) error { got[string(k)] = getU64(v); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("installed image: %v, want %v", got, want)
	}
}

// TestSharedReplace: replace_shared_chunks swaps consecutive chunk
// entries for one merged chunk holding the same offsets, all or nothing,
// only for the partition's write leader in its epoch, only while the
// replaced entries are still stored as read, and never for a condemned
// object; readers' floor lookups then find the merged chunk, the end
// offset does not move and later commits go on.
func TestSharedReplace(t *testing.T) {
	dir := t.TempDir()
	n, c, id, f1, f2 := sharedSetup(t, dir)
	defer n.Close()
	ctx := ctxT(t)
	top, _ := c.TopicByName("sh")
	ep, err := c.ClaimSharedLeader(ctx, f1, "sh", 0, top.Partitions[0].LeaderEpoch)
	if err != nil {
		t.Fatal(err)
	}
	key := func(seq int) string { return fmt.Sprintf("data/1/%d/%020d", f1.Incarnation, seq) }
	mkey := func(seq int) string { return fmt.Sprintf("data/1/%d-c/%020d", f1.Incarnation, seq) }
	var olds []SharedChunk
	for i := range 6 {
		ch := chunk(id, 0, ep, int64(i*10), int64(i*10+9), key(i+1))
		if errs, err := c.CommitSharedChunks(ctx, f1, []SharedChunk{ch}); err != nil || errs[0] != nil {
			t.Fatal(errs, err)
		}
		olds = append(olds, ch)
	}
	// Chunks 1..3 (offsets 10..39) merged into one object.
	m := SharedChunk{TopicID: id, Partition: 0, LeaderEpoch: ep, BaseOffset: 10, LastOffset: 39, Key: mkey(1), Len: 300, MaxTimestamp: 1039}
	changed := olds[2]
	changed.Len++
	for _, tc := range []struct {
		name string
		f    Fence
		old  []SharedChunk
		m    func(SharedChunk) SharedChunk
		want error
	}{
		{"a stale incarnation", Fence{Broker: 1, Incarnation: f1.Incarnation + 1}, olds[1:4], nil, ErrFenced},
		{"not the leader", f2, olds[1:4], nil, ErrFenced},
		{"an old epoch", f1, olds[1:4], func(m SharedChunk) SharedChunk { m.LeaderEpoch--; return m }, ErrFenced},
		{"short of the last chunk", f1, olds[1:3], nil, ErrInvalidRequest},
		{"not starting at the first", f1, olds[2:4], nil, ErrInvalidRequest},
		{"a gap", f1, []SharedChunk{olds[1], olds[3]}, func(m SharedChunk) SharedChunk { return m }, ErrInvalidRequest},
		{"a chunk not as stored", f1, []SharedChunk{olds[1], changed, olds[3]}, nil, ErrInvalidRequest},
		{"no chunks", f1, nil, nil, ErrInvalidRequest},
		{"an empty merged chunk", f1, olds[1:4], func(m SharedChunk) SharedChunk { m.Len = 0; return m }, ErrInvalidRequest},
		{"another partition", f1, olds[1:4], func(m SharedChunk) SharedChunk { m.Partition = 1; return m }, ErrFenced},
	} {
		mm := m
		if tc.m != nil {
			mm = tc.m(m)
		}
		if err := c.ReplaceSharedChunks(ctx, tc.f, tc.old, mm); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if sp, _ := c.SharedChunks(ctx, id, 0, 0, 10); fmt.Sprint(sp.Chunks) != fmt.Sprint(olds) {
			t.Fatalf("%s changed the chunks: %v", tc.name, sp.Chunks)
		}
	}
	if err := c.ReplaceSharedChunks(ctx, f1, olds[1:4], m); err != nil {
		t.Fatal(err)
	}
	want := []SharedChunk{olds[0], m, olds[4], olds[5]}
	if sp, err := c.SharedChunks(ctx, id, 0, 0, 10); err != nil || fmt.Sprint(sp.Chunks) != fmt.Sprint(want) || sp.EndOffset != 60 {
		t.Fatalf("after the swap: %+v %v", sp, err)
	}
	for _, off := range []int64{10, 25, 39} {
		if sp, err := c.SharedChunks(ctx, id, 0, off, 1); err != nil || len(sp.Chunks) != 1 || sp.Chunks[0] != m {
			t.Fatalf("floor of %d: %+v %v", off, sp, err)
		}
	}
	// The same swap again: its chunks are gone.
	if err := c.ReplaceSharedChunks(ctx, f1, olds[1:4], m); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("second swap: %v", err)
	}
	unref, err := c.UnreferencedSharedObjects(ctx, []string{key(1), key(2), key(3), key(4), mkey(1)})
	if err != nil || fmt.Sprint(unref) != fmt.Sprint([]string{key(2), key(3), key(4)}) {
		t.Fatalf("unreferenced after the swap: %v %v", unref, err)
	}
	// A condemned merged object is never swapped in, and the
	// compactor's condemned sequence is its own: the uploads' commits
	// go on.
	if got, err := c.CondemnSharedObjects(ctx, []string{mkey(2)}); err != nil || len(got) != 1 {
		t.Fatalf("condemn: %v %v", got, err)
	}
	m2 := SharedChunk{TopicID: id, Partition: 0, LeaderEpoch: ep, BaseOffset: 40, LastOffset: 59, Key: mkey(2), Len: 200}
	if err := c.ReplaceSharedChunks(ctx, f1, olds[4:6], m2); !errors.Is(err, ErrFenced) {
		t.Fatalf("condemned merged object: %v", err)
	}
	if errs, err := c.CommitSharedChunks(ctx, f1, []SharedChunk{chunk(id, 0, ep, 60, 69, key(7))}); err != nil || errs[0] != nil {
		t.Fatalf("commit after the compactor's object was condemned: %v %v", errs, err)
	}
	m2.Key = mkey(3)
	if err := c.ReplaceSharedChunks(ctx, f1, olds[4:6], m2); err != nil {
		t.Fatal(err)
	}
	stored, counted := sharedRefs(t, n)
	if fmt.Sprint(stored) != fmt.Sprint(counted) {
		t.Fatalf("reference counts %v, chunk entries %v", stored, counted)
	}
}

// TestSharedReassignment: a shared partition's reassignment completes when
// it is recorded (there is no data on the replicas to move, and no raft
// leader that would ever finish it): the voters are the target at once and
// nothing is listed as in progress. A leader that stays keeps its epoch; a
// leader moved out is deposed (its commits fenced) and the first new voter
// named leader in the next epoch, which it then claims.
func TestSharedReassignment(t *testing.T) {
	dir := t.TempDir()
	_, c, id, f1, f2 := sharedSetup(t, dir)
	ctx := ctxT(t)
	inc3, err := c.RegisterBroker(ctx, Broker{ID: 3, Role: RoleWrite})
	if err != nil {
		t.Fatal(err)
	}
	f3 := Fence{Broker: 3, Incarnation: inc3}
	top, _ := c.TopicByName("sh")
	ep1, err := c.ClaimSharedLeader(ctx, f1, "sh", 0, top.Partitions[0].LeaderEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if errs, err := c.CommitSharedChunks(ctx, f1, []SharedChunk{chunk(id, 0, ep1, 0, 9, "o1")}); err != nil || errs[0] != nil {
		t.Fatalf("commit: %v %v", err, errs)
	}
	// [1 2] -> [3 1]: broker 1 stays, and stays leader.
	if err := c.AlterReassignment(ctx, "sh", 0, []int32{3, 1}, true); err != nil {
		t.Fatal(err)
	}
	p := func() Partition { top, _ := c.TopicByName("sh"); return top.Partitions[0] }
	if got := p(); got.Reassigning() || !slices.Equal(got.Voters, []int32{3, 1}) || got.Leader != 1 || got.LeaderEpoch != ep1 {
		t.Fatalf("after [1 2] -> [3 1]: %+v, want voters [3 1], leader 1 in epoch %d, nothing in progress", got, ep1)
	}
	if errs, err := c.CommitSharedChunks(ctx, f1, []SharedChunk{chunk(id, 0, ep1, 10, 19, "o2")}); err != nil || errs[0] != nil {
		t.Fatalf("commit of the leader that stayed: %v %v", err, errs)
	}
	if _, err := c.ClaimSharedLeader(ctx, f2, "sh", 0, ep1); err == nil {
		t.Fatal("broker 2, no longer a voter, claimed the partition")
	}
	// [3 1] -> [2 3]: broker 1 is out; broker 2 is named leader in the
	// next epoch and broker 1's commits are fenced.
	if err := c.AlterReassignment(ctx, "sh", 0, []int32{2, 3}, true); err != nil {
		t.Fatal(err)
	}
	got := p()
	if got.Reassigning() || !slices.Equal(got.Voters, []int32{2, 3}) || got.Leader != 2 || got.LeaderEpoch != ep1+1 {
		t.Fatalf("after [3 1] -> [2 3]: %+v, want voters [2 3], leader 2 in epoch %d, nothing in progress", got, ep1+1)
	}
	if errs, err := c.CommitSharedChunks(ctx, f1, []SharedChunk{chunk(id, 0, ep1, 20, 29, "o3")}); err != nil || !errors.Is(errs[0], ErrFenced) {
		t.Fatalf("commit of the deposed leader: %v %v, want fenced", err, errs)
	}
	ep3, err := c.ClaimSharedLeader(ctx, f2, "sh", 0, got.LeaderEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if errs, err := c.CommitSharedChunks(ctx, f2, []SharedChunk{chunk(id, 0, ep3, 20, 29, "o4")}); err != nil || errs[0] != nil {
		t.Fatalf("commit of the new leader: %v %v", err, errs)
	}
	if _, err := c.ClaimSharedLeader(ctx, f3, "sh", 0, ep3); err != nil {
		t.Fatalf("voter 3 claiming: %v", err)
	}
	// Nothing is in progress, so there is nothing to cancel.
	if err := c.AlterReassignment(ctx, "sh", 0, nil, false); !errors.Is(err, ErrNoReassignment) {
		t.Fatalf("cancel: %v, want no reassignment in progress", err)
	}
}
