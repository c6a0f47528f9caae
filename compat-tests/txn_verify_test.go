package compat

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnBatch is idempotentBatch with the transactional attribute set.
func txnBatch(producerID int64, epoch int16, firstSeq int32, values ...string) []byte {
	raw := idempotentBatch(producerID, epoch, firstSeq, values...)
	binary.BigEndian.PutUint16(raw[21:23], binary.BigEndian.Uint16(raw[21:23])|0x10)
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// TestTransactionsVerifyPartitions: KIP-890 part 1 at the partition
// leader. A transactional batch for a partition the producer did not add
// to its transaction, or one that arrives after its transaction ended (a
// late retry), is refused with INVALID_TXN_STATE (Produce up to v10) or
// TRANSACTION_ABORTABLE (v11, KIP-1050), as Kafka answers, and opens no transaction
// in the partition: the last stable offset stays at the high watermark.
// A transactional batch without a transactional id in the request is
// refused too. A marker from a fenced coordinator (a lower coordinator
// epoch) or, with transaction version 2, at the producer's own epoch does
// not end the producer's open transaction.
func TestTransactionsVerifyPartitions(t *testing.T) {
	t.Parallel()
	const topic, id = "txn-verify", "verify-txn"
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createTopic(ctx, t, newAdmin(t, b.KafkaAddr), topic, 1, nil)
	c := dialRaw(t, b.KafkaAddr)
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr(id), 30_000
	ip.Version = 4
	resp, err := c.roundTrip(ip, 4)
	if err != nil {
		t.Fatal(err)
	}
	ir := resp.(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ir.ErrorCode))
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch
	produce := func(what string, pv int16, seq int32, txnID *string, want int16) {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = pv, -1, 10_000, txnID
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = txnBatch(pid, epoch, seq, what)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := c.roundTrip(req, pv)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; got != want {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	stable := func(when string) {
		t.Helper()
		cl := newClient(t, b.KafkaAddr)
		if hw, lso := listEnd(ctx, t, cl, topic, 0), listEnd(ctx, t, cl, topic, 1); hw != lso {
			t.Errorf("%s: last stable offset %d below the high watermark %d: a transaction was opened", when, lso, hw)
		}
	}
	txnReq := func(req kmsg.Request, v int16) int16 {
		t.Helper()
		req.SetVersion(v)
		resp, err := c.roundTrip(req, v)
		if err != nil {
			t.Fatal(err)
		}
		switch r := resp.(type) {
		case *kmsg.AddPartitionsToTxnResponse:
			return r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.EndTxnResponse:
			return r.ErrorCode
		}
		return -1
	}

	// Kafka's codes by version (KIP-1050): TRANSACTION_ABORTABLE from
	// v11, INVALID_TXN_STATE for the clients before it.
	notInTxn := func(v int16) int16 {
		if v >= 11 {
			return kerr.TransactionAbortable.Code
		}
		return kerr.InvalidTxnState.Code
	}
	for v := int16(9); v <= 11; v++ {
		produce(fmt.Sprintf("v%d before AddPartitionsToTxn", v), v, 0, kmsg.StringPtr(id), notInTxn(v))
	}
	stable("after a batch for a partition not in the transaction")
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = id, pid, epoch
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	if code := txnReq(ap, 3); code != 0 {
		t.Fatalf("AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}
	produce("without a transactional id", 9, 0, nil, kerr.InvalidTxnState.Code)
	produce("in the transaction", 9, 0, kmsg.StringPtr(id), 0)
	produce("second batch of the transaction", 9, 1, kmsg.StringPtr(id), 0)
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = id, pid, epoch, true
	if code := txnReq(et, 3); code != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
	}
	stable("after the commit")
	for v := int16(9); v <= 11; v++ {
		produce(fmt.Sprintf("v%d late batch after the commit", v), v, 2, kmsg.StringPtr(id), notInTxn(v))
	}
	stable("after a late batch")

	// A zombie coordinator's marker (Kafka's appendEndTxnMarker): the
	// commit above left the coordinator epoch of its marker with the
	// producer's state in the partition. The next transaction opens; a
	// COMMIT with a lower coordinator epoch is refused with
	// TRANSACTION_COORDINATOR_FENCED and does not end it, nor does a
	// transaction version 2 marker at the producer's own epoch
	// (INVALID_PRODUCER_EPOCH, Kafka 4.4's checkProducerEpoch). A version 2
	// marker at the next epoch ends it; its retry is taken, as Kafka's
	// idempotent marker retry.
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	if code := txnReq(ap, 3); code != 0 {
		t.Fatalf("AddPartitionsToTxn for the second transaction: %v", kerr.ErrorForCode(code))
	}
	produce("second transaction", 9, 2, kmsg.StringPtr(id), 0)
	open := func(when string) {
		t.Helper()
		cl := newClient(t, b.KafkaAddr)
		if hw, lso := listEnd(ctx, t, cl, topic, 0), listEnd(ctx, t, cl, topic, 1); lso >= hw {
			t.Errorf("%s: last stable offset %d, high watermark %d: the open transaction was ended", when, lso, hw)
		}
	}
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	dresp, err := c.roundTrip(dp, 0)
	if err != nil {
		t.Fatal(err)
	}
	coordEpoch := int32(-1)
	for _, ap := range dresp.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ActiveProducers {
		if ap.ProducerID == pid {
			coordEpoch = ap.CoordinatorEpoch
		}
	}
	if coordEpoch <= 0 {
		t.Fatalf("DescribeProducers: coordinator epoch %d for the producer after its commit, want the marker's (> 0)", coordEpoch)
	}
	marker := func(what string, v int16, ep int16, ce int32, tv int8, want int16, after func(string)) {
		t.Helper()
		wm := kmsg.NewPtrWriteTxnMarkersRequest()
		wm.SetVersion(v)
		wm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: pid, ProducerEpoch: ep, Committed: true, CoordinatorEpoch: ce, TransactionVersion: tv,
			Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: topic, Partitions: []int32{0}}}}}
		resp, err := c.roundTrip(wm, v)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; got != want {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
		after("after " + what)
	}
	for v := int16(0); v <= 2; v++ {
		marker(fmt.Sprintf("v%d COMMIT of coordinator epoch %d", v, coordEpoch-1), v, epoch, coordEpoch-1, 0, kerr.TransactionCoordinatorFenced.Code, open)
	}
	marker("v2 COMMIT of transaction version 2 at the producer's epoch", 2, epoch, coordEpoch+1_000_000, 2, kerr.InvalidProducerEpoch.Code, open)
	marker("v2 COMMIT of transaction version 2 at the next epoch", 2, epoch+1, coordEpoch+1_000_000, 2, 0, stable)
	marker("a retry of that marker", 2, epoch+1, coordEpoch+1_000_000, 2, 0, stable)
	// The coordinator's own abort of the transaction, at the epoch the
	// partition has seen bumped past, is refused there
	// (INVALID_PRODUCER_EPOCH) and taken as done: EndTxn completes.
	et.Commit = false
	if code := txnReq(et, 3); code != 0 {
		t.Fatalf("EndTxn abort of the second transaction: %v", kerr.ErrorForCode(code))
	}
	stable("after the coordinator's abort")
}
