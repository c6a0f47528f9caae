package compat

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTransactionAPIsEveryVersion runs one whole transaction per advertised
// version of AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and
// EndTxn (each with its own transactional id, on raw frames), then
// WriteTxnMarkers, DescribeTransactions and ListTransactions at each of
// theirs, checking every answer and that each response re-encodes to the
// bytes received.
func TestTransactionAPIsEveryVersion(t *testing.T) {
	t.Parallel()
	const topic, group = "txn-versions", "txn-versions-group"
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createTopic(ctx, t, newAdmin(t, b.KafkaAddr), topic, 1, nil)
	c := dialRaw(t, b.KafkaAddr)
	adv := c.apiVersions()
	rt := func(req kmsg.Request, v int16) kmsg.Response {
		t.Helper()
		req.SetVersion(v)
		resp, err := c.roundTrip(req, v)
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), v, err)
		}
		if re := resp.AppendTo(nil); len(re) != len(c.lastBody) {
			t.Errorf("%s v%d: response body %d bytes, re-encodes to %d", kmsg.NameForKey(req.Key()), v, len(c.lastBody), len(re))
		}
		return resp
	}
	versions := func(key int16) (int16, int16) {
		av, ok := adv[key]
		if !ok {
			t.Fatalf("%s not advertised", kmsg.NameForKey(key))
		}
		return av.MinVersion, min(av.MaxVersion, kmsg.RequestForKey(key).MaxVersion())
	}
	ok := func(what string, v int16, code int16) {
		t.Helper()
		if code != 0 {
			t.Errorf("%s v%d: %v", what, v, kerr.ErrorForCode(code))
		}
	}
	_, initMax := versions(22)
	// One transaction per version up to the highest of the client APIs;
	// AddPartitionsToTxn in its client form (v0-3: v4+ is the broker
	// form, TestTransactionsV2RawFrames).
	lo, hi := versions(24)
	_, endMax := versions(26)
	_, commitMax := versions(28)
	hi = max(hi, endMax, commitMax)
	var last string
	for v := lo; v <= hi; v++ {
		id := fmt.Sprintf("txn-v%d", v)
		last = id
		ip := kmsg.NewPtrInitProducerIDRequest()
		ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr(id), 30_000
		ir := rt(ip, initMax).(*kmsg.InitProducerIDResponse)
		ok("InitProducerId", initMax, ir.ErrorCode)
		pid, epoch := ir.ProducerID, ir.ProducerEpoch

		apv := min(v, 3)
		ap := kmsg.NewPtrAddPartitionsToTxnRequest()
		ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = id, pid, epoch
		ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{0}}}
		ar := rt(ap, apv).(*kmsg.AddPartitionsToTxnResponse)
		if len(ar.Topics) != 1 || len(ar.Topics[0].Partitions) != 1 {
			t.Fatalf("AddPartitionsToTxn apv%d: %+v", apv, ar)
		}
		ok("AddPartitionsToTxn", apv, ar.Topics[0].Partitions[0].ErrorCode)
		// A wrong epoch: fenced, as the version can say it.
		ap.ProducerEpoch = epoch + 1
		ar = rt(ap, apv).(*kmsg.AddPartitionsToTxnResponse)
		want := kerr.ProducerFenced.Code
		if apv < 2 {
			want = kerr.InvalidProducerEpoch.Code
		}
		if got := ar.Topics[0].Partitions[0].ErrorCode; got != want {
			t.Errorf("AddPartitionsToTxn apv%d with another epoch: %apv, want %apv", apv, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
		// An unknown topic: nothing added, the others not attempted.
		ap.ProducerEpoch = epoch
		ap.Topics = append(ap.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: "no-such-topic", Partitions: []int32{0}})
		ar = rt(ap, apv).(*kmsg.AddPartitionsToTxnResponse)
		if ar.Topics[0].Partitions[0].ErrorCode != kerr.OperationNotAttempted.Code || ar.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("AddPartitionsToTxn apv%d with an unknown topic: %+v", apv, ar.Topics)
		}

		ov := min(v, func() int16 { _, h := versions(25); return h }())
		ao := kmsg.NewPtrAddOffsetsToTxnRequest()
		ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, pid, epoch, group
		ok("AddOffsetsToTxn", ov, rt(ao, ov).(*kmsg.AddOffsetsToTxnResponse).ErrorCode)

		cv := min(v, func() int16 { _, h := versions(28); return h }())
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.TransactionalID, tc.ProducerID, tc.ProducerEpoch, tc.Group = id, pid, epoch, group
		tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: int64(v), LeaderEpoch: -1}}}}
		tr := rt(tc, cv).(*kmsg.TxnOffsetCommitResponse)
		if len(tr.Topics) != 1 || len(tr.Topics[0].Partitions) != 1 {
			t.Fatalf("TxnOffsetCommit v%d: %+v", cv, tr)
		}
		ok("TxnOffsetCommit", cv, tr.Topics[0].Partitions[0].ErrorCode)

		ev := min(v, func() int16 { _, h := versions(26); return h }())
		et := kmsg.NewPtrEndTxnRequest()
		et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = id, pid, epoch, true
		ok("EndTxn", ev, rt(et, ev).(*kmsg.EndTxnResponse).ErrorCode)
		ok("EndTxn retried", ev, rt(et, ev).(*kmsg.EndTxnResponse).ErrorCode)
		et.Commit = false
		if got := rt(et, ev).(*kmsg.EndTxnResponse).ErrorCode; got != kerr.InvalidTxnState.Code {
			t.Errorf("EndTxn v%d abort after commit: %v, want INVALID_TXN_STATE", ev, kerr.ErrorForCode(got))
		}
	}

	lo, hi = versions(27)
	for v := lo; v <= hi; v++ {
		wm := kmsg.NewPtrWriteTxnMarkersRequest()
		wm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1 << 40, ProducerEpoch: 0, Committed: false,
			Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: topic, Partitions: []int32{0, 5}}}}}
		r := rt(wm, v).(*kmsg.WriteTxnMarkersResponse)
		if len(r.Markers) != 1 || len(r.Markers[0].Topics) != 1 || len(r.Markers[0].Topics[0].Partitions) != 2 {
			t.Fatalf("WriteTxnMarkers v%d: %+v", v, r)
		}
		ps := r.Markers[0].Topics[0].Partitions
		if ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("WriteTxnMarkers v%d: %+v, want OK and UNKNOWN_TOPIC_OR_PARTITION", v, ps)
		}
	}

	lo, hi = versions(65)
	for v := lo; v <= hi; v++ {
		dt := kmsg.NewPtrDescribeTransactionsRequest()
		dt.TransactionalIDs = []string{last, "never-used"}
		r := rt(dt, v).(*kmsg.DescribeTransactionsResponse)
		if len(r.TransactionStates) != 2 {
			t.Fatalf("DescribeTransactions v%d: %+v", v, r)
		}
		if s := r.TransactionStates[0]; s.ErrorCode != 0 || s.State != "CompleteCommit" || s.ProducerID < 0 {
			t.Errorf("DescribeTransactions v%d %s: %+v", v, last, s)
		}
		if s := r.TransactionStates[1]; s.ErrorCode != kerr.TransactionalIDNotFound.Code {
			t.Errorf("DescribeTransactions v%d of an unknown id: %v", v, kerr.ErrorForCode(s.ErrorCode))
		}
	}
	lo, hi = versions(66)
	for v := lo; v <= hi; v++ {
		lt := kmsg.NewPtrListTransactionsRequest()
		lt.StateFilters = []string{"CompleteCommit", "Bogus"}
		r := rt(lt, v).(*kmsg.ListTransactionsResponse)
		if r.ErrorCode != 0 || len(r.UnknownStateFilters) != 1 || len(r.TransactionStates) == 0 {
			t.Errorf("ListTransactions v%d: %+v", v, r)
		}
		for _, s := range r.TransactionStates {
			if s.TransactionState != "CompleteCommit" {
				t.Errorf("ListTransactions v%d: state %s through a CompleteCommit filter", v, s.TransactionState)
			}
		}
		if v < 2 {
			continue
		}
		// v2 (KIP-1152): the pattern matches the whole id, as Kafka's
		// re2j matches(); a prefix of the id alone matches nothing.
		lt = kmsg.NewPtrListTransactionsRequest()
		lt.TransactionalIDPattern = kmsg.StringPtr(regexp.QuoteMeta(last))
		r = rt(lt, v).(*kmsg.ListTransactionsResponse)
		if r.ErrorCode != 0 || len(r.TransactionStates) != 1 || r.TransactionStates[0].TransactionalID != last {
			t.Errorf("ListTransactions v%d pattern %q: %+v", v, last, r)
		}
		lt.TransactionalIDPattern = kmsg.StringPtr(regexp.QuoteMeta(last[:len(last)-1]))
		if r = rt(lt, v).(*kmsg.ListTransactionsResponse); r.ErrorCode != 0 || len(r.TransactionStates) != 0 {
			t.Errorf("ListTransactions v%d pattern of a prefix: %+v", v, r)
		}
		lt.TransactionalIDPattern = kmsg.StringPtr("txn-(")
		if r = rt(lt, v).(*kmsg.ListTransactionsResponse); r.ErrorCode != kerr.InvalidRegularExpression.Code {
			t.Errorf("ListTransactions v%d invalid pattern: %v, want INVALID_REGULAR_EXPRESSION", v, kerr.ErrorForCode(r.ErrorCode))
		}
	}
}
