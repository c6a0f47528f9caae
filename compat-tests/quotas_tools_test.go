package compat

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestToolsClientQuotas drives client quotas with Kafka's own kafka-configs
// (ConfigCommand: AlterClientQuotas and DescribeClientQuotas) and checks
// that the Java producer, which throttles itself on throttle_time_ms, is
// held to its producer_byte_rate.
func TestToolsClientQuotas(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	cp := buildJava(t)
	b := startBroker(t, "--set", "quota.window.num=2")
	bs := []string{"--bootstrap-server", b.KafkaAddr}
	configs := func(args ...string) (string, error) {
		out, stderr, err := tool(t, cp, "", clsConfigs, append(bs, args...)...)
		return out, toolErr(err, stderr)
	}
	for _, args := range [][]string{
		{"--alter", "--entity-type", "clients", "--entity-name", "slow", "--add-config", "producer_byte_rate=100000"},
		{"--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app",
			"--add-config", "consumer_byte_rate=1024,request_percentage=50"},
		{"--alter", "--entity-type", "ips", "--entity-default", "--add-config", "connection_creation_rate=1000"},
	} {
		if _, err := configs(args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app"},
			[]string{"consumer_byte_rate=1024", "request_percentage=50"}},
		{[]string{"--describe", "--entity-type", "ips", "--entity-default"}, []string{"connection_creation_rate=1000"}},
	} {
		out, err := configs(c.args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %q in %q", c.args, w, out)
			}
		}
	}
	// A byte rate must be a whole number: refused by the broker.
	if _, err := configs("--alter", "--entity-type", "clients", "--entity-name", "x", "--add-config", "producer_byte_rate=1.5"); err == nil {
		t.Error("producer_byte_rate=1.5 was accepted")
	}

	// 1 MB at 100 KB/s: the Java producer, throttled, reports about
	// 0.1 MB/s; unthrottled it does far more on any machine.
	perf := func(clientID string) float64 {
		out, stderr, err := tool(t, cp, "", clsProdPerf, "--topic", "quota-perf", "--num-records", "1000", "--record-size", "1000",
			"--throughput", "-1", "--producer-props", "bootstrap.servers="+b.KafkaAddr, "acks=1", "client.id="+clientID)
		if err != nil {
			t.Fatal(toolErr(err, stderr))
		}
		m := regexp.MustCompile(`1000 records sent, [0-9.]+ records/sec \(([0-9.]+) MB/sec\)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no summary line in %q", tail(out, 300))
		}
		mbs, _ := strconv.ParseFloat(m[1], 64)
		return mbs
	}
	if slow := perf("slow"); slow > 0.2 {
		t.Errorf("client slow under producer_byte_rate=100000 produced at %.2f MB/s", slow)
	}

	if _, err := configs("--alter", "--entity-type", "clients", "--entity-name", "slow", "--delete-config", "producer_byte_rate"); err != nil {
		t.Fatal(err)
	}
	out, err := configs("--describe", "--entity-type", "clients", "--entity-name", "slow")
	if err != nil || strings.Contains(out, "producer_byte_rate") {
		t.Fatalf("after delete: %q %v", out, err)
	}
}
