package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterWipedDisk: a write broker (raft voter) or a read broker
// (learner) that comes back on an empty data directory under its old
// node.id is refused before it opens a replica, with the reason: its raft
// state is lost. Under a new node.id the read broker joins as a new
// learner and serves the whole history.
func TestClusterWipedDisk(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 1)
	const topic, parts, n = "wiped", 2, 1000
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	fillTopic(ctx, t, c.writeAddrs, topic, parts, n, "w%05d")

	dataDir := func(p *proc) string {
		b, err := os.ReadFile(p.cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "data.dir: "); ok {
				return v
			}
		}
		t.Fatalf("no data.dir in %s", p.cfg)
		return ""
	}

	// refused restarts p after wiping its partition data and checks that
	// it exits, saying why.
	refused := func(p *proc, why string) {
		t.Helper()
		p.kill()
		if err := os.RemoveAll(filepath.Join(dataDir(p), "logs")); err != nil {
			t.Fatal(err)
		}
		p.start(t)
		done := make(chan error, 1)
		cmd := p.cmd
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			p.cmd = nil
			if err == nil {
				t.Fatalf("%s exited 0", p.name)
			}
		case <-time.After(90 * time.Second):
			t.Fatalf("%s, wiped, is still running after 90 s", p.name)
		}
		logb, _ := os.ReadFile(p.logf.Name())
		if !strings.Contains(string(logb), why) {
			t.Fatalf("%s's log does not say %q:\n%s", p.name, why, tail(logb, 2000))
		}
		t.Logf("%s, wiped, refused to start: %q", p.name, why)
	}
	refused(c.writers[1], "it is a voter of 2 partitions")
	r := c.readers[0]
	refused(r, "it is a learner of 2 partitions")

	// Under a new node.id the read broker is a new learner.
	cfg, err := os.ReadFile(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "node.id: 4\n", "node.id: 9\n", 1))
	if err := os.WriteFile(r.cfg, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dataDir(r), "logs")); err != nil {
		t.Fatal(err)
	}
	r.start(t)
	waitReady(t, r.admin, 60*time.Second)
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < n && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		cons.PollRecords(pctx, 500).EachRecord(func(rec *kgo.Record) { seen[string(rec.Value)] = true })
		pcancel()
	}
	if len(seen) != n {
		t.Fatalf("the read brokers served %d of %d records", len(seen), n)
	}
	t.Logf("the read broker under a new node.id joined; %d records consumed from the read view", n)
}
