package compat

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestCompactionClients: a compacted topic on a raft cluster, cleaned by
// every replica, read from the start through the read listeners by
// sarama, kafka-go and kcat (librdkafka) as well as franz-go. A raft
// partition's cleaner keeps every batch (batches are raft entries), so
// the log holds many batches left without records; each client must
// step over them and read exactly the latest record of every key, not
// stall or stop before the end.
func TestCompactionClients(t *testing.T) {
	t.Parallel()
	c := harness.StartCluster(t, harness.ClusterOptions{Extra: "log.cleaner.backoff.ms: 100\n"})
	writeAddrs := harness.Addrs(harness.ViewWrite, c.Writers)
	readAddrs := harness.Addrs(harness.ViewRead, c.Readers)
	const topic, keys, rounds, pad = "compacted", 30, 12, 30
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(writeAddrs...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cfg := map[string]*string{
		"cleanup.policy":            new("compact"),
		"segment.bytes":             new("2048"),
		"min.cleanable.dirty.ratio": new("0.01"),
	}
	resp, err := kadm.NewClient(prod).CreateTopic(ctx, 1, 3, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	// An elected raft leader (epoch 1 in the write view) and both read
	// replicas in the read view.
	waitFor(t, 30*time.Second, "a leader and two read replicas", func() bool {
		w, r := freshTopics(ctx, t, writeAddrs[0], topic)[topic], freshTopics(ctx, t, readAddrs[0], topic)[topic]
		return len(w.Partitions) == 1 && w.Partitions[0].ErrorCode == 0 && w.Partitions[0].LeaderEpoch >= 1 &&
			len(r.Partitions) == 1 && r.Partitions[0].ErrorCode == 0 && len(r.Partitions[0].Replicas) == 2 && r.Partitions[0].Leader >= 0
	})
	want := map[string]string{} // key -> latest value, "<null>" for a tombstone
	produce := func(key string, value []byte) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", key, err)
		}
		want[key] = "<null>"
		if value != nil {
			want[key] = string(value)
		}
	}
	for round := 0; round < rounds; round++ {
		for k := 0; k < keys; k++ {
			produce(fmt.Sprintf("k%02d", k), []byte(fmt.Sprintf("k%02d-r%02d-%s", k, round, strings.Repeat("x", 30))))
		}
	}
	for k := 0; k < keys; k += 10 {
		produce(fmt.Sprintf("k%02d", k), nil)
	}
	for i := 0; i < pad; i++ {
		produce(fmt.Sprintf("pad%02d", i), []byte(fmt.Sprintf("pad-%02d-%s", i, strings.Repeat("y", 40))))
	}
	wantLines := linesOf(want)

	// check compares what a client read, one "key=value" line per record
	// in offset order, with the survivors.
	check := func(client string, got []string) bool {
		seen := map[string]bool{}
		for _, l := range got {
			k, _, _ := strings.Cut(l, "=")
			if seen[k] {
				return false
			}
			seen[k] = true
		}
		sorted := append([]string(nil), got...)
		sort.Strings(sorted)
		return strings.Join(sorted, "\n") == strings.Join(wantLines, "\n")
	}
	// Both read brokers clean their own copies; franz-go, routed to one of
	// them, sees the survivors once that one has.
	var last []string
	ok := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !ok; time.Sleep(300 * time.Millisecond) {
		last = readFranz(ctx, t, readAddrs, topic, len(want))
		ok = check("franz-go", last)
	}
	if !ok {
		t.Fatalf("franz-go never read exactly the survivors; last read %d records", len(last))
	}
	// Give the other read broker time to clean too: every client below
	// may be routed to either.
	for _, r := range c.Readers {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(300 * time.Millisecond) {
			got := readFranz(ctx, t, []string{r.Listeners[harness.ViewRead]}, topic, len(want))
			if check("franz-go", got) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never held exactly the survivors", r.Name)
			}
		}
	}

	for _, cl := range []struct {
		name string
		read func() ([]string, error)
	}{
		{"sarama", func() ([]string, error) { return readSarama(readAddrs, topic, len(want)) }},
		{"kafka-go", func() ([]string, error) { return readKafkaGo(ctx, readAddrs[0], topic, len(want)) }},
		{"kcat", func() ([]string, error) { return readKcat(ctx, t, readAddrs[0], topic) }},
	} {
		t.Run(cl.name, func(t *testing.T) {
			got, err := cl.read()
			if err != nil {
				t.Fatalf("after %d records: %v", len(got), err)
			}
			if !check(cl.name, got) {
				t.Fatalf("read %d records, want the %d survivors:\n%s", len(got), len(want), strings.Join(got, "\n"))
			}
		})
	}
}

func linesOf(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func line(k, v []byte) string {
	if v == nil {
		return string(k) + "=<null>"
	}
	return string(k) + "=" + string(v)
}

// readFranz reads topic from the start until n records or a quiet second.
func readFranz(ctx context.Context, t *testing.T, addrs []string, topic string, n int) []string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for len(out) < n {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if fs.NumRecords() == 0 {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, line(r.Key, r.Value)) })
	}
	return out
}

func readSarama(addrs []string, topic string, n int) ([]string, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "sluice-compat-sarama"
	cons, err := sarama.NewConsumer(addrs, cfg)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	var out []string
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			out = append(out, line(m.Key, m.Value))
		case e := <-pc.Errors():
			return out, e
		case <-timeout:
			return out, fmt.Errorf("stalled: %d of %d records in 30 s", len(out), n)
		}
	}
	return out, nil
}

func readKafkaGo(ctx context.Context, addr, topic string, n int) ([]string, error) {
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: 0,
		MaxWait: 200 * time.Millisecond, MaxBytes: 10 << 20})
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []string
	for len(out) < n {
		m, err := r.ReadMessage(rctx)
		if err != nil {
			return out, err
		}
		out = append(out, line(m.Key, m.Value))
	}
	return out, nil
}

// readKcat reads the partition with kcat (librdkafka) to its end.
func readKcat(ctx context.Context, t *testing.T, addr, topic string) ([]string, error) {
	kcat := requireTool(t, "kcat")
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(rctx, kcat, "-C", "-b", addr, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
		"-Z", "-f", "%k=%s\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kcat: %v: %s", err, stderr.String())
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && v == "NULL" {
			l = k + "=<null>" // -Z prints a null value as NULL
		}
		out = append(out, l)
	}
	return out, nil
}
