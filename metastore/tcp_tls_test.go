package metastore

import (
	"context"
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
	client := &TCPTransport{closed: make(chan struct{}), tls: loader("b5", tlsconfig.NodeName(5))}
	p := &tcpPeer{t: client, addr: one.Addr(), stopc: make(chan struct{})}
	defer p.stop()
	wc, err := p.conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wc.call(ctx, &Request{}); err != nil {
		t.Fatalf("a broker's request over TLS: %v", err)
	}
}
