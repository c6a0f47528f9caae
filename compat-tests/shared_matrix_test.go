package compat

// The compat matrix's produce and consume rows on shared-mode topics
// (docs/shared-storage.md): every client stack with those rows runs its
// basic scenario group again, on one broker per stack whose shared
// storage is a directory (shared.storage.type=dir, no server to start),
// against topics created with replication.mode=shared. The cells are
// recorded as "shared/<scenario>" and rendered by
// compat-tests/cmd/compatmatrix as a table of their own. Besides the
// checks of the raft rows, every cell also needs each basic topic to
// describe replication.mode=shared and the shared directory to hold
// objects, so a row cannot pass on topics that quietly stayed raft.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// sharedRowPrefix prefixes the scenario names of the shared-mode cells.
const sharedRowPrefix = "shared/"

// sharedScenarios are the rows run on shared topics: the basic group's
// produce and consume rows, with the Metadata of a shared topic
// (error-unknown-topic names no topic, so it is not repeated).
var sharedScenarios = slices.DeleteFunc(slices.Clone(basicScenarios), func(s string) bool { return s == "error-unknown-topic" })

// sharedRows returns the recorded names of sharedScenarios.
func sharedRows() []string {
	var out []string
	for _, s := range sharedScenarios {
		out = append(out, sharedRowPrefix+s)
	}
	return out
}

// startSharedBroker starts `sluice dev` with a shared directory (a fresh
// temporary one) as its shared storage, auto-creation off and a short
// upload linger (the default 250 ms would make clients that send one
// record per request slow, not different), and returns it with the
// directory. The cluster default stays raft: the topics of the shared
// rows ask for replication.mode=shared themselves.
func startSharedBroker(t *testing.T) (*harness.Broker, string) {
	t.Helper()
	dir := t.TempDir()
	b := harness.Start(t, harness.Options{ExtraArgs: []string{"--set", "auto.create.topics.enable=false",
		"--set", "shared.storage.type=dir", "--set", "shared.storage.dir=" + dir,
		"--set", "shared.upload.linger.ms=20"}})
	return b, dir
}

// sharedTopicConfigs is the topic config of the shared rows' topics.
func sharedTopicConfigs() map[string]*string {
	mode := "shared"
	return map[string]*string{"replication.mode": &mode}
}

// prepareSharedBasic is prepareBasic with every topic in shared mode.
func prepareSharedBasic(t *testing.T, addr, p string) {
	t.Helper()
	prepareBasicWith(t, addr, p, sharedTopicConfigs())
}

// checkShared is checkBasic for the shared rows, with one more check for
// every cell: each basic topic of prefix p describes
// replication.mode=shared, and the shared directory dir holds objects.
func checkShared(t *testing.T, addr, p, dir string) func(string) string {
	t.Helper()
	basic := checkBasic(t, addr, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var topics []string
	for _, s := range basicTopicSuffixes {
		topics = append(topics, p+"-"+s)
	}
	problem := ""
	rcs, err := newAdmin(t, addr).DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		problem = fmt.Sprintf("DescribeConfigs of the basic topics: %v", err)
	}
	for _, rc := range rcs {
		if problem != "" {
			break
		}
		if rc.Err != nil {
			problem = fmt.Sprintf("DescribeConfigs %s: %v", rc.Name, rc.Err)
			break
		}
		mode := "(not described)"
		for _, c := range rc.Configs {
			if c.Key == "replication.mode" {
				mode = c.MaybeValue()
			}
		}
		if mode != "shared" {
			problem = fmt.Sprintf("topic %s has replication.mode %s, not shared", rc.Name, mode)
		}
	}
	if problem == "" && len(rcs) != len(topics) {
		problem = fmt.Sprintf("DescribeConfigs described %d of the %d basic topics", len(rcs), len(topics))
	}
	if problem == "" {
		objects, _ := filepath.Glob(filepath.Join(dir, "data", "*", "*", "*"))
		if len(objects) == 0 {
			problem = "no objects in the shared directory"
		} else {
			t.Logf("%d objects in the shared directory; the basic topics describe replication.mode=shared", len(objects))
		}
	}
	return func(s string) string {
		if problem != "" {
			return problem
		}
		return basic(s)
	}
}

// recordSharedResults records the shared rows of client from the RESULT
// lines (or scenario results) of a basic group run on shared topics:
// sharedScenarios as "shared/<scenario>", each failed when override
// (checkShared) names a problem.
func recordSharedResults(t *testing.T, client string, res map[string]scenarioResult, override func(string) string) {
	t.Helper()
	prefixed := map[string]scenarioResult{}
	for k, v := range res {
		if strings.HasPrefix(k, "\x00") {
			prefixed[k] = v
		} else {
			prefixed[sharedRowPrefix+k] = v
		}
	}
	recordResults(t, client, sharedRows(), prefixed, func(s string) string {
		if override == nil {
			return ""
		}
		return override(strings.TrimPrefix(s, sharedRowPrefix))
	})
}

// runSharedClientScenarios runs the basic group of one external client
// (Python, JavaScript, confluent-kafka-go) on shared topics and records
// its shared rows. The transaction topics are created in raft mode (the
// broker's default; the basic group's process runs the transaction
// scenarios too), and those results are only logged: transactions on
// shared topics are checked by the Java client's run (shared_mode_test.go)
// and on real processes in cmd/sluice (TestSharedClusterTransactions).
func runSharedClientScenarios(t *testing.T, client, prefix, dir string, timeout time.Duration, argv func(group, addr, prefix string) []string) {
	t.Helper()
	b, sdir := startSharedBroker(t)
	prepareSharedBasic(t, b.KafkaAddr, prefix)
	prepareTxn(t, b.KafkaAddr, prefix)
	a := argv("basic", b.KafkaAddr, prefix)
	res, _ := runScenarios(t, timeout, dir, a[0], a[1:]...)
	for _, s := range txnScenarios {
		t.Logf("%s (raft topics, not recorded here): %+v", s, res[s])
	}
	recordSharedResults(t, client, res, checkShared(t, b.KafkaAddr, prefix, sdir))
}

func TestSharedMatrixPythonConfluentKafka(t *testing.T) { testSharedPython(t, 0) }
func TestSharedMatrixPythonKafkaPython(t *testing.T)    { testSharedPython(t, 1) }

func testSharedPython(t *testing.T, i int) {
	t.Parallel()
	c := pythonClients[i]
	requireToolMatrix(t, c.client, sharedRows(), pythonHas(c.module),
		"python3 with the "+c.module+" module (make test-setup installs it into compat-tests/.venv)")
	argv := pythonArgv(c.arg)
	runSharedClientScenarios(t, c.client, "shpy-"+c.arg, filepath.Join(".", "python"), 90*time.Second,
		func(group, addr, prefix string) []string { return argv(group, addr, prefix) })
}

func TestSharedMatrixJSKafkaJS(t *testing.T) {
	t.Parallel()
	requireToolMatrix(t, jsClient, sharedRows(), jsReady(), "node with kafkajs (npm ci in compat-tests/js)")
	runSharedClientScenarios(t, jsClient, "shjs", filepath.Join(".", "js"), 90*time.Second,
		func(group, addr, prefix string) []string { return jsArgv(group, addr, prefix) })
}

func TestSharedMatrixConfluentKafkaGo(t *testing.T) {
	t.Parallel()
	bin, why := buildCkg(t)
	requireToolMatrix(t, ckgClient, sharedRows(), bin != "", "a cgo build of confluent-kafka-go ("+why+")")
	runSharedClientScenarios(t, ckgClient, "shckg", ".", 90*time.Second,
		func(group, addr, prefix string) []string { return []string{bin, group, addr, prefix} })
}

// TestSharedMatrixFranzGo runs the basic group's produce and consume
// scenarios with franz-go (kgo, kadm) on shared topics. franz-go's cells
// of the raft rows come from existing tests (compatmatrix's coverage
// table); here every scenario is run as the other clients run it.
func TestSharedMatrixFranzGo(t *testing.T) {
	t.Parallel()
	b, dir := startSharedBroker(t)
	const p = "shfg"
	prepareSharedBasic(t, b.KafkaAddr, p)
	res := franzGoBasic(t, b.KafkaAddr, p)
	recordSharedResults(t, "franz-go", res, checkShared(t, b.KafkaAddr, p, dir))
}

// franzGoBasic runs the basic group's scenarios (prepareBasic's topics of
// prefix p) with franz-go and returns their results.
func franzGoBasic(t *testing.T, addr, p string) map[string]scenarioResult {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := newAdmin(t, addr)
	// read reads n records of partition 0 of topic from offset at.
	read := func(topic string, at int64, n int) ([]*kgo.Record, error) {
		cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(at)}}),
			kgo.FetchMaxWait(200*time.Millisecond))
		defer cl.Close()
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		var out []*kgo.Record
		for len(out) < n {
			fs := cl.PollFetches(rctx)
			if rctx.Err() != nil {
				return out, fmt.Errorf("read %d of %d records of %s from offset %d in 20 s", len(out), n, topic, at)
			}
			if err := fs.Err(); err != nil {
				return out, err
			}
			out = append(out, fs.Records()...)
		}
		return out, nil
	}
	r := &toolRun{res: map[string]scenarioResult{}}
	r.do("bootstrap-metadata", func() error {
		md, err := adm.Metadata(ctx, p+"-meta")
		if err != nil {
			return err
		}
		if len(md.Brokers) != 1 {
			return fmt.Errorf("%d brokers, want 1", len(md.Brokers))
		}
		td, ok := md.Topics[p+"-meta"]
		if !ok || td.Err != nil || len(td.Partitions) != 3 {
			return fmt.Errorf("%s-meta: %+v (listed %v)", p, td, ok)
		}
		return nil
	})
	acks := func(topic string, opts ...kgo.Opt) func() error {
		return func() error {
			cl := newClient(t, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic)}, opts...)...)
			defer cl.Close()
			var rs []*kgo.Record
			for i := range 100 {
				rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d", topic, i)})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				return err
			}
			// acks=0 is answered by nobody: wait (20 s at most) until the
			// broker holds the records before the broker-side check.
			deadline := time.Now().Add(20 * time.Second)
			for {
				lo, err := adm.ListEndOffsets(ctx, topic)
				if err == nil {
					if o, ok := lo.Lookup(topic, 0); ok && o.Err == nil && o.Offset >= 100 {
						return nil
					}
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("the broker does not hold the 100 records 20 s after they were sent (%v)", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	notIdem := kgo.DisableIdempotentWrite()
	r.do("produce-acks0", acks(p+"-acks0", notIdem, kgo.RequiredAcks(kgo.NoAck())))
	r.do("produce-acks1", acks(p+"-acks1", notIdem, kgo.RequiredAcks(kgo.LeaderAck())))
	r.do("produce-acksall", acks(p+"-acksall", notIdem, kgo.RequiredAcks(kgo.AllISRAcks())))
	r.do("produce-idempotent", acks(p+"-idem")) // kgo's default: idempotent, acks=all
	r.do("keys-nulls-headers-timestamps", func() error {
		tp := p + "-fields"
		ts := time.UnixMilli(tsBase)
		rs := []*kgo.Record{
			{Topic: tp, Key: []byte("k1"), Value: []byte("v1"), Timestamp: ts,
				Headers: []kgo.RecordHeader{{Key: "h1", Value: []byte("a")}, {Key: "h2", Value: []byte("b")}}},
			{Topic: tp, Key: []byte("k2"), Value: nil, Timestamp: ts.Add(time.Millisecond)},
			{Topic: tp, Key: nil, Value: []byte("v3"), Timestamp: ts.Add(2 * time.Millisecond),
				Headers: []kgo.RecordHeader{{Key: "h3", Value: []byte{}}}},
		}
		if err := newClient(t, addr).ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return err
		}
		got, err := read(tp, 0, 3)
		if err != nil {
			return err
		}
		want := []struct {
			k, v []byte
			h    string
		}{{[]byte("k1"), []byte("v1"), "h1=a,h2=b"}, {[]byte("k2"), nil, ""}, {nil, []byte("v3"), "h3="}}
		for i, m := range got {
			var hs []string
			for _, h := range m.Headers {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
			w := want[i]
			if !bytes.Equal(m.Key, w.k) || (m.Key == nil) != (w.k == nil) || !bytes.Equal(m.Value, w.v) || (m.Value == nil) != (w.v == nil) ||
				strings.Join(hs, ",") != w.h || m.Timestamp.UnixMilli() != tsBase+int64(i) {
				return fmt.Errorf("record %d: key %q value %q headers %v ts %d", i, m.Key, m.Value, hs, m.Timestamp.UnixMilli())
			}
		}
		return nil
	})
	r.do("near-max-message-bytes", func() error {
		v := strings.Repeat("n", 99_000)
		res, err := newClient(t, addr).ProduceSync(ctx, &kgo.Record{Topic: p + "-big", Key: []byte("near"), Value: []byte(v)}).First()
		if err != nil {
			return err
		}
		got, err := read(p+"-big", res.Offset, 1)
		if err != nil {
			return err
		}
		if got[0].Offset != res.Offset || string(got[0].Key) != "near" || string(got[0].Value) != v {
			return fmt.Errorf("read back offset %d key %q and %d bytes", got[0].Offset, got[0].Key, len(got[0].Value))
		}
		return nil
	})
	r.do("error-record-too-large", func() error {
		err := newClient(t, addr).ProduceSync(ctx, &kgo.Record{Topic: p + "-big", Key: []byte("over"), Value: []byte(strings.Repeat("o", 101_000))}).FirstErr()
		if !errors.Is(err, kerr.MessageTooLarge) {
			return fmt.Errorf("101,000 bytes over max.message.bytes=100000: %v, want MESSAGE_TOO_LARGE", err)
		}
		return nil
	})
	cons := p + "-cons"
	r.do("consume-earliest", func() error {
		got, err := read(cons, 0, 10)
		if err != nil {
			return err
		}
		for i, m := range got[:10] {
			if m.Offset != int64(i) || string(m.Value) != fmt.Sprintf("c-%d", i) {
				return fmt.Errorf("offset %d: %q", m.Offset, m.Value)
			}
		}
		return nil
	})
	r.do("consume-latest", func() error {
		lo, err := adm.ListEndOffsets(ctx, cons) // "latest", resolved now
		if err != nil {
			return err
		}
		latest, ok := lo.Lookup(cons, 0)
		if !ok || latest.Err != nil || latest.Offset != 10 {
			return fmt.Errorf("latest offset of %s: %+v, want 10", cons, latest)
		}
		if err := newClient(t, addr).ProduceSync(ctx, &kgo.Record{Topic: cons, Value: []byte("after-latest")}).FirstErr(); err != nil {
			return err
		}
		got, err := read(cons, latest.Offset, 1)
		if err != nil {
			return err
		}
		if got[0].Offset != 10 || string(got[0].Value) != "after-latest" {
			return fmt.Errorf("read offset %d %q", got[0].Offset, got[0].Value)
		}
		return nil
	})
	r.do("consume-timestamp", func() error {
		lo, err := adm.ListOffsetsAfterMilli(ctx, tsBase+4500, cons)
		if err != nil {
			return err
		}
		o, ok := lo.Lookup(cons, 0)
		if !ok || o.Err != nil || o.Offset != 5 {
			return fmt.Errorf("offset for timestamp base+4500: %+v, want 5", o)
		}
		got, err := read(cons, o.Offset, 3)
		if err != nil {
			return err
		}
		if string(got[0].Value) != "c-5" || string(got[2].Value) != "c-7" {
			return fmt.Errorf("read from 5: %q, %q, %q", got[0].Value, got[1].Value, got[2].Value)
		}
		return nil
	})
	r.do("error-unknown-topic", func() error {
		md, err := adm.Metadata(ctx, p+"-no-such-topic")
		if err != nil {
			return err
		}
		if td := md.Topics[p+"-no-such-topic"]; !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("metadata for a missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", td.Err)
		}
		return nil
	})
	return r.res
}

// matrixBroker starts the broker of an in-process client's matrix test
// and creates the basic group's topics: with shared, a broker with a
// shared directory and the topics in shared mode under prefix "sh"+p;
// otherwise the raft rows' broker under p. It returns the broker, the
// prefix and the shared directory ("" without shared).
func matrixBroker(t *testing.T, shared bool, p string) (*harness.Broker, string, string) {
	t.Helper()
	if !shared {
		b := harness.Start(t, autoCreateOff())
		prepareBasic(t, b.KafkaAddr, p)
		return b, p, ""
	}
	b, dir := startSharedBroker(t)
	p = "sh" + p
	prepareSharedBasic(t, b.KafkaAddr, p)
	return b, p, dir
}
