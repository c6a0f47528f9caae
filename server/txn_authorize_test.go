package server

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
)

// TestAuthorizationTransactions checks the transaction APIs against the
// authorizer as Kafka's KafkaApis does: the transactional id (WRITE to
// use it, DESCRIBE to find or describe it), the topics (WRITE to add them,
// READ to commit their offsets), the group (READ) and the cluster
// (CLUSTER_ACTION for markers), each refusal with its own code while what
// is allowed is served.
func TestAuthorizationTransactions(t *testing.T) {
	b := startBrokerWith(t, func(c *configs.Config) { c.AuthorizerEnable = true }, func(o *Options, meta *metastore.Node) {
		g, err := coordinator.New(coordinator.Config{BrokerID: o.Config.NodeID, Store: meta.Client(), Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		o.Groups = g
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc := b.meta.Client()
	for _, name := range []string{"a", "b"} {
		if _, err := mc.CreateTopic(ctx, metastore.TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mc.CreateACLs(ctx, []acl.Binding{
		anonymousACL(acl.ResourceTransactionalID, "tx-ok", acl.PatternLiteral, acl.OpWrite, acl.Allow),
		anonymousACL(acl.ResourceTopic, "a", acl.PatternLiteral, acl.OpWrite, acl.Allow),
		anonymousACL(acl.ResourceTopic, "a", acl.PatternLiteral, acl.OpRead, acl.Allow),
		anonymousACL(acl.ResourceGroup, "g-ok", acl.PatternLiteral, acl.OpRead, acl.Allow),
	}); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, b.addr)
	want := func(what string, got int16, want error) {
		t.Helper()
		if err := kerr.ErrorForCode(got); err != want {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType = 3, 1
	for id, w := range map[string]error{"tx-ok": nil, "tx-no": kerr.TransactionalIDAuthorizationFailed} {
		fc.CoordinatorKey = id
		want("FindCoordinator "+id, rawDo(t, c, fc).(*kmsg.FindCoordinatorResponse).ErrorCode, w)
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version, ip.TransactionTimeoutMillis = 4, 30_000
	ip.TransactionalID = kmsg.StringPtr("tx-no")
	want("InitProducerId tx-no", rawDo(t, c, ip).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	ip.TransactionalID = kmsg.StringPtr("tx-ok")
	ir := rawDo(t, c, ip).(*kmsg.InitProducerIDResponse)
	want("InitProducerId tx-ok", ir.ErrorCode, nil)
	pid, epoch := ir.ProducerID, ir.ProducerEpoch

	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.Version, ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = 3, "tx-ok", pid, epoch
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a", Partitions: []int32{0}}, {Topic: "b", Partitions: []int32{0}}}
	ar := rawDo(t, c, ap).(*kmsg.AddPartitionsToTxnResponse)
	want("AddPartitionsToTxn a with b refused", ar.Topics[0].Partitions[0].ErrorCode, kerr.OperationNotAttempted)
	want("AddPartitionsToTxn b without WRITE", ar.Topics[1].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	ap.Topics = ap.Topics[:1]
	want("AddPartitionsToTxn a", rawDo(t, c, ap).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode, nil)
	// The broker form (v4+) needs CLUSTER_ACTION, as in Kafka: refused
	// as a whole, with no result per transaction.
	bf := kmsg.NewPtrAddPartitionsToTxnRequest()
	bf.Version = 5
	bt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	bt.TransactionalID, bt.ProducerID, bt.ProducerEpoch, bt.VerifyOnly = "tx-ok", pid, epoch, true
	bt.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "a", Partitions: []int32{0}}}
	bf.Transactions = append(bf.Transactions, bt)
	br := rawDo(t, c, bf).(*kmsg.AddPartitionsToTxnResponse)
	want("AddPartitionsToTxn v5 without CLUSTER_ACTION", br.ErrorCode, kerr.ClusterAuthorizationFailed)
	if len(br.Transactions) != 0 {
		t.Errorf("AddPartitionsToTxn v5 refused, yet results: %+v", br.Transactions)
	}

	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version, ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch = 3, "tx-ok", pid, epoch
	ao.Group = "g-no"
	want("AddOffsetsToTxn g-no", rawDo(t, c, ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	ao.Group = "g-ok"
	want("AddOffsetsToTxn g-ok", rawDo(t, c, ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, nil)

	oc := kmsg.NewPtrTxnOffsetCommitRequest()
	oc.Version, oc.TransactionalID, oc.ProducerID, oc.ProducerEpoch, oc.Group = 3, "tx-ok", pid, epoch, "g-ok"
	for _, topic := range []string{"a", "b"} {
		oc.Topics = append(oc.Topics, kmsg.TxnOffsetCommitRequestTopic{Topic: topic,
			Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}})
	}
	or := rawDo(t, c, oc).(*kmsg.TxnOffsetCommitResponse)
	got := map[string]int16{}
	for _, rt := range or.Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	want("TxnOffsetCommit a", got["a"], nil)
	want("TxnOffsetCommit b without READ", got["b"], kerr.TopicAuthorizationFailed)

	et := kmsg.NewPtrEndTxnRequest()
	et.Version, et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = 3, "tx-no", pid, epoch, true
	want("EndTxn tx-no", rawDo(t, c, et).(*kmsg.EndTxnResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	et.TransactionalID = "tx-ok"
	want("EndTxn tx-ok", rawDo(t, c, et).(*kmsg.EndTxnResponse).ErrorCode, nil)

	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.Version = 1
	wm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: pid, ProducerEpoch: epoch, Committed: true,
		Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "a", Partitions: []int32{0}}}}}
	want("WriteTxnMarkers without CLUSTER_ACTION", rawDo(t, c, wm).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode,
		kerr.ClusterAuthorizationFailed)

	// Describing needs DESCRIBE, which WRITE implies (Kafka's rule).
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"tx-ok", "tx-no"}
	dr := rawDo(t, c, dt).(*kmsg.DescribeTransactionsResponse)
	want("DescribeTransactions tx-ok", dr.TransactionStates[0].ErrorCode, nil)
	want("DescribeTransactions tx-no", dr.TransactionStates[1].ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	if s := dr.TransactionStates[0].State; s != "CompleteCommit" {
		t.Errorf("DescribeTransactions tx-ok: state %q, want CompleteCommit", s)
	}
	// An id the client may not describe, with state: not listed.
	if _, err := mc.PutTxn(ctx, metastore.TxnState{TransactionalID: "tx-hidden", ProducerID: 1 << 40, LastProducerID: -1, LastEpoch: -1,
		TimeoutMs: 1000, Status: metastore.TxnEmpty}, 0, metastore.TxnKeepOffsets); err != nil {
		t.Fatal(err)
	}
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.Version = 1
	lr := rawDo(t, c, lt).(*kmsg.ListTransactionsResponse)
	if len(lr.TransactionStates) != 1 || lr.TransactionStates[0].TransactionalID != "tx-ok" {
		t.Errorf("ListTransactions: %+v, want only tx-ok", lr.TransactionStates)
	}
}
