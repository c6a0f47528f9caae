package compat

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// The log admin surface through Apache Kafka's own tools (kafka-tools
// 4.4.0's DeleteRecordsCommand and LogDirsCommand, as
// kafka-delete-records.sh and kafka-log-dirs.sh run them) and franz-go's
// kadm (DescribeProducers, DescribeTopicPartitions).

const (
	clsDeleteRecords = "org.apache.kafka.tools.DeleteRecordsCommand"
	clsLogDirs       = "org.apache.kafka.tools.LogDirsCommand"
)

// deleteRecordsTool runs kafka-delete-records with one partition's offset
// and returns what it printed for that partition: its low watermark, or
// the error it reports.
func deleteRecordsTool(t *testing.T, cp string, bootstrap []string, topic string, partition int32, offset int64) (int64, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "offsets.json")
	js := fmt.Sprintf(`{"partitions":[{"topic":%q,"partition":%d,"offset":%d}],"version":1}`, topic, partition, offset)
	if err := os.WriteFile(f, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := tool(t, cp, "", clsDeleteRecords, "--bootstrap-server", strings.Join(bootstrap, ","), "--offset-json-file", f)
	if err != nil {
		t.Fatalf("kafka-delete-records: %v", toolErr(err, stderr))
	}
	m := regexp.MustCompile(fmt.Sprintf(`partition: %s-%d\s+low_watermark: (\d+)`, regexp.QuoteMeta(topic), partition)).FindStringSubmatch(out)
	if m != nil {
		low, _ := strconv.ParseInt(m[1], 10, 64)
		return low, ""
	}
	m = regexp.MustCompile(fmt.Sprintf(`partition: %s-%d\s+error: (.*)`, regexp.QuoteMeta(topic), partition)).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("kafka-delete-records printed neither a low watermark nor an error for %s-%d:\n%s", topic, partition, out)
	}
	return -1, m[1]
}

// logDirsReport is kafka-log-dirs --describe's JSON.
type logDirsReport struct {
	Brokers []struct {
		Broker  int32 `json:"broker"`
		LogDirs []struct {
			Error      *string `json:"error"`
			LogDir     string  `json:"logDir"`
			Partitions []struct {
				Partition string `json:"partition"`
				Size      int64  `json:"size"`
				OffsetLag int64  `json:"offsetLag"`
				IsFuture  bool   `json:"isFuture"`
			} `json:"partitions"`
		} `json:"logDirs"`
	} `json:"brokers"`
}

func logDirsTool(t *testing.T, cp string, bootstrap []string, args ...string) logDirsReport {
	t.Helper()
	out, stderr, err := tool(t, cp, "", clsLogDirs, append([]string{"--bootstrap-server", strings.Join(bootstrap, ","), "--describe"}, args...)...)
	if err != nil {
		t.Fatalf("kafka-log-dirs: %v", toolErr(err, stderr))
	}
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("kafka-log-dirs printed no JSON:\n%s", out)
	}
	var rep logDirsReport
	if err := json.Unmarshal([]byte(strings.TrimSpace(out[i:])), &rep); err != nil {
		t.Fatalf("kafka-log-dirs JSON: %v\n%s", err, out)
	}
	return rep
}

// segmentBytes is the size of the segment files of one partition under a
// broker's data directory.
func segmentBytes(t *testing.T, dataDir, topic string, partition int32) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".log") && filepath.Base(filepath.Dir(path)) == fmt.Sprintf("%s-%d", topic, partition) {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func earliest(t *testing.T, cl *kgo.Client, broker int32, topic string, partition int32) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, -2, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(harness.Context(t, 10*time.Second), cl.Broker(int(broker)))
	if err != nil {
		t.Fatalf("ListOffsets at broker %d: %v", broker, err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// TestToolsLogAdmin: against `sluice dev`, kafka-delete-records moves a
// partition's log start (and reports OffsetOutOfRange past the high
// watermark), ListOffsets earliest and a consumer from the start follow
// it; kafka-log-dirs reports the broker's log dir with each partition's
// size equal to its segment files; kadm's DescribeProducers shows the
// idempotent producer; the Java admin client's describeTopics (kafka-topics
// --describe, which uses DescribeTopicPartitions when the broker offers
// it) pages through a topic larger than one answer; and compression.type
// recompresses what producers send (testCompressionType).
func TestToolsLogAdmin(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	cp := buildJava(t)
	b := startBroker(t)
	bs := []string{b.KafkaAddr}
	ctx := harness.Context(t, 2*time.Minute)
	cl := newClient(t, b.KafkaAddr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	const topic = "logadmin"
	createTopic(ctx, t, adm, topic, 2, nil)
	for i := range 10 {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("v%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	if low, msg := deleteRecordsTool(t, cp, bs, topic, 0, 4); low != 4 {
		t.Fatalf("delete records to 4: low watermark %d, error %q", low, msg)
	}
	if low, msg := deleteRecordsTool(t, cp, bs, topic, 0, 11); low != -1 || !strings.Contains(msg, "OffsetOutOfRange") {
		t.Fatalf("delete records past the high watermark: low watermark %d, error %q; want OffsetOutOfRangeException", low, msg)
	}
	if off, code := earliest(t, cl, 1, topic, 0); off != 4 || code != 0 {
		t.Fatalf("earliest after delete records: %d (error %d), want 4", off, code)
	}
	cc := newClient(t, b.KafkaAddr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if fs := cc.PollRecords(ctx, 1); len(fs.Records()) == 0 || fs.Records()[0].Offset != 4 {
		t.Fatalf("a consumer from the start after delete records: %v %v", fs.Records(), fs.Errors())
	}

	rep := logDirsTool(t, cp, bs, "--topic-list", topic)
	if len(rep.Brokers) != 1 || len(rep.Brokers[0].LogDirs) != 1 {
		t.Fatalf("kafka-log-dirs: %+v", rep)
	}
	ld := rep.Brokers[0].LogDirs[0]
	if ld.Error != nil || !filepath.IsAbs(ld.LogDir) || !strings.HasPrefix(ld.LogDir, b.DataDir) {
		t.Fatalf("log dir %q (error %v), want an absolute path under %s", ld.LogDir, ld.Error, b.DataDir)
	}
	sizes := map[string]int64{}
	for _, p := range ld.Partitions {
		sizes[p.Partition] = p.Size
		if p.OffsetLag != 0 || p.IsFuture {
			t.Errorf("%s: offset lag %d, future %v", p.Partition, p.OffsetLag, p.IsFuture)
		}
	}
	for _, p := range []int32{0, 1} {
		name := fmt.Sprintf("%s-%d", topic, p)
		if got, want := sizes[name], segmentBytes(t, b.DataDir, topic, p); got != want {
			t.Errorf("kafka-log-dirs: %s size %d, segment files hold %d", name, got, want)
		}
	}
	if len(sizes) != 2 || sizes[topic+"-0"] == 0 {
		t.Errorf("kafka-log-dirs partitions %v, want %s-0 with data and %s-1", sizes, topic, topic)
	}

	prods, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	prods.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil {
			t.Errorf("DescribeProducers %s-%d: %v", p.Topic, p.Partition, p.Err)
		}
	})
	prods.EachProducer(func(p kadm.DescribedProducer) {
		seen++
		if p.ProducerEpoch != 0 || p.LastSequence != 9 || p.LastTimestamp <= 0 || p.CoordinatorEpoch != -1 || p.CurrentTxnStartOffset != -1 {
			t.Errorf("described producer %+v", p)
		}
	})
	if seen != 1 {
		t.Errorf("DescribeProducers: %d producers, want the one idempotent producer", seen)
	}

	// kafka-topics --describe (Admin.describeTopics, DescribeTopicPartitions
	// with a cursor: the Java client asks for 2000 partitions per answer, so
	// 2100 take two pages).
	createTopic(ctx, t, adm, "logadmin-wide", 2100, nil)
	out, stderr, err := tool(t, cp, "", clsTopics, "--bootstrap-server", b.KafkaAddr, "--describe", "--topic", "logadmin-wide")
	if err != nil {
		t.Fatal(toolErr(err, stderr))
	}
	seenParts := map[string]bool{}
	for _, m := range regexp.MustCompile(`Partition: (\d+)\s+Leader: 1\s`).FindAllStringSubmatch(out, -1) {
		seenParts[m[1]] = true
	}
	if len(seenParts) != 2100 {
		t.Errorf("kafka-topics --describe listed %d distinct partitions of 2100", len(seenParts))
	}
	t.Run("compression-type", func(t *testing.T) { testCompressionType(t, cp, b) })
}

// TestToolsLogAdminCluster: on the 3 write + 2 read cluster, for an RF 3
// topic, kafka-delete-records through the write view, then through the read
// view (a read broker forwards it to the raft leader), moves the log start
// of every replica: each read broker's ListOffsets earliest answers the new
// log start and a consumer on the read view starts there; kafka-log-dirs on
// the read view reports the partition on both read brokers, and kadm's
// DescribeProducers at a read broker (a raft learner) shows the producer.
func TestToolsLogAdminCluster(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	cp := buildJava(t)
	c := harness.StartCluster(t, harness.ClusterOptions{Meta: 1, Write: 3, Read: 2})
	env := &routingEnv{c: c,
		writeAddrs: harness.Addrs(harness.ViewWrite, c.Writers),
		readAddrs:  harness.Addrs(harness.ViewRead, c.Readers),
		mixedAddrs: harness.Addrs(harness.ViewMixed, c.Writers)}
	ctx := harness.Context(t, 3*time.Minute)
	env.waitBrokers(ctx, t)
	const topic = "logadmin-rf3"
	env.createTopic(ctx, t, topic)
	wcl := newClient(t, env.writeAddrs[0], kgo.SeedBrokers(env.writeAddrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 20 {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("v%d", i))}
		if err := wcl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rcl := newClient(t, env.readAddrs[0], kgo.SeedBrokers(env.readAddrs...))
	// waitEarliest waits until every read broker answers earliest = want
	// (each applies the raft entry when it commits it).
	waitEarliest := func(want int64) {
		t.Helper()
		for _, r := range c.Readers {
			deadline := time.Now().Add(20 * time.Second)
			for {
				off, code := earliest(t, rcl, r.ID, topic, 0)
				if off == want && code == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("read broker %d: earliest %d (error %d), want %d", r.ID, off, code, want)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	if low, msg := deleteRecordsTool(t, cp, env.writeAddrs, topic, 0, 7); low != 7 {
		t.Fatalf("delete records through the write view: low watermark %d, error %q", low, msg)
	}
	waitEarliest(7)
	if low, msg := deleteRecordsTool(t, cp, env.readAddrs, topic, 0, 12); low != 12 {
		t.Fatalf("delete records through the read view: low watermark %d, error %q", low, msg)
	}
	waitEarliest(12)
	ends, err := kadm.NewClient(rcl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	if low, msg := deleteRecordsTool(t, cp, env.readAddrs, topic, 0, end.Offset+1); low != -1 || !strings.Contains(msg, "OffsetOutOfRange") {
		t.Fatalf("delete records past the high watermark through the read view: low watermark %d, error %q", low, msg)
	}
	cc := newClient(t, env.readAddrs[0], kgo.SeedBrokers(env.readAddrs...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if fs := cc.PollRecords(ctx, 1); len(fs.Records()) == 0 || fs.Records()[0].Offset != 12 {
		t.Fatalf("a consumer on the read view from the start: %v %v", fs.Records(), fs.Errors())
	}

	rep := logDirsTool(t, cp, env.readAddrs, "--topic-list", topic)
	brokers := map[int32]int64{}
	for _, b := range rep.Brokers {
		for _, ld := range b.LogDirs {
			for _, p := range ld.Partitions {
				if p.Partition == topic+"-0" {
					brokers[b.Broker] = p.Size
				}
			}
		}
	}
	for _, r := range c.Readers {
		if brokers[r.ID] <= 0 {
			t.Errorf("kafka-log-dirs on the read view: read broker %d reports %s-0 with %d bytes (all: %v)", r.ID, topic, brokers[r.ID], brokers)
		}
	}

	prods, err := kadm.NewClient(rcl).DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	prods.EachPartition(func(p kadm.DescribedProducersPartition) {
		if p.Err != nil {
			t.Errorf("DescribeProducers at read broker %d: %v", p.Leader, p.Err)
		}
		for _, ap := range p.ActiveProducers {
			n++
			if ap.LastSequence != 19 {
				t.Errorf("producer %+v, want last sequence 19", ap)
			}
		}
	})
	if n != 1 {
		t.Errorf("DescribeProducers on the read view: %d producers, want 1", n)
	}
}

// testCompressionType: topics whose compression.type names each codec
// store a producer's batches recompressed (franz-go producing snappy), and
// Apache Kafka's console consumer and kcat (librdkafka) decode what the
// broker wrote: every record back, unchanged.
// (A subtest of TestToolsLogAdmin, on its broker.)
func testCompressionType(t *testing.T, cp string, b *harness.Broker) {
	requireTool(t, "kcat")
	ctx := harness.Context(t, 2*time.Minute)
	adm := newAdmin(t, b.KafkaAddr)
	cl := newClient(t, b.KafkaAddr, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	types := []string{"uncompressed", "gzip", "snappy", "lz4", "zstd"}
	const n = 40
	want := map[string]bool{}
	for _, ct := range types {
		topic := "ct-" + ct
		createTopic(ctx, t, adm, topic, 1, map[string]*string{"compression.type": kmsg.StringPtr(ct)})
		for i := range n {
			v := fmt.Sprintf("%s-%d-%s", ct, i, strings.Repeat("x", 300))
			want[v] = true
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(who string, out string) {
		t.Helper()
		got := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				got[l] = true
			}
		}
		for v := range want {
			if !got[v] {
				per := map[string]int{}
				for g := range got {
					per[strings.SplitN(g, "-", 2)[0]]++
				}
				t.Fatalf("%s did not read %q back (%d of %d records; per codec %v)", who, v[:min(len(v), 20)], len(got), len(want), per)
			}
		}
	}
	out, stderr, err := tool(t, cp, "", clsConsumer, "--bootstrap-server", b.KafkaAddr, "--include", "ct-.*",
		"--from-beginning", "--max-messages", fmt.Sprint(len(want)), "--timeout-ms", "20000")
	if err != nil {
		t.Fatal(toolErr(err, stderr))
	}
	check("kafka-console-consumer", out)
	var all strings.Builder
	for _, ct := range types {
		o, _ := kcat(t, 30*time.Second, "", "-b", b.KafkaAddr, "-C", "-t", "ct-"+ct, "-o", "beginning", "-e", "-q", "-f", "%s\n")
		all.WriteString(o)
	}
	check("kcat", all.String())
}
