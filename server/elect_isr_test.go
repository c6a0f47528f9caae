package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// TestElectPreferredNotInISR: a preferred-leader election for a partition
// whose preferred (first) replica is alive but out of the ISR its leader
// reported is refused with PREFERRED_LEADER_NOT_AVAILABLE, as Kafka
// refuses it, and Metadata shows that replica out of the ISR.
func TestElectPreferredNotInISR(t *testing.T) {
	b := startBroker(t, nil)
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mc := b.meta.Client()
	self := b.srv.cfg.NodeID
	if _, err := mc.RegisterBroker(ctx, metastore.Broker{ID: 7, Role: metastore.RoleWrite,
		Endpoints: []metastore.Endpoint{{Name: "PLAINTEXT", View: "mixed", Host: "127.0.0.1", Port: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.CreateTopic(ctx, metastore.TopicSpec{Name: "ie", Partitions: 1, ReplicationFactor: -1, Assignment: [][]int32{{7, self}}}); err != nil {
		t.Fatal(err)
	}
	if err := mc.SetPartitionLeader(ctx, "ie", 0, self, 3, []int32{self}); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = 2, 0, 5000
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "ie", []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.PreferredLeaderNotAvailable.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "not in the ISR") {
		t.Fatalf("elect: code %d message %v", p.ErrorCode, p.ErrorMessage)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("ie")
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	mp := mresp.Topics[0].Partitions[0]
	if len(mp.Replicas) != 2 || mp.Replicas[0] != 7 || len(mp.ISR) != 1 || mp.ISR[0] != self || len(mp.OfflineReplicas) != 0 {
		t.Fatalf("metadata: replicas %v isr %v offline %v", mp.Replicas, mp.ISR, mp.OfflineReplicas)
	}
}
