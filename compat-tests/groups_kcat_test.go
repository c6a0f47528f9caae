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
)

// kcatMember is a running `kcat -G` balanced consumer printing
// "partition offset" per record.
type kcatMember struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	recs   []tpo
	stderr bytes.Buffer
	done   chan struct{}
}

func startKcatMember(t *testing.T, addr, group, topic string, extra ...string) *kcatMember {
	t.Helper()
	args := append([]string{"-u", "-b", addr, "-G", group, "-f", "%p %o\\n", "-X", "auto.offset.reset=earliest",
		"-X", "heartbeat.interval.ms=500", "-X", "session.timeout.ms=10000"}, extra...)
	args = append(args, topic)
	m := &kcatMember{cmd: exec.Command("kcat", args...), done: make(chan struct{})}
	m.cmd.Stderr = &syncWriter{mu: &m.mu, w: &m.stderr}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("kcat -G: %v", err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			p, _ := strconv.Atoi(f[0])
			o, _ := strconv.ParseInt(f[1], 10, 64)
			m.mu.Lock()
			m.recs = append(m.recs, tpo{int32(p), o})
			m.mu.Unlock()
		}
		m.cmd.Wait()
	}()
	t.Cleanup(func() {
		if m.cmd.ProcessState == nil {
			m.cmd.Process.Kill()
		}
		<-m.done
	})
	return m
}

type syncWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (m *kcatMember) records() []tpo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]tpo(nil), m.recs...)
}

func (m *kcatMember) errText() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stderr.String()
}

// stop sends SIGTERM (kcat closes its consumer, committing) and waits.
func (m *kcatMember) stop(t *testing.T) {
	t.Helper()
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		m.cmd.Process.Kill()
		t.Fatalf("kcat -G did not exit on SIGTERM; stderr:\n%s", tail(m.errText(), 4<<10))
	}
}

// TestGroupKcat runs kcat -G (librdkafka 2.0.2 balanced consumer): one
// member reads part of a topic and commits on close, the broker restarts, a
// second run resumes at the committed offsets, and two members sharing the
// group split the partitions and read the rest exactly once between them.
func TestGroupKcat(t *testing.T) {
	t.Parallel()
	requireTool(t, "kcat")
	const (
		topic = "grp-kcat"
		group = "grp-kcat-g"
	)
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, topic, 4, nil)
	produceN(ctx, t, b.KafkaAddr, topic, "k", 80)

	// One member, exactly 30 records (-c), then it closes and commits.
	out, _ := kcat(t, 2*time.Minute, "", "-b", b.KafkaAddr, "-G", group, "-c", "30", "-f", "%p %o\\n",
		"-X", "auto.offset.reset=earliest", topic)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 30 {
		t.Fatalf("kcat -G -c 30 printed %d records", len(lines))
	}
	committed, lag := groupLag(ctx, t, adm, group, topic)
	if sumCommitted(committed) != 30 || lag != 50 {
		t.Fatalf("after kcat -G -c 30: commits %v, lag %d; want 30 committed and lag 50", committed, lag)
	}

	// Restart the broker; the next member resumes at the commits.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	adm = newAdmin(t, b.KafkaAddr)
	out, _ = kcat(t, 2*time.Minute, "", "-b", b.KafkaAddr, "-G", group, "-c", "50", "-f", "%p %o\\n",
		"-X", "auto.offset.reset=earliest", topic)
	first := map[int32]int64{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		p, _ := strconv.Atoi(f[0])
		o, _ := strconv.ParseInt(f[1], 10, 64)
		if _, ok := first[int32(p)]; !ok {
			first[int32(p)] = o
		}
	}
	for p, o := range first {
		if want := max(committed[p], 0); o != want {
			t.Errorf("after restart kcat resumed partition %d at %d, committed %d", p, o, committed[p])
		}
	}
	if committed, lag = groupLag(ctx, t, adm, group, topic); lag != 0 {
		t.Fatalf("after reading the rest: commits %v lag %d", committed, lag)
	}

	// Two balanced members split the partitions.
	m1 := startKcatMember(t, b.KafkaAddr, group, topic)
	m2 := startKcatMember(t, b.KafkaAddr, group, topic)
	waitFor(t, time.Minute, "both kcat members to be assigned partitions", func() bool {
		return strings.Count(m1.errText(), "assigned:") > 0 && strings.Count(m2.errText(), "assigned:") > 0 &&
			!strings.Contains(lastLine(m1.errText(), "rebalanced"), "revoked") &&
			!strings.Contains(lastLine(m2.errText(), "rebalanced"), "revoked")
	})
	produceN(ctx, t, b.KafkaAddr, topic, "k2", 80)
	deadline := time.Now().Add(time.Minute)
	for len(m1.records())+len(m2.records()) < 80 {
		if time.Now().After(deadline) {
			t.Fatalf("the two members read %d and %d of 80 new records\nstderr 1:\n%s\nstderr 2:\n%s",
				len(m1.records()), len(m2.records()), tail(m1.errText(), 4<<10), tail(m2.errText(), 4<<10))
		}
		time.Sleep(50 * time.Millisecond)
	}
	m1.stop(t)
	m2.stop(t)
	seen := map[tpo]int{}
	parts1, parts2 := map[int32]bool{}, map[int32]bool{}
	for _, r := range m1.records() {
		seen[r]++
		parts1[r.p] = true
	}
	for _, r := range m2.records() {
		seen[r]++
		parts2[r.p] = true
	}
	if len(seen) != 80 {
		t.Errorf("the two members read %d distinct records, want 80", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("partition %d offset %d read %d times", k.p, k.o, n)
		}
	}
	for p := range parts1 {
		if parts2[p] {
			t.Errorf("partition %d was read by both members", p)
		}
	}
	if len(parts1) == 0 || len(parts2) == 0 {
		t.Errorf("partitions were not split: member 1 read %v, member 2 %v\nstderr 1:\n%s\nstderr 2:\n%s",
			parts1, parts2, tail(m1.errText(), 2<<10), tail(m2.errText(), 2<<10))
	}
	if committed, lag = groupLag(ctx, t, adm, group, topic); lag != 0 || sumCommitted(committed) != 160 {
		t.Errorf("after both members closed: commits %v lag %d, want 160 committed and lag 0", committed, lag)
	}
}

// lastLine returns the last line of s containing substr.
func lastLine(s, substr string) string {
	ls := strings.Split(s, "\n")
	for i := len(ls) - 1; i >= 0; i-- {
		if strings.Contains(ls[i], substr) {
			return ls[i]
		}
	}
	return ""
}

// TestGroupKcatStatic: kcat -G with group.instance.id (static membership,
// JoinGroup v5 from librdkafka 2.0.2). A restarted instance replaces its
// old member without waiting for its session, resumes at the committed
// offset, and DescribeGroups shows one member with that instance id.
func TestGroupKcatStatic(t *testing.T) {
	t.Parallel()
	requireTool(t, "kcat")
	const topic, group = "grp-kcat-static", "grp-kcat-static-g"
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, topic, 1, nil)
	produceN(ctx, t, b.KafkaAddr, topic, "s", 40)
	for run := 0; run < 2; run++ {
		out, _ := kcat(t, time.Minute, "", "-b", b.KafkaAddr, "-G", group, "-c", "10", "-f", "%p %o\\n",
			"-X", "auto.offset.reset=earliest", "-X", "group.instance.id=inst-1", "-X", "session.timeout.ms=30000", topic)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 10 || lines[0] != "0 "+strconv.Itoa(10*run) {
			t.Fatalf("static run %d read %d records starting with %q, want 10 from offset %d", run, len(lines), lines[0], 10*run)
		}
	}
	committed, lag := groupLag(ctx, t, adm, group, topic)
	if committed[0] != 20 || lag != 20 {
		t.Errorf("after two static runs: commits %v lag %d, want 20 and 20", committed, lag)
	}
	// librdkafka sends no LeaveGroup for a static member: it stays, once.
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ms := dg[group].Members
	if len(ms) != 1 || ms[0].InstanceID == nil || *ms[0].InstanceID != "inst-1" {
		t.Errorf("DescribeGroups after the static restart: %+v", ms)
	}
}
