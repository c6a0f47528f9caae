package compat

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// runJava runs a main class from the compat-tests/java classpath and returns
// its stdout; a non-zero exit fails the test with stderr.
func runJava(t *testing.T, classpath string, timeout time.Duration, class string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The group coordinator's side of the client logs at info (joins,
	// generations, errors that reset the member): what a failed run needs.
	cmd := exec.CommandContext(ctx, "java", jvm(classpath, append([]string{
		"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals=info", class}, args...)...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %v ran for %v\nstdout:\n%s", class, args, time.Since(start).Round(time.Millisecond), tail(out.String(), 8<<10))
	if err != nil || ctx.Err() != nil {
		t.Fatalf("%s failed (%v, ctx %v)\nstderr (tail):\n%s", class, err, ctx.Err(), tail(errb.String(), 64<<10))
	}
	return out.String()
}

// firstOffsets parses GroupConsume's "FIRST partition offset" lines.
func firstOffsets(t *testing.T, out string) map[int32]int64 {
	t.Helper()
	m := map[int32]int64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "FIRST" {
			p, _ := strconv.Atoi(f[1])
			o, _ := strconv.ParseInt(f[2], 10, 64)
			m[int32(p)] = o
		}
	}
	return m
}

// toolDescribe runs kafka-consumer-groups --describe and returns each
// partition's CURRENT-OFFSET and LAG as the tool prints them.
func toolDescribe(t *testing.T, classpath, addr, group, topic string) (cur, lag map[int32]int64) {
	t.Helper()
	out := runJava(t, classpath, 2*time.Minute, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
		"--bootstrap-server", addr, "--describe", "--group", group)
	cur, lag = map[int32]int64{}, map[int32]int64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[0] != group || f[1] != topic {
			continue
		}
		p, err1 := strconv.Atoi(f[2])
		c, err2 := strconv.ParseInt(f[3], 10, 64)
		lg, err3 := strconv.ParseInt(f[5], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("kafka-consumer-groups --describe: cannot parse %q", l)
		}
		cur[int32(p)], lag[int32(p)] = c, lg
	}
	if len(cur) == 0 {
		t.Fatalf("kafka-consumer-groups --describe printed no partition rows for %s/%s:\n%s", group, topic, out)
	}
	return cur, lag
}

func sum(m map[int32]int64) int64 {
	var s int64
	for _, v := range m {
		s += v
	}
	return s
}

// TestGroupJava runs the Java consumer (kafka-clients 4.4) in a group with
// group.protocol=classic and with group.protocol=consumer (KIP-848): it
// processes part of a topic and commits, kadm and kafka-consumer-groups
// --describe must report the same offsets and the expected lag, the broker
// restarts, a second run resumes exactly at the committed offsets, and
// kafka-consumer-groups --reset-offsets --to-earliest rewinds the group.
func TestGroupJava(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	classpath := buildJava(t)
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol, func(t *testing.T) {
			topic, group := "grp-java-"+protocol, "grp-java-g-"+protocol
			const produced, firstRun = 90, 50
			b := startBroker(t)
			ctx := harness.Context(t, 5*time.Minute)
			adm := newAdmin(t, b.KafkaAddr)
			createTopic(ctx, t, adm, topic, 3, nil)
			produceN(ctx, t, b.KafkaAddr, topic, "j", produced)

			out := runJava(t, classpath, 3*time.Minute, "dev.sluice.compat.GroupConsume", b.KafkaAddr, topic, group, protocol, strconv.Itoa(firstRun))
			if !strings.Contains(out, "CONSUMED "+strconv.Itoa(firstRun)+"\n") || !strings.HasSuffix(out, "RESULT OK\n") {
				t.Fatalf("first run did not consume %d records", firstRun)
			}
			committed, lag := groupLag(ctx, t, adm, group, topic)
			if sumCommitted(committed) != firstRun || lag != produced-firstRun {
				t.Fatalf("after the first run kadm sees commits %v (sum %d) and lag %d, want sum %d and lag %d",
					committed, sumCommitted(committed), lag, firstRun, produced-firstRun)
			}
			ends := endOffsets(ctx, t, adm, topic)
			checkTool := func(when string) {
				t.Helper()
				// For a group without members the tool lists the
				// partitions that have a commit; each must agree with
				// kadm, and its lag be end minus commit.
				cur, tlag := toolDescribe(t, classpath, b.KafkaAddr, group, topic)
				if fmtOffsets(cur) != fmtOffsets(committedOnly(committed)) {
					t.Errorf("%s: kafka-consumer-groups --describe offsets %v, kadm %v", when, cur, committed)
				}
				for p, c := range cur {
					if tlag[p] != ends[p]-c {
						t.Errorf("%s: kafka-consumer-groups --describe partition %d lag %d, want %d-%d", when, p, tlag[p], ends[p], c)
					}
				}
			}
			checkTool("after the first run")

			// Restart the broker: the group and its offsets come back
			// from the metastore.
			if err := b.Stop(); err != nil {
				t.Fatal(err)
			}
			b.Restart()
			adm = newAdmin(t, b.KafkaAddr)
			out = runJava(t, classpath, 3*time.Minute, "dev.sluice.compat.GroupConsume", b.KafkaAddr, topic, group, protocol, strconv.Itoa(produced-firstRun))
			if !strings.HasSuffix(out, "RESULT OK\n") {
				t.Fatalf("second run failed")
			}
			for p, o := range firstOffsets(t, out) {
				want := max(committed[p], 0) // no commit: auto.offset.reset=earliest
				if o != want {
					t.Errorf("second run: partition %d resumed at %d, committed %d", p, o, committed[p])
				}
			}
			committed, lag = groupLag(ctx, t, adm, group, topic)
			if sumCommitted(committed) != produced || lag != 0 {
				t.Errorf("after the second run kadm sees commits %v and lag %d, want sum %d and lag 0", committed, lag, produced)
			}
			checkTool("after the second run")

			// --reset-offsets --to-earliest on the (now empty) group.
			runJava(t, classpath, 2*time.Minute, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
				"--bootstrap-server", b.KafkaAddr, "--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic)
			committed, lag = groupLag(ctx, t, adm, group, topic)
			if sumCommitted(committed) != 0 || lag != produced {
				t.Errorf("after --reset-offsets --to-earliest kadm sees commits %v and lag %d, want 0 and %d", committed, lag, produced)
			}
			out = runJava(t, classpath, 3*time.Minute, "dev.sluice.compat.GroupConsume", b.KafkaAddr, topic, group, protocol, "3")
			for p, o := range firstOffsets(t, out) {
				if o != 0 {
					t.Errorf("after the reset partition %d resumed at %d, want 0", p, o)
				}
			}
		})
	}
}

// committedOnly drops partitions without a commit (the tool prints "-").
func committedOnly(m map[int32]int64) map[int32]int64 {
	out := map[int32]int64{}
	for p, o := range m {
		if o >= 0 {
			out[p] = o
		}
	}
	return out
}

// TestGroupJavaRebalance runs three Java consumers in one group, closes one
// and starts another mid-stream, with group.protocol=classic (cooperative
// sticky) and group.protocol=consumer (KIP-848, the broker's assignor):
// every record is processed exactly once and the group ends with no lag.
func TestGroupJavaRebalance(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	classpath := buildJava(t)
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol, func(t *testing.T) {
			topic, group := "grp-javareb-"+protocol, "grp-javareb-g-"+protocol
			const total = 3000
			b := startBroker(t)
			ctx := harness.Context(t, 5*time.Minute)
			adm := newAdmin(t, b.KafkaAddr)
			createTopic(ctx, t, adm, topic, 6, nil)
			produceN(ctx, t, b.KafkaAddr, topic, "r", total)
			out := runJava(t, classpath, 4*time.Minute, "dev.sluice.compat.GroupRebalance", b.KafkaAddr, topic, group, protocol, strconv.Itoa(total))
			if !strings.HasSuffix(out, "RESULT OK\n") {
				t.Fatalf("java rebalance run failed")
			}
			committed, lag := groupLag(ctx, t, adm, group, topic)
			if lag != 0 || sumCommitted(committed) != total {
				t.Errorf("after the run: commits %v lag %d, want %d committed and lag 0", committed, lag, total)
			}
		})
	}
}
