package txn

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metastore"
)

// markerLog records the markers the coordinator asks for, as a partition
// leader would take them; fail makes it refuse (a leader away).
type markerLog struct {
	mu   sync.Mutex
	fail atomic.Bool
	got  []string
}

func (m *markerLog) WriteMarkers(_ context.Context, mk Marker, tps []metastore.TopicPartition) error {
	pid, epoch, commit := mk.ProducerID, mk.Epoch, mk.Commit
	if mk.CoordinatorEpoch <= 0 {
		return fmt.Errorf("marker with coordinator epoch %d", mk.CoordinatorEpoch)
	}
	if m.fail.Load() {
		return errors.New("leader not available")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tp := range tps {
		m.got = append(m.got, fmt.Sprintf("%s-%d:%d/%d:%v", tp.Topic, tp.Partition, pid, epoch, commit))
	}
	return nil
}

func (m *markerLog) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.got
	m.got = nil
	slices.Sort(g)
	return g
}

type env struct {
	c       *Coordinator
	store   *metastore.Client
	markers *markerLog
	now     atomic.Int64 // unix ms
}

// newEnv runs a coordinator over a real single-node metastore.
func newEnv(t *testing.T) *env {
	t.Helper()
	mc := metastore.Default()
	mc.DataDir = filepath.Join(t.TempDir(), "meta")
	mc.TickInterval = 10 * time.Millisecond
	mc.Logger = zerolog.Nop()
	meta, err := metastore.Open(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := meta.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	e := &env{store: meta.Client(), markers: &markerLog{}}
	e.now.Store(1_000_000)
	c, err := New(Config{
		Store: e.store, Markers: e.markers,
		NewProducerID: func(ctx context.Context) (int64, error) { return e.store.AllocateProducerIDs(ctx, 1) },
		Now:           func() time.Time { return time.UnixMilli(e.now.Load()) },
		MaxTimeout:    time.Minute, IDExpiration: time.Hour, CompleteTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.c = c
	return e
}

func (e *env) state(t *testing.T, id string) metastore.TxnState {
	t.Helper()
	st, _, err := e.store.GetTxn(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitStatus waits for a background completion.
func (e *env) waitStatus(t *testing.T, id string, want metastore.TxnStatus) metastore.TxnState {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := e.state(t, id)
		if st.Status == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: status %s, want %s", id, st.Status, want)
		}
	}
}

var tpA, tpB = metastore.TopicPartition{Topic: "a", Partition: 0}, metastore.TopicPartition{Topic: "b", Partition: 1}

func code(c int16) string {
	if c == 0 {
		return "OK"
	}
	return kerr.ErrorForCode(c).(*kerr.Error).Message
}

// TestTransitions walks one transactional id through Kafka's state
// machine, step by step, checking each answer, the stored state and the
// markers written.
func TestTransitions(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	const id = "tx"
	pid, epoch, c := e.c.InitProducerID(ctx, id, 10_000, -1, -1)
	if c != 0 || epoch != 0 {
		t.Fatalf("first InitProducerId: %s epoch %d", code(c), epoch)
	}
	type step struct {
		name       string
		do         func() int16
		wantCode   int16
		wantStatus metastore.TxnStatus
		wantMarks  []string
	}
	var cur int16 = 0 // the producer's epoch as the steps move it
	mark := func(tp metastore.TopicPartition, e int16, commit bool) string {
		return fmt.Sprintf("%s-%d:%d/%d:%v", tp.Topic, tp.Partition, pid, e, commit)
	}
	steps := []step{
		{"EndTxn with nothing open", func() int16 { return e.c.EndTxn(ctx, id, pid, cur, true, 0).Code },
			kerr.InvalidTxnState.Code, metastore.TxnEmpty, nil},
		{"AddPartitions other producer id", func() int16 { return e.c.AddPartitions(ctx, id, pid+1, cur, []metastore.TopicPartition{tpA}) },
			kerr.InvalidProducerIDMapping.Code, metastore.TxnEmpty, nil},
		{"AddPartitions other epoch", func() int16 { return e.c.AddPartitions(ctx, id, pid, cur+1, []metastore.TopicPartition{tpA}) },
			kerr.ProducerFenced.Code, metastore.TxnEmpty, nil},
		{"AddPartitions unknown id", func() int16 { return e.c.AddPartitions(ctx, "nope", pid, cur, []metastore.TopicPartition{tpA}) },
			kerr.InvalidProducerIDMapping.Code, metastore.TxnEmpty, nil},
		{"AddPartitions", func() int16 { return e.c.AddPartitions(ctx, id, pid, cur, []metastore.TopicPartition{tpA, tpB}) },
			0, metastore.TxnOngoing, nil},
		{"AddPartitions again (no change)", func() int16 { return e.c.AddPartitions(ctx, id, pid, cur, []metastore.TopicPartition{tpA}) },
			0, metastore.TxnOngoing, nil},
		{"AddOffsets", func() int16 { return e.c.AddOffsets(ctx, id, pid, cur, "g") }, 0, metastore.TxnOngoing, nil},
		{"AddOffsets empty group", func() int16 { return e.c.AddOffsets(ctx, id, pid, cur, "") }, kerr.InvalidGroupID.Code, metastore.TxnOngoing, nil},
		{"EndTxn commit", func() int16 { return e.c.EndTxn(ctx, id, pid, cur, true, 0).Code },
			0, metastore.TxnCompleteCommit, []string{mark(tpA, 0, true), mark(tpB, 0, true)}},
		{"EndTxn commit retried", func() int16 { return e.c.EndTxn(ctx, id, pid, cur, true, 0).Code }, 0, metastore.TxnCompleteCommit, nil},
		{"EndTxn abort after commit", func() int16 { return e.c.EndTxn(ctx, id, pid, cur, false, 0).Code },
			kerr.InvalidTxnState.Code, metastore.TxnCompleteCommit, nil},
		{"AddPartitions starts the next", func() int16 { return e.c.AddPartitions(ctx, id, pid, cur, []metastore.TopicPartition{tpB}) },
			0, metastore.TxnOngoing, nil},
		{"EndTxn abort", func() int16 { return e.c.EndTxn(ctx, id, pid, cur, false, 0).Code },
			0, metastore.TxnCompleteAbort, []string{mark(tpB, 0, false)}},
		{"AddPartitions for a third", func() int16 { return e.c.AddPartitions(ctx, id, pid, cur, []metastore.TopicPartition{tpA}) },
			0, metastore.TxnOngoing, nil},
		{"InitProducerId with it open: fenced and aborted at epoch+1", func() int16 {
			_, _, c := e.c.InitProducerID(ctx, id, 10_000, -1, -1)
			e.waitStatus(t, id, metastore.TxnCompleteAbort)
			return c
		}, kerr.ConcurrentTransactions.Code, metastore.TxnCompleteAbort, []string{mark(tpA, 1, false)}},
		{"InitProducerId retried: epoch 2", func() int16 {
			_, ep, c := e.c.InitProducerID(ctx, id, 10_000, -1, -1)
			if ep != 2 {
				t.Errorf("epoch %d, want 2", ep)
			}
			return c
		}, 0, metastore.TxnEmpty, nil},
		{"old producer fenced", func() int16 { return e.c.AddPartitions(ctx, id, pid, cur, []metastore.TopicPartition{tpA}) },
			kerr.ProducerFenced.Code, metastore.TxnEmpty, nil},
		{"KIP-360 InitProducerId with a stale epoch", func() int16 {
			_, _, c := e.c.InitProducerID(ctx, id, 10_000, pid, 0)
			return c
		}, kerr.ProducerFenced.Code, metastore.TxnEmpty, nil},
		{"KIP-360 retry of the bump to 2 (its answer lost)", func() int16 {
			_, ep, c := e.c.InitProducerID(ctx, id, 10_000, pid, 1)
			if ep != 2 {
				t.Errorf("epoch %d, want 2", ep)
			}
			return c
		}, 0, metastore.TxnEmpty, nil},
		{"KIP-360 InitProducerId with the current epoch bumps", func() int16 {
			_, ep, c := e.c.InitProducerID(ctx, id, 10_000, pid, 2)
			if ep != 3 {
				t.Errorf("epoch %d, want 3", ep)
			}
			return c
		}, 0, metastore.TxnEmpty, nil},
		{"timeout over transaction.max.timeout.ms", func() int16 {
			_, _, c := e.c.InitProducerID(ctx, id, 120_000, -1, -1)
			return c
		}, kerr.InvalidTransactionTimeout.Code, metastore.TxnEmpty, nil},
		{"empty transactional id", func() int16 {
			_, _, c := e.c.InitProducerID(ctx, "", 1000, -1, -1)
			return c
		}, kerr.InvalidRequest.Code, metastore.TxnEmpty, nil},
	}
	for _, s := range steps {
		if s.name == "old producer fenced" {
			cur = 0
		}
		got := s.do()
		if got != s.wantCode {
			t.Errorf("%s: %s, want %s", s.name, code(got), code(s.wantCode))
		}
		if st := e.state(t, id); st.Status != s.wantStatus {
			t.Errorf("%s: status %s, want %s", s.name, st.Status, s.wantStatus)
		}
		if m := e.markers.take(); !slices.Equal(m, s.wantMarks) {
			t.Errorf("%s: markers %v, want %v", s.name, m, s.wantMarks)
		}
	}
	if c, a, to := e.c.Stats(); c != 1 || a != 2 || to != 0 {
		t.Errorf("stats: %d committed, %d aborted, %d timed out; want 1, 2 (one by EndTxn, one by InitProducerId), 0", c, a, to)
	}
}

// TestOffsetsCommitWithDecision: offsets a transaction commits for a group
// are invisible until the commit decision, then committed in the same
// metastore write; an abort discards them.
func TestOffsetsCommitWithDecision(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for _, commit := range []bool{true, false} {
		id := fmt.Sprintf("offs-%v", commit)
		group := "g-" + id
		pid, ep, c := e.c.InitProducerID(ctx, id, 10_000, -1, -1)
		if c != 0 {
			t.Fatal(code(c))
		}
		if c := e.c.AddOffsets(ctx, id, pid, ep, group); c != 0 {
			t.Fatal(code(c))
		}
		if err := e.store.TxnCommitOffsets(ctx, metastore.Fence{}, id, pid, ep+1, group, []metastore.OffsetCommit{{TopicPartition: tpA, Offset: 5}}); !errors.Is(err, metastore.ErrTxnFenced) {
			t.Errorf("TxnCommitOffsets with another epoch: %v, want ErrTxnFenced", err)
		}
		if err := e.store.TxnCommitOffsets(ctx, metastore.Fence{}, id, pid, ep, group, []metastore.OffsetCommit{{TopicPartition: tpA, Offset: 42}}); err != nil {
			t.Fatal(err)
		}
		if offs, _ := e.store.FetchOffsets(ctx, group, nil); len(offs) != 0 {
			t.Errorf("commit=%v: offsets visible while open: %v", commit, offs)
		}
		if tps, _ := e.store.PendingTxnOffsets(ctx, group); !slices.Equal(tps, []metastore.TopicPartition{tpA}) {
			t.Errorf("commit=%v: pending %v, want [%v]", commit, tps, tpA)
		}
		if c := e.c.EndTxn(ctx, id, pid, ep, commit, 0).Code; c != 0 {
			t.Fatal(code(c))
		}
		offs, _ := e.store.FetchOffsets(ctx, group, nil)
		if commit && (len(offs) != 1 || offs[0].Offset != 42) {
			t.Errorf("after commit: offsets %v, want a:0 at 42", offs)
		}
		if !commit && len(offs) != 0 {
			t.Errorf("after abort: offsets %v, want none", offs)
		}
		if tps, _ := e.store.PendingTxnOffsets(ctx, group); len(tps) != 0 {
			t.Errorf("commit=%v: pending after the end: %v", commit, tps)
		}
	}
}

// TestMarkersRetried: a decision stands when the markers cannot be
// written; the coordinator keeps trying and completes once they can.
func TestMarkersRetried(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	pid, ep, _ := e.c.InitProducerID(ctx, "r", 10_000, -1, -1)
	if c := e.c.AddPartitions(ctx, "r", pid, ep, []metastore.TopicPartition{tpA}); c != 0 {
		t.Fatal(code(c))
	}
	e.markers.fail.Store(true)
	if c := e.c.EndTxn(ctx, "r", pid, ep, true, 0).Code; c != 0 {
		t.Fatalf("EndTxn: %s", code(c))
	}
	if st := e.state(t, "r"); st.Status != metastore.TxnPrepareCommit {
		t.Fatalf("status %s, want PrepareCommit while markers fail", st.Status)
	}
	if c := e.c.AddPartitions(ctx, "r", pid, ep, []metastore.TopicPartition{tpA}); c != kerr.ConcurrentTransactions.Code {
		t.Errorf("AddPartitions while completing: %s, want CONCURRENT_TRANSACTIONS", code(c))
	}
	e.markers.fail.Store(false)
	e.waitStatus(t, "r", metastore.TxnCompleteCommit)
	if m := e.markers.take(); len(m) != 1 {
		t.Errorf("markers %v, want one", m)
	}
}

// TestSweep: a transaction open past its timeout is aborted with the
// producer's epoch bumped (fencing it); an id idle past
// transactional.id.expiration.ms is removed.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	pid, ep, _ := e.c.InitProducerID(ctx, "slow", 1000, -1, -1)
	if c := e.c.AddPartitions(ctx, "slow", pid, ep, []metastore.TopicPartition{tpB}); c != 0 {
		t.Fatal(code(c))
	}
	e.c.InitProducerID(ctx, "idle", 1000, -1, -1)
	e.c.Sweep(ctx, true)
	if st := e.state(t, "slow"); st.Status != metastore.TxnOngoing {
		t.Fatalf("swept before its timeout: %s", st.Status)
	}
	e.now.Add(1500)
	e.c.Sweep(ctx, false)
	st := e.waitStatus(t, "slow", metastore.TxnCompleteAbort)
	if st.Epoch != ep+1 {
		t.Errorf("timed-out abort left epoch %d, want %d", st.Epoch, ep+1)
	}
	if m := e.markers.take(); !slices.Equal(m, []string{fmt.Sprintf("b-1:%d/%d:false", pid, ep+1)}) {
		t.Errorf("markers %v", m)
	}
	// The abort is counted once its write returns, which may be after
	// the state is visible.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, a, to := e.c.Stats()
		if a == 1 && to == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats: %d aborted, %d timed out; want 1 and 1", a, to)
		}
	}
	if c := e.c.EndTxn(ctx, "slow", pid, ep, true, 0).Code; c != kerr.ProducerFenced.Code {
		t.Errorf("EndTxn of the timed-out producer: %s, want PRODUCER_FENCED", code(c))
	}
	e.now.Add(time.Hour.Milliseconds() + 1)
	e.c.Sweep(ctx, true)
	if _, found, _ := e.store.GetTxn(ctx, "idle"); found {
		t.Error("idle id not expired")
	}
}

// TestTwoCoordinators: two coordinators over one metastore (a takeover
// while the old one still answers) never both move a state: a write
// based on a stale version fails with CONCURRENT_TRANSACTIONS.
func TestTwoCoordinators(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.c.InitProducerID(ctx, "two", 10_000, -1, -1)
	st := e.state(t, "two")
	next := st
	next.Status = metastore.TxnOngoing
	if _, err := e.store.PutTxn(ctx, next, st.Version, metastore.TxnKeepOffsets); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PutTxn(ctx, next, st.Version, metastore.TxnKeepOffsets); !errors.Is(err, metastore.ErrTxnConflict) {
		t.Errorf("second write on the same version: %v, want ErrTxnConflict", err)
	}
	if _, err := e.store.PutTxn(ctx, next, 0, metastore.TxnKeepOffsets); !errors.Is(err, metastore.ErrTxnConflict) {
		t.Errorf("create over an existing state: %v, want ErrTxnConflict", err)
	}
}

func TestOwner(t *testing.T) {
	brokers := []metastore.Broker{
		{ID: 1, Role: metastore.RoleWrite}, {ID: 2, Role: metastore.RoleWrite}, {ID: 3, Role: metastore.RoleCombined},
		{ID: 4, Role: metastore.RoleRead}, {ID: 5, Role: metastore.RoleWrite, ShuttingDown: true},
	}
	counts := map[int32]int{}
	for i := range 300 {
		o := Owner(fmt.Sprint("id-", i), brokers)
		counts[o]++
		// Only the ids of a broker that leaves move.
		if o != 1 {
			if o2 := Owner(fmt.Sprint("id-", i), brokers[1:]); o2 != o {
				t.Fatalf("id-%d moved from %d to %d when broker 1 left", i, o, o2)
			}
		}
	}
	if counts[4] != 0 || counts[5] != 0 || counts[1] < 50 || counts[2] < 50 || counts[3] < 50 {
		t.Errorf("owners %v: want only write brokers not shutting down, spread", counts)
	}
	if Owner("x", brokers[3:4]) != -1 {
		t.Error("a read broker owns a transactional id")
	}
}
