package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTransactionsV2RawFrames: transaction version 2 (KIP-890 part 2) on
// raw frames, as Kafka's clients use it once ApiVersions finalizes
// transaction.version 2: Produce v12 adds its partition to the
// transaction without AddPartitionsToTxn, TxnOffsetCommit v5 adds its
// group without AddOffsetsToTxn, and every EndTxn v5 bumps the producer's
// epoch and answers the new one; a retry with the old epoch is answered
// as the first, and an abort with nothing in the transaction bumps too.
// AddPartitionsToTxn v4-5, the broker form, verifies (VerifyOnly) and
// adds.
func TestTransactionsV2RawFrames(t *testing.T) {
	t.Parallel()
	const topic, id, group = "txn-v2", "txn-v2-id", "txn-v2-group"
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createTopic(ctx, t, newAdmin(t, b.KafkaAddr), topic, 2, nil)
	c := dialRaw(t, b.KafkaAddr)
	rt := func(req kmsg.Request, v int16) kmsg.Response {
		t.Helper()
		req.SetVersion(v)
		resp, err := c.roundTrip(req, v)
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), v, err)
		}
		return resp
	}
	want := func(what string, got, want int16) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}

	// The feature, finalized at level 2.
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "sluice-compat", "0.1"
	avr := rt(av, 3).(*kmsg.ApiVersionsResponse)
	finalized := int16(-1)
	for _, f := range avr.FinalizedFeatures {
		if f.Name == "transaction.version" {
			finalized = f.MaxVersionLevel
		}
	}
	if finalized != 2 || avr.FinalizedFeaturesEpoch < 0 {
		t.Fatalf("ApiVersions: transaction.version finalized at %d (epoch %d), want 2", finalized, avr.FinalizedFeaturesEpoch)
	}

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr(id), 60_000
	ir := rt(ip, 5).(*kmsg.InitProducerIDResponse)
	want("InitProducerId", ir.ErrorCode, 0)
	pid, e0 := ir.ProducerID, ir.ProducerEpoch

	produce := func(what string, partition int32, epoch int16, seq int32, code int16) {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10_000, kmsg.StringPtr(id)
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = topic
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = partition, txnBatch(pid, epoch, seq, what)
		pt.Partitions = append(pt.Partitions, pp)
		req.Topics = append(req.Topics, pt)
		want("Produce v12 "+what, rt(req, 12).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode, code)
	}
	endTxn := func(what string, epoch int16, commit bool, code int16) (int64, int16) {
		t.Helper()
		et := kmsg.NewPtrEndTxnRequest()
		et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = id, pid, epoch, commit
		r := rt(et, 5).(*kmsg.EndTxnResponse)
		want("EndTxn v5 "+what, r.ErrorCode, code)
		return r.ProducerID, r.ProducerEpoch
	}
	verify := func(v int16, epoch int16, parts []int32) []int16 {
		t.Helper()
		ap := kmsg.NewPtrAddPartitionsToTxnRequest()
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, true
		tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: topic, Partitions: parts}}
		ap.Transactions = append(ap.Transactions, tx)
		r := rt(ap, v).(*kmsg.AddPartitionsToTxnResponse)
		if r.ErrorCode != 0 || len(r.Transactions) != 1 || len(r.Transactions[0].Topics) != 1 || len(r.Transactions[0].Topics[0].Partitions) != len(parts) {
			t.Fatalf("AddPartitionsToTxn v%d VerifyOnly: %+v", v, r)
		}
		var codes []int16
		for _, p := range r.Transactions[0].Topics[0].Partitions {
			codes = append(codes, p.ErrorCode)
		}
		return codes
	}

	// The first transaction: a batch to partition 0 and the group's
	// offsets, neither added by the client.
	produce("first", 0, e0, 0, 0)
	cl := newClient(t, b.KafkaAddr)
	if hw, lso := listEnd(ctx, t, cl, topic, 0), listEnd(ctx, t, cl, topic, 1); lso >= hw {
		t.Errorf("after a Produce v12: last stable offset %d, high watermark %d: no transaction open", lso, hw)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.ProducerID, tc.ProducerEpoch, tc.Group = id, pid, e0, group
	tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}}}
	want("TxnOffsetCommit v5", rt(tc, 5).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, 0)

	codes := verify(5, e0, []int32{0, 1})
	want("AddPartitionsToTxn v5 VerifyOnly, a partition in the transaction", codes[0], 0)
	want("AddPartitionsToTxn v5 VerifyOnly, a partition not in it", codes[1], kerr.TransactionAbortable.Code)
	want("AddPartitionsToTxn v4 VerifyOnly, a partition not in it", verify(4, e0, []int32{1})[0], kerr.InvalidTxnState.Code)
	want("AddPartitionsToTxn v5 VerifyOnly, another epoch", verify(5, e0+1, []int32{0})[0], kerr.ProducerFenced.Code)

	gotPid, e1 := endTxn("commit", e0, true, 0)
	if gotPid != pid || e1 != e0+1 {
		t.Fatalf("EndTxn v5 commit: producer %d epoch %d, want %d epoch %d", gotPid, e1, pid, e0+1)
	}
	if p, e := endTxn("commit retried with the old epoch", e0, true, 0); p != pid || e != e1 {
		t.Errorf("EndTxn v5 retry: producer %d epoch %d, want %d epoch %d", p, e, pid, e1)
	}
	endTxn("abort with the old epoch after the commit", e0, false, kerr.InvalidTxnState.Code)
	endTxn("commit with an epoch never given", e1+1, true, kerr.ProducerFenced.Code)
	if hw, lso := listEnd(ctx, t, cl, topic, 0), listEnd(ctx, t, cl, topic, 1); lso != hw {
		t.Errorf("after the commit: last stable offset %d, high watermark %d", lso, hw)
	}
	offs, err := newAdmin(t, b.KafkaAddr).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); !ok || o.At != 7 {
		t.Errorf("group offset after the commit: %+v (found %v), want 7", o, ok)
	}

	// The old epoch is fenced at the partition by the marker's bumped one.
	produce("with the old epoch", 0, e0, 1, kerr.InvalidProducerEpoch.Code)

	// The second transaction, at the new epoch, aborted.
	produce("second", 0, e1, 0, 0)
	produce("second, other partition", 1, e1, 0, 0)
	_, e2 := endTxn("abort", e1, false, 0)
	if e2 != e1+1 {
		t.Errorf("EndTxn v5 abort: epoch %d, want %d", e2, e1+1)
	}

	// An abort with nothing in the transaction still bumps; a commit of
	// nothing is INVALID_TXN_STATE.
	_, e3 := endTxn("abort of an empty transaction", e2, false, 0)
	if e3 != e2+1 {
		t.Errorf("EndTxn v5 empty abort: epoch %d, want %d", e3, e2+1)
	}
	endTxn("commit of an empty transaction", e3, true, kerr.InvalidTxnState.Code)

	// read_committed sees the committed record only, on both partitions.
	rc := newClient(t, b.KafkaAddr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	var got []string
	// Until the committed record came and three polls of a second
	// brought nothing more.
	for quiet := 0; ctx.Err() == nil && (len(got) == 0 || quiet < 3); {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := rc.PollFetches(pctx)
		pcancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)); n++ })
		if n == 0 {
			quiet++
		}
	}
	if len(got) != 1 || got[0] != "first" {
		t.Errorf("read_committed: %q, want [first]", got)
	}

	// DescribeTransactions shows the bumped epoch.
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{id}
	ds := rt(dt, 0).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
	if ds.ProducerEpoch != e3 || ds.State != "CompleteAbort" {
		t.Errorf("DescribeTransactions: %s at epoch %d, want CompleteAbort at %d", ds.State, ds.ProducerEpoch, e3)
	}

	// One Produce v12 with the first batches of a transaction to both
	// partitions adds both (in one write of the transaction's state) and
	// opens the transaction in each.
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 10_000, kmsg.StringPtr(id)
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	for p := int32(0); p < 2; p++ {
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = p, txnBatch(pid, e3, 0, "fourth")
		pt.Partitions = append(pt.Partitions, pp)
	}
	req.Topics = append(req.Topics, pt)
	for i, p := range rt(req, 12).(*kmsg.ProduceResponse).Topics[0].Partitions {
		want(fmt.Sprintf("Produce v12 to both partitions, partition %d", i), p.ErrorCode, 0)
	}
	ds = rt(dt, 0).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
	if ds.State == "Ongoing" && len(ds.Topics) == 1 {
		if n := len(ds.Topics[0].Partitions); n != 2 {
			t.Errorf("DescribeTransactions after a Produce v12 to two partitions: %d partitions, want 2", n)
		}
	} else {
		t.Errorf("DescribeTransactions after a Produce v12 to two partitions: %+v, want Ongoing with both", ds)
	}
	endOf := func(p int32, isolation int8) int64 {
		t.Helper()
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.IsolationLevel = isolation
		lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: p, Timestamp: -1, CurrentLeaderEpoch: -1}}}}
		r := rt(lo, 4).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		want(fmt.Sprintf("ListOffsets partition %d isolation %d", p, isolation), r.ErrorCode, 0)
		return r.Offset
	}
	for p := int32(0); p < 2; p++ {
		if hw, lso := endOf(p, 0), endOf(p, 1); lso >= hw {
			t.Errorf("partition %d: last stable offset %d, high watermark %d: no transaction open", p, lso, hw)
		}
	}
	endTxn("commit of the two-partition transaction", e3, true, 0)
}
