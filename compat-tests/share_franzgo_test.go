package compat

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestShareGroupFranzGo drives share groups (KIP-932) with franz-go's share
// consumer (kgo.ShareGroup): eight clients in one group on one partition
// each get records and every record is accepted exactly once; records one
// client releases (AckRelease) are delivered again to the group with
// delivery count 2.
func TestShareGroupFranzGo(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := harness.Context(t, 4*time.Minute)
	adm := newAdmin(t, b.KafkaAddr)
	const topic, group = "share-franz", "share-franz-g"
	createTopic(ctx, t, adm, topic, 1, nil)

	const consumers, n = 8, 400
	type got struct {
		consumer int
		count    int32
	}
	var mu sync.Mutex
	seen := map[string][]got{}
	had := map[int]bool{} // consumers that have accepted a record
	released := map[string]bool{}
	clients := make([]*kgo.Client, consumers)
	for i := range clients {
		clients[i] = newClient(t, b.KafkaAddr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(10))
	}
	// Share groups start at the end of the log: let every member join
	// and fetch before producing.
	prod := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	waitShareMembers(ctx, t, prod, group, consumers)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			releasedOne := false
			for cctx.Err() == nil {
				fs := cl.PollRecords(cctx, 10)
				for _, r := range fs.Records() {
					v := string(r.Value)
					mu.Lock()
					// Consumer 0 releases its first record once.
					if i == 0 && !releasedOne && r.DeliveryCount() == 1 {
						releasedOne = true
						released[v] = true
						mu.Unlock()
						r.Ack(kgo.AckRelease)
						continue
					}
					seen[v] = append(seen[v], got{i, r.DeliveryCount()})
					had[i] = true
					mu.Unlock()
					r.Ack(kgo.AckAccept)
				}
				if err := cl.FlushAcks(cctx); err != nil && cctx.Err() == nil {
					t.Errorf("consumer %d FlushAcks: %v", i, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	// Produce in small steps so that every member finds records. Which
	// member gets a record is a race among their fetches, so while one
	// has had none after the first n, produce more, up to four times n.
	produced := 0
	for {
		mu.Lock()
		all := len(had) == consumers
		mu.Unlock()
		if produced >= n && (all || produced >= 4*n) {
			break
		}
		rs := make([]*kgo.Record, 20)
		for j := range rs {
			rs[j] = &kgo.Record{Value: []byte("rec-" + strconv.Itoa(produced+j))}
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced += len(rs)
		time.Sleep(50 * time.Millisecond)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		done := len(seen)
		mu.Unlock()
		if done >= produced || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()

	per := map[int]int{}
	for i := 0; i < produced; i++ {
		v := "rec-" + strconv.Itoa(i)
		gs := seen[v]
		if len(gs) != 1 {
			t.Errorf("%s accepted %d times, want once: %+v", v, len(gs), gs)
			continue
		}
		per[gs[0].consumer]++
		want := int32(1)
		if released[v] {
			want = 2
		}
		if gs[0].count != want {
			t.Errorf("%s delivered with count %d, want %d", v, gs[0].count, want)
		}
	}
	t.Logf("records per consumer: %v; released and redelivered: %v", per, released)
	if len(per) != consumers {
		t.Errorf("%d of %d consumers got records: %v", len(per), consumers, per)
	}
	if len(released) != 1 {
		t.Errorf("consumer 0 released %d records, want 1", len(released))
	}
}
