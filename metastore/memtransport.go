package metastore

import (
	"context"
	"math/rand"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Hub is an in-memory network for tests (NATS raft_transport_helpers_test.go
// style): every node gets a HubTransport from it, and the hub can partition
// nodes, drop, delay and duplicate raft messages, run a hook on each one,
// and pause a node (Pause).
// Raft messages are marshalled and unmarshalled on the way, as on a wire, so
// no memory is shared between nodes. Clients (HubClient) are endpoints too
// and are partitioned like nodes.
type Hub struct {
	mu      sync.Mutex
	eps     map[uint64]*HubTransport
	cut     map[[2]uint64]bool // directed from->to links that are down
	drop    float64
	dup     float64
	delayLo time.Duration
	delayHi time.Duration
	onSend  func(from, to uint64, m *pb.Message) bool
	rng     *rand.Rand
	// paused nodes (Pause) and what waits for each: raft messages and
	// requests sent to it, in the order they arrived.
	paused map[uint64]bool
	held   map[uint64][]func(*sync.WaitGroup)
}

// NewHub makes an empty network.
func NewHub(seed int64) *Hub {
	return &Hub{eps: map[uint64]*HubTransport{}, cut: map[[2]uint64]bool{}, rng: rand.New(rand.NewSource(seed)),
		paused: map[uint64]bool{}, held: map[uint64][]func(*sync.WaitGroup){}}
}

// Pause makes node id look, to the network, like a stopped process
// (SIGSTOP, a long stall): what it sends is lost, and what is sent to it,
// raft messages and requests, waits as in its socket buffers until Resume.
// A caller whose request waits gives up at its own deadline, not knowing
// whether the request will run; at Resume it runs with the deadline it
// carried (Request.TimeoutMs), counted from then, as a TCP server counts
// it from when it reads the frame. The node itself keeps running (its
// raft ticks: a paused leader steps down, CheckQuorum).
func (h *Hub) Pause(id uint64) {
	h.mu.Lock()
	h.paused[id] = true
	h.mu.Unlock()
}

// Resume delivers what waited for node id, in order, and returns once the
// requests among it have been answered.
func (h *Hub) Resume(id uint64) {
	h.mu.Lock()
	delete(h.paused, id)
	held := h.held[id]
	delete(h.held, id)
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, fn := range held {
		fn(&wg)
	}
	wg.Wait()
}

func (h *Hub) isPaused(id uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paused[id]
}

// hold keeps fn for Resume if node to is paused.
func (h *Hub) hold(to uint64, fn func(*sync.WaitGroup)) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.paused[to] {
		return false
	}
	h.held[to] = append(h.held[to], fn)
	return true
}

// Transport returns the endpoint for node id (a new one each call: a
// restarted node gets a fresh endpoint).
func (h *Hub) Transport(id uint64) *HubTransport {
	t := &HubTransport{hub: h, id: id, inbox: make(chan *pb.Message, 8192), stopc: make(chan struct{})}
	return t
}

// Partition cuts every link between the ids given and everyone else.
func (h *Hub) Partition(ids ...uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	in := map[uint64]bool{}
	for _, id := range ids {
		in[id] = true
	}
	for a := range h.allIDsLocked() {
		for b := range h.allIDsLocked() {
			if in[a] != in[b] {
				h.cut[[2]uint64{a, b}] = true
			}
		}
	}
}

// Cut cuts the link from a to b (one direction).
func (h *Hub) Cut(a, b uint64) {
	h.mu.Lock()
	h.cut[[2]uint64{a, b}] = true
	h.mu.Unlock()
}

// Heal restores every link and removes drop, delay and duplication.
func (h *Hub) Heal() {
	h.mu.Lock()
	h.cut = map[[2]uint64]bool{}
	h.drop, h.dup, h.delayLo, h.delayHi = 0, 0, 0, 0
	h.mu.Unlock()
}

// Drop drops each raft message with probability p.
func (h *Hub) Drop(p float64) { h.mu.Lock(); h.drop = p; h.mu.Unlock() }

// Duplicate delivers each raft message twice with probability p.
func (h *Hub) Duplicate(p float64) { h.mu.Lock(); h.dup = p; h.mu.Unlock() }

// Delay delays each raft message and call by a random duration in [lo, hi]
// (which also reorders messages).
func (h *Hub) Delay(lo, hi time.Duration) {
	h.mu.Lock()
	h.delayLo, h.delayHi = lo, hi
	h.mu.Unlock()
}

// OnSend installs a hook run on every raft message; returning false drops it.
func (h *Hub) OnSend(fn func(from, to uint64, m *pb.Message) bool) {
	h.mu.Lock()
	h.onSend = fn
	h.mu.Unlock()
}

func (h *Hub) allIDsLocked() map[uint64]bool {
	ids := map[uint64]bool{}
	for id := range h.eps {
		ids[id] = true
	}
	for k := range h.cut {
		ids[k[0]], ids[k[1]] = true, true
	}
	return ids
}

// register makes id reachable; an endpoint id must be registered before a
// Partition call to be included in it.
func (h *Hub) register(t *HubTransport) {
	h.mu.Lock()
	h.eps[t.id] = t
	h.mu.Unlock()
}

func (h *Hub) unregister(t *HubTransport) {
	h.mu.Lock()
	if h.eps[t.id] == t {
		delete(h.eps, t.id)
	}
	h.mu.Unlock()
}

// route decides the fate of one message from a to b: the destination (nil:
// unreachable), how many copies and after what delay.
func (h *Hub) route(a, b uint64, m *pb.Message) (*HubTransport, int, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dst := h.eps[b]
	if dst == nil || h.cut[[2]uint64{a, b}] {
		return nil, 0, 0
	}
	if m != nil {
		if h.onSend != nil && !h.onSend(a, b, m) {
			return dst, 0, 0
		}
		if h.drop > 0 && h.rng.Float64() < h.drop {
			return dst, 0, 0
		}
	}
	copies := 1
	if m != nil && h.dup > 0 && h.rng.Float64() < h.dup {
		copies = 2
	}
	d := h.delayLo
	if h.delayHi > h.delayLo {
		d += time.Duration(h.rng.Int63n(int64(h.delayHi - h.delayLo)))
	}
	return dst, copies, d
}

// Add registers a client endpoint id (no node behind it), so partitions
// include it.
func (h *Hub) Add(id uint64) {
	h.mu.Lock()
	if _, ok := h.eps[id]; !ok {
		h.eps[id] = nil
	}
	h.mu.Unlock()
}

// HubTransport is one node's endpoint on a Hub.
type HubTransport struct {
	hub   *Hub
	id    uint64
	h     Handler
	inbox chan *pb.Message
	stopc chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// Start implements Transport.
func (t *HubTransport) Start(h Handler) error {
	t.h = h
	t.hub.register(t)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			select {
			case m := <-t.inbox:
				t.h.HandleRaft(m)
			case <-t.stopc:
				return
			}
		}
	}()
	return nil
}

// Send implements Transport.
func (t *HubTransport) Send(msgs []*pb.Message) {
	if t.hub.isPaused(t.id) {
		return // a stopped process sends nothing
	}
	for _, m := range msgs {
		to := m.GetTo()
		dst, copies, delay := t.hub.route(t.id, to, m)
		isSnap := m.GetType() == pb.MsgSnap
		if dst == nil || copies == 0 {
			if isSnap {
				go t.h.ReportSnapshot(to, false)
			} else if dst == nil {
				go t.h.ReportUnreachable(to)
			}
			continue
		}
		data, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		for i := 0; i < copies; i++ {
			cp := &pb.Message{}
			if err := proto.Unmarshal(data, cp); err != nil {
				panic(err)
			}
			deliver := func() {
				ok := dst.enqueue(cp)
				if isSnap && i == 0 {
					t.h.ReportSnapshot(to, ok)
				}
			}
			if t.hub.hold(to, func(*sync.WaitGroup) { deliver() }) {
				continue
			}
			if delay > 0 {
				time.AfterFunc(delay, deliver)
			} else if isSnap {
				go deliver()
			} else {
				dst.enqueue(cp)
			}
		}
	}
}

func (t *HubTransport) enqueue(m *pb.Message) bool {
	select {
	case <-t.stopc:
		return false
	default:
	}
	select {
	case t.inbox <- m:
		return true
	default:
		return false // full: dropped, raft retries
	}
}

// Call implements Transport.
func (t *HubTransport) Call(ctx context.Context, to uint64, req *Request) (*Response, error) {
	return t.hub.call(ctx, t.id, to, req)
}

func (h *Hub) call(ctx context.Context, from, to uint64, req *Request) (*Response, error) {
	dst, _, delay := h.route(from, to, nil)
	if dst == nil || dst.h == nil {
		return nil, ErrUnreachable
	}
	if h.isPaused(from) {
		return nil, ErrUnreachable // a stopped process sends nothing
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// To a paused node: the request waits for Resume, and runs then with
	// the deadline it carries (no context crosses a wire).
	ch := make(chan *Response, 1)
	fwd := *req
	if h.hold(to, func(wg *sync.WaitGroup) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch <- dst.h.HandleRequest(context.Background(), &fwd)
		}()
	}) {
		select {
		case resp := <-ch:
			if h.isCut(to, from) {
				return nil, ErrTimeout
			}
			return resp, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	resp := dst.h.HandleRequest(ctx, req)
	// The answer crosses the network too.
	if h.isCut(to, from) {
		return nil, ErrTimeout // executed, but the answer is lost
	}
	return resp, nil
}

func (h *Hub) isCut(a, b uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cut[[2]uint64{a, b}]
}

// AddPeer implements Transport (the hub routes by id).
func (t *HubTransport) AddPeer(uint64, string) {}

// RemovePeer implements Transport.
func (t *HubTransport) RemovePeer(uint64) {}

// Close implements Transport.
func (t *HubTransport) Close() error {
	t.once.Do(func() {
		t.hub.unregister(t)
		close(t.stopc)
	})
	t.wg.Wait()
	return nil
}

// HubClient returns a remote-style Client (its own cache, fed by a watch)
// that reaches the given nodes through the hub as endpoint id clientID.
func (h *Hub) HubClient(clientID uint64, nodes ...uint64) *Client {
	h.Add(clientID)
	var eps []callFunc
	for _, n := range nodes {
		n := n
		eps = append(eps, func(ctx context.Context, req *Request) (*Response, error) {
			return h.call(ctx, clientID, n, req)
		})
	}
	return newRemoteClient(eps, ClientConfig{})
}
