package compat

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTransactionsFranzGoConsumeTransformProduce runs franz-go's
// GroupTransactSession (consume, transform, produce, with the consumed
// offsets in the transaction) against `sluice dev`: one round is
// aborted, the next committed. A read_committed consumer of the output
// must see exactly the committed round and nothing of the aborted one,
// while read_uncommitted shows both (so the aborted records were really
// written and the filtering is the broker's and the client's work with
// the aborted-transactions list); the group's committed offsets must be
// those of the committed round only.
func TestTransactionsFranzGoConsumeTransformProduce(t *testing.T) {
	t.Parallel()
	const in, out, group, n = "txn-in", "txn-out", "txn-ctp", 40
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, in, 2, nil)
	createTopic(ctx, t, adm, out, 2, nil)

	src := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range n {
		if err := src.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("v%02d", i))).FirstErr(); err != nil {
			t.Fatalf("producing input: %v", err)
		}
	}

	// round runs one transaction over every input record and ends it.
	round := func(tag string, commit kgo.TransactionEndTry) {
		t.Helper()
		sess, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(b.KafkaAddr), kgo.ClientID("sluice-compat-txn"),
			kgo.TransactionalID("ctp-"+group), kgo.TransactionTimeout(30*time.Second),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DefaultProduceTopic(out), kgo.FetchMaxWait(300*time.Millisecond),
		)
		if err != nil {
			t.Fatalf("%s: NewGroupTransactSession: %v", tag, err)
		}
		defer sess.Close()
		if err := sess.Begin(); err != nil {
			t.Fatalf("%s: Begin: %v", tag, err)
		}
		got := 0
		for got < n {
			if ctx.Err() != nil {
				t.Fatalf("%s: consumed %d of %d input records before the deadline", tag, got, n)
			}
			fs := sess.PollFetches(ctx)
			fs.EachError(func(topic string, p int32, err error) {
				if ctx.Err() == nil {
					t.Logf("%s: fetch %s/%d: %v", tag, topic, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				got++
				sess.Produce(ctx, kgo.StringRecord(tag+":"+string(r.Value)), func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("%s: transactional produce: %v", tag, err)
					}
				})
			})
		}
		// Every record written before the end, so an aborted round's
		// records are in the log (an abort drops buffered ones).
		if err := sess.Client().Flush(ctx); err != nil {
			t.Fatalf("%s: Flush: %v", tag, err)
		}
		committed, err := sess.End(ctx, commit)
		if err != nil {
			t.Fatalf("%s: End: %v", tag, err)
		}
		if want := commit == kgo.TryCommit; committed != want {
			t.Fatalf("%s: End committed=%v, want %v", tag, committed, want)
		}
	}
	round("aborted", kgo.TryAbort)
	if offs := groupOffsets(ctx, t, adm, group, in); len(offs) != 0 {
		t.Errorf("after the aborted round the group has committed offsets %v, want none", offs)
	}
	round("committed", kgo.TryCommit)
	if offs := groupOffsets(ctx, t, adm, group, in); offs[0]+offs[1] != n {
		t.Errorf("after the committed round the group's offsets are %v, want %d in total", offs, n)
	}
	// Transaction version 2: each session's InitProducerId and each
	// EndTxn bumped the epoch (0, 1 at the abort, 2, 3 at the commit);
	// with version 0 the ends bump nothing and it would be 1.
	if e := txnEpoch(ctx, t, adm, "ctp-"+group); e != 3 {
		t.Errorf("producer epoch after two sessions of one transaction each: %d, want 3 (EndTxn v5 bumps it)", e)
	}

	committed := readOutput(ctx, t, b.KafkaAddr, out, kgo.ReadCommitted(), n)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("committed:v%02d", i))
	}
	if strings.Join(committed, ",") != strings.Join(want, ",") {
		t.Errorf("read_committed saw %d records %v,\nwant exactly the %d committed ones", len(committed), committed, n)
	}
	all := readOutput(ctx, t, b.KafkaAddr, out, kgo.ReadUncommitted(), 2*n)
	aborted := 0
	for _, v := range all {
		if strings.HasPrefix(v, "aborted:") {
			aborted++
		}
	}
	if aborted != n {
		t.Errorf("read_uncommitted saw %d aborted records, want %d (they must be in the log)", aborted, n)
	}
}

// TestTransactionsOffsetsOnlyAtCommit drives a transactional franz-go
// producer and sends AddOffsetsToTxn and TxnOffsetCommit itself, so it
// can look in between: while the transaction is open the offsets are not
// the group's (OffsetFetch shows none, and UNSTABLE_OFFSET_COMMIT with
// require_stable), read_committed ListOffsets stops at the open
// transaction (the last stable offset), and a read_committed consumer
// gets nothing of it; after the commit the offsets and the records are
// there. An aborted transaction's offsets never appear.
func TestTransactionsOffsetsOnlyAtCommit(t *testing.T) {
	t.Parallel()
	const topic, group = "txn-offsets", "txn-offsets-group"
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, topic, 1, nil)
	plain := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	if err := plain.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err != nil {
		t.Fatalf("plain produce: %v", err)
	}

	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic), kgo.TransactionalID("offsets-txn"),
		kgo.TransactionTimeout(30*time.Second))
	txnRound := func(offset int64, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("BeginTransaction: %v", err)
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("txn-%d", offset))).FirstErr(); err != nil {
			t.Fatalf("transactional produce: %v", err)
		}
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatalf("ProducerID: %v", err)
		}
		ao := kmsg.NewPtrAddOffsetsToTxnRequest()
		ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "offsets-txn", pid, epoch, group
		aor, err := ao.RequestWith(ctx, cl)
		if err != nil || aor.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v / %v", err, kerr.ErrorForCode(aor.ErrorCode))
		}
		oc := kmsg.NewPtrTxnOffsetCommitRequest()
		oc.TransactionalID, oc.ProducerID, oc.ProducerEpoch, oc.Group = "offsets-txn", pid, epoch, group
		ot := kmsg.NewTxnOffsetCommitRequestTopic()
		ot.Topic = topic
		op := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		op.Partition, op.Offset = 0, offset
		ot.Partitions = append(ot.Partitions, op)
		oc.Topics = append(oc.Topics, ot)
		ocr, err := oc.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("TxnOffsetCommit: %v", err)
		}
		if code := ocr.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
		}

		// Open: nothing of it is visible.
		if offs := groupOffsets(ctx, t, adm, group, topic); offs[0] == offset {
			t.Errorf("offset %d is the group's before its transaction ended", offset)
		}
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Group, of.RequireStable = group, true
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = topic, []int32{0}
		of.Topics = append(of.Topics, ft)
		ofr, err := of.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("OffsetFetch: %v", err)
		}
		if code := stableCode(ofr); code != kerr.UnstableOffsetCommit.Code {
			t.Errorf("OffsetFetch require_stable during the transaction: %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
		}
		hw, lso := listEnd(ctx, t, cl, topic, 0), listEnd(ctx, t, cl, topic, 1)
		if lso >= hw || lso != offset {
			t.Errorf("open transaction from offset %d: read_committed end %d, read_uncommitted end %d; want %d below it", offset, lso, hw, offset)
		}

		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("EndTransaction: %v", err)
		}
		offs := groupOffsets(ctx, t, adm, group, topic)
		if commit == kgo.TryCommit && offs[0] != offset {
			t.Errorf("after commit the group's offset is %v, want %d", offs, offset)
		}
		if commit == kgo.TryAbort && offs[0] == offset {
			t.Errorf("after abort the group's offset is the aborted transaction's %d", offset)
		}
		if end := listEnd(ctx, t, cl, topic, 1); end != listEnd(ctx, t, cl, topic, 0) {
			t.Errorf("after the transaction ended: read_committed end %d, high watermark %d; want equal", end, listEnd(ctx, t, cl, topic, 0))
		}
	}
	txnRound(1, kgo.TryCommit) // offsets: 0 before, 1 txn-1, 2 its marker
	txnRound(3, kgo.TryAbort)  // 3 txn-3, 4 its marker
	got := readOutput(ctx, t, b.KafkaAddr, topic, kgo.ReadCommitted(), 2)
	if strings.Join(got, ",") != "before,txn-1" {
		t.Errorf("read_committed saw %v, want [before txn-1]", got)
	}
}

// groupOffsets returns the group's committed offsets for topic by partition.
func groupOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	resp, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("OffsetFetch %s: %v", group, err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

func stableCode(r *kmsg.OffsetFetchResponse) int16 {
	if r.ErrorCode != 0 {
		return r.ErrorCode
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode
			}
		}
	}
	for _, g := range r.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
	}
	return 0
}

// listEnd is ListOffsets latest for one partition at an isolation level.
func listEnd(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ListOffsets isolation %d: %v %v", isolation, err, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// readOutput reads topic from the start at an isolation level until want
// records arrived and a further poll brings no more, and returns their
// values sorted.
func readOutput(ctx context.Context, t *testing.T, addr, topic string, level kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	defer cl.Close()
	var vals []string
	quiet := 0
	for quiet < 3 {
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %d records of %d before the deadline", topic, len(vals), want)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)); n++ })
		if n == 0 && len(vals) >= want {
			quiet++
		}
	}
	sort.Strings(vals)
	return vals
}

// txnEpoch is a transactional id's producer epoch, as
// DescribeTransactions reports it.
func txnEpoch(ctx context.Context, t *testing.T, adm *kadm.Client, id string) int16 {
	t.Helper()
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatalf("DescribeTransactions %s: %v", id, err)
	}
	d, ok := ds[id]
	if !ok || d.Err != nil {
		t.Fatalf("DescribeTransactions %s: %+v", id, d)
	}
	return d.ProducerEpoch
}
