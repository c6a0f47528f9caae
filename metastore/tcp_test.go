package metastore

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

func freeAddrs(t testing.TB, n int) []string {
	var out []string
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// TestTCPCluster runs three nodes over the real TCP transport, configured
// the way `sluice serve` would (peers as "id=host:port"), and a remote
// client dialing one follower.
func TestTCPCluster(t *testing.T) {
	addrs := freeAddrs(t, 3)
	var peerList []string
	for i, a := range addrs {
		peerList = append(peerList, fmt.Sprintf("%d=%s", i+1, a))
	}
	nodes := map[uint64]*Node{}
	dirs := map[uint64]string{}
	open := func(id uint64) {
		cfg := testConfig(t, id, dirs[id])
		cfg.Listen = addrs[id-1]
		cfg.PeerList = peerList
		n, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = n
	}
	for id := uint64(1); id <= 3; id++ {
		dirs[id] = t.TempDir()
		open(id)
	}
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	ctx := ctxT(t)
	for _, n := range nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lead := nodes[1].Leader()
	var follower uint64 = 1
	if lead == 1 {
		follower = 2
	}
	rc, err := Dial(ctx, ClientConfig{Addrs: []string{addrs[follower-1]}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if rc.ClusterID() == "" || rc.ClusterID() != nodes[lead].view.ClusterID() {
		t.Fatalf("cluster id %q", rc.ClusterID())
	}
	inc, err := rc.RegisterBroker(ctx, Broker{ID: 1, Role: RoleCombined})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Heartbeat(ctx, 1, inc); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.CreateTopic(ctx, TopicSpec{Name: "tcp", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if _, ok := rc.TopicByName("tcp"); !ok {
		t.Fatal("not in remote cache")
	}
	if err := rc.CommitOffsets(ctx, Fence{}, "g", []OffsetCommit{{TopicPartition: TopicPartition{"tcp", 1}, Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	if offs, err := rc.FetchOffsets(ctx, "g", nil); err != nil || len(offs) != 1 || offs[0].Offset != 3 {
		t.Fatalf("%+v %v", offs, err)
	}
	st, err := rc.NodeStatus(ctx)
	if err != nil || st.Leader != lead || len(st.Voters) != 3 || st.Members[lead] != addrs[lead-1] {
		t.Fatalf("status %+v %v", st, err)
	}
	// Kill the leader; the client (dialed to a surviving follower, or
	// failing over) keeps working.
	nodes[lead].Close()
	delete(nodes, lead)
	rc2, err := Dial(ctx, ClientConfig{Addrs: addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer rc2.Close()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		_, err := rc2.CreateTopic(wctx, TopicSpec{Name: "after-failover", Partitions: 1})
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("no write after failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, ok := rc2.TopicByName("tcp"); !ok {
		t.Fatal("lost topic")
	}
	// Restart the old leader from disk; it catches up.
	open(lead)
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if _, ok := nodes[lead].Client().TopicByName("after-failover"); !ok {
			return fmt.Errorf("restarted node behind")
		}
		return nil
	})
}

// A single voter with a listener (sluice serve --roles meta,write,read on
// one host): remote brokers dial it.
func TestSingleNodeWithListener(t *testing.T) {
	cfg := testConfig(t, 1, t.TempDir())
	cfg.Listen = "127.0.0.1:0"
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := ctxT(t)
	rc, err := Dial(ctx, ClientConfig{Addrs: []string{n.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := rc.CreateTopic(ctx, TopicSpec{Name: "x", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Client().TopicByName("x"); !ok {
		t.Fatal("embedded client does not see the remote write")
	}
}
