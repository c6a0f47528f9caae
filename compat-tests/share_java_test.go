package compat

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// javaProc is a running Java main class whose stdout lines arrive on lines.
type javaProc struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
	mu    sync.Mutex
	out   strings.Builder
	errb  bytes.Buffer
}

func startJava(t *testing.T, classpath, class string, args ...string) *javaProc {
	t.Helper()
	p := &javaProc{cmd: exec.Command("java", jvm(classpath, append([]string{class}, args...)...)...), lines: make(chan string, 1<<16), done: make(chan error, 1)}
	p.cmd.Stderr = &p.errb
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.done <- p.cmd.Wait()
	}()
	return p
}

func (p *javaProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitLine returns the first line with prefix, failing after timeout.
func (p *javaProc) waitLine(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("java exited before printing %q\nstdout:\n%s\nstderr:\n%s", prefix, tail(p.output(), 8<<10), tail(p.errb.String(), 8<<10))
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timer.C:
			t.Fatalf("no %q line within %v\nstdout:\n%s", prefix, timeout, tail(p.output(), 8<<10))
		}
	}
}

type shareGot struct {
	consumer int
	offset   int64
	count    int
	atMs     int64
	value    string
}

// TestShareGroupJava drives share groups (KIP-932) with Kafka's
// KafkaShareConsumer 4.4: a consumer acquires records and is stopped
// (SIGSTOP) holding them, its connection open; eight consumers in one group then share the one
// partition: each gets records, every record is accepted exactly once
// (nothing acknowledged is delivered again), and the killed consumer's
// records come back to them, with a delivery count of 2, once their lock
// (group.share.record.lock.duration.ms, 4 s here) expired. After a restart
// of the broker a new consumer gets only records produced since: the
// acknowledgements were in the metastore.
func TestShareGroupJava(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	classpath := buildJava(t)
	const lockMs = 4000
	b := startBroker(t, "--set", "group.share.record.lock.duration.ms="+strconv.Itoa(lockMs))
	ctx := harness.Context(t, 6*time.Minute)
	adm := newAdmin(t, b.KafkaAddr)
	const topic, group = "share-java", "share-java-g"
	createTopic(ctx, t, adm, topic, 1, nil)
	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	produce := func(values ...string) {
		t.Helper()
		rs := make([]*kgo.Record, len(values))
		for i, v := range values {
			rs[i] = &kgo.Record{Value: []byte(v)}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// The holder. share.auto.offset.reset is latest: the group starts
	// at the end of the log when it first fetches, so produce until the
	// holder has something.
	holder := startJava(t, classpath, "dev.sluice.compat.ShareConsume", b.KafkaAddr, topic, group, "hold", "300")
	held := make(chan string, 1)
	go func() { held <- holder.waitLine(t, "HELD ", 2*time.Minute) }()
	var heldLine string
	for i := 0; heldLine == ""; i++ {
		produce("warm-" + strconv.Itoa(i))
		select {
		case heldLine = <-held:
		case <-time.After(300 * time.Millisecond):
		}
	}
	// Stopped, not killed: its connection stays open, so its records
	// come back only when their locks expire (a killed consumer's come
	// back at once, when its connection closes: TestShareReleaseOnDisconnect).
	if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer holder.cmd.Process.Kill()
	f := strings.Fields(heldLine)
	heldAt, _ := strconv.ParseInt(f[1], 10, 64)
	heldOffsets := map[int64]bool{}
	for _, s := range strings.Split(f[2], ",") {
		o, _ := strconv.ParseInt(s, 10, 64)
		heldOffsets[o] = true
	}
	t.Logf("holder acquired offsets %s and was stopped", f[2])

	const consumers, n = 8, 400
	run := startJava(t, classpath, "dev.sluice.compat.ShareConsume", b.KafkaAddr, topic, group, "consume",
		strconv.Itoa(consumers), "rec-", strconv.Itoa(n), "150")
	// Let the members join before the records arrive, so that all of
	// them take part; the partition is already initialized.
	waitShareMembers(ctx, t, cl, group, consumers)
	// And let the holder's lock expire first: on a quiet machine the
	// consumers take the 400 records in well under the lock duration and
	// would stop before the held records came back.
	time.Sleep(time.Until(time.UnixMilli(heldAt + lockMs + 1000)))
	values := make([]string, n)
	for i := range values {
		values[i] = "rec-" + strconv.Itoa(i)
	}
	produce(values...)
	select {
	case err := <-run.done:
		if err != nil {
			t.Fatalf("share consumers failed: %v\nstdout:\n%s\nstderr:\n%s", err, tail(run.output(), 16<<10), tail(run.errb.String(), 16<<10))
		}
	case <-ctx.Done():
		t.Fatalf("share consumers did not finish\nstdout:\n%s", tail(run.output(), 16<<10))
	}
	out := run.output()
	if !strings.Contains(out, "RESULT OK") {
		t.Fatalf("share consumers:\n%s", tail(out, 16<<10))
	}
	var got []shareGot
	perConsumer := map[int]int{}
	byOffset := map[int64][]shareGot{}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "ACKFAIL") {
			t.Errorf("acknowledgement failed: %s", l)
		}
		f := strings.Fields(l)
		if len(f) != 6 || f[0] != "GOT" {
			continue
		}
		var g shareGot
		g.consumer, _ = strconv.Atoi(f[1])
		g.offset, _ = strconv.ParseInt(f[2], 10, 64)
		g.count, _ = strconv.Atoi(f[3])
		g.atMs, _ = strconv.ParseInt(f[4], 10, 64)
		g.value = f[5]
		got = append(got, g)
		perConsumer[g.consumer]++
		byOffset[g.offset] = append(byOffset[g.offset], g)
	}
	t.Logf("records per consumer: %v", perConsumer)
	if len(perConsumer) != consumers {
		t.Errorf("%d of %d consumers got records: %v", len(perConsumer), consumers, perConsumer)
	}
	// Every record was accepted when received: one delivery each.
	for off, gs := range byOffset {
		if len(gs) > 1 {
			t.Errorf("offset %d delivered %d times after being accepted: %+v", off, len(gs), gs)
		}
	}
	// The holder's records came back once their lock expired.
	for off := range heldOffsets {
		gs := byOffset[off]
		if len(gs) != 1 {
			t.Errorf("held offset %d delivered %d times to the group, want once", off, len(gs))
			continue
		}
		if gs[0].count != 2 {
			t.Errorf("held offset %d came back with delivery count %d, want 2", off, gs[0].count)
		}
		if gs[0].atMs < heldAt+lockMs-500 {
			t.Errorf("held offset %d came back %d ms after the holder got it, before its %d ms lock expired", off, gs[0].atMs-heldAt, lockMs)
		}
	}
	for _, g := range got {
		if strings.HasPrefix(g.value, "rec-") && g.count != 1 {
			t.Errorf("record %s delivered with count %d, want 1", g.value, g.count)
		}
	}

	// Restart: acknowledged records are never delivered again; only the
	// records produced after the restart arrive.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	cl = newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	again := startJava(t, classpath, "dev.sluice.compat.ShareConsume", b.KafkaAddr, topic, group, "consume",
		"1", "after-", "3", "90")
	waitShareMembers(ctx, t, cl, group, 1)
	produce("after-0", "after-1", "after-2")
	if err := <-again.done; err != nil {
		t.Fatalf("consumer after restart: %v\n%s\n%s", err, tail(again.output(), 8<<10), tail(again.errb.String(), 8<<10))
	}
	for _, l := range strings.Split(again.output(), "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[0] == "GOT" && !strings.HasPrefix(f[5], "after-") {
			t.Errorf("after the restart an acknowledged record came back: %s", l)
		}
	}
}

// waitShareMembers waits until the share group has at least n members
// (ShareGroupDescribe).
func waitShareMembers(ctx context.Context, t *testing.T, cl *kgo.Client, group string, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 && len(resp.Groups[0].Members) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("share group %s did not reach %d members (last: %+v, %v)", group, n, resp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
