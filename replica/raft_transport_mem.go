package replica

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// MemNetwork is an in-process network of Transports for tests, with fault
// injection in the style of NATS's raft test transport: links can be cut
// (Partition, Cut) and healed, and each message can be dropped, duplicated
// or delayed at random, or inspected and dropped by an OnSend hook. Every
// message is marshalled and unmarshalled on the way, as on a real wire, so
// no memory is shared between hosts.
type MemNetwork struct {
	mu      sync.Mutex
	nodes   map[NodeID]*memTransport
	cut     map[[2]NodeID]bool // directed links that lose everything
	drop    float64
	dup     float64
	delayLo time.Duration
	delayHi time.Duration
	onSend  func(from, to NodeID, e Envelope) bool
	rng     *rand.Rand

	Sent, Dropped, Delivered atomic.Int64
}

// NewMemNetwork returns a fault-free network; seed drives its randomness.
func NewMemNetwork(seed uint64) *MemNetwork {
	return &MemNetwork{
		nodes: map[NodeID]*memTransport{},
		cut:   map[[2]NodeID]bool{},
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// Transport returns the endpoint of node id, replacing an earlier one (a
// restarted broker).
func (n *MemNetwork) Transport(id NodeID) Transport {
	t := &memTransport{net: n, id: id, in: make(chan memDelivery, 4096), done: make(chan struct{})}
	n.mu.Lock()
	n.nodes[id] = t
	n.mu.Unlock()
	go t.run()
	return t
}

// SetFaults sets the probability that a message is dropped and that it is
// delivered twice, and the range of delay added to each batch.
func (n *MemNetwork) SetFaults(drop, dup float64, delayLo, delayHi time.Duration) {
	n.mu.Lock()
	n.drop, n.dup, n.delayLo, n.delayHi = drop, dup, delayLo, delayHi
	n.mu.Unlock()
}

// OnSend installs a hook called for every message; returning false drops it.
func (n *MemNetwork) OnSend(fn func(from, to NodeID, e Envelope) bool) {
	n.mu.Lock()
	n.onSend = fn
	n.mu.Unlock()
}

// Cut drops everything from a to b and from b to a.
func (n *MemNetwork) Cut(a, b NodeID) {
	n.mu.Lock()
	n.cut[[2]NodeID{a, b}], n.cut[[2]NodeID{b, a}] = true, true
	n.mu.Unlock()
}

// Partition isolates the given nodes from every other node (they still
// reach each other).
func (n *MemNetwork) Partition(side ...NodeID) {
	in := map[NodeID]bool{}
	for _, s := range side {
		in[s] = true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for a := range n.nodes {
		for b := range n.nodes {
			if in[a] != in[b] {
				n.cut[[2]NodeID{a, b}] = true
			}
		}
	}
}

// Heal restores every link and removes random faults.
func (n *MemNetwork) Heal() {
	n.mu.Lock()
	n.cut = map[[2]NodeID]bool{}
	n.drop, n.dup, n.delayLo, n.delayHi = 0, 0, 0, 0
	n.mu.Unlock()
}

type memDelivery struct {
	from NodeID
	msgs []Envelope
}

type memTransport struct {
	net  *MemNetwork
	id   NodeID
	in   chan memDelivery
	h    atomic.Pointer[func(NodeID, []Envelope)]
	done chan struct{}
	once sync.Once
}

func (t *memTransport) Handle(h func(NodeID, []Envelope)) { t.h.Store(&h) }

func (t *memTransport) Close() error {
	t.once.Do(func() {
		t.net.mu.Lock()
		if t.net.nodes[t.id] == t {
			delete(t.net.nodes, t.id)
		}
		t.net.mu.Unlock()
		close(t.done)
	})
	return nil
}

func (t *memTransport) run() {
	for {
		select {
		case <-t.done:
			return
		case d := <-t.in:
			if h := t.h.Load(); h != nil {
				(*h)(d.from, d.msgs)
				t.net.Delivered.Add(int64(len(d.msgs)))
			}
		}
	}
}

func (t *memTransport) Send(to NodeID, msgs []Envelope) {
	n := t.net
	n.Sent.Add(int64(len(msgs)))
	// Copy through the wire format.
	frame, err := encodeFrame(nil, msgs)
	if err != nil {
		n.Dropped.Add(int64(len(msgs)))
		return
	}
	msgs, err = decodeFrame(frame[4:])
	if err != nil {
		panic(err)
	}
	n.mu.Lock()
	dst := n.nodes[to]
	if dst == nil || n.cut[[2]NodeID{t.id, to}] {
		n.mu.Unlock()
		n.Dropped.Add(int64(len(msgs)))
		return
	}
	out := msgs[:0:0]
	var dups []Envelope
	for _, e := range msgs {
		if n.onSend != nil && !n.onSend(t.id, to, e) {
			n.Dropped.Add(1)
			continue
		}
		if n.drop > 0 && n.rng.Float64() < n.drop {
			n.Dropped.Add(1)
			continue
		}
		out = append(out, e)
		if n.dup > 0 && n.rng.Float64() < n.dup {
			dups = append(dups, e)
		}
	}
	var delay, delay2 time.Duration
	if n.delayHi > 0 {
		delay = n.delayLo + time.Duration(n.rng.Int64N(int64(n.delayHi-n.delayLo)+1))
		delay2 = n.delayLo + time.Duration(n.rng.Int64N(int64(n.delayHi-n.delayLo)+1))
	}
	n.mu.Unlock()
	if len(dups) > 0 {
		// A duplicate is a second copy, decoded again so it shares nothing.
		f, _ := encodeFrame(nil, dups)
		dups, _ = decodeFrame(f[4:])
		dst.deliver(t.id, dups, delay2)
	}
	if len(out) > 0 {
		dst.deliver(t.id, out, delay)
	}
}

func (t *memTransport) deliver(from NodeID, msgs []Envelope, delay time.Duration) {
	put := func() {
		select {
		case t.in <- memDelivery{from: from, msgs: msgs}:
		case <-t.done:
		default:
			t.net.Dropped.Add(int64(len(msgs)))
		}
	}
	if delay > 0 {
		time.AfterFunc(delay, put)
		return
	}
	put()
}
