package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterSemiSync: semi-sync on real processes, its configs changed at
// runtime with IncrementalAlterConfigs. With semi.sync.wait.replicas=2
// and one follower paused (SIGSTOP), acks=all waits (a majority has the
// record, two voters do not); lowering semi.sync.timeout.ms answers it and
// the partition falls back (counted, gauge, log line); a later write is
// answered in the fallback; once the follower resumes and catches up the
// partition is semi-synchronous again; and a write held by semi-sync is
// answered as soon as the topic changes to raft, which a majority
// satisfies. Every acknowledged record is then read from the read broker.
func TestClusterSemiSync(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestCluster(t, "raft")
	const topic = "semisync"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProduceRequestTimeout(30*time.Second), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	str := func(s string) *string { return &s }
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{
		"replication.mode": str("semi-sync"), "semi.sync.wait.replicas": str("2"), "semi.sync.timeout.ms": str("600000"),
	}, topic); err != nil {
		t.Fatal(err)
	}
	// The preferred leader, where the rebalance keeps it: a leader that
	// moves after this would turn the paused "follower" into the leader.
	ln := waitPreferredLeaders(ctx, t, adm, topic, 1)[0]
	leader := c.writers[ln-1]
	follower := c.writers[ln%3]
	alter := func(name, value string) {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: &value}}, topic)
		if err == nil {
			_, err = rs.On(topic, nil)
		}
		if err != nil {
			t.Fatalf("set %s=%s: %v", name, value, err)
		}
	}
	var acked []string
	produce := func(v string) <-chan error {
		done := make(chan error, 1)
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
			if err == nil {
				acked = append(acked, v) // one producer goroutine calls back in order
			}
			done <- err
		})
		return done
	}
	answered := func(done <-chan error, within time.Duration) (bool, error) {
		select {
		case err := <-done:
			return true, err
		case <-time.After(within):
			return false, nil
		}
	}
	fallback := func() (gauge, count float64) {
		ss := parseSamples(scrapeText(t, leader.admin))
		gauge, _ = total(ss, "sluice_partition_semi_sync_fallback", map[string]string{"topic": topic})
		count, _ = total(ss, "sluice_semi_sync_fallbacks_total", nil)
		return gauge, count
	}
	if ok, err := answered(produce("warm"), 30*time.Second); !ok || err != nil {
		t.Fatalf("acks=all with every voter up: %v %v", ok, err)
	}
	if g, n := fallback(); g != 0 || n != 0 {
		t.Fatalf("fallback gauge %v, %v fallbacks with every voter up", g, n)
	}
	pause := func() {
		t.Helper()
		if err := follower.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	resume := func() {
		if err := follower.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Error(err)
		}
	}
	pause()
	defer resume()
	held := produce("held")
	if ok, err := answered(held, 3*time.Second); ok {
		t.Fatalf("acks=all answered (%v) with one of the two voters semi.sync.wait.replicas=2 asks for paused", err)
	}
	alter("semi.sync.timeout.ms", "1500")
	if ok, err := answered(held, 20*time.Second); !ok || err != nil {
		t.Fatalf("acks=all not answered after semi.sync.timeout.ms was lowered below its wait: %v %v", ok, err)
	}
	if g, n := fallback(); g != 1 || n != 1 {
		t.Fatalf("after the timeout: fallback gauge %v, %v fallbacks, want 1 and 1", g, n)
	}
	if ok, err := answered(produce("in-fallback"), 20*time.Second); !ok || err != nil {
		t.Fatalf("acks=all in the fallback: %v %v", ok, err)
	}
	resume()
	deadline := time.Now().Add(60 * time.Second)
	for {
		g, _ := fallback()
		if g == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still fallen back a minute after the paused follower resumed")
		}
		time.Sleep(300 * time.Millisecond)
	}
	b, err := os.ReadFile(leader.logf.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"semi-sync fell back to async", "semi-sync resumed"} {
		if !strings.Contains(string(b), line) {
			t.Errorf("the leader's log has no %q line", line)
		}
	}
	// Held by semi-sync, answered by the change to raft.
	alter("semi.sync.timeout.ms", "600000")
	pause()
	held = produce("held-again")
	if ok, err := answered(held, 3*time.Second); ok {
		t.Fatalf("acks=all answered (%v) with a voter paused and a 10-minute timeout", err)
	}
	alter("replication.mode", "raft")
	if ok, err := answered(held, 20*time.Second); !ok || err != nil {
		t.Fatalf("a write a majority holds not answered after the change to raft: %v %v", ok, err)
	}
	resume()
	if _, n := fallback(); n != 1 {
		t.Errorf("%v fallbacks counted, want 1", n)
	}

	// To async at runtime: the leader becomes the sole voter (its log
	// records it master), then answers with both other write brokers
	// paused; back to raft: the write brokers are voters again, and a
	// write with both paused waits for them.
	other := c.writers[(ln+1)%3]
	waitLog := func(line string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			b, err := os.ReadFile(leader.logf.Name())
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), line) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the leader's log has no %q line", line)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	pauseBoth := func() {
		t.Helper()
		pause()
		if err := other.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	resumeBoth := func() {
		resume()
		if err := other.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Error(err)
		}
	}
	defer resumeBoth()
	alter("replication.mode", "async")
	waitLog(fmt.Sprintf(`"master":%d,`, ln))
	pauseBoth()
	// Past an election timeout: a leader that needed a majority of
	// voters would have stepped down (CheckQuorum) and take nothing.
	time.Sleep(4 * time.Second)
	if ok, err := answered(produce("async-alone"), 5*time.Second); !ok || err != nil {
		t.Fatalf("async master with both other write brokers paused: answered %v, %v", ok, err)
	}
	resumeBoth()
	alter("replication.mode", "raft")
	waitLog(`"master":-1,`)
	pauseBoth()
	held = produce("raft-held")
	if ok, err := answered(held, 3*time.Second); ok {
		t.Fatalf("raft answered (%v) with both other voters paused after leaving async", err)
	}
	resumeBoth()
	if ok, err := answered(held, 20*time.Second); !ok || err != nil {
		t.Fatalf("raft after the voters resumed: %v %v", ok, err)
	}
	// Nothing acknowledged is lost: all of it is read from the read broker.
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	read := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); len(read) < len(acked) && time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { read[string(r.Value)] = true })
		pcancel()
	}
	for _, v := range acked {
		if !read[v] {
			t.Errorf("acknowledged record %s not read from the read broker", v)
		}
	}
	if len(acked) != 6 {
		t.Errorf("acknowledged %v, want 6 records", acked)
	}
}
