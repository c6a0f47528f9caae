package compat

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupStaticFencing: two kgo consumers claim the same group.instance.id.
// The second replaces the first in the group (KIP-345), and the first is
// fenced: the broker answers its heartbeats and commits with
// FENCED_INSTANCE_ID, which kgo reports as a fatal group error.
func TestGroupStaticFencing(t *testing.T) {
	t.Parallel()
	const topic, group = "grp-static", "grp-static-g"
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, topic, 2, nil)
	produceN(ctx, t, b.KafkaAddr, topic, "s", 20)

	var fenced atomic.Bool
	opts := func(name string) []kgo.Opt {
		return []kgo.Opt{kgo.ClientID(name), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.InstanceID("inst-1"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(300 * time.Millisecond),
			kgo.SessionTimeout(10 * time.Second), kgo.FetchMaxWait(300 * time.Millisecond)}
	}
	first := newClient(t, b.KafkaAddr, opts("first")...)
	got := 0
	for got < 20 && ctx.Err() == nil {
		fs := first.PollFetches(ctx)
		got += fs.NumRecords()
	}
	if err := first.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("first commit: %v", err)
	}

	second := newClient(t, b.KafkaAddr, opts("second")...)
	go func() {
		for ctx.Err() == nil && !fenced.Load() {
			fs := first.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if errors.Is(err, kerr.FencedInstanceID) {
					fenced.Store(true)
				}
			})
		}
	}()
	waitFor(t, time.Minute, "the second consumer to own the partitions", func() bool {
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil || dg[group].Err != nil || len(dg[group].Members) != 1 {
			return false
		}
		return dg[group].Members[0].ClientID == "second" && dg[group].State == "Stable"
	})
	produceN(ctx, t, b.KafkaAddr, topic, "t", 10)
	n := 0
	for n < 10 && ctx.Err() == nil {
		n += second.PollFetches(ctx).NumRecords()
	}
	if n != 10 {
		t.Fatalf("the replacing instance read %d of the 10 new records (it should resume at the commit)", n)
	}
	// The old instance's next commit is fenced even if its poll loop has
	// not seen the error yet.
	err := first.CommitUncommittedOffsets(ctx)
	waitFor(t, 30*time.Second, "the first instance to be fenced", func() bool {
		return fenced.Load() || errors.Is(err, kerr.FencedInstanceID)
	})
	t.Logf("fenced: poll loop saw it %v, commit error %v", fenced.Load(), err)
}
