package server

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
)

// TestOffsetExpiryThroughMetastore: a franz-go group consumer commits and
// leaves (its classic group is Empty); once offsets.retention.minutes has
// passed on the coordinator's clock, an expiry pass removes the offsets
// from the real metastore, so OffsetFetch (kadm) answers -1 and the group
// is gone; before that they are kept.
func TestOffsetExpiryThroughMetastore(t *testing.T) {
	clock := coordinator.NewFakeClock()
	var groups *coordinator.Coordinator
	b := startBrokerWith(t, nil, func(o *Options, meta *metastore.Node) {
		g, err := coordinator.New(coordinator.Config{BrokerID: o.Config.NodeID, Store: meta.Client(), Logger: zerolog.Nop(),
			Clock: clock, OffsetsRetention: 10080 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		o.Groups, groups = g, g
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic, group = "exp", "exp-group"
	adm := kadm.NewClient(b.client(t))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceN(t, b.client(t), topic, 0, 5)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 5 && ctx.Err() == nil; {
		n += cl.PollFetches(ctx).NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close() // leaves the group: Empty
	committed := func() int64 {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs.Lookup(topic, 0)
		if !ok {
			return -1
		}
		return o.At
	}
	if got := committed(); got != 5 {
		t.Fatalf("committed %d, want 5", got)
	}
	clock.Advance(10080*time.Minute - time.Second)
	if n, err := groups.ExpireOffsets(ctx); err != nil || n != 0 || committed() != 5 {
		t.Fatalf("before retention: expired %d (%v), committed %d", n, err, committed())
	}
	clock.Advance(time.Second)
	if n, err := groups.ExpireOffsets(ctx); err != nil || n != 1 {
		t.Fatalf("at retention: expired %d (%v), want 1", n, err)
	}
	if got := committed(); got != -1 {
		t.Fatalf("committed after expiry: %d, want -1 (none)", got)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed[group]; ok {
		t.Errorf("the Empty group without offsets is still listed: %v", listed.Groups())
	}
}
