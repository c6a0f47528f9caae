package compat

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// Kafka's command-line tools (the main classes of the kafka-tools 4.4.0 jar,
// on the classpath of compat-tests/java), each run in its own JVM as a user
// runs kafka-topics.sh and friends: topics, configs, console producer and
// consumer, consumer-groups, and the producer and consumer perf tests. The
// client column "java-tools" of the matrix; the perf tests and
// consumer-groups also get rows of their own.

const toolsClient = "java-tools"

var toolScenarios = []string{"tool-producer-perf", "tool-consumer-perf", "tool-consumer-groups-describe"}

const (
	clsTopics   = "org.apache.kafka.tools.TopicCommand"
	clsConfigs  = "org.apache.kafka.tools.ConfigCommand"
	clsProducer = "org.apache.kafka.tools.ConsoleProducer"
	clsConsumer = "org.apache.kafka.tools.consumer.ConsoleConsumer"
	clsGroups   = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	clsProdPerf = "org.apache.kafka.tools.ProducerPerformance"
	clsConsPerf = "org.apache.kafka.tools.ConsumerPerformance"
)

// tool runs one tool and returns stdout and stderr; a non-zero exit is an
// error (most tools exit 1 on a failure they report).
func tool(t *testing.T, cp, stdin, class string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", jvm(cp, append([]string{class}, args...)...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	short := class[strings.LastIndex(class, ".")+1:]
	t.Logf("%s %s: %v in %v\nstdout (tail): %s\nstderr (tail): %s", short, strings.Join(args, " "), err,
		time.Since(start).Round(time.Millisecond), tail(out.String(), 1500), tail(errb.String(), 1500))
	return out.String(), errb.String(), err
}

func toolErr(err error, stderr string) error {
	if err != nil {
		return fmt.Errorf("%v: %s", err, tail(strings.TrimSpace(stderr), 300))
	}
	return nil
}

type toolRun struct {
	res map[string]scenarioResult
}

func (r *toolRun) do(scenario string, fn func() error) {
	if err := fn(); err != nil {
		r.res[scenario] = scenarioResult{"fail", err.Error()}
		return
	}
	if _, ok := r.res[scenario]; !ok {
		r.res[scenario] = scenarioResult{"pass", ""}
	}
}

func TestToolsJava(t *testing.T) { testToolsJava(t, false) }

// TestSharedMatrixToolsJava runs the basic scenarios of TestToolsJava on
// shared-mode topics (shared_matrix_test.go).
func TestSharedMatrixToolsJava(t *testing.T) { testToolsJava(t, true) }

func testToolsJava(t *testing.T, shared bool) {
	t.Parallel()
	var cp string
	t.Run("java-build", func(t *testing.T) {
		requireTool(t, "java")
		requireTool(t, "mvn")
		cp = buildJava(t)
	})
	// The transaction scenarios are not expressible with the tools (compatmatrix).
	rows := slices.Concat(basicScenarios, adminScenarios, groupScenarios, toolScenarios)
	if shared {
		rows = sharedRows()
	}
	requireToolMatrix(t, toolsClient, rows, cp != "", "java, mvn and the compat-tests/java dependencies")

	var b *harness.Broker
	p, sharedDir := "tools", ""
	if shared {
		b, sharedDir = startSharedBroker(t)
		p = "shtools"
	} else {
		b = startBroker(t, autoCreateOff().ExtraArgs...)
	}
	addr := b.KafkaAddr
	bs := []string{"--bootstrap-server", addr}
	produceLines := func(topic, lines string, extra ...string) (string, error) {
		_, stderr, err := tool(t, cp, lines, clsProducer, append(append(bs, "--topic", topic,
			"--reader-property", "parse.key=true", "--reader-property", "key.separator=\t"), extra...)...)
		if err == nil && strings.Contains(stderr, "ERROR") {
			err = fmt.Errorf("%s", tail(stderr, 400))
		}
		return stderr, err
	}
	consumeLines := func(extra ...string) ([]string, error) {
		out, stderr, err := tool(t, cp, "", clsConsumer, append(append(bs, "--timeout-ms", "15000",
			"--formatter-property", "print.key=true", "--formatter-property", "print.offset=true"), extra...)...)
		// --timeout-ms ends the console consumer with a TimeoutException
		// and exit status 1: the expected end when it read fewer records
		// than --max-messages.
		timedOut := strings.Contains(stderr, "org.apache.kafka.common.errors.TimeoutException")
		if err != nil && timedOut {
			err = nil
		}
		if err == nil && strings.Contains(stderr, "ERROR") && !timedOut {
			err = fmt.Errorf("%s", tail(stderr, 400))
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
		return lines, err
	}

	t.Run("basic", func(t *testing.T) {
		if shared {
			prepareSharedBasic(t, addr, p)
		} else {
			prepareBasic(t, addr, p)
		}
		r := &toolRun{res: map[string]scenarioResult{}}
		r.do("bootstrap-metadata", func() error {
			out, stderr, err := tool(t, cp, "", clsTopics, append(bs, "--describe", "--topic", p+"-meta")...)
			if err != nil {
				return toolErr(err, stderr)
			}
			if !strings.Contains(out, "PartitionCount: 3") || strings.Count(out, "Leader: 1") != 3 {
				return fmt.Errorf("kafka-topics --describe: %s", tail(out, 300))
			}
			return nil
		})
		acks := func(topic, acks string, props ...string) func() error {
			return func() error {
				var in strings.Builder
				for i := 0; i < 100; i++ {
					fmt.Fprintf(&in, "k%d\t%s-%d\n", i, topic, i)
				}
				args := []string{"--request-required-acks", acks}
				for _, pr := range props {
					args = append(args, "--command-property", pr)
				}
				_, err := produceLines(topic, in.String(), args...)
				return err
			}
		}
		r.do("produce-acks0", acks(p+"-acks0", "0"))
		r.do("produce-acks1", acks(p+"-acks1", "1"))
		r.do("produce-acksall", acks(p+"-acksall", "all", "enable.idempotence=false"))
		r.do("produce-idempotent", acks(p+"-idem", "all", "enable.idempotence=true"))

		r.do("keys-nulls-headers-timestamps", func() error {
			// The console producer cannot set a record's timestamp (it stamps
			// CreateTime now); the consumer prints what the broker holds.
			t0 := time.Now().UnixMilli()
			if _, err := produceLines(p+"-fields", "h1:a,h2:b\tk1\tv1\nNULL\tk2\tNULL\nh3:\tNULL\tv3\n",
				"--reader-property", "parse.headers=true", "--reader-property", "null.marker=NULL"); err != nil {
				return err
			}
			lines, err := consumeLines("--topic", p+"-fields", "--partition", "0", "--offset", "earliest", "--max-messages", "3",
				"--formatter-property", "print.headers=true", "--formatter-property", "print.timestamp=true",
				"--formatter-property", "null.literal=<null>")
			if err != nil {
				return err
			}
			re := regexp.MustCompile(`^CreateTime:(\d+)\tOffset:(\d)\t(.*)$`)
			want := []string{"h1:a,h2:b\tk1\tv1", "NO_HEADERS\tk2\t<null>", "h3:\t<null>\tv3"}
			if len(lines) != 3 {
				return fmt.Errorf("read %d lines: %q", len(lines), lines)
			}
			for i, l := range lines {
				m := re.FindStringSubmatch(l)
				if m == nil || m[3] != want[i] {
					return fmt.Errorf("line %d: %q, want CreateTime:<ts>\\tOffset:%d\\t%q", i, l, i, want[i])
				}
				var ts int64
				fmt.Sscan(m[1], &ts)
				if ts < t0-60_000 || ts > time.Now().UnixMilli() {
					return fmt.Errorf("line %d: timestamp %d not from this run", i, ts)
				}
			}
			return nil
		})
		r.do("near-max-message-bytes", func() error {
			v := strings.Repeat("n", 99_000)
			if _, err := produceLines(p+"-big", "near\t"+v+"\n"); err != nil {
				return err
			}
			lines, err := consumeLines("--topic", p+"-big", "--partition", "0", "--offset", "earliest", "--max-messages", "1")
			if err != nil {
				return err
			}
			if len(lines) != 1 || !strings.HasSuffix(lines[0], "\tnear\t"+v) {
				return fmt.Errorf("read %d lines", len(lines))
			}
			return nil
		})
		r.do("error-record-too-large", func() error {
			stderr, _ := produceLines(p+"-big", "over\t"+strings.Repeat("o", 101_000)+"\n")
			if !strings.Contains(stderr, "RecordTooLargeException") {
				return fmt.Errorf("no RecordTooLargeException (MESSAGE_TOO_LARGE) for 101,000 bytes over max.message.bytes=100000: %s", tail(stderr, 300))
			}
			return nil
		})
		r.do("consume-earliest", func() error {
			lines, err := consumeLines("--topic", p+"-cons", "--partition", "0", "--offset", "earliest", "--max-messages", "10")
			if err != nil {
				return err
			}
			for i := 0; i < 10; i++ {
				if i >= len(lines) || lines[i] != fmt.Sprintf("Offset:%d\tnull\tc-%d", i, i) {
					return fmt.Errorf("line %d of %q", i, lines)
				}
			}
			return nil
		})
		r.do("consume-latest", func() error {
			// Start the consumer at latest, then write a record a second
			// until it prints one: it must print only records written after
			// it started, so the first is at offset 10 or later.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var lines []string
			var cerr error
			done := make(chan struct{})
			go func() {
				defer close(done)
				lines, cerr = consumeLines("--topic", p+"-cons", "--partition", "0", "--offset", "latest", "--max-messages", "1")
			}()
			cl := newClient(t, addr)
			for i := 0; ; i++ {
				select {
				case <-done:
					if cerr != nil {
						return cerr
					}
					if len(lines) != 1 || !regexp.MustCompile(`^Offset:(1\d|[2-9]\d)\tnull\tafter-latest-\d+$`).MatchString(lines[0]) {
						return fmt.Errorf("read %q, want one after-latest record at offset 10 or later", lines)
					}
					return nil
				case <-time.After(time.Second):
				}
				if i > 30 {
					return fmt.Errorf("the consumer printed nothing in 30 s")
				}
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: p + "-cons", Value: []byte(fmt.Sprintf("after-latest-%d", i)),
					Timestamp: time.UnixMilli(tsBase + 100_000)}).FirstErr(); err != nil {
					return err
				}
			}
		})
		r.do("consume-timestamp", func() error {
			// The console consumer has no timestamp start; kafka-consumer-groups
			// --reset-offsets --to-datetime (ListOffsets by timestamp) sets the
			// group's offset, and the console consumer resumes there.
			g := p + "-ts"
			dt := time.UnixMilli(tsBase+4500).UTC().Format("2006-01-02T15:04:05.000") + "Z"
			out, stderr, err := tool(t, cp, "", clsGroups, append(bs, "--reset-offsets", "--group", g, "--topic", p+"-cons",
				"--to-datetime", dt, "--execute")...)
			if err != nil {
				return toolErr(err, stderr)
			}
			if !regexp.MustCompile(`(?m)^` + g + `\s+` + p + `-cons\s+0\s+5\s*$`).MatchString(out) {
				return fmt.Errorf("reset to %s: %s, want new offset 5", dt, tail(out, 300))
			}
			lines, err := consumeLines("--topic", p+"-cons", "--group", g, "--max-messages", "3")
			if err != nil {
				return err
			}
			if len(lines) != 3 || lines[0] != "Offset:5\tnull\tc-5" || lines[2] != "Offset:7\tnull\tc-7" {
				return fmt.Errorf("read %q", lines)
			}
			return nil
		})
		r.do("error-unknown-topic", func() error {
			_, stderr, _ := tool(t, cp, "", clsConsumer, append(bs, "--topic", p+"-no-such-topic", "--partition", "0",
				"--offset", "earliest", "--timeout-ms", "3000")...)
			if !strings.Contains(stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
				return fmt.Errorf("the console consumer did not report UNKNOWN_TOPIC_OR_PARTITION: %s", tail(stderr, 300))
			}
			return nil
		})
		if shared {
			recordSharedResults(t, toolsClient, r.res, checkShared(t, addr, p, sharedDir))
			return
		}
		recordResults(t, toolsClient, basicScenarios, r.res, checkBasic(t, addr, p))
	})
	if shared {
		return
	}

	t.Run("admin", func(t *testing.T) {
		r := &toolRun{res: map[string]scenarioResult{}}
		tp := p + "-adm"
		describe := func() (string, error) {
			out, stderr, err := tool(t, cp, "", clsConfigs, append(bs, "--describe", "--all", "--entity-type", "topics", "--entity-name", tp)...)
			return out, toolErr(err, stderr)
		}
		partitions := func() (string, error) {
			out, stderr, err := tool(t, cp, "", clsTopics, append(bs, "--describe", "--topic", tp)...)
			return out, toolErr(err, stderr)
		}
		r.do("admin-create", func() error {
			out, stderr, err := tool(t, cp, "", clsTopics, append(bs, "--create", "--topic", tp, "--partitions", "2",
				"--config", "retention.ms=3600000")...)
			if err != nil || !strings.Contains(out, "Created topic "+tp) {
				return fmt.Errorf("create: %v %s", toolErr(err, stderr), out)
			}
			if d, err := partitions(); err != nil || !strings.Contains(d, "PartitionCount: 2") {
				return fmt.Errorf("after create: %v %s", err, d)
			}
			_, stderr, err = tool(t, cp, "", clsTopics, append(bs, "--create", "--topic", tp, "--partitions", "2")...)
			if err == nil || !strings.Contains(stderr, "TopicExistsException") {
				return fmt.Errorf("create again: %v, want TopicExistsException (TOPIC_ALREADY_EXISTS): %s", err, tail(stderr, 300))
			}
			return nil
		})
		r.do("admin-describe-configs", func() error {
			out, err := describe()
			if err != nil {
				return err
			}
			if !strings.Contains(out, "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000") ||
				!strings.Contains(out, "cleanup.policy=") {
				return fmt.Errorf("kafka-configs --describe --all: %s", tail(out, 500))
			}
			return nil
		})
		r.do("admin-alter-configs", func() error {
			_, stderr, err := tool(t, cp, "", clsConfigs, append(bs, "--alter", "--entity-type", "topics", "--entity-name", tp,
				"--add-config", "retention.ms=7200000")...)
			if err != nil {
				return toolErr(err, stderr)
			}
			out, err := describe()
			if err != nil {
				return err
			}
			if !strings.Contains(out, "retention.ms=7200000 sensitive=false") {
				return fmt.Errorf("after alter: %s", tail(out, 500))
			}
			return nil
		})
		r.do("admin-create-partitions", func() error {
			_, stderr, err := tool(t, cp, "", clsTopics, append(bs, "--alter", "--topic", tp, "--partitions", "4")...)
			if err != nil {
				return toolErr(err, stderr)
			}
			if d, err := partitions(); err != nil || !strings.Contains(d, "PartitionCount: 4") {
				return fmt.Errorf("after create partitions: %v %s", err, d)
			}
			return nil
		})
		r.do("admin-delete", func() error {
			_, stderr, err := tool(t, cp, "", clsTopics, append(bs, "--delete", "--topic", tp)...)
			if err != nil {
				return toolErr(err, stderr)
			}
			out, stderr, err := tool(t, cp, "", clsTopics, append(bs, "--list")...)
			if err != nil {
				return toolErr(err, stderr)
			}
			if regexp.MustCompile(`(?m)^` + tp + `$`).MatchString(out) {
				return fmt.Errorf("still listed after delete")
			}
			return nil
		})
		r.do("error-bad-config", func() error {
			// kafka-topics --create --config retention.ms=soon is refused by
			// the tool itself (ConfigException) before any request is sent;
			// kafka-configs --alter sends it (IncrementalAlterConfigs).
			_, stderr, err := tool(t, cp, "", clsConfigs, append(bs, "--alter", "--entity-type", "topics", "--entity-name", p+"-meta",
				"--add-config", "retention.ms=soon")...)
			if err == nil || !strings.Contains(stderr, "InvalidConfigurationException") {
				return fmt.Errorf("alter retention.ms=soon: %v, want InvalidConfigurationException (INVALID_CONFIG): %s", err, tail(stderr, 300))
			}
			return nil
		})
		recordResults(t, toolsClient, adminScenarios, r.res, nil)
	})

	t.Run("group", func(t *testing.T) {
		prepareGroup(t, addr, p)
		r := &toolRun{res: map[string]scenarioResult{}}
		tp := p + "-grp"
		describeMembers := func(g string) (string, error) {
			out, stderr, err := tool(t, cp, "", clsGroups, append(bs, "--describe", "--group", g, "--members", "--verbose")...)
			return out, toolErr(err, stderr)
		}
		r.do("group-commit-resume", func() error {
			g := p + "-g1"
			lines, err := consumeLines("--topic", tp, "--group", g, "--from-beginning", "--max-messages", "40")
			if err != nil {
				return err
			}
			if len(lines) != 40 {
				return fmt.Errorf("first consumer read %d of 40", len(lines))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var rs []*kgo.Record
			for i := 0; i < 4; i++ {
				rs = append(rs, &kgo.Record{Topic: tp, Partition: int32(i), Value: []byte(fmt.Sprintf("after-%d", i))})
			}
			if err := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, rs...).FirstErr(); err != nil {
				return err
			}
			lines, err = consumeLines("--topic", tp, "--group", g, "--from-beginning", "--max-messages", "4")
			if err != nil {
				return err
			}
			var vals []string
			for _, l := range lines {
				vals = append(vals, l[strings.LastIndex(l, "\t")+1:])
			}
			if strings.Join(sortedCopy(vals), " ") != "after-0 after-1 after-2 after-3" {
				return fmt.Errorf("resumed consumer read %q", vals)
			}
			return nil
		})
		r.do("tool-consumer-groups-describe", func() error {
			out, stderr, err := tool(t, cp, "", clsGroups, append(bs, "--describe", "--group", p+"-g1")...)
			if err != nil {
				return toolErr(err, stderr)
			}
			if n := len(regexp.MustCompile(`(?m)^`+p+`-g1\s+`+tp+`\s+\d\s+11\s+11\s+0\s`).FindAllString(out, -1)); n != 4 {
				return fmt.Errorf("want 4 partitions at offset 11 with lag 0: %s", tail(out, 600))
			}
			return nil
		})
		r.do("group-rebalance", func() error {
			g := p + "-g2"
			var procs []*exec.Cmd
			var mu sync.Mutex
			start := func() error {
				cmd := exec.Command("java", jvm(cp, clsConsumer, "--bootstrap-server", addr, "--topic", tp, "--group", g,
					"--command-property", "partition.assignment.strategy=org.apache.kafka.clients.consumer.RangeAssignor",
					"--command-property", "heartbeat.interval.ms=500", "--command-property", "session.timeout.ms=10000")...)
				if err := cmd.Start(); err != nil {
					return err
				}
				mu.Lock()
				procs = append(procs, cmd)
				mu.Unlock()
				return nil
			}
			defer func() {
				for _, c := range procs {
					if c.ProcessState == nil {
						c.Process.Kill()
						c.Wait()
					}
				}
			}()
			memberRe := regexp.MustCompile(`(?m)^` + g + `\s+\S+\s+\S+\s+\S+\s+(\d+)\s+(.*)$`)
			waitMembers := func(want []string) error {
				deadline := time.Now().Add(45 * time.Second)
				var last string
				for time.Now().Before(deadline) {
					out, err := describeMembers(g)
					last = out
					if err == nil {
						var got []string
						for _, m := range memberRe.FindAllStringSubmatch(out, -1) {
							got = append(got, m[1])
						}
						if strings.Join(sortedCopy(got), ",") == strings.Join(want, ",") {
							return nil
						}
					}
					time.Sleep(500 * time.Millisecond)
				}
				return fmt.Errorf("members' partition counts never became %v: %s", want, tail(last, 600))
			}
			if err := start(); err != nil {
				return err
			}
			if err := waitMembers([]string{"4"}); err != nil {
				return fmt.Errorf("one consumer: %v", err)
			}
			if err := start(); err != nil {
				return err
			}
			if err := waitMembers([]string{"2", "2"}); err != nil {
				return fmt.Errorf("two consumers: %v", err)
			}
			// SIGTERM: the console consumer's shutdown hook closes the
			// consumer, which leaves the group.
			procs[1].Process.Signal(syscall.SIGTERM)
			procs[1].Wait()
			if err := waitMembers([]string{"4"}); err != nil {
				return fmt.Errorf("after one left: %v", err)
			}
			return nil
		})
		recordResults(t, toolsClient, groupScenarios, r.res, nil)
		recordResults(t, toolsClient, []string{"tool-consumer-groups-describe"}, r.res, nil)
	})

	t.Run("perf", func(t *testing.T) {
		r := &toolRun{res: map[string]scenarioResult{}}
		tp := p + "-perf"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		createTopic(ctx, t, newAdmin(t, addr), tp, 2, nil)
		cancel()
		r.do("tool-producer-perf", func() error {
			out, stderr, err := tool(t, cp, "", clsProdPerf, "--topic", tp, "--num-records", "20000", "--record-size", "200",
				"--throughput", "-1", "--producer-props", "bootstrap.servers="+addr, "acks=all", "compression.type=lz4")
			if err != nil {
				return toolErr(err, stderr)
			}
			if !strings.Contains(out, "20000 records sent") {
				return fmt.Errorf("no '20000 records sent': %s", tail(out, 300))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var total int64
			for _, e := range endOffsets(ctx, t, newAdmin(t, addr), tp) {
				total += e
			}
			if total != 20000 {
				return fmt.Errorf("the broker holds %d records, want 20000", total)
			}
			return nil
		})
		r.do("tool-consumer-perf", func() error {
			out, stderr, err := tool(t, cp, "", clsConsPerf, "--bootstrap-server", addr, "--topic", tp, "--num-records", "20000",
				"--timeout", "30000")
			if err != nil {
				return toolErr(err, stderr)
			}
			// The summary line: start.time, end.time, data.consumed.in.MB,
			// MB.sec, data.consumed.in.nMsg, ...
			if !regexp.MustCompile(`(?m),\s*20000,`).MatchString(out) && !strings.Contains(out, ", 20000, ") {
				return fmt.Errorf("no 20000 messages in the summary: %s", tail(out, 500))
			}
			return nil
		})
		recordResults(t, toolsClient, []string{"tool-producer-perf", "tool-consumer-perf"}, r.res, nil)
	})
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}
