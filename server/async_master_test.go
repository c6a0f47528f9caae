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
