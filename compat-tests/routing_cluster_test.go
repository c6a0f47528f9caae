package compat

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// Routing with real clients on a real cluster (docs/architecture.md,
// "Routing"; issue 5 scope item 7), for the clients
// cmd/sluice/cluster_test.go does not cover (it has franz-go and kcat):
// sarama, kafka-go, kafkajs and the Java client.
// One cluster of `sluice serve` processes (1 meta node, write brokers 1-3,
// read brokers 4 and 5 in racks rack-a and rack-b) serves every client in
// turn; the phases run one after another, so each metric delta holds only
// the traffic of the client under test. Per client, on a 3-partition rf=3
// topic:
//
//  1. producer on the write listeners, acks=all: the read brokers receive
//     no request of any kind and forward no produce;
//  2. consumer group on the read listeners, consuming everything and
//     committing: the write brokers receive no request of any kind;
//  3. consumer group on the write brokers' mixed listeners: once it has
//     records of every partition (warm-up), the test snapshots the
//     metrics and produces more records, which it then consumes. Clients
//     with KIP-392 follower fetching (Java, sarama, kafkajs; each sends
//     client rack rack-b) must send no further Fetch and no OffsetCommit
//     to a write broker, and fetch from the rack-b read broker only.
//     kafka-go has no follower fetching: the write brokers serve its Fetch
//     (the documented fallback) while its commits still go to the read
//     broker that coordinates the group.

const (
	routingPartitions = 3
	routingRecords    = 200 // produced in phase 1
	routingLate       = 100 // produced after the mixed consumer's warm-up
	routingRack       = "rack-b"
)

// routingClient is one client under test.
type routingClient struct {
	name string
	// rack is sent as the client's rack when the client has KIP-392
	// follower fetching; empty for a client without it.
	rack string
	// prepare, when set, checks the client's tools (skipping, or failing
	// under CI=true) and builds what it runs.
	prepare func(t *testing.T)
	// produce writes the records (key i, value i) with acks=all through
	// addrs and returns once every one is acknowledged.
	produce func(ctx context.Context, t *testing.T, addrs []string, topic string, keys, values []string)
	// consume reads exactly n records of topic as the only member of
	// group, bootstrapped on addrs, committing what it processed, and
	// returns their values. It leaves the group before it returns. With
	// hooks set it calls hooks.warm once, after it has processed and
	// committed records of every partition, and goes on consuming when
	// warm returns; and it calls hooks.done once it has processed and
	// committed all n, before it closes.
	consume func(ctx context.Context, t *testing.T, addrs []string, topic, group, rack string, n int, hooks *routingHooks) []string
}

// routingHooks mark the steady state of a consumer: from warm to done it
// is consuming, between them no start-up or shut-down traffic (the Java
// consumer, for one, closes its fetch session with every broker it ever
// fetched from, redirected or not, when it closes).
type routingHooks struct {
	warm, done func()
}

// routingEnv is the shared cluster. The franz-go clients that set up and
// check the phases are closed before a measured phase starts (kgo
// refreshes metadata in the background), except the late producer of the
// mixed phase, which talks only to write listeners and sends no Fetch or
// OffsetCommit.
type routingEnv struct {
	c                                 *harness.Cluster
	writeAddrs, readAddrs, mixedAddrs []string
	racks                             map[string]string // read broker name -> rack
}

// admin returns a kadm client bootstrapped on addrs and its closer.
func (env *routingEnv) admin(t *testing.T, addrs []string) (*kadm.Client, func()) {
	t.Helper()
	cl := newClient(t, addrs[0], kgo.SeedBrokers(addrs...))
	return kadm.NewClient(cl), cl.Close
}

func TestRouting(t *testing.T) {
	t.Parallel()
	racks := []string{"rack-a", routingRack}
	start := time.Now()
	c := harness.StartCluster(t, harness.ClusterOptions{Meta: 1, Write: 3, Read: 2, ReadRacks: racks})
	env := &routingEnv{
		c:          c,
		writeAddrs: harness.Addrs(harness.ViewWrite, c.Writers),
		readAddrs:  harness.Addrs(harness.ViewRead, c.Readers),
		mixedAddrs: harness.Addrs(harness.ViewMixed, c.Writers),
		racks:      map[string]string{},
	}
	for i, r := range c.Readers {
		env.racks[r.Name] = racks[i]
	}
	ctx := harness.Context(t, time.Minute)
	env.waitBrokers(ctx, t)
	t.Logf("cluster of %d processes serving in %v", len(c.Nodes()), time.Since(start).Round(time.Millisecond))

	for _, cl := range []routingClient{saramaRouting(), kafkaGoRouting(), kafkaJSRouting(), javaRouting()} {
		t.Run(cl.name, func(t *testing.T) {
			began := time.Now()
			env.run(t, cl)
			t.Logf("%s: routing phases took %v", cl.name, time.Since(began).Round(time.Millisecond))
		})
	}
}

// waitBrokers waits until the mixed view lists every broker: a topic
// created before a read broker registered would not have it as a learner.
func (env *routingEnv) waitBrokers(ctx context.Context, t *testing.T) {
	t.Helper()
	cl := newClient(t, env.mixedAddrs[0], kgo.SeedBrokers(env.mixedAddrs...))
	defer cl.Close()
	want := len(env.c.Brokers())
	for {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err == nil && len(resp.Brokers) == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the mixed view never listed all %d brokers (last: %v)", want, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createTopic creates a routingPartitions-partition rf=3 topic and waits
// until every partition has an elected leader in the write view and a
// leader in the read and mixed views, with both read brokers among its
// replicas in the mixed view.
func (env *routingEnv) createTopic(ctx context.Context, t *testing.T, topic string) {
	t.Helper()
	adm, done := env.admin(t, env.writeAddrs)
	defer done()
	resp, err := adm.CreateTopic(ctx, routingPartitions, 3, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	// minEpoch 1 in the write view: an elected raft leader has reported
	// (before that Metadata names the first voter at epoch 0, and a
	// produce can use up sarama's three quick retries).
	ready := func(addr string, wantReplicas int, minEpoch int32) bool {
		tp, ok := freshTopics(ctx, t, addr, topic)[topic]
		if !ok || tp.ErrorCode != 0 || len(tp.Partitions) != routingPartitions {
			return false
		}
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 || len(p.Replicas) < wantReplicas || p.LeaderEpoch < minEpoch {
				return false
			}
		}
		return true
	}
	for !(ready(env.writeAddrs[0], 3, 1) && ready(env.readAddrs[0], 2, 0) && ready(env.mixedAddrs[0], 5, 0)) {
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s: not every partition got a leader in every view", topic)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (env *routingEnv) run(t *testing.T, cl routingClient) {
	if cl.prepare != nil {
		cl.prepare(t)
	}
	ctx := harness.Context(t, 3*time.Minute)
	topic := "routing-" + cl.name
	env.createTopic(ctx, t, topic)
	keys := make([]string, routingRecords)
	values := make([]string, routingRecords)
	for i := range keys {
		keys[i], values[i] = fmt.Sprintf("k%05d", i), fmt.Sprintf("%s-%05d", cl.name, i)
	}

	// 1. Producer on the write listeners.
	if !t.Run("produce-on-write-listeners", func(t *testing.T) {
		before := env.c.Snapshot(t)
		cl.produce(ctx, t, env.writeAddrs, topic, keys, values)
		d := env.c.Snapshot(t).Sub(before)
		env.logDelta(t, "producer on the write listeners", d)
		for _, r := range env.c.Readers {
			if n := d[r.Name].Requests("", ""); n != 0 {
				t.Errorf("producer bootstrapped on the write listeners sent %v requests to read broker %s: %v", n, r.Name, d[r.Name].RequestsByAPI())
			}
			if n := d[r.Name].Sum("sluice_forwarded_produce_total", nil); n != 0 {
				t.Errorf("read broker %s forwarded %v produce batches", r.Name, n)
			}
		}
		if n := env.sum(d, env.c.Writers, "Produce", ""); n == 0 {
			t.Errorf("no write broker counted a Produce request")
		}
		// The consumers below check that every record arrived once.
	}) {
		return
	}

	// 2. Consumer group on the read listeners.
	if !t.Run("consume-on-read-listeners", func(t *testing.T) {
		group := topic + "-read"
		before := env.c.Snapshot(t)
		got := cl.consume(ctx, t, env.readAddrs, topic, group, "", routingRecords, nil)
		d := env.c.Snapshot(t).Sub(before)
		env.logDelta(t, "consumer group on the read listeners", d)
		checkValues(t, "read-listener consumer", got, values)
		for _, w := range env.c.Writers {
			if n := d[w.Name].Requests("", ""); n != 0 {
				t.Errorf("consumer bootstrapped on the read listeners sent %v requests to write broker %s: %v", n, w.Name, d[w.Name].RequestsByAPI())
			}
		}
		for _, api := range []string{"Fetch", "OffsetCommit"} {
			if n := env.sum(d, env.c.Readers, api, harness.ViewRead); n == 0 {
				t.Errorf("the read brokers counted no %s on their read listeners", api)
			}
		}
		env.checkCommitted(ctx, t, topic, group)
	}) {
		return
	}

	// 3. Consumer group on the write brokers' mixed listeners; the name
	// says which behaviour is expected of the client.
	phase := "consume-on-mixed-listeners-follower-fetching"
	if cl.rack == "" {
		phase = "consume-on-mixed-listeners-fallback-no-follower-fetching"
	}
	t.Run(phase, func(t *testing.T) {
		group := topic + "-mixed"
		lateValues := make([]string, routingLate)
		for i := range lateValues {
			lateValues[i] = fmt.Sprintf("%s-late-%05d", cl.name, i)
		}
		before := env.c.Snapshot(t)
		var warmed, finished harness.ClusterMetrics
		// The hooks run on the client's goroutine: no t.Fatal in them.
		warm := func() {
			var err error
			if warmed, err = env.c.Scrape(); err != nil {
				t.Errorf("metrics at warm-up: %v", err)
				return
			}
			rs := make([]*kgo.Record, len(lateValues))
			for i, v := range lateValues {
				rs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
			}
			// Uncompressed: kgo's default is snappy, which kafkajs cannot
			// read without a codec plugin.
			late, err := kgo.NewClient(kgo.SeedBrokers(env.writeAddrs...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
				kgo.ProducerBatchCompression(kgo.NoCompression()))
			if err == nil {
				err = late.ProduceSync(ctx, rs...).FirstErr()
				late.Close()
			}
			if err != nil {
				t.Errorf("producing the records consumed after warm-up: %v", err)
			}
		}
		done := func() {
			var err error
			if finished, err = env.c.Scrape(); err != nil {
				t.Errorf("metrics after consuming: %v", err)
			}
		}
		got := cl.consume(ctx, t, env.mixedAddrs, topic, group, cl.rack, routingRecords+routingLate, &routingHooks{warm: warm, done: done})
		end := env.c.Snapshot(t)
		if warmed == nil || finished == nil {
			t.Fatalf("the mixed-listener consumer did not report both its warm-up and its end")
		}
		env.logDelta(t, "mixed-listener consumer, warm-up", warmed.Sub(before))
		d := finished.Sub(warmed)
		env.logDelta(t, "mixed-listener consumer, after warm-up", d)
		env.logDelta(t, "mixed-listener consumer, closing", end.Sub(finished))
		checkValues(t, "mixed-listener consumer", got, append(append([]string{}, values...), lateValues...))
		// The group's coordinator is a read broker in the mixed view too, so
		// no OffsetCommit reaches a write broker at any point of the phase.
		if n := env.sum(end.Sub(before), env.c.Writers, "OffsetCommit", ""); n != 0 {
			t.Errorf("mixed-listener consumer sent %v OffsetCommit requests to write brokers; its coordinator is a read broker", n)
		}
		if n := env.sum(d, env.c.Readers, "OffsetCommit", harness.ViewMixed); n == 0 {
			t.Errorf("no read broker counted an OffsetCommit on its mixed listener after warm-up")
		}
		if cl.rack != "" {
			// KIP-392: every partition was redirected to a read broker in
			// the client's rack before its first record arrived.
			if n := env.sum(d, env.c.Writers, "Fetch", ""); n != 0 {
				t.Errorf("follower-fetching client sent %v Fetch requests to write brokers after warm-up", n)
			}
			for _, r := range env.c.Readers {
				n := d[r.Name].Requests("Fetch", harness.ViewMixed)
				switch {
				case env.racks[r.Name] == cl.rack && n == 0:
					t.Errorf("read broker %s (rack %s, the client's) served no Fetch after warm-up", r.Name, cl.rack)
				case env.racks[r.Name] != cl.rack && n != 0:
					t.Errorf("read broker %s (rack %s) served %v Fetch requests to a client in rack %s", r.Name, env.racks[r.Name], n, cl.rack)
				}
			}
		} else {
			// No follower fetching: the write brokers serve it, and count it.
			if n := env.sum(d, env.c.Writers, "Fetch", harness.ViewMixed); n == 0 {
				t.Errorf("fallback: the write brokers counted no Fetch on their mixed listeners after warm-up")
			}
			var bytes float64
			for _, w := range env.c.Writers {
				bytes += d[w.Name].Sum("sluice_fetched_bytes_total", map[string]string{"topic": topic})
			}
			if bytes == 0 {
				t.Errorf("fallback: the write brokers returned no record bytes of %s after warm-up", topic)
			}
		}
		env.checkCommitted(ctx, t, topic, group)
	})
}

// sum adds sluice_requests_total for api and view over brokers.
func (env *routingEnv) sum(d harness.ClusterMetrics, brokers []*harness.Node, api, view string) float64 {
	var n float64
	for _, b := range brokers {
		n += d[b.Name].Requests(api, view)
	}
	return n
}

// logDelta logs, per broker, the requests of a phase by API.
func (env *routingEnv) logDelta(t *testing.T, phase string, d harness.ClusterMetrics) {
	t.Helper()
	var b strings.Builder
	for _, n := range env.c.Brokers() {
		byAPI := d[n.Name].RequestsByAPI()
		apis := make([]string, 0, len(byAPI))
		for a := range byAPI {
			apis = append(apis, a)
		}
		sort.Strings(apis)
		fmt.Fprintf(&b, "\n  %-8s", n.Name)
		for _, a := range apis {
			fmt.Fprintf(&b, " %s=%v", a, byAPI[a])
		}
	}
	t.Logf("requests during %s:%s", phase, b.String())
}

// checkCommitted requires group's committed offsets to be the end offsets.
func (env *routingEnv) checkCommitted(ctx context.Context, t *testing.T, topic, group string) {
	t.Helper()
	readAdm, closeRead := env.admin(t, env.readAddrs)
	defer closeRead()
	adm, closeWrite := env.admin(t, env.writeAddrs)
	defer closeWrite()
	offs, err := readAdm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("fetch the offsets of %s: %v", group, err)
	}
	for p, e := range endOffsets(ctx, t, adm, topic) {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.At != e {
			t.Errorf("group %s committed %d on %s/%d (found %v), want the end offset %d", group, o.At, topic, p, ok, e)
		}
	}
}

// checkValues requires got to hold every value of want exactly once.
func checkValues(t *testing.T, who string, got, want []string) {
	t.Helper()
	seen := make(map[string]int, len(got))
	for _, v := range got {
		seen[v]++
	}
	missing, dups := 0, 0
	for _, v := range want {
		if seen[v] == 0 {
			missing++
		}
	}
	for _, k := range seen {
		if k > 1 {
			dups += k - 1
		}
	}
	if missing != 0 || dups != 0 || len(got) != len(want) {
		t.Errorf("%s: got %d records, want %d; %d missing, %d read twice", who, len(got), len(want), missing, dups)
	}
}

// runRoutingProc runs a client program that speaks the routing protocol on
// stdout: "V <value>" for each record it processed, "WARM" once warmed up
// and "DONE" once it consumed everything, before closing (after each it
// waits for a line on stdin), and a last line "RESULT OK" or "RESULT
// FAIL: ...". It returns the values.
func runRoutingProc(ctx context.Context, t *testing.T, dir string, argv []string, hooks *routingHooks) []string {
	t.Helper()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", argv[0], err)
	}
	var values []string
	var last, other string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // client debug logs can be long lines
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "V "):
			values = append(values, line[2:])
		case line == "WARM" || line == "DONE":
			if hooks == nil {
				t.Errorf("%s reported %s, which it was not asked for", argv[0], line)
			} else if line == "WARM" {
				hooks.warm()
			} else {
				hooks.done()
			}
			io.WriteString(stdin, "GO\n")
		case strings.HasPrefix(line, "RESULT "):
			last = line
		default:
			other += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Errorf("reading the output of %s: %v", argv[0], err)
	}
	stdin.Close()
	err = cmd.Wait()
	t.Logf("%s ran for %v\n%s", strings.Join(argv[:min(len(argv), 3)], " "), time.Since(start).Round(time.Millisecond), tail(other, 4<<10))
	if err != nil || last != "RESULT OK" {
		t.Fatalf("%s: %v, %q\nstderr (tail):\n%s", strings.Join(argv, " "), err, last, tail(stderr.String(), 16<<10))
	}
	return values
}
