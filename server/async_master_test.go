package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/replica"
)

// TestAsyncMasterFencedWithoutLease: while this broker's lease is not
// certainly valid (it may have been replaced as master by then), its async
// partition refuses produce with NOT_LEADER_OR_FOLLOWER, so nothing is
// acknowledged that a promoted replica never receives; once the lease
// holds again it takes writes. A raft-mode partition is not fenced.
func TestAsyncMasterFencedWithoutLease(t *testing.T) {
	var valid atomic.Bool
	valid.Store(true)
	b := startBrokerWith(t, nil, func(o *Options, _ *metastore.Node) { o.LeaseValid = valid.Load })
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	async := "async"
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"replication.mode": &async}, "am"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "rf"); err != nil {
		t.Fatal(err)
	}
	produce := func(topic string) int16 {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		tp, ok := b.meta.Client().TopicByName(topic)
		if !ok {
			t.Fatalf("no topic %s", topic)
		}
		rt.Topic, rt.TopicID = topic, tp.ID // the client picks the version
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 0, makeTestBatch(1, 10)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	for _, topic := range []string{"am", "rf"} {
		for code := produce(topic); code != 0; code = produce(topic) {
			if ctx.Err() != nil {
				t.Fatalf("%s: %v", topic, kerr.ErrorForCode(code))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	valid.Store(false)
	if code := produce("am"); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("async master without a valid lease answered %v", kerr.ErrorForCode(code))
	}
	if code := produce("rf"); code != 0 {
		t.Fatalf("raft partition without a valid lease answered %v", kerr.ErrorForCode(code))
	}
	valid.Store(true)
	if code := produce("am"); code != 0 {
		t.Fatalf("async master with its lease back answered %v", kerr.ErrorForCode(code))
	}
}

// TestAsyncMasterFencedAtAck: the fence is checked again before the
// acknowledgement, on the view as it is then. A batch proposed while the
// lease held but answered after it lapsed is not acknowledged (a write
// learner may have been promoted in between, and the batch, unknown to it,
// would be cut when this broker follows it), and neither is one answered
// while the metastore view here does not hold this broker's current
// registration (after a lapse it registered again, but a promotion
// recorded before that would not be visible yet). Writes are acknowledged
// again once the lease and the view agree.
func TestAsyncMasterFencedAtAck(t *testing.T) {
	// checks > 0: that many more lease checks succeed, then all fail;
	// checks < 0: the lease holds.
	var checks atomic.Int64
	checks.Store(-1)
	var inc atomic.Uint64
	b := startBrokerWith(t, nil, func(o *Options, _ *metastore.Node) {
		o.LeaseValid = func() bool {
			n := checks.Load()
			if n < 0 {
				return true
			}
			return n > 0 && checks.Add(-1) >= 0
		}
		o.LeaseIncarnation = inc.Load
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc := b.meta.Client()
	first, err := mc.RegisterBroker(ctx, metastore.Broker{ID: 1, Role: metastore.RoleCombined})
	if err != nil {
		t.Fatal(err)
	}
	inc.Store(first)
	cl := b.client(t)
	async := "async"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"replication.mode": &async}, "am"); err != nil {
		t.Fatal(err)
	}
	tp, ok := mc.TopicByName("am")
	if !ok {
		t.Fatal("no topic am")
	}
	produce := func() (int16, int64) {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "am", tp.ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 0, makeTestBatch(1, 10)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, p.BaseOffset
	}
	for code, _ := produce(); code != 0; code, _ = produce() {
		if ctx.Err() != nil {
			t.Fatalf("first write: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(20 * time.Millisecond)
	}
	end := func() int64 {
		top, _ := mc.TopicByName("am")
		r, ok := b.srv.raft.Get(replica.Key{TopicID: top.ID, Index: 0})
		if !ok {
			t.Fatal("partition not open")
		}
		return r.LogEndOffset()
	}
	before := end()
	// One check passes (before the write), the next (before the answer)
	// fails: written, not acknowledged.
	checks.Store(1)
	if code, off := produce(); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a batch answered after the lease lapsed: %v at offset %d", kerr.ErrorForCode(code), off)
	}
	if e := end(); e <= before {
		t.Fatalf("the batch was not written (log end %d, %d before): the check before the write fired, not the one before the answer", e, before)
	}
	checks.Store(-1)
	// Registered again (a lapse): until the view here holds the new
	// registration, nothing is acknowledged.
	second, err := mc.RegisterBroker(ctx, metastore.Broker{ID: 1, Role: metastore.RoleCombined})
	if err != nil {
		t.Fatal(err)
	}
	inc.Store(second + 1) // a registration the view does not hold yet
	if code, off := produce(); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("acknowledged without this registration in the view: %v at offset %d", kerr.ErrorForCode(code), off)
	}
	inc.Store(second)
	if code, _ := produce(); code != 0 {
		t.Fatalf("with the lease and its registration in the view: %v", kerr.ErrorForCode(code))
	}
}

// TestAsyncRecordAfterPromotion: a leader records itself async master
// unless the record names another master promoted from a takeover in a
// term no earlier than the leader's own: that leader is an old master that
// missed the promotion (paused past its lease), which must follow, not
// write over the promotion. Seen in the nemesis: the old master, resumed
// after a pause, recorded itself over the promoted one, then "promoted"
// itself again from the new master's takeover; two masters. A leader in a
// later term (a promoted master, or one a reassignment's raft election
// made) records itself.
func TestAsyncRecordAfterPromotion(t *testing.T) {
	b := startBrokerWith(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	async := "async"
	if _, err := kadm.NewClient(b.client(t)).CreateTopic(ctx, 1, 1, map[string]*string{"replication.mode": &async}, "rec"); err != nil {
		t.Fatal(err)
	}
	tp, ok := b.meta.Client().TopicByName("rec")
	if !ok {
		t.Fatal("no topic")
	}
	self := b.srv.cfg.NodeID
	other := self + 1
	p := tp.Partitions[0]
	p.AsyncMaster, p.AsyncTakeover = &other, &metastore.AsyncClaim{Term: 5, Index: 40, Offset: 400}
	if b.srv.asyncRecordDue(tp, p, 5) {
		t.Fatal("a leader in the takeover's term recorded itself over the promoted master")
	}
	if !b.srv.asyncRecordDue(tp, p, 6) {
		t.Fatal("a leader in a later term did not record itself")
	}
	p.AsyncTakeover = nil
	if !b.srv.asyncRecordDue(tp, p, 1) {
		t.Fatal("a leader did not record itself over a master set without a promotion")
	}
	p.AsyncMaster = &self
	if b.srv.asyncRecordDue(tp, p, 1) {
		t.Fatal("recorded again")
	}
}
