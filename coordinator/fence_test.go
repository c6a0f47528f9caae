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

func simpleCommitReq(group string, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group = group
	req.Generation = -1 // a simple (admin) commit: no membership needed
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func commitCode(t *testing.T, c *Coordinator, group string, offset int64) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := c.OffsetCommit(ctx, simpleCommitReq(group, offset))
	return resp.Topics[0].Partitions[0].ErrorCode
}

// A coordinator serves no group while its lease is not certainly valid,
// and once another broker took its group over (its lease lapsed), its
// writes are refused by the metastore: it answers NOT_COORDINATOR and drops
// the group, and the committed offsets are the new owner's.
func TestCoordinatorFencedByLease(t *testing.T) {
	mcfg := metastore.Default()
	mcfg.ID = 1
	mcfg.DataDir = filepath.Join(t.TempDir(), "meta")
	mcfg.LeaseDuration = time.Hour
	meta, err := metastore.Open(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close() })
	store := meta.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := store.CreateTopic(ctx, metastore.TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	inc1, err := store.RegisterBroker(ctx, metastore.Broker{ID: 1, Role: metastore.RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	var valid atomic.Bool
	valid.Store(true)
	c, err := New(Config{BrokerID: 1, Store: store, Logger: zerolog.Nop(),
		Incarnation: func() uint64 { return inc1 },
		LeaseValid:  valid.Load,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	if code := commitCode(t, c, "g", 5); code != 0 {
		t.Fatalf("commit by the owner: %v", kerr.ErrorForCode(code))
	}
	valid.Store(false)
	if code := commitCode(t, c, "g", 6); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit while the lease is not certainly valid: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	valid.Store(true)

	// Broker 1's registration ends (as an expiry would) and broker 2
	// takes the group; broker 1's coordinator still holds it in memory.
	if err := store.UnregisterBroker(ctx, 1, inc1); err != nil {
		t.Fatal(err)
	}
	inc2, err := store.RegisterBroker(ctx, metastore.Broker{ID: 2, Role: metastore.RoleRead})
	if err != nil {
		t.Fatal(err)
	}
	if owner, err := store.ClaimGroup(ctx, "g", metastore.Fence{Broker: 2, Incarnation: inc2}); err != nil || owner != 2 {
		t.Fatalf("broker 2 claiming the group: %d %v", owner, err)
	}
	if err := store.CommitOffsets(ctx, metastore.Fence{Broker: 2, Incarnation: inc2}, "g",
		[]metastore.OffsetCommit{{TopicPartition: metastore.TopicPartition{Topic: "t", Partition: 0}, Offset: 50}}); err != nil {
		t.Fatal(err)
	}
	if code := commitCode(t, c, "g", 7); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit by the fenced coordinator: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	offs, err := store.FetchOffsets(ctx, "g", nil)
	if err != nil || len(offs) != 1 || offs[0].Offset != 50 {
		t.Fatalf("offsets after the fenced commit: %+v %v, want 50", offs, err)
	}
	// The fenced coordinator dropped the group: it is not loaded any more.
	checkDropped := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.mu.groups["g"] == nil && !c.mu.owned["g"]
	}
	deadline := time.Now().Add(5 * time.Second)
	for !checkDropped() {
		if time.Now().After(deadline) {
			t.Fatal("the fenced coordinator still holds the group")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
