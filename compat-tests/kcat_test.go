package compat

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// kcat runs kcat (librdkafka) with args and stdin, bounded by timeout, and
// returns stdout and stderr; a non-zero exit fails the test.
func kcat(t *testing.T, timeout time.Duration, stdin string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %s: no exit within %v\nstdout (tail):\n%s\nstderr (head and tail):\n%s\n...\n%s", strings.Join(args, " "), timeout,
			tail(out.String(), 4<<10), head(errb.String(), 2<<10), tail(errb.String(), 2<<10))
	}
	if err != nil {
		t.Fatalf("kcat %s: %v\nstdout (tail):\n%s\nstderr (head and tail):\n%s\n...\n%s", strings.Join(args, " "), err,
			tail(out.String(), 4<<10), head(errb.String(), 2<<10), tail(errb.String(), 2<<10))
	}
	t.Logf("kcat %s: ok in %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return out.String(), errb.String()
}

// TestKcat drives the broker with kcat 1.7.1 (librdkafka 2.0.2): metadata
// listing, keyed produce with headers, and a simple (group-less) consumer
// reading to the end of each partition.
func TestKcat(t *testing.T) {
	t.Parallel()
	requireTool(t, "kcat")
	const (
		topic      = "orders"
		partitions = 3
	)
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	createTopic(ctx, t, adm, topic, partitions, nil)
	cancel()

	// -L: the broker and the topic with its partitions, no errors.
	out, _ := kcat(t, 60*time.Second, "", "-b", b.KafkaAddr, "-L", "-t", topic)
	t.Logf("kcat -L:\n%s", out)
	brokerRe := regexp.MustCompile(`(?m)^\s*broker (\d+) at ` + regexp.QuoteMeta(b.KafkaAddr))
	if !regexp.MustCompile(`(?m)^\s*1 brokers:`).MatchString(out) || !brokerRe.MatchString(out) {
		t.Errorf("kcat -L does not list exactly one broker at %s", b.KafkaAddr)
	}
	topicRe := regexp.MustCompile(`(?m)^\s*topic "` + topic + `" with (\d+) partitions:`)
	if m := topicRe.FindStringSubmatch(out); m == nil {
		t.Errorf("kcat -L does not list topic %q", topic)
	} else if m[1] != strconv.Itoa(partitions) {
		t.Errorf("kcat -L lists %s partitions for %q, want %d", m[1], topic, partitions)
	}
	for p := 0; p < partitions; p++ {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^\s*partition %d, leader \d+, replicas: \d+, isrs: \d+\s*$`, p)).MatchString(out) {
			t.Errorf("kcat -L: no healthy line for partition %d (with leader, replicas and isrs and no error)", p)
		}
	}
	if strings.Contains(out, "Broker:") || strings.Contains(out, "error") {
		t.Errorf("kcat -L reports an error")
	}

	// -P twice, with different headers each time; -K: splits key from value.
	type msg struct{ key, value, headers string }
	var want []msg
	produce := func(run int, headers []string) {
		var in strings.Builder
		for i := 0; i < 50; i++ {
			m := msg{fmt.Sprintf("order-%d-%02d", run, i), fmt.Sprintf("{\"run\":%d,\"n\":%d}", run, i), strings.Join(headers, ",")}
			fmt.Fprintf(&in, "%s:%s\n", m.key, m.value)
			want = append(want, m)
		}
		args := []string{"-b", b.KafkaAddr, "-P", "-t", topic, "-K:"}
		for _, h := range headers {
			args = append(args, "-H", h)
		}
		_, stderr := kcat(t, 60*time.Second, in.String(), args...)
		if strings.Contains(stderr, "ERROR") || strings.Contains(stderr, "failed") {
			t.Fatalf("kcat -P reported errors:\n%s", stderr)
		}
	}
	produce(1, []string{"trace=abc", "src=kcat"})
	produce(2, []string{"trace=def"})

	// -C from the beginning, exit at the end of every partition.
	out, _ = kcat(t, 30*time.Second, "", "-b", b.KafkaAddr, "-C", "-t", topic, "-o", "beginning", "-e",
		"-f", "%p|%o|%k|%s|%h\n")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if out == "" {
		lines = nil
	}
	if len(lines) != len(want) {
		t.Errorf("kcat -C read %d messages, want %d:\n%s", len(lines), len(want), out)
	}
	wantIdx := map[string]int{}
	for i, m := range want {
		wantIdx[m.key+"|"+m.value+"|"+m.headers] = i
	}
	seen := map[int]bool{}
	lastIdx := map[string]int{}
	nextOff := map[string]int64{}
	for _, l := range lines {
		f := strings.SplitN(l, "|", 3)
		if len(f) != 3 {
			t.Errorf("kcat -C: unparsable line %q", l)
			continue
		}
		p, offStr, rest := f[0], f[1], f[2]
		off, _ := strconv.ParseInt(offStr, 10, 64)
		if off != nextOff[p] {
			t.Errorf("kcat -C: partition %s: offset %d, want %d (dense offsets in a fresh topic)", p, off, nextOff[p])
		}
		nextOff[p] = off + 1
		i, ok := wantIdx[rest]
		if !ok {
			t.Errorf("kcat -C: unexpected message %q (key|value|headers)", rest)
			continue
		}
		if seen[i] {
			t.Errorf("kcat -C: message %q read twice", rest)
		}
		seen[i] = true
		if li, ok := lastIdx[p]; ok && i < li {
			t.Errorf("kcat -C: partition %s: %q came after %q; produce order not kept", p, rest, want[li].key)
		}
		lastIdx[p] = i
	}
	for i, m := range want {
		if !seen[i] {
			t.Errorf("kcat -C: missing message key=%s value=%s headers=%s", m.key, m.value, m.headers)
		}
	}
}

func head(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// TestKcatCompression produces with kcat -z for each codec (one subtest and
// topic per codec). librdkafka 2.0.2 silently stops compressing when the
// broker's Produce range does not start at v0 (it checks
// ApiVersion_supported(Produce, 0, 0)), enables LZ4 only when the broker
// advertises FindCoordinator v0, and needs Produce v7 and Fetch v10 for zstd
// (rdkafka_feature.c); so the records must come back in batches with the
// requested compression type, which kgo reports per record.
func TestKcatCompression(t *testing.T) {
	t.Parallel()
	requireTool(t, "kcat")
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	const n = 20
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "kcat-" + c.name
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			createTopic(ctx, t, adm, topic, 1, nil)
			var in strings.Builder
			for i := 0; i < n; i++ {
				fmt.Fprintf(&in, "%s-%02d:%s\n", c.name, i, compressible(c.name, i))
			}
			_, stderr := kcat(t, 60*time.Second, in.String(), "-b", b.KafkaAddr, "-P", "-t", topic, "-K:", "-z", c.name)
			if strings.Contains(stderr, "does not support compression") || strings.Contains(stderr, "ERROR") {
				t.Errorf("kcat -P -z %s:\n%s", c.name, stderr)
			}
			got := consumeAll(ctx, t, b.KafkaAddr, topic, endOffsets(ctx, t, adm, topic))[0]
			if len(got) != n {
				t.Fatalf("read %d records, want %d", len(got), n)
			}
			types := map[uint8]int{}
			for i, r := range got {
				if string(r.Key) != fmt.Sprintf("%s-%02d", c.name, i) || string(r.Value) != compressible(c.name, i) {
					t.Errorf("offset %d: key %q, want %s-%02d (or the value differs)", r.Offset, r.Key, c.name, i)
				}
				types[r.Attrs.CompressionType()]++
			}
			if types[c.id] != n {
				hint := ""
				if c.name == "lz4" {
					hint = " (librdkafka 2.0.2 enables LZ4 only when the broker advertises FindCoordinator v0, rdkafka_feature.c)"
				}
				t.Errorf("kcat -z %s: records came back in batches with compression types %v (type: count), want all %d%s", c.name, types, c.id, hint)
			}
		})
	}
}
