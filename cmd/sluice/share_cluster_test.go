package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterShareGroupReadBrokerKill runs share groups (KIP-932) on the
// read brokers of a split cluster (3 meta, 3 write, 2 read): eight
// franz-go share consumers (kgo.ShareGroup) on one partition through the
// read view each get records, and no record whose acknowledgement the
// broker confirmed is delivered again. Then the read broker that holds the
// share-partition (the partition's read-view leader, which FindCoordinator's
// share-partition key names) is SIGKILLed while one consumer holds
// records it has not acknowledged: the other read broker claims the
// partition once the dead one's lease lapses and carries on from the
// stored state, so the confirmed acknowledgements hold, the records in
// flight are delivered again (with the delivery count last stored: as in
// Kafka, an acquisition is not written, so the count may not have risen
// across the kill), and every
// record produced is accepted. Last the killed broker starts again: the
// view names it the leader again, the other read broker releases the
// share-partition and it claims it, with the same guarantees.
func TestClusterShareGroupReadBrokerKill(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 2)
	const topic, group = "sharekill", "sharekill-g"
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fillTopic(ctx, t, c.writeAddrs, topic, 1, 0, "")

	// The partition's leader in the read view, and the share-partition
	// holder FindCoordinator names (key type 2).
	probe, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	var leader int32 = -1
	var topicID [16]byte
	for deadline := time.Now().Add(30 * time.Second); leader < 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		md, err := kadm.NewClient(probe).Metadata(ctx, topic)
		if err == nil && len(md.Topics[topic].Partitions) == 1 {
			leader, topicID = md.Topics[topic].Partitions[0].Leader, md.Topics[topic].ID
		}
	}
	if leader < 4 {
		t.Fatalf("partition 0's read-view leader is %d, not a read broker", leader)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType = 2
	fc.CoordinatorKeys = []string{fmt.Sprintf("%s:%s:0", group, base64.RawURLEncoding.EncodeToString(topicID[:]))}
	fcr, err := fc.RequestWith(ctx, probe)
	if err != nil || len(fcr.Coordinators) != 1 || fcr.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator (share-partition key): %+v %v", fcr, err)
	}
	if got := fcr.Coordinators[0].NodeID; got != leader {
		t.Errorf("FindCoordinator names %d as the share-partition's holder, the read view's leader is %d", got, leader)
	}

	type delivery struct {
		consumer int
		count    int32
	}
	const consumers, n = 8, 400
	var (
		mu        sync.Mutex
		delivered = map[string][]delivery{}
		confirmed = map[string]int32{} // value -> delivery count its accept was confirmed at
		attempted = map[string]int32{} // value -> delivery count an accept was sent for
		had       = map[int]bool{}
		held      = map[string]int32{} // consumer 0's records in flight at the kill
	)
	var holdState atomic.Int32 // 1: consumer 0 keeps its next records unacknowledged; 2: it has them
	releaseHold := make(chan struct{})
	clients := make([]*kgo.Client, consumers)
	results := make([][]kgo.ShareAckResult, consumers)
	for i := range clients {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
			kgo.ShareMaxRecords(10), kgo.RetryTimeout(30*time.Second),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				mu.Lock()
				results[i] = append(results[i], rs...)
				mu.Unlock()
			}))
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = cl
		defer cl.Close()
	}
	waitMembers := func() {
		deadline := time.Now().Add(60 * time.Second)
		for {
			req := kmsg.NewPtrShareGroupDescribeRequest()
			req.GroupIDs = []string{group}
			resp, err := req.RequestWith(ctx, probe)
			if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 && len(resp.Groups[0].Members) >= consumers {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("share group %s did not reach %d members through the read brokers (last: %+v, %v)", group, consumers, resp, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitMembers()

	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(cctx, 2*time.Second)
				fs := cl.PollRecords(pctx, 10)
				pcancel()
				recs := fs.Records()
				if len(recs) == 0 {
					continue
				}
				mu.Lock()
				for _, r := range recs {
					v := string(r.Value)
					delivered[v] = append(delivered[v], delivery{i, r.DeliveryCount()})
					had[i] = true
				}
				mu.Unlock()
				if i == 0 && holdState.Load() == 1 {
					// Keep these in flight across the kill.
					mu.Lock()
					for _, r := range recs {
						held[string(r.Value)] = r.DeliveryCount()
					}
					mu.Unlock()
					holdState.Store(2)
					select {
					case <-releaseHold:
					case <-cctx.Done():
						return
					}
					continue
				}
				mu.Lock()
				results[i] = nil
				for _, r := range recs {
					r.Ack(kgo.AckAccept)
					attempted[string(r.Value)] = max(attempted[string(r.Value)], r.DeliveryCount())
				}
				mu.Unlock()
				err := cl.FlushAcks(cctx)
				mu.Lock()
				ok := err == nil && len(results[i]) > 0
				for _, res := range results[i] {
					ok = ok && res.Err == nil
				}
				if ok {
					for _, r := range recs {
						confirmed[string(r.Value)] = r.DeliveryCount()
					}
				}
				mu.Unlock()
			}
		}()
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produced := 0
	produce := func(k int) {
		rs := make([]*kgo.Record, k)
		for j := range rs {
			rs[j] = &kgo.Record{Value: []byte(fmt.Sprintf("rec-%05d", produced+j))}
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced += k
	}
	// Produce in steps until every consumer has had records (which one
	// gets a record is a race among their fetches).
	for {
		mu.Lock()
		all := len(had) == consumers
		mu.Unlock()
		if produced >= n && (all || produced >= 4*n) {
			break
		}
		produce(20)
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	before := len(had)
	mu.Unlock()
	if before != consumers {
		t.Errorf("%d of %d consumers got records before the kill", before, consumers)
	}

	// Consumer 0 takes records and keeps them; then the holder dies.
	holdState.Store(1)
	for deadline := time.Now().Add(30 * time.Second); holdState.Load() != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("consumer 0 got no records to hold")
		}
		produce(5)
	}
	c.readers[leader-4].kill()
	mu.Lock()
	t.Logf("killed read broker %d (the share-partition's holder) with %d records produced, %d accepts confirmed, consumer 0 holding %d",
		leader, produced, len(confirmed), len(held))
	mu.Unlock()
	// The other read broker takes over once the lease lapses.
	for i := 0; i < n/20; i++ {
		produce(20)
		time.Sleep(50 * time.Millisecond)
	}
	// Consumer 0's records are delivered again elsewhere; then it goes on.
	waitFor := func(what string, within time.Duration, done func() bool) {
		deadline := time.Now().Add(within)
		for {
			mu.Lock()
			ok := done()
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s within %v", what, within)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	defer func() {
		if t.Failed() {
			mu.Lock()
			for v, cnt := range held {
				t.Logf("held %s (delivery %d): deliveries %+v", v, cnt, delivered[v])
			}
			mu.Unlock()
		}
	}()
	waitFor("records held across the kill delivered again", 90*time.Second, func() bool {
		for v := range held {
			// The held delivery is one; another is the redelivery.
			if len(delivered[v]) < 2 {
				return false
			}
		}
		return true
	})
	close(releaseHold)
	// Every record is acknowledged at its latest delivery. An accept
	// that was sent but not confirmed was either applied (the broker
	// died between saving it and answering) or is delivered again.
	latest := func(v string) int32 {
		m := int32(0)
		for _, d := range delivered[v] {
			m = max(m, d.count)
		}
		return m
	}
	acked := func() bool {
		for i := 0; i < produced; i++ {
			v := fmt.Sprintf("rec-%05d", i)
			if l := latest(v); l == 0 || attempted[v] < l {
				return false
			}
		}
		return true
	}
	settle := func() {
		waitFor("every record acknowledged", 90*time.Second, acked)
		// Let a record whose accept was lost be delivered again, and
		// acknowledged.
		time.Sleep(3 * time.Second)
		waitFor("every record acknowledged", 30*time.Second, acked)
	}
	settle()
	afterKill := produced

	// The killed broker comes back: the read view names it the leader
	// again, the other read broker lets go of the share-partition and it
	// claims it, under load.
	back := c.readers[leader-4]
	back.start(t)
	waitReady(t, back.admin, 60*time.Second)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		md, err := kadm.NewClient(probe).Metadata(ctx, topic)
		if err == nil && len(md.Topics[topic].Partitions) == 1 && md.Topics[topic].Partitions[0].Leader == leader {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the read view does not name the restarted broker %d the leader again", leader)
		}
	}
	for i := 0; i < n/20; i++ {
		produce(20)
		time.Sleep(50 * time.Millisecond)
	}
	settle()
	ccancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	redelivered, unconfirmed, per := 0, 0, map[int]int{}
	for i := 0; i < produced; i++ {
		v := fmt.Sprintf("rec-%05d", i)
		ds := delivered[v]
		for _, d := range ds {
			per[d.consumer]++
		}
		if len(ds) > 1 {
			redelivered++
		}
		at, ok := confirmed[v]
		if !ok {
			unconfirmed++
			if attempted[v] < latest(v) {
				t.Errorf("%s: delivered (%+v) and never acknowledged", v, ds)
			}
			continue
		}
		for _, d := range ds {
			if d.count > at {
				t.Errorf("%s: its accept was confirmed at delivery %d, then delivered again (deliveries %+v)", v, at, ds)
			}
		}
	}
	for v, cnt := range held {
		counts := []int32{}
		for _, d := range delivered[v] {
			counts = append(counts, d.count)
		}
		if len(counts) < 2 || slices.Min(counts[1:]) < cnt {
			t.Errorf("%s was in flight at the kill (delivery %d): deliveries %v, want another at a count not below it", v, cnt, counts)
		}
	}
	t.Logf("%d records (%d before the restart); %d delivered more than once (in flight at the kill or the handover back); %d held by consumer 0; %d accepted without a confirmation; deliveries per consumer %v",
		produced, afterKill, redelivered, len(held), unconfirmed, per)
	other := c.readers[1-(leader-4)]
	if b, _ := os.ReadFile(other.logf.Name()); !strings.Contains(string(b), "share-partition released") {
		t.Errorf("read broker %s did not release the share-partition when the view named broker %d again", other.name, leader)
	}
	if unconfirmed > produced/10 {
		t.Errorf("%d of %d accepts were not confirmed", unconfirmed, produced)
	}
	if len(per) != consumers {
		t.Errorf("%d of %d consumers got records: %v", len(per), consumers, per)
	}
}

// TestClusterShareGroupOffsetsReset resets a share group's start offset
// (AlterShareGroupOffsets, as kafka-share-groups --reset-offsets) at the
// group's coordinator while another read broker holds the partition's
// share state: the holder lets go of its copy, so the next consumer gets
// the records from the new start again, though no record was produced
// since (a holder that kept its copy would find nothing to hand out).
func TestClusterShareGroupOffsetsReset(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 2)
	const topic, n = "sharereset", 100
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fillTopic(ctx, t, c.writeAddrs, topic, 1, n, "rec-%05d")

	adm, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	kadmc := kadm.NewClient(adm)
	var leader int32 = -1
	for deadline := time.Now().Add(30 * time.Second); leader < 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		md, err := kadmc.Metadata(ctx, topic)
		if err == nil && len(md.Topics[topic].Partitions) == 1 {
			leader = md.Topics[topic].Partitions[0].Leader
		}
	}
	if leader < 4 {
		t.Fatalf("partition 0's read-view leader is %d, not a read broker", leader)
	}
	// A group coordinated by the other read broker.
	group := ""
	for i := 0; i < 32 && group == ""; i++ {
		g := fmt.Sprintf("sharereset-g%d", i)
		rs := kadmc.FindGroupCoordinators(ctx, g)
		if err := rs.Error(); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.NodeID != leader {
				group = g
			}
		}
	}
	if group == "" {
		t.Fatalf("no group of 32 is coordinated by a read broker other than %d", leader)
	}
	start := func(at int64) {
		t.Helper()
		var os kadm.Offsets
		os.AddOffset(topic, 0, at, -1)
		rs, err := kadmc.AlterShareGroupOffsets(ctx, group, os)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			t.Fatalf("AlterShareGroupOffsets to %d: %v", at, err)
		}
	}
	consume := func(want int) map[string]int32 {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		got := map[string]int32{}
		for deadline := time.Now().Add(45 * time.Second); len(got) < want && time.Now().Before(deadline); {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			fs := cl.PollRecords(pctx, 100)
			pcancel()
			for _, r := range fs.Records() {
				got[string(r.Value)] = r.DeliveryCount()
				r.Ack(kgo.AckAccept)
			}
			if err := cl.FlushAcks(ctx); err != nil {
				t.Fatalf("FlushAcks: %v", err)
			}
		}
		return got
	}
	start(0)
	if got := consume(n); len(got) != n {
		t.Fatalf("first consumer got %d of %d records", len(got), n)
	}
	// The consumer left; reset to offset 50 at the coordinator (not the
	// holder), with nothing produced since.
	start(n / 2)
	got := consume(n / 2)
	for i := n / 2; i < n; i++ {
		if _, ok := got[fmt.Sprintf("rec-%05d", i)]; !ok {
			t.Errorf("rec-%05d not delivered after the reset to %d (got %d records)", i, n/2, len(got))
			break
		}
	}
	t.Logf("group %s (coordinator other than the holder %d): %d records delivered again after the reset", group, leader, len(got))
}
