package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterAsyncControlledShutdownHandsOver: an async master shut down
// with SIGTERM (a controlled shutdown) under an acks=all producer hands
// its place to a write replica that holds its whole log, instead of
// letting the partition fail over as for a crash once its lease is gone:
// the replica is promoted through the handover, nothing is cut anywhere,
// writes go on at the new master, and every acknowledged record is read
// back once, in order, from the read broker.
func TestClusterAsyncControlledShutdownHandsOver(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterLayout(t, "async", 1, clusterLayout{})
	const topic, parts = "handover", 3
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MaxBufferedRecords(2000),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.RetryTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	adm := kadm.NewClient(prod)
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitAsyncMasters(t, c, topic, parts)
	masters := electedLeaders(t, adm, topic, parts)

	load := startAckedLoad(ctx, prod, "h")
	time.Sleep(3 * time.Second)

	// Shut down the master of partition 0 (and of whatever else it leads).
	victim := masters[0]
	w := c.writers[victim-1]
	led := 0
	for _, m := range masters {
		if m == victim {
			led++
		}
	}
	took := w.stop(t, 60*time.Second)
	stopped := time.Now()
	t.Logf("write broker %d, master of %d partitions, shut down in %v", victim, led, took.Round(time.Millisecond))

	// Writes go on at the new masters: every partition takes an
	// acknowledged write after the shutdown.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		n := load.ackedSince(stopped, parts)
		if n == parts {
			t.Logf("every partition acknowledged writes again %v after the old master exited", time.Since(stopped).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d partitions took writes within 60 s of the shutdown", n, parts)
		}
	}
	time.Sleep(2 * time.Second)
	load.halt()
	if err := prod.Flush(ctx); err != nil {
		t.Logf("flush: %v", err)
	}

	// The old master handed every partition it led over, each was promoted
	// through the handover, and nothing was cut anywhere.
	count := func(p *proc, what string) int {
		b, _ := os.ReadFile(p.logf.Name())
		return strings.Count(string(b), what)
	}
	if n := count(w, "async handover: handed the master's place over"); n != led {
		t.Errorf("the old master handed %d partitions over, it led %d", n, led)
	}
	promoted := 0
	for _, o := range c.writers {
		promoted += count(o, "async handover: promoted to master")
		for _, bad := range []string{"truncating to the new master", "claimed its place", "what the old master wrote after this offset is lost"} {
			if n := count(o, bad); n > 0 {
				t.Errorf("%s: %d lines %q: a crash failover, not a handover", o.name, n, bad)
			}
		}
	}
	if promoted != led {
		t.Errorf("%d promotions through a handover, want %d", promoted, led)
	}

	found := readAckedOnce(ctx, t, c.readAddrs, topic, load.records())
	t.Logf("all %d acknowledged records read once after the handover", found)
}
