package compat

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's kafka-transactions tool (TransactionsCommand of the kafka-tools
// 4.4.0 jar, one JVM per command, as kafka-transactions.sh runs it)
// against `sluice dev`.

const clsTransactions = "org.apache.kafka.tools.TransactionsCommand"

// toolTable parses the table a Kafka tool prints (ToolsUtils.
// prettyPrintTable: a header line, then one line per row, columns padded
// with spaces) into one map per row, keyed by column name. No column of
// the transactions tool holds a space.
func toolTable(t *testing.T, out string) []map[string]string {
	t.Helper()
	var head []string
	var rows []map[string]string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		if len(f) != len(head) {
			t.Fatalf("table row %q: %d columns, the header %v has %d", l, len(f), head, len(head))
		}
		row := map[string]string{}
		for i, h := range head {
			row[h] = f[i]
		}
		rows = append(rows, row)
	}
	if head == nil {
		t.Fatalf("no table in %q", out)
	}
	return rows
}

// stableEnd is ListOffsets latest for one partition at an isolation
// level (1: read_committed, the last stable offset; 0: the high
// watermark).
func stableEnd(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partition int32, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ListOffsets %s-%d isolation %d: %v %+v", topic, partition, isolation, err, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// TestTransactionsTool runs kafka-transactions against a broker with one
// producer's transaction open in partition 0 (after a committed one, so
// the partition holds a marker and a coordinator epoch for it) and a
// hanging transaction in partition 1: a transactional batch produced
// (Produce v9, with transaction.partition.verification.enable=false so
// the leader does not ask the coordinator) by a producer id no
// coordinator ever gave out, the way Kafka's own tests make one, so no
// marker will ever end it and the last stable offset stays behind.
//
//   - list shows the open transaction as Ongoing at coordinator 1, and
//     --transactional-id-pattern (ListTransactions v2) filters on the
//     whole id;
//   - describe --transactional-id shows its producer, state, timeout and
//     partition;
//   - describe-producers shows its CurrentTransactionStartOffset (the
//     offset of its first batch) and the coordinator epoch of its last
//     marker, both as DescribeProducers answers them;
//   - find-hanging --broker-id 1 lists the hanging transaction and not
//     the open one, whose coordinator still lists its partition;
//   - abort --start-offset writes an ABORT marker for the hanging one:
//     the last stable offset of partition 1 reaches the high watermark
//     and read_committed sees none of its records.
func TestTransactionsTool(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	cp := buildJava(t)
	const topic, id = "txn-tool", "tool-txn"
	b := startBroker(t, "--set", "auto.create.topics.enable=false", "--set", "transaction.partition.verification.enable=false")
	addr := b.KafkaAddr
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	createTopic(ctx, t, newAdmin(t, addr), topic, 2, nil)
	run := func(args ...string) string {
		t.Helper()
		out, stderr, err := tool(t, cp, "", clsTransactions, append([]string{"--bootstrap-server", addr}, args...)...)
		if err != nil {
			t.Fatalf("kafka-transactions %s: %v", strings.Join(args, " "), toolErr(err, stderr))
		}
		return out
	}

	// The open transaction, after a committed one, in partition 0.
	p := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(id),
		kgo.TransactionTimeout(time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("c0"), kgo.StringRecord("c1"), kgo.StringRecord("c2")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("open0"), kgo.StringRecord("open1")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// What DescribeProducers says of partition 0, to compare the tool's
	// table with.
	raw := dialRaw(t, addr)
	dp := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = topic, []int32{0}
	dp.Topics = append(dp.Topics, dt)
	dresp, err := raw.roundTrip(dp, 0)
	if err != nil {
		t.Fatal(err)
	}
	dpr := dresp.(*kmsg.DescribeProducersResponse)
	if len(dpr.Topics) != 1 || len(dpr.Topics[0].Partitions) != 1 || dpr.Topics[0].Partitions[0].ErrorCode != 0 ||
		len(dpr.Topics[0].Partitions[0].ActiveProducers) != 1 {
		t.Fatalf("DescribeProducers %s-0: %+v", topic, dpr)
	}
	open := dpr.Topics[0].Partitions[0].ActiveProducers[0]
	// c0..c2 at 0-2, the COMMIT marker at 3: the open transaction
	// starts at 4.
	if open.CurrentTxnStartOffset != 4 || open.CoordinatorEpoch < 0 {
		t.Fatalf("DescribeProducers %s-0: %+v, want the open transaction at offset 4 and a coordinator epoch", topic, open)
	}
	pid := strconv.FormatInt(open.ProducerID, 10)

	t.Run("list", func(t *testing.T) {
		rows := toolTable(t, run("list"))
		found := false
		for _, r := range rows {
			if r["TransactionalId"] == id {
				found = true
				if r["Coordinator"] != "1" || r["ProducerId"] != pid || r["TransactionState"] != "Ongoing" {
					t.Errorf("list: %v, want coordinator 1, producer %s, Ongoing", r, pid)
				}
			}
		}
		if !found {
			t.Errorf("list: %s missing from %v", id, rows)
		}
		// ListTransactions v2: the pattern matches the whole id.
		if rows := toolTable(t, run("list", "--transactional-id-pattern", "tool-.*")); len(rows) != 1 || rows[0]["TransactionalId"] != id {
			t.Errorf("list --transactional-id-pattern tool-.*: %v, want only %s", rows, id)
		}
		if rows := toolTable(t, run("list", "--transactional-id-pattern", "tool")); len(rows) != 0 {
			t.Errorf("list --transactional-id-pattern tool: %v, want none (the pattern must match the whole id)", rows)
		}
	})

	t.Run("describe", func(t *testing.T) {
		rows := toolTable(t, run("describe", "--transactional-id", id))
		if len(rows) != 1 {
			t.Fatalf("describe: %v", rows)
		}
		r := rows[0]
		if r["CoordinatorId"] != "1" || r["TransactionalId"] != id || r["ProducerId"] != pid ||
			r["ProducerEpoch"] != strconv.Itoa(int(open.ProducerEpoch)) || r["TransactionState"] != "Ongoing" ||
			r["TransactionTimeoutMs"] != "60000" || r["TopicPartitions"] != topic+"-0" || r["CurrentTransactionStartTimeMs"] == "None" {
			t.Errorf("describe: %v, want producer %s epoch %d Ongoing, timeout 60000, partition %s-0", r, pid, open.ProducerEpoch, topic)
		}
	})

	t.Run("describe-producers", func(t *testing.T) {
		rows := toolTable(t, run("describe-producers", "--topic", topic, "--partition", "0"))
		if len(rows) != 1 {
			t.Fatalf("describe-producers: %v, want one producer", rows)
		}
		r := rows[0]
		want := map[string]string{
			"ProducerId": pid, "ProducerEpoch": strconv.Itoa(int(open.ProducerEpoch)),
			"LatestCoordinatorEpoch": strconv.Itoa(int(open.CoordinatorEpoch)), "CurrentTransactionStartOffset": "4",
		}
		for k, v := range want {
			if r[k] != v {
				t.Errorf("describe-producers %s: %q, want %q (row %v)", k, r[k], v, r)
			}
		}
	})

	// The hanging transaction in partition 1: a producer id above any
	// the broker gave out, never registered with a coordinator.
	const ghost = int64(1) << 40
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 9, -1, 10_000, kmsg.StringPtr("tool-ghost")
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 1, txnBatch(ghost, 0, 0, "h0", "h1", "h2")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	presp, err := raw.roundTrip(req, 9)
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("the hanging transaction's Produce: %v", kerr.ErrorForCode(code))
	}
	// A committed record after it, held back by it too.
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	hw1, lso1 := stableEnd(ctx, t, cl, topic, 1, 0), stableEnd(ctx, t, cl, topic, 1, 1)
	if lso1 != 0 || hw1 != 4 {
		t.Fatalf("partition 1 with the hanging transaction: last stable offset %d, high watermark %d; want 0 and 4", lso1, hw1)
	}
	time.Sleep(10 * time.Millisecond) // find-hanging wants the last batch strictly older than now

	t.Run("find-hanging", func(t *testing.T) {
		// The default --max-transaction-timeout (15 minutes) leaves out
		// everything this young.
		if rows := toolTable(t, run("find-hanging", "--broker-id", "1")); len(rows) != 0 {
			t.Errorf("find-hanging with the default 15 minutes: %v, want none", rows)
		}
		rows := toolTable(t, run("find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"))
		if len(rows) != 1 {
			t.Fatalf("find-hanging: %v, want only the hanging transaction (producer %d)", rows, ghost)
		}
		r := rows[0]
		if r["Topic"] != topic || r["Partition"] != "1" || r["ProducerId"] != strconv.FormatInt(ghost, 10) ||
			r["ProducerEpoch"] != "0" || r["CoordinatorEpoch"] != "-1" || r["StartOffset"] != "0" {
			t.Errorf("find-hanging: %v, want %s-1 producer %d epoch 0 coordinator epoch -1 at offset 0", r, topic, ghost)
		}
	})

	t.Run("abort", func(t *testing.T) {
		run("abort", "--topic", topic, "--partition", "1", "--start-offset", "0")
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			hw, lso := stableEnd(ctx, t, cl, topic, 1, 0), stableEnd(ctx, t, cl, topic, 1, 1)
			if hw == lso && hw > hw1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after abort: partition 1 last stable offset %d, high watermark %d (before: %d); want them equal, past the marker", lso, hw, hw1)
			}
		}
		if rows := toolTable(t, run("find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0")); len(rows) != 0 {
			t.Errorf("find-hanging after abort: %v, want none", rows)
		}
	})

	// The open transaction commits; read_committed sees its records and
	// the committed ones, none of the hanging transaction's.
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	got := readOutput(ctx, t, addr, topic, kgo.ReadCommitted(), 6)
	if fmt.Sprint(got) != "[after c0 c1 c2 open0 open1]" {
		t.Errorf("read_committed: %v, want [after c0 c1 c2 open0 open1]", got)
	}
}
