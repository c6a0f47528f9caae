package main

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestReadersOnlyValidate: -producers 0 takes readers and a duration and
// refuses what would write.
func TestReadersOnlyValidate(t *testing.T) {
	ok := func() config {
		return config{RecordSize: 1024, Partitions: 8, Acks: "all", Compression: "none", Isolation: "read_uncommitted",
			Duration: 10 * time.Second, Warmup: 2 * time.Second, MaxDuration: time.Minute, Producers: 0, Consumers: 2}
	}
	c := ok()
	if err := c.validate(); err != nil {
		t.Fatalf("tailing readers only: %v", err)
	}
	c = ok()
	c.Consumers, c.BacklogReaders = 0, 3
	if err := c.validate(); err != nil {
		t.Fatalf("backlog readers only: %v", err)
	}
	for name, f := range map[string]func(*config){
		"no readers": func(c *config) { c.Consumers = 0 },
		"records":    func(c *config) { c.Records = 100 },
		"prefill":    func(c *config) { c.Prefill = 100 },
		"rate":       func(c *config) { c.Rate = 100 },
		"negative":   func(c *config) { c.Producers = -1 },
	} {
		c := ok()
		f(&c)
		if err := c.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestReadersOnly: a readers-only run next to a writing run on a real
// `sluice dev` reads for its whole duration what the other process writes,
// tailing and from the start, and reports it in the usual result with no
// produce figures and no end-to-end latency.
func TestReadersOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the broker")
	}
	addr := startDev(t)
	base := config{Brokers: addr, Topic: "readers-only", Partitions: 4, Replication: 1, RecordSize: 1024,
		Acks: "all", Idempotent: true, Compression: "none", Linger: 5 * time.Millisecond,
		Duration: 6 * time.Second, Warmup: 2 * time.Second, MaxDuration: time.Minute, Drain: 10 * time.Second,
		CreateTopic: true, Isolation: "read_uncommitted", Quiet: true}
	w, r := base, base
	w.Producers, w.Consumers, w.Rate = 2, 1, 2000
	r.Producers, r.Consumers, r.BacklogReaders = 0, 2, 1
	for _, c := range []*config{&w, &r} {
		if err := c.validate(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var wres, rres *result
	var werr, rerr error
	wg.Add(2)
	go func() { defer wg.Done(); wres, werr = run(ctx, &w) }()
	go func() { defer wg.Done(); rres, rerr = run(ctx, &r) }()
	wg.Wait()
	if werr != nil || rerr != nil {
		t.Fatalf("writer: %v; reader: %v", werr, rerr)
	}
	if wres.Produce.Records == 0 || wres.Consume.E2E.Count == 0 {
		t.Fatalf("the writing run produced %d records, its probe measured %d latencies", wres.Produce.Records, wres.Consume.E2E.Count)
	}
	if rres.Produce.Records != 0 || rres.Produce.TotalRecords != 0 {
		t.Fatalf("the readers-only run produced %d records", rres.Produce.TotalRecords)
	}
	if rres.ElapsedS < r.Duration.Seconds() || rres.WindowS < (r.Duration-r.Warmup).Seconds()-0.5 {
		t.Fatalf("readers-only run ended early: %.1f s elapsed, window %.1f s", rres.ElapsedS, rres.WindowS)
	}
	// Two tailing readers see about what one probe sees, twice over.
	if rres.Consume.Records < wres.Consume.Records || rres.Consume.MBPerS <= 0 || rres.Consume.Missing != 0 {
		t.Fatalf("tailing readers read %d records (%.2f MB/s, missing %d); the writer's probe read %d",
			rres.Consume.Records, rres.Consume.MBPerS, rres.Consume.Missing, wres.Consume.Records)
	}
	if rres.Consume.E2E.Count != 0 {
		t.Fatalf("readers-only run measured %d end-to-end latencies on another process's clock", rres.Consume.E2E.Count)
	}
	if rres.Backlog.Records == 0 || rres.Backlog.MBPerS <= 0 {
		t.Fatalf("backlog reader read %d records (%.2f MB/s)", rres.Backlog.Records, rres.Backlog.MBPerS)
	}
}

// TestBacklogReadersCatchUp: backlog readers alone (-producers 0
// -consumers 0) on a topic written beforehand end the run once each has
// read the whole topic, and report that time and the MB/s over it.
func TestBacklogReadersCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the broker")
	}
	addr := startDev(t)
	base := config{Brokers: addr, Topic: "backlog-catch-up", Partitions: 4, Replication: 1, RecordSize: 1024,
		Acks: "all", Idempotent: true, Compression: "none", Linger: 5 * time.Millisecond,
		MaxDuration: time.Minute, Drain: 10 * time.Second, CreateTopic: true, Isolation: "read_uncommitted", Quiet: true}
	w, r := base, base
	w.Producers, w.Consumers, w.Records = 2, 0, 20000
	r.Producers, r.Consumers, r.BacklogReaders, r.CreateTopic = 0, 0, 3, false
	r.Duration = 60 * time.Second
	for _, c := range []*config{&w, &r} {
		if err := c.validate(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wres, err := run(ctx, &w)
	if err != nil {
		t.Fatal(err)
	}
	rres, err := run(ctx, &r)
	if err != nil {
		t.Fatal(err)
	}
	want := wres.Produce.TotalRecords * 3
	if b := rres.Backlog; b.CaughtUpS <= 0 || b.CaughtUpMBPerS <= 0 || b.Records < want {
		t.Fatalf("backlog readers: %d records of %d, caught up after %.2f s (%.1f MB/s)", b.Records, want, b.CaughtUpS, b.CaughtUpMBPerS)
	}
	if rres.ElapsedS >= r.Duration.Seconds() {
		t.Fatalf("the run went on for %.1f s after the readers had read everything", rres.ElapsedS)
	}
	t.Logf("%d records read in %.2f s: %.1f MB/s", rres.Backlog.Records, rres.Backlog.CaughtUpS, rres.Backlog.CaughtUpMBPerS)
}
