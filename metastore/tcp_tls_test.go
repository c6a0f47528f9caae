package metastore

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/internal/tlsconfig/pkitest"
)

// tlsHandler records the raft messages a transport receives and answers
// every request.
type tlsHandler struct{ got chan uint64 }

func (h *tlsHandler) HandleRaft(m *pb.Message) { h.got <- m.GetFrom() }
func (h *tlsHandler) HandleRequest(context.Context, *Request) *Response {
	return &Response{}
}
func (h *tlsHandler) ReportUnreachable(uint64)    {}
func (h *tlsHandler) ReportSnapshot(uint64, bool) {}

// TestTCPTransportMutualTLS: members whose certificates name them
// (meta-<id>) exchange raft messages; a member whose certificate names
// another id is refused when it sends raft messages and counted; a
// plaintext peer is refused at the handshake; a broker's client (any
// trusted certificate) is served requests.
func TestTCPTransportMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := pkitest.NewCA(t, "internal CA")
	trust := pkitest.Write(t, dir, "ca.crt", ca.PEM())
	loader := func(name string, dns ...string) *tlsconfig.Loader {
		t.Helper()
		l, err := tlsconfig.NewLoader(tlsconfig.InternalOptions(tlsconfig.Options{
			KeystoreLocation:   pkitest.Write(t, dir, name+".pem", ca.Issue(t, name, dns...)),
			TruststoreLocation: trust,
		}))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	start := func(id uint64, l *tlsconfig.Loader) (*TCPTransport, *tlsHandler) {
		t.Helper()
		tr := NewTCPTransport(id, "127.0.0.1:0", zerolog.Nop())
		tr.SetTLS(l)
		h := &tlsHandler{got: make(chan uint64, 64)}
		if err := tr.Start(h); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr, h
	}
	one, oneGot := start(1, loader("m1", tlsconfig.MetaName(1)))
	two, _ := start(2, loader("m2", tlsconfig.MetaName(2)))
	impostor, _ := start(3, loader("m3", tlsconfig.MetaName(9)))
	plain, _ := start(4, nil)
	for _, tr := range []*TCPTransport{two, impostor, plain} {
		tr.AddPeer(1, one.Addr())
	}
	hb := func(from uint64) []*pb.Message {
		return []*pb.Message{{Type: new(pb.MsgHeartbeat), From: new(from), To: new(uint64(1)), Term: new(uint64(1))}}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		two.Send(hb(2))
		impostor.Send(hb(3))
		plain.Send(hb(4))
		select {
		case from := <-oneGot.got:
			if from != 2 {
				t.Fatalf("raft message from %d delivered", from)
			}
		case <-time.After(100 * time.Millisecond):
		}
		r := one.Refused()
		if r["identity"] >= 1 && r["tls"] >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refused %v, want identity and tls", r)
		}
	}
	for len(oneGot.got) > 0 {
		if from := <-oneGot.got; from != 2 {
			t.Fatalf("raft message from %d delivered", from)
		}
	}

	// A member dials a peer only if the peer's certificate names it: node
	// 1 registered at the impostor's address is not reached.
	two.AddPeer(3, impostor.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := two.Call(ctx, 3, &Request{}); err == nil {
		t.Fatal("called a member whose certificate names another id")
	}
	// A broker's client: a trusted certificate of no member.
	p := &caller{addr: one.Addr(), tls: loader("b5", tlsconfig.NodeName(5)), stopc: make(chan struct{})}
	defer p.stop()
	wc, err := p.conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wc.call(ctx, &Request{}); err != nil {
		t.Fatalf("a broker's request over TLS: %v", err)
	}
}

// fromHandler records the senders of the raft messages a transport
// receives without ever blocking it, and answers every request.
type fromHandler struct {
	tlsHandler
	mu   sync.Mutex
	from map[uint64]int
}

func (h *fromHandler) HandleRaft(m *pb.Message) {
	h.mu.Lock()
	h.from[m.GetFrom()]++
	h.mu.Unlock()
}

func (h *fromHandler) delivered() map[uint64]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.from)
}

// TestTCPTransportChecksMembers: without TLS a member takes raft messages
// only from a member it knows, over a connection from the IP that member
// is registered at (any loopback address for one registered at a
// loopback address); others are refused and counted by reason, and
// requests are served to anyone.
func TestTCPTransportChecksMembers(t *testing.T) {
	start := func(id uint64) (*TCPTransport, *fromHandler) {
		t.Helper()
		tr := NewTCPTransport(id, "127.0.0.1:0", zerolog.Nop())
		h := &fromHandler{from: map[uint64]int{}}
		if err := tr.Start(h); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr, h
	}
	one, oneGot := start(1)
	two, _ := start(2)         // a member, at its address
	elsewhere, _ := start(3)   // a member registered at another host's IP
	stranger, _ := start(4)    // not a member
	otherLoop, _ := start(5)   // a member registered at another loopback IP
	one.AddPeer(2, two.Addr()) // 127.0.0.1
	one.AddPeer(3, "192.0.2.1:9391")
	one.AddPeer(5, "127.0.0.2:9391")
	for _, tr := range []*TCPTransport{two, elsewhere, stranger, otherLoop} {
		tr.AddPeer(1, one.Addr())
	}
	hb := func(from uint64) []*pb.Message {
		return []*pb.Message{{Type: new(pb.MsgHeartbeat), From: new(from), To: new(uint64(1)), Term: new(uint64(1))}}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		two.Send(hb(2))
		elsewhere.Send(hb(3))
		stranger.Send(hb(4))
		otherLoop.Send(hb(5))
		time.Sleep(50 * time.Millisecond)
		r, got := one.Refused(), oneGot.delivered()
		if got[3] > 0 || got[4] > 0 {
			t.Fatalf("raft messages delivered from %v (refused %v)", got, r)
		}
		if r["unknown_node"] >= 1 && r["address"] >= 1 && got[2] > 0 && got[5] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refused %v, delivered from %v; want unknown_node and address refused, 2 and 5 delivered", r, got)
		}
	}
	// A member may not speak as the node it sends to.
	before := one.Refused()["unknown_node"]
	deadline = time.Now().Add(10 * time.Second)
	for one.Refused()["unknown_node"] == before {
		if time.Now().After(deadline) {
			t.Fatal("a raft message from the receiver's own id was not refused")
		}
		two.Send(hb(1)) // a refusal closes the connection; the next redials
		time.Sleep(50 * time.Millisecond)
	}
	if got := oneGot.delivered(); got[1] > 0 {
		t.Fatalf("raft messages delivered from %v", got)
	}
	// Requests: a stranger's are served.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := stranger.Call(ctx, 1, &Request{}); err != nil {
		t.Fatalf("a request from a non-member: %v", err)
	}
}
