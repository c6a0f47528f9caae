package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/protocol"
)

// txnKeys are the transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn,
// EndTxn, WriteTxnMarkers, TxnOffsetCommit, DescribeTransactions,
// ListTransactions.
var txnKeys = []int16{24, 25, 26, 27, 28, 65, 66}

// txnSeeds are well-formed requests of every transaction API against
// topic "fz" and transactional id "fz-txn".
func txnSeeds() []kmsg.Request {
	apt := kmsg.NewPtrAddPartitionsToTxnRequest()
	apt.TransactionalID, apt.ProducerID = "fz-txn", 1
	apt.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "fz", Partitions: []int32{0, 1}}}
	aot := kmsg.NewPtrAddOffsetsToTxnRequest()
	aot.TransactionalID, aot.ProducerID, aot.Group = "fz-txn", 1, "fz-group"
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.Commit = "fz-txn", 1, true
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, Committed: true,
		Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "fz", Partitions: []int32{0, 7}}}}}
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID = "fz-txn", "fz-group", 1
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "fz", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3}}}}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"fz-txn", ""}
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.StateFilters = []string{"Ongoing", "Bogus"}
	return []kmsg.Request{apt, aot, end, wm, toc, dt, lt}
}

// FuzzTxnRequests decodes arbitrary bodies as the transaction APIs at
// every advertised version, as the connection does, and sends what
// decodes to a real broker (a metastore, local logs, a group and a
// transaction coordinator): each must be answered, none may crash the
// broker or leave it without an answer.
func FuzzTxnRequests(f *testing.F) {
	for _, req := range txnSeeds() {
		r, _ := protocol.Versions(req.Key())
		for _, v := range []int16{r.Min, r.Max} {
			req.SetVersion(v)
			f.Add(req.Key(), v, req.AppendTo(nil))
		}
	}
	b := startBrokerWith(f, nil, func(o *Options, meta *metastore.Node) {
		g, err := coordinator.New(coordinator.Config{BrokerID: o.Config.NodeID, Store: meta.Client(), Logger: zerolog.Nop()})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { g.Close() })
		o.Groups = g
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RequestRetries(0))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := b.meta.Client().CreateTopic(ctx, metastore.TopicSpec{Name: "fz", Partitions: 2, ReplicationFactor: 1}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		r, ok := protocol.Versions(key)
		if !ok || version < r.Min || version > r.Max || !slices.Contains(txnKeys, key) {
			return
		}
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := cl.Broker(int(b.srv.cfg.NodeID)).Request(ctx, req)
		if err != nil {
			t.Fatalf("key %d v%d: no answer: %v", key, version, err)
		}
		if resp.Key() != key {
			t.Fatalf("key %d answered with key %d", key, resp.Key())
		}
	})
}
