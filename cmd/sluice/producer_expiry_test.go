package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProducerIDExpiration runs `sluice dev` with producer.id.expiration.ms
// of 3 s, checked every 300 ms. A franz-go idempotent producer writes,
// idles past the expiration (DescribeProducers, through kadm, lists it
// before and no longer lists it after), then writes again with the
// sequence it continues from: the broker takes it as a producer it holds
// no state for, as Kafka 4.4 does, and the partition holds every record
// exactly once, in order.
func TestProducerIDExpiration(t *testing.T) {
	ports := freePorts(t, 2)
	kafka, admin := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "sluice.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath, "dev", "--data-dir", filepath.Join(dir, "data"), "--kafka-addr", kafka, "--admin-addr", admin,
		"--log-format", "json", "--set", "producer.id.expiration.ms=3000", "--set", "producer.id.expiration.check.interval.ms=300")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("broker log tail:\n%s", tail(b, 3000))
		}
	}()
	waitReady(t, admin, 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic = "pid-expiry"
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produce := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s%03d", prefix, i))).FirstErr(); err != nil {
				t.Fatalf("produce %s%03d: %v", prefix, i, err)
			}
		}
	}
	listed := func() (bool, error) {
		pid, _, err := cl.ProducerID(ctx)
		if err != nil {
			return false, err
		}
		ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			return false, err
		}
		found := false
		var perr error
		ds.EachPartition(func(p kadm.DescribedProducersPartition) {
			if p.Err != nil {
				perr = p.Err
			}
			for _, d := range p.ActiveProducers {
				found = found || d.ProducerID == pid
			}
		})
		return found, perr
	}

	produce("a", 10)
	start := time.Now()
	if ok, err := listed(); err != nil || !ok {
		t.Fatalf("DescribeProducers right after producing: listed %v, %v", ok, err)
	}
	var gone time.Duration
	for {
		ok, err := listed()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			gone = time.Since(start)
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("the idle producer is still listed 30 s after its last batch (expiration 3 s)")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The last batch's timestamp is the client's, taken before start.
	if gone < 2500*time.Millisecond {
		t.Fatalf("producer expired %v after its last batch, before producer.id.expiration.ms (3 s)", gone)
	}
	t.Logf("producer no longer listed %v after its last batch", gone)

	// The client continues its sequence at 10; the broker has forgotten
	// the producer and takes it.
	produce("b", 10)
	if ok, err := listed(); err != nil || !ok {
		t.Fatalf("DescribeProducers after producing again: listed %v, %v", ok, err)
	}

	rd, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []string
	for len(got) < 20 && ctx.Err() == nil {
		fs := rd.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	want := append(values("a", 10), values("b", 10)...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("partition holds %v\nwant %v", got, want)
	}
	// Nothing after the 20 (no duplicate written).
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup(topic, 0); o.Offset != 20 {
		t.Fatalf("end offset %d, want 20", o.Offset)
	}
}
