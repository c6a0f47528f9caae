package replica

import (
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/internal/tlsconfig/pkitest"
)

// TestTCPTransportMutualTLS: with TLS, transports whose certificates name
// their node ids exchange messages; a peer without TLS, one whose
// certificate another CA signed and one whose certificate names another
// node than its hello declares are refused and counted; a dialer does not
// send to a listener whose certificate names another node than the one it
// dialled.
func TestTCPTransportMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, rogue := pkitest.NewCA(t, "internal CA"), pkitest.NewCA(t, "another CA")
	trust := pkitest.Write(t, dir, "ca.crt", ca.PEM())
	loader := func(name string, keystore []byte) *tlsconfig.Loader {
		t.Helper()
		l, err := tlsconfig.NewLoader(tlsconfig.InternalOptions(tlsconfig.Options{
			KeystoreLocation:   pkitest.Write(t, dir, name+".pem", keystore),
			TruststoreLocation: trust,
		}))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	var addrs sync.Map
	resolve := func(id NodeID) string {
		a, _ := addrs.Load(id)
		s, _ := a.(string)
		return s
	}
	type recv struct {
		from NodeID
		n    int
	}
	start := func(self NodeID, l *tlsconfig.Loader, as NodeID) (*TCPTransport, chan recv) {
		t.Helper()
		tr, err := NewTCPTransport(TCPConfig{Self: self, Listen: "127.0.0.1:0", Resolve: resolve, TLS: l, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		addrs.Store(as, tr.Addr())
		ch := make(chan recv, 64)
		tr.Handle(func(from NodeID, msgs []Envelope) { ch <- recv{from, len(msgs)} })
		return tr, ch
	}
	msg := func(from, to uint64) []Envelope {
		return []Envelope{{Group: Key{Index: 1}, Msg: &raftpb.Message{Type: new(raftpb.MsgHeartbeat), From: new(from), To: new(to), Term: new(uint64(1))}}}
	}
	a, aGot := start(1, loader("a", ca.Issue(t, "a", tlsconfig.NodeName(1))), 1)
	b, _ := start(2, loader("b", ca.Issue(t, "b", tlsconfig.NodeName(2))), 2)
	// Node 3 holds a certificate for node 9; node 4 one of another CA;
	// node 5 has no TLS.
	c, _ := start(3, loader("c", ca.Issue(t, "c", tlsconfig.NodeName(9))), 3)
	d, _ := start(4, loader("d", rogue.Issue(t, "d", tlsconfig.NodeName(4))), 4)
	e, _ := start(5, nil, 5)

	wait := func(ch chan recv, want NodeID) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			b.Send(1, msg(2, 1))
			select {
			case r := <-ch:
				if r.from != want {
					t.Fatalf("delivered from %d, want %d", r.from, want)
				}
				return
			case <-deadline:
				t.Fatalf("nothing delivered from %d", want)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	wait(aGot, 2)

	for _, tr := range []*TCPTransport{c, d, e} {
		tr.Send(1, msg(uint64(tr.cfg.Self), 1))
	}
	want := map[string]int64{"identity": 1, "tls": 2}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := a.Refused()
		if got["identity"] >= want["identity"] && got["tls"] >= want["tls"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refused %v, want at least %v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case r := <-aGot:
		if r.from != 2 {
			t.Fatalf("delivered from %d", r.from)
		}
	default:
	}

	// Node 6 is registered at node 3's address, whose certificate names
	// node 9: node 1 must not send it anything.
	addrs.Store(NodeID(6), c.Addr())
	cGot := make(chan recv, 8)
	c.Handle(func(from NodeID, msgs []Envelope) { cGot <- recv{from, len(msgs)} })
	before := c.Refused()["tls"]
	a.Send(6, msg(1, 6))
	deadline = time.Now().Add(10 * time.Second)
	for c.Refused()["tls"] == before {
		if time.Now().After(deadline) {
			t.Fatal("the dialer did not abort its handshake with the wrong node")
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case r := <-cGot:
		t.Fatalf("delivered to a listener whose certificate names another node (from %d)", r.from)
	case <-time.After(200 * time.Millisecond):
	}
}
