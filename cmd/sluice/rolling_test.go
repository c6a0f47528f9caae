package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// stop ends a process with SIGTERM (a controlled shutdown) and waits for
// it to exit.
func (p *proc) stop(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(within):
		p.kill()
		t.Fatalf("%s did not exit within %v of SIGTERM", p.name, within)
	}
	p.cmd = nil
	return time.Since(start)
}

// TestClusterRollingRestart restarts every write broker and then every read
// broker of the 3+2 cluster in turn (SIGTERM, controlled shutdown, start
// again) under an idempotent acks=all producer: no send fails, the
// producer's ack latency stays bounded, and every acknowledged record is
// read once, in order, from the read broker afterwards.
func TestClusterRollingRestart(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 2)
	const topic, parts = "rolling", 6
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	adm := kadm.NewClient(wcl)
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, topic, parts)

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProduceRequestTimeout(10*time.Second),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var mu sync.Mutex
	var acked []ackedRecord
	var lat []time.Duration
	var failed []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond) // ~500 records/s
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			sent := time.Now()
			prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("r%07d", i))}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				acked = append(acked, ackedRecord{r.Partition, r.Offset, string(r.Value)})
				lat = append(lat, time.Since(sent))
			})
		}
	}()
	time.Sleep(2 * time.Second)
	for _, p := range append(append([]*proc{}, c.writers...), c.readers...) {
		took := p.stop(t, 60*time.Second)
		line := ""
		if b, err := os.ReadFile(p.logf.Name()); err == nil {
			if i := bytes.LastIndex(b, []byte("controlled shutdown done")); i >= 0 {
				start := bytes.LastIndexByte(b[:i], '\n') + 1
				end := i + bytes.IndexByte(b[i:], '\n')
				line = string(b[start:max(end, i)])
			}
		}
		if line == "" {
			t.Errorf("%s logged no controlled shutdown", p.name)
		}
		t.Logf("%s stopped %.1fs after SIGTERM: %s", p.name, took.Seconds(), line)
		time.Sleep(time.Second)
		p.start(t)
		waitReady(t, p.admin, 60*time.Second)
		waitLeaders(t, adm, topic, parts)
		time.Sleep(3 * time.Second) // it catches up before the next one goes
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Fatalf("%d sends failed during the rolling restart, first: %v", len(failed), failed[0])
	}
	slices.Sort(lat)
	p99 := lat[len(lat)*99/100]
	t.Logf("ROLLING RESTART: %d records acknowledged, none failed; ack latency p50 %v, p99 %v, max %v",
		len(acked), lat[len(lat)/2].Round(time.Millisecond), p99.Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	// A bound, not a measurement: it catches a stall (a partition
	// without a leader for an election timeout or more at every step),
	// while the figure itself is logged. On a quiet machine the p99 was
	// 1.2 s with controlled shutdown and 2.7 s without it (elections).
	if p99 > 5*time.Second {
		t.Errorf("ack latency p99 %v during the rolling restart, want under 5 s", p99)
	}

	// Every acknowledged record is on the read broker once, where it was
	// acknowledged.
	want := map[string]ackedRecord{}
	for _, a := range acked {
		want[a.value] = a
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < len(want) && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if seen[v] {
				t.Errorf("record %s read twice", v)
			}
			seen[v] = true
			if a, ok := want[v]; ok && (a.partition != r.Partition || a.offset != r.Offset) {
				t.Errorf("%s acknowledged at %d/%d, read at %d/%d", v, a.partition, a.offset, r.Partition, r.Offset)
			}
		})
	}
	missing := 0
	for v := range want {
		if !seen[v] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records missing from the read broker", missing, len(want))
	}
}
