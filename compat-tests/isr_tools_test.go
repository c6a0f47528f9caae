package compat

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestToolsISR runs Apache Kafka's kafka-topics (TopicCommand, whose
// --describe is the Java AdminClient's describeTopics) against the 3
// write + 2 read cluster in each listener view: a healthy cluster has no
// under-replicated and no unavailable partition; after kill -9 of a write
// broker every partition shows it out of the ISR and in OfflineReplicas
// in the write and mixed views (the read view does not list write
// brokers) within replica.lag.time.max.ms plus its lease and a metadata
// refresh, with a leader still; and once it restarts nothing is
// under-replicated again. About 1-2 min (JVM starts on 2 cores).
func TestToolsISR(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	cp := buildJava(t)
	const lagMs = 3000
	c := harness.StartCluster(t, harness.ClusterOptions{Meta: 1, Write: 3, Read: 2,
		Extra: fmt.Sprintf("replica.lag.time.max.ms: %d\n", lagMs)})
	views := map[string][]string{
		harness.ViewWrite: harness.Addrs(harness.ViewWrite, c.Writers[:2]),
		harness.ViewMixed: harness.Addrs(harness.ViewMixed, c.Writers[:2]),
		harness.ViewRead:  harness.Addrs(harness.ViewRead, c.Readers),
	}
	const topic, parts = "isr-tools", 6
	topics := func(view string, args ...string) (string, error) {
		out, stderr, err := tool(t, cp, "", clsTopics, append([]string{"--bootstrap-server", strings.Join(views[view], ",")}, args...)...)
		return out, toolErr(err, stderr)
	}
	// Every read broker must be registered before the topic is created,
	// or it would not be a learner of its partitions.
	env := &routingEnv{c: c, mixedAddrs: harness.Addrs(harness.ViewMixed, c.Brokers())}
	env.waitBrokers(harness.Context(t, time.Minute), t)
	if _, err := topics(harness.ViewWrite, "--create", "--topic", topic, "--partitions", fmt.Sprint(parts), "--replication-factor", "3"); err != nil {
		t.Fatal(err)
	}
	// poll runs kafka-topics --describe (with flag, if any) in view until ok
	// accepts its partition lines, and returns them.
	poll := func(view, flag string, within time.Duration, ok func(lines []string) error) []string {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			args := []string{"--describe", "--topic", topic}
			if flag != "" {
				args = append(args, flag)
			}
			out, err := topics(view, args...)
			var lines []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "Partition: ") {
					lines = append(lines, strings.TrimSpace(l))
				}
			}
			if err == nil {
				err = ok(lines)
			}
			if err == nil {
				return lines
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s view, kafka-topics --describe %s: %v\n%s", view, flag, err, out)
			}
			time.Sleep(time.Second)
		}
	}
	// field is a comma-separated field of a kafka-topics partition line.
	field := func(line, name string) []string {
		m := regexp.MustCompile(`\b` + name + `: ([0-9,]*)`).FindStringSubmatch(line)
		if m == nil || m[1] == "" {
			return nil
		}
		return strings.Split(m[1], ",")
	}
	// What each view lists as replicas: the write brokers, the read
	// brokers, or both.
	replicas := map[string]int{harness.ViewWrite: 3, harness.ViewRead: 2, harness.ViewMixed: 5}
	none := func(lines []string) error {
		if len(lines) != 0 {
			return fmt.Errorf("%d partitions listed", len(lines))
		}
		return nil
	}
	for _, view := range []string{harness.ViewWrite, harness.ViewMixed, harness.ViewRead} {
		all := poll(view, "", 30*time.Second, func(lines []string) error {
			if len(lines) != parts {
				return fmt.Errorf("%d partitions described", len(lines))
			}
			for _, l := range lines {
				if n := len(field(l, "Replicas")); n != replicas[view] {
					return fmt.Errorf("%d replicas, want %d: %s", n, replicas[view], l)
				}
			}
			return nil
		})
		t.Logf("%s view, healthy:\n%s", view, strings.Join(all, "\n"))
		poll(view, "--under-replicated-partitions", 30*time.Second, none)
		poll(view, "--unavailable-partitions", 30*time.Second, none)
	}

	victim := c.Writers[2]
	victim.Kill()
	killed := time.Now()
	id := fmt.Sprint(victim.ID)
	for _, view := range []string{harness.ViewWrite, harness.ViewMixed} {
		lines := poll(view, "--under-replicated-partitions", 40*time.Second, func(lines []string) error {
			if len(lines) != parts {
				return fmt.Errorf("%d of %d partitions under-replicated", len(lines), parts)
			}
			for _, l := range lines {
				isr, replicas := field(l, "Isr"), field(l, "Replicas")
				if !contains(replicas, id) || contains(isr, id) || len(isr) != len(replicas)-1 {
					return fmt.Errorf("broker %s not shown out of the ISR: %s", id, l)
				}
			}
			return nil
		})
		t.Logf("%s view, %v after kill -9 of broker %s:\n%s", view, time.Since(killed).Round(100*time.Millisecond), id, strings.Join(lines, "\n"))
		// The Admin API has no offline replicas (TopicPartitionInfo);
		// the consumer's Metadata has, so check the wire answer. A
		// broker is offline once its lease (10 s) lapses, which can be
		// after it left the ISR (replica.lag.time.max.ms).
		adm, closeAdm := env.admin(t, views[view])
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			md, err := adm.Metadata(harness.Context(t, 10*time.Second), topic)
			if err == nil {
				for _, p := range md.Topics[topic].Partitions {
					if len(p.OfflineReplicas) != 1 || p.OfflineReplicas[0] != victim.ID || slices.Contains(p.ISR, victim.ID) {
						err = fmt.Errorf("partition %d: isr %v offline replicas %v, want [%d] offline", p.Partition, p.ISR, p.OfflineReplicas, victim.ID)
					}
				}
			}
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s view: %v", view, err)
			}
		}
		closeAdm()
		t.Logf("%s view: broker %s listed offline %v after kill -9", view, id, time.Since(killed).Round(100*time.Millisecond))
		poll(view, "--unavailable-partitions", 30*time.Second, none)
	}
	poll(harness.ViewRead, "--under-replicated-partitions", 10*time.Second, none)

	victim.Restart()
	back := time.Now()
	for _, view := range []string{harness.ViewWrite, harness.ViewMixed, harness.ViewRead} {
		poll(view, "--under-replicated-partitions", 60*time.Second, none)
	}
	t.Logf("fully replicated in every view %v after broker %s was ready again", time.Since(back).Round(100*time.Millisecond), id)
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
