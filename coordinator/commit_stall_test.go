package coordinator

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// stalledStore is the metastore's client whose offset writes can be held,
// as a write caught by the metastore leader's death is held until the
// client reaches the next leader or its deadline passes.
type stalledStore struct {
	*metastore.Client
	hold    atomic.Bool
	release chan struct{}
}

func (s *stalledStore) CommitOffsets(ctx context.Context, f metastore.Fence, group string, offs []metastore.OffsetCommit) error {
	if s.hold.Load() {
		select {
		case <-s.release:
		case <-ctx.Done():
			return metastore.ErrTimeout
		}
	}
	return s.Client.CommitOffsets(ctx, f, group, offs)
}

// An offset commit whose metastore write hangs must not hold up the
// group's heartbeats (a member would miss its session and the group
// rebalance), and it answers COORDINATOR_NOT_AVAILABLE, retriable, once
// offsets.commit.timeout.ms has passed, as Kafka's coordinator does.
func TestOffsetCommitWriteStallDoesNotBlockHeartbeats(t *testing.T) {
	mcfg := metastore.Default()
	mcfg.ID = 1
	mcfg.DataDir = filepath.Join(t.TempDir(), "meta")
	meta, err := metastore.Open(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := meta.Client().CreateTopic(ctx, metastore.TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	inc, err := meta.Client().RegisterBroker(ctx, metastore.Broker{ID: 1, Role: metastore.RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	store := &stalledStore{Client: meta.Client(), release: make(chan struct{})}
	defer close(store.release)
	const commitTimeout = time.Second
	c, err := New(Config{BrokerID: 1, Store: store, CommitTimeout: commitTimeout,
		Incarnation: func() uint64 { return inc },
		Logger:      zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e := &env{t: t, c: c}
	id := e.join(9, "g", "", nil).MemberID
	if r := e.join(9, "g", id, nil); r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("join: %+v", r)
	}
	if s := e.sync("g", id, 1, nil, map[string]string{id: "A"}); s.ErrorCode != 0 {
		t.Fatalf("sync: %+v", s)
	}
	commit := func(offset int64) <-chan int16 {
		ch := make(chan int16, 1)
		go func() {
			ch <- c.OffsetCommit(ctx, commitReq(8, "g", id, nil, "t", 1, offset)).Topics[0].Partitions[0].ErrorCode
		}()
		return ch
	}
	if code := <-commit(5); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}

	store.hold.Store(true)
	t0 := time.Now()
	held := commit(10)
	time.Sleep(50 * time.Millisecond) // the commit is in its write
	for i := 0; i < 5; i++ {
		hb := make(chan int16, 1)
		go func() { hb <- e.heartbeat("g", id, 1, nil) }()
		select {
		case code := <-hb:
			if code != 0 {
				t.Fatalf("heartbeat during the held commit: %v", kerr.ErrorForCode(code))
			}
		case <-time.After(500 * time.Millisecond):
			t.Fatalf("a heartbeat waited more than 500 ms behind a held offset write")
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case code := <-held:
		if code != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("held commit answered %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
		}
		if took := time.Since(t0); took < commitTimeout || took > commitTimeout+2*time.Second {
			t.Fatalf("held commit answered after %v, want about %v", took, commitTimeout)
		}
	case <-time.After(commitTimeout + 5*time.Second):
		t.Fatalf("held commit did not answer within %v", commitTimeout+5*time.Second)
	}

	// The write goes through again: the client's retry lands, the member
	// never left.
	store.hold.Store(false)
	if code := <-commit(10); code != 0 {
		t.Fatalf("commit after the write came back: %v", kerr.ErrorForCode(code))
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = "g"
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if got := c.OffsetFetch(ctx, req).Topics[0].Partitions[0].Offset; got != 10 {
		t.Fatalf("committed offset %d, want 10", got)
	}
	if code := e.heartbeat("g", id, 1, nil); code != 0 {
		t.Fatalf("heartbeat after: %v", kerr.ErrorForCode(code))
	}
}
