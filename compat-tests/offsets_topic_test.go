package compat

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// offsetsRecord is one decoded __consumer_offsets offset-commit record.
type offsetsRecord struct {
	partition, offset int64
	key               kmsg.OffsetCommitKey
	value             kmsg.OffsetCommitValue
}

// readOffsetsTopic consumes __consumer_offsets from the start with a kgo
// consumer, decoding offset commits with kmsg, until done says it has seen
// what it waits for (or ctx ends).
func readOffsetsTopic(ctx context.Context, t *testing.T, addr string, done func([]offsetsRecord) bool) []offsetsRecord {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics("__consumer_offsets"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
	var recs []offsetsRecord
	for !done(recs) {
		if ctx.Err() != nil {
			t.Fatalf("__consumer_offsets: gave up after %d records: %+v", len(recs), recs)
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Fatalf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			var k kmsg.OffsetCommitKey
			if err := k.ReadFrom(r.Key); err != nil {
				t.Fatalf("offset %d of partition %d: key does not decode: %v", r.Offset, r.Partition, err)
			}
			if k.Version != 1 {
				t.Fatalf("key version %d, want 1 (OffsetCommitKey)", k.Version)
			}
			var v kmsg.OffsetCommitValue
			if err := v.ReadFrom(r.Value); err != nil {
				t.Fatalf("offset %d of partition %d: value does not decode: %v", r.Offset, r.Partition, err)
			}
			recs = append(recs, offsetsRecord{partition: int64(r.Partition), offset: r.Offset, key: k, value: v})
		})
	}
	return recs
}

// latest finds the last record for group/topic/partition.
func latest(recs []offsetsRecord, group, topic string, p int32) (offsetsRecord, bool) {
	var out offsetsRecord
	found := false
	for _, r := range recs {
		if r.key.Group == group && r.key.Topic == topic && r.key.Partition == p {
			out, found = r, true
		}
	}
	return out, found
}

// TestConsumerOffsetsTopic: __consumer_offsets as lag exporters read it.
// Offsets committed by one client appear, in Kafka's OffsetCommitKey v1 /
// OffsetCommitValue v3 format, in the partition Kafka's hash of the group
// id picks, to a kgo consumer; the topic is listed internal with 50
// partitions; producing to it, creating or deleting it is refused; its
// offsets survive a restart of the broker.
func TestConsumerOffsetsTopic(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := harness.Context(t, 45*time.Second)
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, "orders", 3, nil)

	// A group lookup creates the topic, as in Kafka.
	for _, c := range adm.FindGroupCoordinators(ctx, "my-group") {
		if c.Err != nil {
			t.Fatalf("FindCoordinator: %v", c.Err)
		}
	}
	md := freshTopics(ctx, t, b.KafkaAddr)
	mt, ok := md["__consumer_offsets"]
	if !ok {
		t.Fatal("Metadata does not list __consumer_offsets after a FindCoordinator")
	}
	if !mt.IsInternal || len(mt.Partitions) != 50 || mt.ErrorCode != 0 {
		t.Fatalf("__consumer_offsets: internal %v, %d partitions, error %d; want internal, 50, 0", mt.IsInternal, len(mt.Partitions), mt.ErrorCode)
	}
	for _, p := range mt.Partitions {
		if p.Leader < 0 || p.ErrorCode != 0 {
			t.Fatalf("partition %d: leader %d, error %d", p.Partition, p.Leader, p.ErrorCode)
		}
	}

	// Another client commits; Kafka puts "my-group" in partition
	// abs("my-group".hashCode()) % 50 = 12 (hashCode -1906497762).
	commit := func(offs map[int32]int64) {
		t.Helper()
		os := kadm.Offsets{}
		for p, o := range offs {
			os.Add(kadm.Offset{Topic: "orders", Partition: p, At: o, LeaderEpoch: -1, Metadata: "m"})
		}
		resp, err := adm.CommitOffsets(ctx, "my-group", os)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	commit(map[int32]int64{0: 10, 1: 20, 2: 30})
	recs := readOffsetsTopic(ctx, t, b.KafkaAddr, func(rs []offsetsRecord) bool {
		_, ok := latest(rs, "my-group", "orders", 2)
		return ok
	})
	for p, want := range map[int32]int64{0: 10, 1: 20, 2: 30} {
		r, ok := latest(recs, "my-group", "orders", p)
		if !ok {
			t.Fatalf("no record for my-group orders/%d in %+v", p, recs)
		}
		if r.value.Offset != want || r.value.Metadata != "m" || r.value.Version != 3 || r.value.CommitTimestamp <= 0 {
			t.Fatalf("orders/%d: value %+v, want offset %d metadata m, version 3, a commit time", p, r.value, want)
		}
		if r.partition != 12 {
			t.Fatalf("my-group's record in partition %d, want 12 (Kafka's abs(hashCode) %% 50)", r.partition)
		}
	}

	// A later commit shows up as a newer record of the same key.
	commit(map[int32]int64{1: 25})
	recs = readOffsetsTopic(ctx, t, b.KafkaAddr, func(rs []offsetsRecord) bool {
		r, ok := latest(rs, "my-group", "orders", 1)
		return ok && r.value.Offset == 25
	})
	before := map[int64]kmsg.OffsetCommitValue{}
	for _, r := range recs {
		before[r.offset] = r.value
	}

	// Read-only: produce refused as Kafka refuses appends to an internal
	// topic; create and delete refused.
	pcl := newClient(t, b.KafkaAddr, kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	err := pcl.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Partition: 0, Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
	// (kadm returns the topic's error as the call's error too.)
	if cr, _ := adm.CreateTopic(ctx, 1, 1, nil, "__consumer_offsets"); !errors.Is(cr.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("create __consumer_offsets: %v, want TOPIC_ALREADY_EXISTS", cr.Err)
	}
	if dr, _ := adm.DeleteTopic(ctx, "__consumer_offsets"); !errors.Is(dr.Err, kerr.TopicDeletionDisabled) {
		t.Fatalf("delete __consumer_offsets: %v, want TOPIC_DELETION_DISABLED", dr.Err)
	}

	// Offsets stay the same across a restart; new commits follow them.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	commit(map[int32]int64{0: 11})
	recs = readOffsetsTopic(ctx, t, b.KafkaAddr, func(rs []offsetsRecord) bool {
		r, ok := latest(rs, "my-group", "orders", 0)
		return ok && r.value.Offset == 11
	})
	after := map[int64]kmsg.OffsetCommitValue{}
	for _, r := range recs {
		after[r.offset] = r.value
	}
	for o, v := range before {
		if w, ok := after[o]; !ok || w.Offset != v.Offset || w.CommitTimestamp != v.CommitTimestamp {
			t.Fatalf("after a restart offset %d holds %+v (ok %v), before %+v", o, w, ok, v)
		}
	}
	if len(after) != len(before)+1 {
		t.Fatalf("after a restart and one commit: %d records, before %d", len(after), len(before))
	}
}

// TestConsumerOffsetsTopicCluster: in a cluster of separate processes
// (1 meta node, 1 write broker, 2 read brokers) offsets committed through
// the read view are read from __consumer_offsets through the read view and
// through the write view: every broker materialises the topic, and each
// view names one leader per partition.
func TestConsumerOffsetsTopicCluster(t *testing.T) {
	t.Parallel()
	c := harness.StartCluster(t, harness.ClusterOptions{Meta: 1, Write: 1, Read: 2})
	ctx := harness.Context(t, time.Minute)
	writeAddr := harness.Addrs(harness.ViewWrite, c.Writers)[0]
	readAddrs := harness.Addrs(harness.ViewRead, c.Readers)
	// Both read brokers registered.
	for {
		if ctx.Err() != nil {
			t.Fatal("the read view never listed both read brokers")
		}
		cl := newClient(t, readAddrs[0])
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		cl.Close()
		if err == nil && len(resp.Brokers) == 2 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	createTopic(ctx, t, newAdmin(t, writeAddr), "corders", 2, nil)
	adm := newAdmin(t, readAddrs[0])
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "corders", Partition: 0, At: 5, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "corders", Partition: 1, At: 6, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "my-group", os); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	for view, addr := range map[string]string{"read": readAddrs[1], "write": writeAddr} {
		recs := readOffsetsTopic(ctx, t, addr, func(rs []offsetsRecord) bool {
			_, ok0 := latest(rs, "my-group", "corders", 0)
			_, ok1 := latest(rs, "my-group", "corders", 1)
			return ok0 && ok1
		})
		for p, want := range map[int32]int64{0: 5, 1: 6} {
			if r, _ := latest(recs, "my-group", "corders", p); r.value.Offset != want || r.partition != 12 {
				t.Fatalf("%s view: corders/%d: offset %d in partition %d, want %d in 12", view, p, r.value.Offset, r.partition, want)
			}
		}
	}
}

// TestConsumerOffsetsTopicTransactional: offsets a transaction commits
// (TxnOffsetCommit, then EndTxn commit) appear in __consumer_offsets like
// plain commits, also once the view has read past earlier commits.
func TestConsumerOffsetsTopicTransactional(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := harness.Context(t, 60*time.Second)
	adm := newAdmin(t, b.KafkaAddr)
	const topic, group, txid = "txorders", "txn-view-group", "txn-view"
	createTopic(ctx, t, adm, topic, 1, nil)

	// A plain commit first, read through the view: it has polled past it.
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, group, os); err != nil || resp.Error() != nil {
		t.Fatalf("plain commit: %v / %v", err, resp.Error())
	}
	readOffsetsTopic(ctx, t, b.KafkaAddr, func(rs []offsetsRecord) bool {
		_, ok := latest(rs, group, topic, 0)
		return ok
	})

	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(txid),
		kgo.TransactionTimeout(30*time.Second))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("BeginTransaction: %v", err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("in-txn")).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatalf("ProducerID: %v", err)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = txid, pid, epoch, group
	if aor, err := ao.RequestWith(ctx, cl); err != nil || aor.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v / %v", err, kerr.ErrorForCode(aor.ErrorCode))
	}
	oc := kmsg.NewPtrTxnOffsetCommitRequest()
	oc.TransactionalID, oc.ProducerID, oc.ProducerEpoch, oc.Group = txid, pid, epoch, group
	oc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}}}
	ocr, err := oc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}
	if code := ocr.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("EndTransaction: %v", err)
	}
	if offs := groupOffsets(ctx, t, adm, group, topic); offs[0] != 5 {
		t.Fatalf("after the commit the group's offsets are %v, want 5", offs)
	}
	// The view polls about every second; 20 s is many polls.
	vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	readOffsetsTopic(vctx, t, b.KafkaAddr, func(rs []offsetsRecord) bool {
		r, ok := latest(rs, group, topic, 0)
		return ok && r.value.Offset == 5
	})
}
