package replica

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// tcpHosts runs hosts that talk over TCPTransport on loopback.
type tcpHosts struct {
	t     *testing.T
	root  string
	addrs sync.Map
	mu    sync.Mutex
	hosts map[NodeID]*Host
}

func (th *tcpHosts) start(n NodeID) *Host {
	th.t.Helper()
	tr, err := NewTCPTransport(TCPConfig{
		Self: n, Listen: "127.0.0.1:0", Logger: testLogger(th.t),
		Resolve: func(id NodeID) string {
			a, _ := th.addrs.Load(id)
			s, _ := a.(string)
			return s
		},
	})
	if err != nil {
		th.t.Fatal(err)
	}
	th.addrs.Store(n, tr.Addr())
	h, err := NewHost(HostConfig{
		Node: n, Dir: filepath.Join(th.root, fmt.Sprint("node", n)), Transport: tr, Logger: testLogger(th.t),
		TickInterval: 10 * time.Millisecond, ElectionTicks: 15, HeartbeatTicks: 2,
	})
	if err != nil {
		th.t.Fatal(err)
	}
	th.mu.Lock()
	th.hosts[n] = h
	th.mu.Unlock()
	return h
}

func (th *tcpHosts) stop(n NodeID) {
	th.mu.Lock()
	h := th.hosts[n]
	delete(th.hosts, n)
	th.mu.Unlock()
	if h != nil {
		h.Close()
	}
}

// TestRaftTCP: three voters and a learner over the TCP transport, several partitions
// sharing each peer connection; one host restarts on a new port.
func TestRaftTCP(t *testing.T) {
	th := &tcpHosts{t: t, root: t.TempDir(), hosts: map[NodeID]*Host{}}
	nodes := []NodeID{1, 2, 3}
	const parts = 8
	keys := make([]Key, parts)
	open := func(n NodeID) {
		h := th.start(n)
		for p := range parts {
			keys[p] = Key{TopicID: [16]byte{7}, Index: int32(p)}
			m := Members{Voters: []NodeID{nodes[p%3], nodes[(p+1)%3], nodes[(p+2)%3]}, Learners: []NodeID{4}}
			if _, err := h.Open("tcp", keys[p], m, ReplicaOptions{Log: smallLogConfig()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range append(nodes, 4) {
		open(n)
	}
	defer func() {
		for _, n := range append(nodes, 4) {
			th.stop(n)
		}
	}()
	produce := func(p int, v string) {
		t.Helper()
		checkFor(t, 10*time.Second, func() error {
			th.mu.Lock()
			defer th.mu.Unlock()
			for _, h := range th.hosts {
				r, _ := h.Get(keys[p])
				if r == nil || !r.IsLeader() {
					continue
				}
				pr, err := r.Propose(testBatch(v, 2, -1, 0, 0), AcksAll)
				if err != nil {
					return err
				}
				<-pr.Done()
				_, err = pr.Wait(t.Context())
				return err
			}
			return errors.New("no leader")
		})
	}
	for i := range 10 {
		for p := range parts {
			produce(p, fmt.Sprint("p", p, "-", i))
		}
	}
	th.stop(2)
	for p := range parts {
		produce(p, fmt.Sprint("p", p, "-down"))
	}
	open(2)
	for p := range parts {
		produce(p, fmt.Sprint("p", p, "-back"))
	}
	for p := range parts {
		checkFor(t, 15*time.Second, func() error {
			th.mu.Lock()
			defer th.mu.Unlock()
			var ref []byte
			var hw int64 = -1
			for n, h := range th.hosts {
				r, _ := h.Get(keys[p])
				if hw == -1 {
					hw = r.HighWatermark()
				}
				if r.HighWatermark() != hw || r.LogEndOffset() != hw {
					return fmt.Errorf("partition %d node %d: hw %d end %d, want %d", p, n, r.HighWatermark(), r.LogEndOffset(), hw)
				}
				b := logBytes(t, r)
				if ref == nil {
					ref = b
				} else if !bytes.Equal(ref, b) {
					return fmt.Errorf("partition %d: logs differ", p)
				}
			}
			if hw < 2*12 {
				return fmt.Errorf("partition %d: hw %d", p, hw)
			}
			return nil
		})
	}
}
