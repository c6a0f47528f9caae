//go:build cgo

// Command ckg runs the compat scenarios with confluent-kafka-go v2 (cgo over
// the librdkafka it bundles); ckg_test.go builds and drives it.
//
//	ckg GROUP BOOTSTRAP PREFIX [ARGS...]
//	ckg secure BOOTSTRAP TOPIC KEY=VALUE...
//
// GROUP is basic, admin, group, write-codecs or read-codecs, as in
// python/scenarios.py; every scenario prints one line:
// RESULT <scenario> pass|fail|na <detail>. secure (security_matrix_test.go)
// produces 20 records to TOPIC and reads them back with the librdkafka
// settings given (security.protocol, ssl.*, sasl.*): RESULT roundtrip.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

const (
	client       = "confluent-kafka-go"
	codecRecords = 50
	tsBase       = int64(1_700_000_000_000)
)

var codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

var bootstrap string

// security is librdkafka configuration every client gets (the secure group).
var security []any

func result(scenario, status, detail string) {
	detail = strings.ReplaceAll(detail, "\n", " ")
	if len(detail) > 400 {
		detail = detail[:400]
	}
	fmt.Printf("RESULT %s %s %s\n", scenario, status, detail)
}

func run(scenario string, fn func() (string, error)) {
	detail, err := fn()
	if err != nil {
		result(scenario, "fail", err.Error())
		return
	}
	result(scenario, "pass", detail)
}

func conf(kv ...any) *kafka.ConfigMap {
	m := kafka.ConfigMap{"bootstrap.servers": bootstrap, "client.id": "sluice-compat-ckg"}
	kv = append(append([]any{}, security...), kv...)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return &m
}

type rec struct {
	key, value []byte
	headers    []kafka.Header
	ts         int64 // 0: let the client stamp it
	partition  int32 // -1: any
	offset     int64
}

func code(err error) int {
	var ke kafka.Error
	if errors.As(err, &ke) {
		return int(ke.Code())
	}
	return -1
}

// produce sends recs and returns each record's delivery error.
func produce(topic string, recs []rec, kv ...any) ([]error, error) {
	p, err := kafka.NewProducer(conf(append([]any{"linger.ms", 5, "message.timeout.ms", 20000}, kv...)...))
	if err != nil {
		return nil, err
	}
	defer p.Close()
	dc := make(chan kafka.Event, len(recs))
	for i, r := range recs {
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: r.key, Value: r.value, Headers: r.headers, Opaque: i}
		if r.partition >= 0 {
			m.TopicPartition.Partition = r.partition
		}
		if r.ts != 0 {
			m.Timestamp = time.UnixMilli(r.ts)
		}
		if err := p.Produce(m, dc); err != nil {
			return nil, err
		}
	}
	errs := make([]error, len(recs))
	for range recs {
		select {
		case ev := <-dc:
			m := ev.(*kafka.Message)
			errs[m.Opaque.(int)] = m.TopicPartition.Error
		case <-time.After(30 * time.Second):
			return nil, errors.New("no delivery report within 30 s")
		}
	}
	return errs, nil
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func newConsumer(kv ...any) (*kafka.Consumer, error) {
	return kafka.NewConsumer(conf(append([]any{"group.id", "sluice-compat-ckg-unused", "enable.auto.commit", false,
		"auto.offset.reset", "earliest", "fetch.wait.max.ms", 200}, kv...)...))
}

// consume reads n records of one partition from offset start (a logical
// offset such as kafka.OffsetBeginning, or a real one); kv is more
// consumer configuration.
func consume(topic string, partition int32, start kafka.Offset, n int, onRunning func() error, kv ...any) ([]rec, error) {
	c, err := newConsumer(kv...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: partition, Offset: start}}); err != nil {
		return nil, err
	}
	if onRunning != nil {
		// librdkafka has no position before the first record: let it
		// resolve the start offset and begin fetching first.
		end := time.Now().Add(2 * time.Second)
		for time.Now().Before(end) {
			c.Poll(100)
		}
		if err := onRunning(); err != nil {
			return nil, err
		}
	}
	var out []rec
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		m, err := c.ReadMessage(500 * time.Millisecond)
		if err != nil {
			if err.(kafka.Error).IsTimeout() {
				continue
			}
			return out, err
		}
		out = append(out, rec{key: m.Key, value: m.Value, headers: m.Headers, ts: m.Timestamp.UnixMilli(), offset: int64(m.TopicPartition.Offset)})
	}
	return out, nil
}

func offsetForTime(topic string, partition int32, ts int64) (int64, error) {
	c, err := newConsumer()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	got, err := c.OffsetsForTimes([]kafka.TopicPartition{{Topic: &topic, Partition: partition, Offset: kafka.Offset(ts)}}, 10000)
	if err != nil {
		return 0, err
	}
	if got[0].Error != nil {
		return 0, got[0].Error
	}
	return int64(got[0].Offset), nil
}

func values(topic string, n int) []rec {
	out := make([]rec, n)
	for i := range out {
		out[i] = rec{key: []byte(fmt.Sprintf("k%d", i)), value: []byte(fmt.Sprintf("%s-%d", topic, i)), partition: -1}
	}
	return out
}

func adminClient() (*kafka.AdminClient, error) { return kafka.NewAdminClient(conf()) }

func topicPartitions(adm *kafka.AdminClient, topic string) (int, kafka.Error, error) {
	md, err := adm.GetMetadata(&topic, false, 10000)
	if err != nil {
		return 0, kafka.Error{}, err
	}
	tm := md.Topics[topic]
	return len(tm.Partitions), tm.Error, nil
}

func basic(p string) {
	adm, err := adminClient()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer adm.Close()
	run("bootstrap-metadata", func() (string, error) {
		md, err := adm.GetMetadata(nil, true, 10000)
		if err != nil {
			return "", err
		}
		if len(md.Brokers) != 1 {
			return "", fmt.Errorf("brokers=%d, want 1", len(md.Brokers))
		}
		if n := len(md.Topics[p+"-meta"].Partitions); n != 3 {
			return "", fmt.Errorf("%s-meta has %d partitions, want 3", p, n)
		}
		return "", nil
	})
	acks := func(a string, idem bool, topic string) func() (string, error) {
		return func() (string, error) {
			errs, err := produce(topic, values(topic, 100), "acks", a, "enable.idempotence", idem)
			if err != nil {
				return "", err
			}
			return "", firstErr(errs)
		}
	}
	run("produce-acks0", acks("0", false, p+"-acks0"))
	run("produce-acks1", acks("1", false, p+"-acks1"))
	run("produce-acksall", acks("all", false, p+"-acksall"))
	run("produce-idempotent", acks("all", true, p+"-idem"))

	run("keys-nulls-headers-timestamps", func() (string, error) {
		t := p + "-fields"
		want := []rec{
			{key: []byte("k1"), value: []byte("v1"), headers: []kafka.Header{{Key: "h1", Value: []byte("a")}, {Key: "h2", Value: []byte("b")}}, ts: tsBase, partition: -1},
			{key: []byte("k2"), value: nil, ts: tsBase + 1, partition: -1},
			{key: nil, value: []byte("v3"), headers: []kafka.Header{{Key: "h3", Value: []byte{}}}, ts: tsBase + 2, partition: -1},
		}
		errs, err := produce(t, want)
		if err == nil {
			err = firstErr(errs)
		}
		if err != nil {
			return "", err
		}
		got, err := consume(t, 0, kafka.OffsetBeginning, 3, nil)
		if err != nil {
			return "", err
		}
		if len(got) != 3 {
			return "", fmt.Errorf("read %d records, want 3", len(got))
		}
		for i, w := range want {
			g := got[i]
			if !bytes.Equal(g.key, w.key) || !bytes.Equal(g.value, w.value) || (g.value == nil) != (w.value == nil) ||
				(g.key == nil) != (w.key == nil) || g.ts != w.ts || hdrs(g.headers) != hdrs(w.headers) {
				return "", fmt.Errorf("record %d: key %q value %q ts %d headers %s, want key %q value %q ts %d headers %s",
					i, g.key, g.value, g.ts, hdrs(g.headers), w.key, w.value, w.ts, hdrs(w.headers))
			}
		}
		return "", nil
	})

	big := p + "-big"
	run("near-max-message-bytes", func() (string, error) {
		v := bytes.Repeat([]byte("n"), 99_000)
		errs, err := produce(big, []rec{{key: []byte("near"), value: v, partition: -1}})
		if err == nil {
			err = firstErr(errs)
		}
		if err != nil {
			return "", err
		}
		got, err := consume(big, 0, kafka.OffsetBeginning, 1, nil)
		if err != nil {
			return "", err
		}
		if len(got) != 1 || !bytes.Equal(got[0].value, v) {
			return "", fmt.Errorf("did not read the record back (%d records)", len(got))
		}
		return "", nil
	})
	run("error-record-too-large", func() (string, error) {
		errs, err := produce(big, []rec{{key: []byte("over"), value: bytes.Repeat([]byte("o"), 101_000), partition: -1}})
		if err != nil {
			return "", err
		}
		if c := code(errs[0]); c != 10 {
			return "", fmt.Errorf("101,000 bytes over max.message.bytes=100000: %v (code %d), want 10 (MESSAGE_TOO_LARGE)", errs[0], c)
		}
		return "", nil
	})

	cons := p + "-cons"
	run("consume-earliest", func() (string, error) {
		got, err := consume(cons, 0, kafka.OffsetBeginning, 10, nil)
		if err != nil {
			return "", err
		}
		var vals []string
		for _, r := range got {
			vals = append(vals, string(r.value))
		}
		if want := "c-0 c-1 c-2 c-3 c-4 c-5 c-6 c-7 c-8 c-9"; strings.Join(vals, " ") != want {
			return "", fmt.Errorf("read %v", vals)
		}
		return "", nil
	})
	run("consume-latest", func() (string, error) {
		got, err := consume(cons, 0, kafka.OffsetEnd, 1, func() error {
			errs, err := produce(cons, []rec{{value: []byte("after-latest"), ts: tsBase + 100_000, partition: -1}})
			if err == nil {
				err = firstErr(errs)
			}
			return err
		})
		if err != nil {
			return "", err
		}
		if len(got) != 1 || string(got[0].value) != "after-latest" || got[0].offset != 10 {
			return "", fmt.Errorf("read %d records (%v)", len(got), got)
		}
		return "", nil
	})
	run("consume-timestamp", func() (string, error) {
		off, err := offsetForTime(cons, 0, tsBase+4500)
		if err != nil {
			return "", err
		}
		if off != 5 {
			return "", fmt.Errorf("offset for timestamp base+4500: %d, want 5", off)
		}
		got, err := consume(cons, 0, kafka.Offset(off), 3, nil)
		if err != nil {
			return "", err
		}
		if len(got) < 3 || string(got[0].value) != "c-5" || string(got[2].value) != "c-7" {
			return "", fmt.Errorf("read %d records", len(got))
		}
		return "", nil
	})
	run("error-unknown-topic", func() (string, error) {
		_, terr, err := topicPartitions(adm, p+"-no-such-topic")
		if err != nil {
			if c := code(err); c == 3 {
				return "", nil
			}
			return "", err
		}
		if int(terr.Code()) != 3 {
			return "", fmt.Errorf("metadata for a missing topic: error %v (%d), want 3 (UNKNOWN_TOPIC_OR_PARTITION)", terr, terr.Code())
		}
		return "", nil
	})
	run("txn-commit-abort", func() (string, error) { return "", transactions(p + "-txn") })
	run("txn-offsets", func() (string, error) { return "", txnOffsets(p) })
	run("txn-fencing", func() (string, error) { return txnFencing(p) })
}

// produceWait produces values to partition 0 of topic with p and waits for
// every delivery report.
func produceWait(ctx context.Context, p *kafka.Producer, topic string, values ...string) error {
	dc := make(chan kafka.Event, len(values))
	for _, v := range values {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte(v)}, dc); err != nil {
			return err
		}
	}
	for range values {
		select {
		case ev := <-dc:
			if err := ev.(*kafka.Message).TopicPartition.Error; err != nil {
				return fmt.Errorf("delivery: %w", err)
			}
		case <-ctx.Done():
			return errors.New("no delivery report in time")
		}
	}
	return nil
}

// newTxnProducer is a transactional producer of id, initialized.
func newTxnProducer(ctx context.Context, id string) (*kafka.Producer, error) {
	p, err := kafka.NewProducer(conf("transactional.id", id, "message.timeout.ms", 20000))
	if err != nil {
		return nil, err
	}
	if err := p.InitTransactions(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("InitTransactions: %w", err)
	}
	return p, nil
}

// endTxn commits (commit) or aborts transaction i of p.
func endTxn(ctx context.Context, p *kafka.Producer, i int, commit bool) error {
	var err error
	if commit {
		err = p.CommitTransaction(ctx)
	} else {
		err = p.AbortTransaction(ctx)
	}
	if err != nil {
		return fmt.Errorf("ending transaction %d (commit %v): %w", i, commit, err)
	}
	return nil
}

// readCommitted reads n values of partition 0 of topic from the start
// with isolation.level=read_committed.
func readCommitted(topic string, n int) ([]string, error) {
	recs, err := consume(topic, 0, kafka.OffsetBeginning, n, nil, "isolation.level", "read_committed")
	if err != nil {
		return nil, err
	}
	var vals []string
	for _, r := range recs {
		vals = append(vals, string(r.value))
	}
	return vals, nil
}

// txnOffsets is txn-offsets (the Go test's prepareTxn): a consumer of
// group p-txo-g (assigned partition 0 of p-txo-in, not subscribed, so its
// GetConsumerGroupMetadata has generation -1) reads i-0..i-9; a
// transaction writes o-0..o-4 to p-txo-out, sends offset 5 with
// SendOffsetsToTransaction and commits, the next o-5..o-9 with offset 10
// and aborts. The consumer's Committed offset is then 5 and a
// read_committed consumer reads o-0..o-4.
func txnOffsets(p string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, out := p+"-txo-in", p+"-txo-out"
	c, err := newConsumer("group.id", p+"-txo-g", "isolation.level", "read_committed")
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Assign([]kafka.TopicPartition{{Topic: &in, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		return err
	}
	var input []*kafka.Message
	deadline := time.Now().Add(20 * time.Second)
	for len(input) < 10 && time.Now().Before(deadline) {
		m, err := c.ReadMessage(500 * time.Millisecond)
		if err != nil {
			if err.(kafka.Error).IsTimeout() {
				continue
			}
			return err
		}
		input = append(input, m)
	}
	if len(input) != 10 {
		return fmt.Errorf("read %d of 10 records of %s in 20 s", len(input), in)
	}
	pr, err := newTxnProducer(ctx, p+"-txo-tid")
	if err != nil {
		return err
	}
	defer pr.Close()
	for i, commit := range []bool{true, false} {
		batch := input[5*i : 5*i+5]
		if err := pr.BeginTransaction(); err != nil {
			return fmt.Errorf("BeginTransaction: %w", err)
		}
		var vals []string
		for _, m := range batch {
			vals = append(vals, "o-"+strings.TrimPrefix(string(m.Value), "i-"))
		}
		if err := produceWait(ctx, pr, out, vals...); err != nil {
			return fmt.Errorf("transaction %d: %w", i, err)
		}
		md, err := c.GetConsumerGroupMetadata()
		if err != nil {
			return fmt.Errorf("GetConsumerGroupMetadata: %w", err)
		}
		next := batch[len(batch)-1].TopicPartition.Offset + 1
		if err := pr.SendOffsetsToTransaction(ctx, []kafka.TopicPartition{{Topic: &in, Partition: 0, Offset: next}}, md); err != nil {
			return fmt.Errorf("transaction %d: SendOffsetsToTransaction: %w", i, err)
		}
		if err := endTxn(ctx, pr, i, commit); err != nil {
			return err
		}
	}
	got, err := c.Committed([]kafka.TopicPartition{{Topic: &in, Partition: 0}}, 20000)
	if err != nil {
		return fmt.Errorf("Committed: %w", err)
	}
	if len(got) != 1 || got[0].Error != nil || got[0].Offset != 5 {
		return fmt.Errorf("committed offset of %s/0: %v, want 5", in, got)
	}
	vals, err := readCommitted(out, 5)
	if err != nil {
		return err
	}
	if want := []string{"o-0", "o-1", "o-2", "o-3", "o-4"}; !slices.Equal(vals, want) {
		return fmt.Errorf("read_committed read %q, want %q", vals, want)
	}
	return nil
}

// txnFencing is txn-fencing (prepareTxn): producer A (p-txf-tid) writes
// f-a-0 in an open transaction; B initializes with the same transactional
// id, fencing A; A's CommitTransaction fails with librdkafka's fatal
// fenced error (ERR__FENCED, from PRODUCER_FENCED); B writes f-b-0 and
// commits; read_committed reads f-b-0 only.
func txnFencing(p string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := p + "-txf"
	a, err := newTxnProducer(ctx, p+"-txf-tid")
	if err != nil {
		return "", fmt.Errorf("A: %w", err)
	}
	defer a.Close()
	if err := a.BeginTransaction(); err != nil {
		return "", err
	}
	if err := produceWait(ctx, a, topic, "f-a-0"); err != nil {
		return "", fmt.Errorf("A: %w", err)
	}
	b, err := newTxnProducer(ctx, p+"-txf-tid")
	if err != nil {
		return "", fmt.Errorf("B: %w", err)
	}
	defer b.Close()
	err = a.CommitTransaction(ctx)
	var ke kafka.Error
	if !errors.As(err, &ke) || ke.Code() != kafka.ErrFenced || !ke.IsFatal() {
		return "", fmt.Errorf("A's commit after B initialized: %v, want the fatal %v", err, kafka.ErrFenced)
	}
	detail := fmt.Sprintf("A's commit: %v (%v, fatal)", ke, ke.Code())
	if err := b.BeginTransaction(); err != nil {
		return "", err
	}
	if err := produceWait(ctx, b, topic, "f-b-0"); err != nil {
		return "", fmt.Errorf("B: %w", err)
	}
	if err := b.CommitTransaction(ctx); err != nil {
		return "", fmt.Errorf("B commit: %w", err)
	}
	vals, err := readCommitted(topic, 1)
	if err != nil {
		return "", err
	}
	if !slices.Equal(vals, []string{"f-b-0"}) {
		return "", fmt.Errorf("read_committed read %q, want f-b-0", vals)
	}
	return detail, nil
}

// transactions is txn-commit-abort on topic (1 partition, created by the
// Go test): a transaction of c-0..c-4 committed, one of a-0..a-4 aborted
// (flushed first, so that its records reach the log before the ABORT
// marker), one of c-5..c-9 committed; a read_committed consumer reads
// exactly c-0..c-9.
func transactions(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := newTxnProducer(ctx, topic+"-tid")
	if err != nil {
		return err
	}
	defer p.Close()
	var want []string
	for i, commit := range []bool{true, false, true} {
		if err := p.BeginTransaction(); err != nil {
			return fmt.Errorf("BeginTransaction: %w", err)
		}
		var vals []string
		for j := range 5 {
			v := fmt.Sprintf("c-%d", 5*(i/2)+j)
			if !commit {
				v = fmt.Sprintf("a-%d", j)
			} else {
				want = append(want, v)
			}
			vals = append(vals, v)
		}
		if err := produceWait(ctx, p, topic, vals...); err != nil {
			return err
		}
		if err := endTxn(ctx, p, i, commit); err != nil {
			return err
		}
	}
	vals, err := readCommitted(topic, len(want))
	if err != nil {
		return err
	}
	if !slices.Equal(vals, want) {
		return fmt.Errorf("read_committed read %q, want c-0..c-9", vals)
	}
	return nil
}

func hdrs(hs []kafka.Header) string {
	var parts []string
	for _, h := range hs {
		parts = append(parts, h.Key+"="+string(h.Value))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func adminGroup(p string) {
	adm, err := adminClient()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer adm.Close()
	t := p + "-adm"
	ctx := context.Background()
	create := func(name string, parts int, cfg map[string]string) (int, error) {
		res, err := adm.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: name, NumPartitions: parts, ReplicationFactor: 1, Config: cfg}})
		if err != nil {
			return -1, err
		}
		return int(res[0].Error.Code()), nil
	}
	describe := func() (map[string]string, error) {
		res, err := adm.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: t}})
		if err != nil {
			return nil, err
		}
		if res[0].Error.Code() != kafka.ErrNoError {
			return nil, res[0].Error
		}
		out := map[string]string{}
		for k, v := range res[0].Config {
			out[k] = v.Value
		}
		return out, nil
	}
	waitParts := func(want int) error {
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, _, err := topicPartitions(adm, t)
			if err == nil && n == want {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d partitions (%v), want %d", n, err, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	run("admin-create", func() (string, error) {
		c, err := create(t, 2, map[string]string{"retention.ms": "3600000"})
		if err != nil || c != 0 {
			return "", fmt.Errorf("create: %v code %d", err, c)
		}
		if err := waitParts(2); err != nil {
			return "", err
		}
		if c, err := create(t, 2, nil); err != nil || c != 36 {
			return "", fmt.Errorf("create again: %v code %d, want 36 (TOPIC_ALREADY_EXISTS)", err, c)
		}
		return "", nil
	})
	run("admin-describe-configs", func() (string, error) {
		cfg, err := describe()
		if err != nil {
			return "", err
		}
		if cfg["retention.ms"] != "3600000" {
			return "", fmt.Errorf("retention.ms=%q", cfg["retention.ms"])
		}
		if _, ok := cfg["cleanup.policy"]; !ok {
			return "", errors.New("no cleanup.policy")
		}
		return "", nil
	})
	run("admin-alter-configs", func() (string, error) {
		res, err := adm.IncrementalAlterConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: t,
			Config: []kafka.ConfigEntry{{Name: "retention.ms", Value: "7200000", IncrementalOperation: kafka.AlterConfigOpTypeSet}}}})
		if err != nil {
			return "", err
		}
		if res[0].Error.Code() != kafka.ErrNoError {
			return "", res[0].Error
		}
		cfg, err := describe()
		if err != nil {
			return "", err
		}
		if cfg["retention.ms"] != "7200000" {
			return "", fmt.Errorf("after alter retention.ms=%q", cfg["retention.ms"])
		}
		return "", nil
	})
	run("admin-create-partitions", func() (string, error) {
		res, err := adm.CreatePartitions(ctx, []kafka.PartitionsSpecification{{Topic: t, IncreaseTo: 4}})
		if err != nil {
			return "", err
		}
		if res[0].Error.Code() != kafka.ErrNoError {
			return "", res[0].Error
		}
		return "", waitParts(4)
	})
	run("admin-delete", func() (string, error) {
		res, err := adm.DeleteTopics(ctx, []string{t})
		if err != nil {
			return "", err
		}
		if res[0].Error.Code() != kafka.ErrNoError {
			return "", res[0].Error
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			md, err := adm.GetMetadata(nil, true, 10000)
			if err == nil {
				if _, ok := md.Topics[t]; !ok {
					return "", nil
				}
			}
			if time.Now().After(deadline) {
				return "", errors.New("topic still listed after delete")
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	run("error-bad-config", func() (string, error) {
		c, err := create(p+"-bad", 1, map[string]string{"retention.ms": "soon"})
		if err != nil {
			return "", err
		}
		if c != 40 {
			return "", fmt.Errorf("create with retention.ms=soon: code %d, want 40 (INVALID_CONFIG)", c)
		}
		return "", nil
	})
}

type member struct{ c *kafka.Consumer }

func newMember(group, topic string) (*member, error) {
	c, err := newConsumer("group.id", group, "session.timeout.ms", 10000, "heartbeat.interval.ms", 500,
		"partition.assignment.strategy", "range")
	if err != nil {
		return nil, err
	}
	return &member{c}, c.Subscribe(topic, nil)
}

func (m *member) poll(ms int) []rec {
	ev := m.c.Poll(ms)
	if msg, ok := ev.(*kafka.Message); ok && msg.TopicPartition.Error == nil {
		return []rec{{key: msg.Key, value: msg.Value}}
	}
	return nil
}

func (m *member) assignment() []int32 {
	tps, _ := m.c.Assignment()
	var out []int32
	for _, tp := range tps {
		out = append(out, tp.Partition)
	}
	slices.Sort(out)
	return out
}

func groups(p string) {
	t := p + "-grp"
	run("group-commit-resume", func() (string, error) {
		g := p + "-g1"
		m, err := newMember(g, t)
		if err != nil {
			return "", err
		}
		var got []rec
		deadline := time.Now().Add(30 * time.Second)
		for len(got) < 40 && time.Now().Before(deadline) {
			got = append(got, m.poll(500)...)
		}
		if len(got) != 40 {
			m.c.Close()
			return "", fmt.Errorf("first member read %d of 40", len(got))
		}
		if _, err := m.c.Commit(); err != nil {
			m.c.Close()
			return "", fmt.Errorf("commit: %v", err)
		}
		m.c.Close()
		var after []rec
		for i := 0; i < 4; i++ {
			after = append(after, rec{key: []byte("k"), value: []byte(fmt.Sprintf("after-%d", i)), partition: int32(i)})
		}
		if errs, err := produce(t, after); err != nil || firstErr(errs) != nil {
			return "", fmt.Errorf("produce: %v %v", err, firstErr(errs))
		}
		if m, err = newMember(g, t); err != nil {
			return "", err
		}
		defer m.c.Close()
		got = nil
		deadline = time.Now().Add(30 * time.Second)
		for len(got) < 4 && time.Now().Before(deadline) {
			got = append(got, m.poll(500)...)
		}
		end := time.Now().Add(1500 * time.Millisecond)
		for time.Now().Before(end) {
			got = append(got, m.poll(200)...)
		}
		var vals []string
		for _, r := range got {
			vals = append(vals, string(r.value))
		}
		slices.Sort(vals)
		if strings.Join(vals, " ") != "after-0 after-1 after-2 after-3" {
			return "", fmt.Errorf("resumed member read %v", vals)
		}
		return "", nil
	})
	run("group-rebalance", func() (string, error) {
		g := p + "-g2"
		all := func(x []int32) bool { return slices.Equal(x, []int32{0, 1, 2, 3}) }
		a, err := newMember(g, t)
		if err != nil {
			return "", err
		}
		defer a.c.Close()
		deadline := time.Now().Add(30 * time.Second)
		for !all(a.assignment()) && time.Now().Before(deadline) {
			a.poll(200)
		}
		if !all(a.assignment()) {
			return "", fmt.Errorf("single member holds %v", a.assignment())
		}
		b, err := newMember(g, t)
		if err != nil {
			return "", err
		}
		split := func() bool {
			aa, bb := a.assignment(), b.assignment()
			u := append(slices.Clone(aa), bb...)
			slices.Sort(u)
			return len(aa) == 2 && len(bb) == 2 && all(u)
		}
		deadline = time.Now().Add(40 * time.Second)
		for !split() && time.Now().Before(deadline) {
			a.poll(100)
			b.poll(100)
		}
		if !split() {
			b.c.Close()
			return "", fmt.Errorf("after join: %v and %v", a.assignment(), b.assignment())
		}
		b.c.Close()
		deadline = time.Now().Add(30 * time.Second)
		for !all(a.assignment()) && time.Now().Before(deadline) {
			a.poll(200)
		}
		if !all(a.assignment()) {
			return "", fmt.Errorf("after leave: %v", a.assignment())
		}
		return "", nil
	})
}

func writeCodecs(p string) {
	for _, codec := range codecs {
		run("write-"+codec, func() (string, error) {
			var recs []rec
			for i := 0; i < codecRecords; i++ {
				recs = append(recs, rec{key: []byte(fmt.Sprintf("k-%d", i)),
					value:   []byte(fmt.Sprintf("%s/%s/%d/%s", client, codec, i, strings.Repeat("abcdefghij", 20))),
					headers: []kafka.Header{{Key: "h", Value: []byte(codec)}}, partition: -1})
			}
			errs, err := produce(p+"-"+codec, recs, "compression.type", codec, "linger.ms", 50)
			if err != nil {
				return "", err
			}
			return "", firstErr(errs)
		})
	}
}

func readCodecs(topics []string) {
	for _, t := range topics {
		run("read "+t, func() (string, error) {
			got, err := consume(t, 0, kafka.OffsetBeginning, codecRecords, nil)
			if err != nil {
				return "", err
			}
			if len(got) != codecRecords {
				return "", fmt.Errorf("read %d of %d", len(got), codecRecords)
			}
			h := sha256.New()
			for _, r := range got {
				var hs []string
				for _, hd := range r.headers {
					hs = append(hs, hd.Key+"="+string(hd.Value))
				}
				fmt.Fprintf(h, "%s\t%s\t%s\n", r.key, r.value, strings.Join(hs, ","))
			}
			return hex.EncodeToString(h.Sum(nil)), nil
		})
	}
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: ckg GROUP BOOTSTRAP PREFIX [ARGS...]")
		os.Exit(2)
	}
	group, prefix := os.Args[1], os.Args[3]
	bootstrap = os.Args[2]
	_, v := kafka.LibraryVersion()
	fmt.Printf("VERSION confluent-kafka-go v2.11.1 (librdkafka %s)\n", v)
	switch group {
	case "basic":
		basic(prefix)
	case "admin":
		adminGroup(prefix)
	case "group":
		groups(prefix)
	case "write-codecs":
		writeCodecs(prefix)
	case "read-codecs":
		readCodecs(os.Args[4:])
	case "secure":
		for _, a := range os.Args[4:] {
			k, v, _ := strings.Cut(a, "=")
			security = append(security, k, v)
		}
		secure(prefix)
	default:
		fmt.Fprintln(os.Stderr, "unknown group", group)
		os.Exit(2)
	}
}

// secure produces 20 records to topic's partition 0 (acks=all) and reads
// them back from the start, over whatever listener the security settings
// reach.
func secure(topic string) {
	run("roundtrip", func() (string, error) {
		var recs []rec
		for i := range 20 {
			recs = append(recs, rec{value: []byte(fmt.Sprint("v", i)), partition: 0})
		}
		errs, err := produce(topic, recs, "acks", "all")
		if err == nil {
			err = firstErr(errs)
		}
		if err != nil {
			return "", fmt.Errorf("produce: %w", err)
		}
		got, err := consume(topic, 0, kafka.OffsetBeginning, len(recs), nil)
		if err != nil {
			return "", fmt.Errorf("consume: %w", err)
		}
		for i, r := range recs {
			if i >= len(got) || !bytes.Equal(got[i].value, r.value) {
				return "", fmt.Errorf("read back %d of %d records", len(got), len(recs))
			}
		}
		return fmt.Sprintf("%d records", len(got)), nil
	})
}
