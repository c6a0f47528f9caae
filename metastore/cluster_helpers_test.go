package metastore

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"
)

// testCluster is an in-process metastore group over a Hub.
type testCluster struct {
	t     testing.TB
	hub   *Hub
	mu    sync.Mutex
	dirs  map[uint64]string
	nodes map[uint64]*Node
	mod   func(*Config)
	peers map[uint64]string
}

func newTestCluster(t testing.TB, size int, mod func(*Config)) *testCluster {
	c := &testCluster{t: t, hub: NewHub(1), dirs: map[uint64]string{}, nodes: map[uint64]*Node{}, mod: mod, peers: map[uint64]string{}}
	for id := uint64(1); id <= uint64(size); id++ {
		c.peers[id] = fmt.Sprintf("node-%d", id)
		c.dirs[id] = t.TempDir()
	}
	for id := uint64(1); id <= uint64(size); id++ {
		c.start(id, false)
	}
	t.Cleanup(c.closeAll)
	c.waitLeader()
	return c
}

func (c *testCluster) config(id uint64, join bool) Config {
	cfg := testConfig(c.t, id, c.dirs[id])
	cfg.Peers = c.peers
	cfg.Join = join
	cfg.Transport = c.hub.Transport(id)
	cfg.RequestTimeout = 3 * time.Second
	if c.mod != nil {
		c.mod(&cfg)
	}
	return cfg
}

func (c *testCluster) start(id uint64, join bool) *Node {
	c.t.Helper()
	if _, ok := c.dirs[id]; !ok {
		c.dirs[id] = c.t.TempDir()
	}
	n, err := Open(c.config(id, join))
	if err != nil {
		c.t.Fatalf("open node %d: %v", id, err)
	}
	c.mu.Lock()
	c.nodes[id] = n
	c.mu.Unlock()
	return n
}

func (c *testCluster) stop(id uint64) {
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if n != nil {
		n.Close()
	}
}

func (c *testCluster) closeAll() {
	c.mu.Lock()
	ns := c.nodes
	c.nodes = map[uint64]*Node{}
	c.mu.Unlock()
	for _, n := range ns {
		n.Close()
	}
}

func (c *testCluster) node(id uint64) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *testCluster) ids() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []uint64
	for id := range c.nodes {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// waitLeader waits until the running nodes agree on one leader (among
// them) and the cluster id is set.
func (c *testCluster) waitLeader(among ...uint64) uint64 {
	c.t.Helper()
	if len(among) == 0 {
		among = c.ids()
	}
	var lead uint64
	checkFor(c.t, 15*time.Second, 10*time.Millisecond, func() error {
		lead = 0
		for _, id := range among {
			n := c.node(id)
			if n == nil {
				continue
			}
			l := n.Leader()
			if l == 0 || (lead != 0 && l != lead) {
				return fmt.Errorf("node %d sees leader %d", id, l)
			}
			lead = l
		}
		ok := false
		for _, id := range among {
			if id == lead {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("leader %d not among %v", lead, among)
		}
		if c.node(lead) == nil || c.node(lead).view.ClusterID() == "" {
			return fmt.Errorf("no cluster id yet")
		}
		return nil
	})
	return lead
}

func (c *testCluster) follower(lead uint64) uint64 {
	for _, id := range c.ids() {
		if id != lead {
			return id
		}
	}
	c.t.Fatal("no follower")
	return 0
}

// waitConverged waits until every running node has applied the same index
// and holds the same cache image.
func (c *testCluster) waitConverged() {
	c.t.Helper()
	checkFor(c.t, 20*time.Second, 20*time.Millisecond, func() error {
		var ref *image
		var refID uint64
		for _, id := range c.ids() {
			img := c.node(id).view.image()
			norm(img)
			if ref == nil {
				ref, refID = img, id
				continue
			}
			if img.Rev != ref.Rev {
				return fmt.Errorf("node %d at %d, node %d at %d", id, img.Rev, refID, ref.Rev)
			}
			if !reflect.DeepEqual(img, ref) {
				return fmt.Errorf("node %d image differs from node %d", id, refID)
			}
		}
		return nil
	})
}

func norm(img *image) {
	sort.Slice(img.Topics, func(i, j int) bool { return img.Topics[i].Name < img.Topics[j].Name })
	sort.Slice(img.Brokers, func(i, j int) bool { return img.Brokers[i].ID < img.Brokers[j].ID })
}

// offsetsOn reads a group's offsets straight from a node's bbolt (no
// barrier), for comparing replicas.
func offsetsOn(n *Node, group string) map[TopicPartition]int64 {
	out := map[TopicPartition]int64{}
	resp := n.read(&readRequest{What: "offsets", Group: group})
	for _, o := range resp.Offsets {
		out[o.TopicPartition] = o.Offset
	}
	return out
}

func shortCtx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
