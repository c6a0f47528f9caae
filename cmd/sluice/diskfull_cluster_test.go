package main

import (
	"context"
	"crypto/rand"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterWriteBrokerDiskFull: write broker 1 of a 3 write + 1 read
// cluster runs out of disk while producers (acks=all, idempotent) keep
// writing to a topic whose three partitions it leads one of. Every record
// is acknowledged all the same (its partitions' leadership moves to the
// brokers with room), it leaves every ISR as its replicas stop, reads
// from the read broker keep working, and once
// space returns broker 1 is back in every partition's ISR without a
// restart; every acknowledged record is read back once, in order. About
// 30 s (7 processes).
func TestClusterWriteBrokerDiskFull(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	mnt := smallFS(t, 64<<20)
	c := startTestClusterLayout(t, "raft", 1, clusterLayout{dataDir: func(name string) string {
		if name == "write-1" {
			return filepath.Join(mnt, "data")
		}
		return ""
	}})
	const topic, parts = "full-cluster", 3
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	acl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	adm := kadm.NewClient(acl)
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	// Broker 1 leads a partition (its preferred leader's), so the full
	// disk meets a leader as well as followers.
	leaders := waitPreferredLeaders(ctx, t, adm, topic, parts)
	if !slices.Contains(slices.Collect(maps.Values(leaders)), 1) {
		t.Fatalf("broker 1 leads none of %v", leaders)
	}
	led := int32(-1) // the partition broker 1 leads
	for p, l := range leaders {
		if l == 1 {
			led = p
		}
	}
	popts := []kgo.Opt{kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(40 * time.Second)}
	prod, err := kgo.NewClient(append(popts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// prodLed writes to the partition broker 1 leads only.
	prodLed, err := kgo.NewClient(append(popts, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prodLed.Close()
	type at struct {
		p   int32
		off int64
	}
	acked := map[string]at{}
	next := 0
	// produce writes n records of 16 KiB with cl (to partition p when
	// cl partitions manually) and waits for every acknowledgement.
	produce := func(cl *kgo.Client, n int, p int32) {
		t.Helper()
		var rs []*kgo.Record
		for range n {
			v := make([]byte, 16<<10)
			rand.Read(v)
			rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(next)), Value: v, Partition: p})
			next++
		}
		pctx, pcancel := context.WithTimeout(ctx, 45*time.Second)
		defer pcancel()
		for _, r := range cl.ProduceSync(pctx, rs...) {
			if r.Err != nil {
				t.Fatalf("record %s not acknowledged: %v", r.Record.Key, r.Err)
			}
			acked[string(r.Record.Key)] = at{r.Record.Partition, r.Record.Offset}
		}
	}
	produceRound := func() { t.Helper(); produce(prod, 9, 0) }
	produceRound()
	// Room on broker 1 for its followers (a follower stops when handed
	// entries with less than 1 MiB free) but not for a batch of its
	// leader's (refused when it leaves less than 1 MiB free), so that the
	// records of the partition it leads, and only those, are refused: its
	// leader hands leadership to another voter and stops, and the records
	// are acknowledged by the new leader. (When the leader stayed behind
	// as a follower in sync, the new leader's preferred-leader rebalance
	// handed leadership straight back, and the records timed out.)
	filler := fillFS(t, mnt, 1<<20+24<<10)
	produce(prodLed, 3, led)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("broker 1's partition %d's records acknowledged with %d bytes free there; leader now %d", led, freeBytes(t, mnt), md.Topics[topic].Partitions[led].Leader)
	if n := metricValue(t, c.writers[0].admin, "sluice_offline_replicas"); n != 1 {
		t.Errorf("broker 1 after handing partition %d's leadership away: sluice_offline_replicas = %v, want 1", led, n)
	}
	// Then it fills within a round or two (each round puts 48 KiB on each
	// partition, all three of which it holds); then 20 more rounds.
	rounds := 0
	for fullRounds := 0; fullRounds < 20; rounds++ {
		produceRound()
		if freeBytes(t, mnt) < 1<<20 {
			fullRounds++
		}
		if rounds > 200 {
			t.Fatalf("broker 1's disk never filled: %d bytes free", freeBytes(t, mnt))
		}
	}
	t.Logf("%d records acknowledged, %d rounds while broker 1's disk was full (%d bytes free)", len(acked), 20, freeBytes(t, mnt))
	// Its stopped replicas told their leaders, which took it out of
	// their ISRs at once (not after replica.lag.time.max.ms, 30 s).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		md, err = adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		in := 0
		for _, p := range md.Topics[topic].Partitions {
			if slices.Contains(p.ISR, 1) {
				in++
			}
		}
		if in == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("broker 1, its replicas stopped on a full disk, still in %d partitions' ISR 10 s later", in)
			break
		}
	}
	for _, p := range md.Topics[topic].Partitions {
		t.Logf("disk full: partition %d leader %d ISR %v", p.Partition, p.Leader, p.ISR)
		if p.Leader == 1 {
			t.Errorf("partition %d still led by the broker with a full disk", p.Partition)
		}
	}
	if n := metricValue(t, c.writers[0].admin, "sluice_offline_replicas"); n != parts {
		t.Errorf("broker 1 with a full disk: sluice_offline_replicas = %v, want %d (its replicas stopped, to be reopened)", n, parts)
	}

	// Reads through the read broker, with broker 1 still full.
	verify := func(stage string) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		vctx, vcancel := context.WithTimeout(ctx, 40*time.Second)
		defer vcancel()
		seen := map[string]at{}
		nextOff := map[int32]int64{}
		for len(seen) < len(acked) {
			fs := cl.PollFetches(vctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("%s: fetch with %d of %d records read: %v", stage, len(seen), len(acked), err)
			}
			for _, r := range fs.Records() {
				if r.Offset != nextOff[r.Partition] {
					t.Fatalf("%s: partition %d: record at %d, want %d", stage, r.Partition, r.Offset, nextOff[r.Partition])
				}
				nextOff[r.Partition]++
				if _, dup := seen[string(r.Key)]; dup {
					t.Fatalf("%s: key %s twice", stage, r.Key)
				}
				seen[string(r.Key)] = at{r.Partition, r.Offset}
			}
		}
		for k, a := range acked {
			if seen[k] != a {
				t.Fatalf("%s: acknowledged record %s at %v: read at %v", stage, k, a, seen[k])
			}
		}
		t.Logf("%s: %d acknowledged records read from the read broker", stage, len(acked))
	}
	verify("disk full")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freedAt := time.Now()
	for {
		produceRound()
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		back := 0
		for _, p := range md.Topics[topic].Partitions {
			if slices.Contains(p.ISR, 1) {
				back++
			}
		}
		if back == parts {
			break
		}
		if time.Since(freedAt) > 40*time.Second {
			t.Fatalf("broker 1 not back in every ISR 40 s after space returned: %+v", md.Topics[topic].Partitions)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for metricValue(t, c.writers[0].admin, "sluice_offline_replicas") != 0 {
		if time.Since(freedAt) > 40*time.Second {
			t.Fatalf("broker 1's replicas still offline 40 s after space returned")
		}
		produceRound()
	}
	t.Logf("broker 1's replicas reopened and in every ISR %v after space returned, without a restart", time.Since(freedAt).Round(time.Millisecond))
	waitReady(t, c.writers[0].admin, 5*time.Second)
	verify("space freed")
}
