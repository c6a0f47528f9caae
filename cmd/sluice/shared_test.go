package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sharedDev is one `sluice dev` process with shared.storage.type=dir.
type sharedDev struct {
	data, shared, kafka, admin string
	cmd                        *exec.Cmd
	log                        *os.File
	extra                      []string // more --set flags
}

// startSharedDev starts a sharedDev with more --set flags extra in a new
// temporary directory (its data directory, shared directory and log). At
// the end of the test the process is killed, and its log's tail shown if
// the test failed.
func startSharedDev(t *testing.T, extra ...string) *sharedDev {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, 2)
	logf, err := os.Create(filepath.Join(dir, "sluice.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	d := &sharedDev{data: filepath.Join(dir, "data"), shared: filepath.Join(dir, "shared"),
		kafka: "127.0.0.1:" + strconv.Itoa(ports[0]), admin: "127.0.0.1:" + strconv.Itoa(ports[1]), log: logf, extra: extra}
	if err := os.MkdirAll(d.shared, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.kill9)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("sluice log:\n%s", tail(b, 4000))
		}
	})
	d.start(t)
	return d
}

func (d *sharedDev) start(t *testing.T) {
	t.Helper()
	d.cmd = exec.Command(binPath, "dev", "--data-dir", d.data, "--kafka-addr", d.kafka, "--admin-addr", d.admin, "--log-format", "json",
		"--set", "shared.storage.type=dir", "--set", "shared.storage.dir="+d.shared, "--set", "shared.upload.linger.ms=20")
	for _, kv := range d.extra {
		d.cmd.Args = append(d.cmd.Args, "--set", kv)
	}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, d.admin, 60*time.Second)
}

func (d *sharedDev) kill9() {
	if d.cmd == nil || d.cmd.Process == nil {
		return // never started
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = d.cmd.Process.Wait()
}

// consumeAll reads partitions [0, parts) of topic from the start up to
// their end offsets and returns each partition's values in offset order.
func consumeAll(t *testing.T, ctx context.Context, addr, topic string, parts int) map[int32][]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want += o.Offset
		offsets[o.Partition] = kgo.NewOffset().AtStart()
	})
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets})
	got := map[int32][]string{}
	n := int64(0)
	for n < want {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming %s after %d of %d records: %v", topic, n, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if int64(len(got[r.Partition])) != r.Offset {
				t.Fatalf("partition %d: offset %d after %d records", r.Partition, r.Offset, len(got[r.Partition]))
			}
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	return got
}

// TestSharedDevProduceConsume: `sluice dev` with a shared directory serves
// a topic in replication.mode=shared to real clients. franz-go and kcat
// produce to it and consume it back; the data is in objects in the shared
// directory. Killed with SIGKILL while a producer is writing, and
// restarted with its partition logs deleted (the metastore and the shared
// directory kept), the broker serves the whole history: every record whose
// produce was acknowledged, in the offsets it was acknowledged at, and
// new records continue after them.
func TestSharedDevProduceConsume(t *testing.T) {
	d := startSharedDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	adm, err := kgo.NewClient(kgo.SeedBrokers(d.kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	mode := "shared"
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 3, 1, map[string]*string{"replication.mode": &mode}, "sh"); err != nil {
		t.Fatal(err)
	}

	// franz-go, idempotent, acks=all; the acknowledged offsets recorded.
	acked := map[int32]map[int64]string{0: {}, 1: {}, 2: {}}
	var mu sync.Mutex
	prod, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.DefaultProduceTopic("sh"), kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordRetries(3), kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	produce := func(from, n int) {
		var wg sync.WaitGroup
		for i := from; i < from+n; i++ {
			wg.Add(1)
			prod.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("fg-%05d", i))}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					mu.Lock()
					acked[r.Partition][r.Offset] = string(r.Value)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	produce(0, 3000)
	for p, m := range acked {
		if len(m) == 0 {
			t.Fatalf("partition %d: nothing acknowledged", p)
		}
	}

	// kcat, if installed: produces to partition 0, consumes it back.
	kcatLines := 0
	if kcat, err := exec.LookPath("kcat"); err != nil {
		noteMissing(t, "kcat not installed: its produce and consume of the shared topic not run")
	} else {
		in := ""
		for i := 0; i < 200; i++ {
			in += fmt.Sprintf("kc-%03d\n", i)
		}
		c := exec.CommandContext(ctx, kcat, "-b", d.kafka, "-t", "sh", "-p", "0", "-P", "-X", "acks=all")
		c.Stdin = strings.NewReader(in)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("kcat produce: %v\n%s", err, out)
		}
		kcatLines = 200
		out, err := exec.CommandContext(ctx, kcat, "-b", d.kafka, "-t", "sh", "-p", "0", "-C", "-e", "-q", "-f", "%o %s\n").Output()
		if err != nil {
			t.Fatalf("kcat consume: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		mu.Lock()
		n0 := len(acked[0])
		for i, l := range lines {
			off, val, _ := strings.Cut(l, " ")
			if off != strconv.Itoa(i) {
				t.Fatalf("kcat read offset %s at line %d", off, i)
			}
			if i < n0 {
				if acked[0][int64(i)] != val {
					t.Fatalf("kcat read %q at %d, franz-go's acknowledged %q", val, i, acked[0][int64(i)])
				}
			} else {
				acked[0][int64(i)] = val
			}
		}
		mu.Unlock()
		if len(lines) != n0+200 || !strings.HasPrefix(lines[len(lines)-1], strconv.Itoa(n0+199)+" kc-199") {
			t.Fatalf("kcat read %d lines, want %d ending with kc-199", len(lines), n0+200)
		}
	}
	objects, _ := filepath.Glob(filepath.Join(d.shared, "data", "1", "*", "*"))
	if len(objects) == 0 {
		t.Fatal("no objects in the shared directory")
	}
	t.Logf("%d records (%d by kcat) in %d objects before the kill", 3000+kcatLines, kcatLines, len(objects))
	if puts := metricValue(t, d.admin, "sluice_shared_puts_total"); puts != float64(len(objects)) {
		t.Fatalf("sluice_shared_puts_total %v, %d objects in the directory", puts, len(objects))
	}
	if n := metricValue(t, d.admin, "sluice_shared_put_bytes_total"); n <= 0 {
		t.Fatalf("sluice_shared_put_bytes_total %v", n)
	}

	// SIGKILL while the producer writes.
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(done)
		for i := 10000; ; i += 200 {
			select {
			case <-stopped:
				return
			default:
			}
			produce(i, 200)
		}
	}()
	time.Sleep(time.Second)
	mu.Lock()
	before := len(acked[0]) + len(acked[1]) + len(acked[2])
	mu.Unlock()
	d.kill9()
	close(stopped)
	if err := os.RemoveAll(filepath.Join(d.data, "logs")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(d.data, "consumer-offsets")); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	// The idempotent producer retries what it had in flight at the kill
	// against the restarted broker (franz-go fails such records only once
	// it knows their outcome): each is written once, as the rebuilt
	// producer table recognises a retry of a batch that did commit.
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the producer did not finish after the restart")
	}
	prod.Close()

	got := consumeAll(t, ctx, d.kafka, "sh", 3)
	total := 0
	for p, m := range acked {
		total += len(m)
		for off, v := range m {
			if off >= int64(len(got[p])) || got[p][off] != v {
				t.Fatalf("partition %d offset %d: acknowledged %q, read %d records after the restart", p, off, v, len(got[p]))
			}
		}
	}
	seen := map[string]bool{}
	for p, vs := range got {
		for off, v := range vs {
			if seen[v] {
				t.Fatalf("partition %d offset %d: %q written twice", p, off, v)
			}
			seen[v] = true
		}
	}
	if total <= before {
		t.Logf("no record acknowledged between the count and the kill")
	}
	t.Logf("after SIGKILL and restart with no partition logs: %d acknowledged records all read back (%d acknowledged a moment before the kill)", total, before)

	// New records continue after the history.
	prod2, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.DefaultProduceTopic("sh"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod2.Close()
	r := &kgo.Record{Partition: 0, Value: []byte("after")}
	if err := prod2.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if r.Offset != int64(len(got[r.Partition])) {
		t.Fatalf("record after the restart at %d/%d, history ends at %d", r.Partition, r.Offset, len(got[r.Partition]))
	}
}
