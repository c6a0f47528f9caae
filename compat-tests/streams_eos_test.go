package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStreamsExactlyOnceV2 runs compat-tests/java's StreamsCount, a Kafka
// Streams 4.4 application with processing.guarantee=exactly_once_v2 that
// counts the records of each key in a RocksDB store backed by a compacted
// changelog topic, and writes each new count (no record cache: one output
// per input). Input is produced while it runs; once some output is
// committed the application is SIGKILLed mid-stream, restarted on the same
// state directory (so its transactional id fences the dead one's open
// transaction, and the store is restored from the changelog), and left
// to finish. read_committed must then show, for every key, the counts
// 1, 2, ... N exactly once each and in order, N being the key's input
// records: no input counted twice or lost across the crash.
func TestStreamsExactlyOnceV2(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	classpath := buildJava(t)
	b := startBroker(t)
	const app, in, out, keys, total = "sluice-eos", "streams-in", "streams-out", 8, 4000
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, in, 2, nil)
	createTopic(ctx, t, adm, out, 2, nil)
	stateDir := t.TempDir()

	type run struct {
		cmd     *exec.Cmd
		running chan struct{}
		out     *bytes.Buffer
		mu      *sync.Mutex
	}
	start := func(name string) run {
		t.Helper()
		cmd := exec.CommandContext(ctx, "java", jvm(classpath, "dev.sluice.compat.StreamsCount", b.KafkaAddr, app, in, out, stateDir)...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		r := run{cmd: cmd, running: make(chan struct{}), out: &bytes.Buffer{}, mu: &sync.Mutex{}}
		cmd.Stderr = &lockedWriter{w: r.out, mu: r.mu}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(stdout)
			once := sync.Once{}
			for sc.Scan() {
				line := sc.Text()
				r.mu.Lock()
				r.out.WriteString(line + "\n")
				r.mu.Unlock()
				if line == "STATE RUNNING" {
					once.Do(func() { close(r.running) })
				}
			}
		}()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			if t.Failed() {
				r.mu.Lock()
				t.Logf("%s output (tail):\n%s", name, tail(r.out.String(), 16<<10))
				r.mu.Unlock()
			}
		})
		select {
		case <-r.running:
		case <-ctx.Done():
			t.Fatalf("%s: Streams never reached RUNNING", name)
		}
		return r
	}

	// The input, produced while the application runs: key k%keys of
	// record k, in batches. The second half waits for the first run's
	// kill, so that the crash is always mid-stream, however fast the
	// application runs on a loaded machine.
	src := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(in))
	var produced atomic.Int64
	produceDone := make(chan error, 1)
	killed := make(chan struct{})
	produce := func() {
		for i := 0; i < total; i += 40 {
			if i == total/2 {
				select {
				case <-killed:
				case <-ctx.Done():
					produceDone <- ctx.Err()
					return
				}
			}
			var recs []*kgo.Record
			for k := i; k < i+40 && k < total; k++ {
				recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", k%keys), Value: fmt.Appendf(nil, "%d", k)})
			}
			if err := src.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				produceDone <- err
				return
			}
			produced.Store(int64(i + len(recs)))
			time.Sleep(30 * time.Millisecond)
		}
		produceDone <- nil
	}

	outCl := newClient(t, b.KafkaAddr, kgo.ConsumeTopics(out), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	counts := map[string][]int64{}
	seen := 0
	poll := func() {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		fs := outCl.PollFetches(pctx)
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) != 8 {
				t.Fatalf("output record %q: value of %d bytes, want a long", r.Key, len(r.Value))
			}
			counts[string(r.Key)] = append(counts[string(r.Key)], int64(binary.BigEndian.Uint64(r.Value)))
			seen++
		})
	}

	first := start("first run")
	go produce()
	for seen < 200 {
		if ctx.Err() != nil {
			t.Fatalf("first run: %d committed outputs before the deadline", seen)
		}
		poll()
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	t.Logf("killed the first run (SIGKILL) with %d committed outputs read and %d of %d inputs produced", seen, produced.Load(), total)
	close(killed)

	second := start("second run")
	if err := <-produceDone; err != nil {
		t.Fatalf("producing input: %v", err)
	}
	want := total / keys
	complete := func() bool {
		for k := range keys {
			c := counts[fmt.Sprintf("k%d", k)]
			if len(c) == 0 || c[len(c)-1] < int64(want) {
				return false
			}
		}
		return true
	}
	for !complete() {
		if ctx.Err() != nil {
			t.Fatalf("after the restart: %d committed outputs of %d before the deadline", seen, total)
		}
		poll()
	}
	// A little longer, for anything counted twice after the last count.
	for range 3 {
		poll()
	}
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		c := counts[key]
		bad := len(c) != want
		for i, v := range c {
			if v != int64(i+1) {
				bad = true
			}
		}
		if bad {
			t.Errorf("key %s: committed counts %v, want 1..%d each once", key, brief(c), want)
		}
	}

	// The store's changelog is the compacted topic Streams created.
	changelog := app + "-counts-changelog"
	rcs, err := adm.DescribeTopicConfigs(ctx, changelog)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(changelog, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("DescribeConfigs %s: %v %v", changelog, err, rc.Err)
	}
	policy := ""
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil {
			policy = *c.Value
		}
	}
	if policy != "compact" {
		t.Errorf("%s: cleanup.policy %q, want compact", changelog, policy)
	}

	_ = second.cmd.Process.Signal(syscall.SIGTERM)
	werr := make(chan error, 1)
	go func() { werr <- second.cmd.Wait() }()
	select {
	case <-werr:
	case <-time.After(60 * time.Second):
		t.Errorf("the second run did not stop within 60 s of SIGTERM")
	}
}

// brief shortens a long list of counts for a message.
func brief(c []int64) string {
	s := fmt.Sprint(c)
	if len(s) > 300 {
		s = s[:150] + " ... " + s[len(s)-150:]
	}
	return strings.TrimSpace(s)
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
