package replica

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/internal/peeraddr"
	"github.com/sluice-broker/sluice/internal/tlsconfig"
)

// TCPConfig configures a TCPTransport.
type TCPConfig struct {
	Self NodeID
	// Listen is the address to accept peers on ("127.0.0.1:0" for tests).
	Listen string
	// Resolve returns a peer's address; "" means unknown for now.
	Resolve func(NodeID) string
	// QueueLen bounds the batches waiting for one peer (default 1024);
	// when it is full, Send drops.
	QueueLen int
	// TLS, when set, makes every connection mutual TLS: both sides present
	// a certificate the trust store signed, and a peer's certificate must
	// name the node id its hello declares (tlsconfig.NodeName).
	TLS    *tlsconfig.Loader
	Logger zerolog.Logger
}

// TCPTransport is the production Transport: one outbound TCP connection
// per peer broker, written by one goroutine that coalesces everything
// queued for that peer, across groups, into one frame per write; inbound
// connections are read by one goroutine each. A connection starts with
// "SLRT" | version u16 | node i32, then frames (see encodeFrame).
//
// An inbound connection is kept only if the node it declares resolves
// (Resolve: a registered broker) and, when that broker's address is a
// specific IP, the connection comes from that IP (loopback from loopback:
// peeraddr.FromHost); a broker dials from the
// IP it listens on, so the check holds on multi-homed hosts. A later
// connection of the same node replaces the earlier one. This stops
// strays and misconfigured peers, not an attacker who can use a broker's
// address, unless TLS is configured: then the connection is mutual TLS
// first, and the declared node must be the one the peer's certificate
// names (refused as RefusedIdentity otherwise), so the hello is
// authenticated; the dialer checks in turn that the certificate of the
// broker it reached names the node it dialled.
type TCPTransport struct {
	cfg TCPConfig
	lg  zerolog.Logger
	ln  net.Listener
	// local is the IP outbound connections are made from: the listening
	// IP, unless that is unspecified.
	local net.IP

	h atomic.Pointer[func(NodeID, []Envelope)]

	mu      sync.Mutex
	peers   map[NodeID]*tcpPeer
	conns   map[net.Conn]struct{}
	inbound map[NodeID]net.Conn
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	handshaking atomic.Int32
	refused     refusals

	Dropped atomic.Int64
}

const tcpMagic = 0x534c5254 // "SLRT"

// helloTimeout bounds the wait for a new connection's hello (a variable
// for tests).
var helloTimeout = 10 * time.Second

// maxHandshaking bounds the inbound connections that have not sent their
// hello yet; more are closed at once.
const maxHandshaking = 64

// NewTCPTransport listens and returns the transport; peers are dialled on
// first Send.
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 1024
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	t := &TCPTransport{
		cfg: cfg, ln: ln,
		lg:      cfg.Logger.With().Str("component", "raft-transport").Logger(),
		peers:   map[NodeID]*tcpPeer{},
		conns:   map[net.Conn]struct{}{},
		inbound: map[NodeID]net.Conn{},
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsUnspecified() {
		t.local = a.IP
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// Addr is the listening address.
func (t *TCPTransport) Addr() string { return t.ln.Addr().String() }

// Refused returns the connections and frames refused, by reason (see
// Refusal).
func (t *TCPTransport) Refused() map[string]int64 {
	out := map[string]int64{}
	t.refused.snapshot(out)
	return out
}

func (t *TCPTransport) refuse(why Refusal, c net.Conn, node NodeID, err error) {
	t.refused.add(&t.lg, why, func(e *zerolog.Event) {
		e.Str("remote", c.RemoteAddr().String()).Int32("peer", int32(node)).AnErr("error", err)
	})
}

// Handle implements Transport.
func (t *TCPTransport) Handle(h func(NodeID, []Envelope)) { t.h.Store(&h) }

// Send implements Transport.
func (t *TCPTransport) Send(to NodeID, msgs []Envelope) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	p := t.peers[to]
	if p == nil {
		p = &tcpPeer{t: t, id: to, q: make(chan encoded, t.cfg.QueueLen)}
		t.peers[to] = p
		t.wg.Add(1)
		go p.run()
	}
	t.mu.Unlock()
	// Encode now, in the caller's goroutine: raft's doc.go asks that
	// messages be marshalled before the raft loop moves on.
	b, err := encodeEnvelopes(nil, msgs)
	if err != nil {
		t.lg.Error().Err(err).Msg("raft transport: encoding messages")
		return
	}
	select {
	case p.q <- encoded{n: len(msgs), b: b}:
	default:
		t.Dropped.Add(int64(len(msgs)))
	}
}

// encoded is a batch of envelopes in wire form, waiting for a peer's writer.
type encoded struct {
	n int
	b []byte
}

// Close implements Transport: it stops accepting, closes every connection
// and waits for the goroutines.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.cancel()
	err := t.ln.Close()
	t.wg.Wait()
	return err
}

func (t *TCPTransport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *TCPTransport) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	c.Close()
}

func (t *TCPTransport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		if t.handshaking.Add(1) > maxHandshaking {
			t.handshaking.Add(-1)
			t.refuse(RefusedBusy, c, -1, nil)
			c.Close()
			continue
		}
		if !t.track(c) {
			t.handshaking.Add(-1)
			return
		}
		t.wg.Add(1)
		go t.read(c)
	}
}

// hello runs the TLS handshake when configured, reads and checks a new
// connection's hello and returns the peer and the connection to read.
func (t *TCPTransport) hello(c net.Conn) (NodeID, net.Conn, *bufio.Reader, bool) {
	defer t.handshaking.Add(-1)
	var tc *tls.Conn
	if t.cfg.TLS != nil {
		var err error
		if tc, err = t.cfg.TLS.Server(c, helloTimeout); err != nil {
			if t.ctx.Err() == nil {
				t.refuse(RefusedTLS, c, -1, err)
			}
			return 0, nil, nil, false
		}
		c = tc
	}
	br := bufio.NewReaderSize(c, 64<<10)
	from, ok := t.checkHello(c, br)
	if !ok {
		return from, nil, nil, false
	}
	if tc != nil {
		if err := tlsconfig.PeerNamesNode(tc.ConnectionState(), int64(from)); err != nil {
			t.refuse(RefusedIdentity, c, from, err)
			return from, nil, nil, false
		}
	}
	return from, c, br, true
}

// checkHello reads and checks the hello.
func (t *TCPTransport) checkHello(c net.Conn, br *bufio.Reader) (NodeID, bool) {
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	var hello [10]byte
	if _, err := io.ReadFull(br, hello[:]); err != nil {
		if t.ctx.Err() == nil {
			t.refuse(RefusedHandshake, c, -1, err)
		}
		return 0, false
	}
	if binary.BigEndian.Uint32(hello[:]) != tcpMagic || binary.BigEndian.Uint16(hello[4:]) != 1 {
		t.refuse(RefusedHandshake, c, -1, nil)
		return 0, false
	}
	from := NodeID(int32(binary.BigEndian.Uint32(hello[6:])))
	addr := ""
	if from >= 0 && from != t.cfg.Self && t.cfg.Resolve != nil {
		addr = t.cfg.Resolve(from)
	}
	if addr == "" {
		t.refuse(RefusedUnknownNode, c, from, nil)
		return from, false
	}
	if !peeraddr.FromHost(c.RemoteAddr(), addr) {
		t.refuse(RefusedAddress, c, from, fmt.Errorf("registered at %s", addr))
		return from, false
	}
	c.SetReadDeadline(time.Time{})
	return from, true
}

// adopt makes c the inbound connection of node from, closing the one it
// replaces (a peer that redialled leaves its old connection behind).
func (t *TCPTransport) adopt(from NodeID, c net.Conn) {
	t.mu.Lock()
	old := t.inbound[from]
	t.inbound[from] = c
	t.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

func (t *TCPTransport) disown(from NodeID, c net.Conn) {
	t.mu.Lock()
	if t.inbound[from] == c {
		delete(t.inbound, from)
	}
	t.mu.Unlock()
}

func (t *TCPTransport) read(c net.Conn) {
	defer t.wg.Done()
	defer t.untrack(c)
	from, rc, br, ok := t.hello(c)
	if !ok {
		return
	}
	t.adopt(from, c)
	defer t.disown(from, c)
	if rc != c {
		// Close the TLS connection too, so the alert goes out.
		defer rc.Close()
	}
	var lenb [4]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(br, lenb[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(lenb[:])
		if n > maxFrameBytes {
			t.refuse(RefusedFrame, c, from, fmt.Errorf("frame of %d bytes", n))
			return
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return
		}
		msgs, err := decodeFrame(buf)
		if err != nil {
			t.refuse(RefusedFrame, c, from, err)
			return
		}
		if h := t.h.Load(); h != nil {
			(*h)(from, msgs)
		}
	}
}

type tcpPeer struct {
	t  *TCPTransport
	id NodeID
	q  chan encoded
}

// run dials the peer, then writes whatever is queued as one frame per
// round; on an error it drops what it holds, waits and redials.
func (p *tcpPeer) run() {
	t := p.t
	defer t.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		if t.ctx.Err() != nil {
			return
		}
		c, raw, err := p.dial()
		if err != nil {
			// Messages queued while the peer is down are stale by the time
			// it returns; raft resends what matters.
			p.drain()
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		err = p.write(c)
		c.Close()
		t.untrack(raw)
		if err != nil && t.ctx.Err() == nil {
			t.lg.Debug().Err(err).Int32("peer", int32(p.id)).Msg("raft transport: connection lost")
		}
	}
}

// dial returns the connection to write to and the TCP connection under
// it (the same one without TLS), which is what the transport tracks.
func (p *tcpPeer) dial() (net.Conn, net.Conn, error) {
	t := p.t
	addr := ""
	if t.cfg.Resolve != nil {
		addr = t.cfg.Resolve(p.id)
	}
	if addr == "" {
		return nil, nil, fmt.Errorf("no address for node %d", p.id)
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	if t.local != nil {
		// From the address peers know this broker by (see peeraddr.FromHost).
		d.LocalAddr = &net.TCPAddr{IP: t.local}
	}
	c, err := d.DialContext(t.ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if !t.track(c) {
		return nil, nil, errors.New("transport closed")
	}
	raw := c
	if t.cfg.TLS != nil {
		tc, err := t.cfg.TLS.DialPeer(c, int64(p.id), helloTimeout)
		if err != nil {
			t.untrack(raw)
			return nil, nil, fmt.Errorf("TLS with node %d: %w", p.id, err)
		}
		c = tc
	}
	var hello [10]byte
	binary.BigEndian.PutUint32(hello[:], tcpMagic)
	binary.BigEndian.PutUint16(hello[4:], 1)
	binary.BigEndian.PutUint32(hello[6:], uint32(t.cfg.Self))
	c.SetWriteDeadline(time.Now().Add(helloTimeout))
	if _, err := c.Write(hello[:]); err != nil {
		t.untrack(raw)
		return nil, nil, err
	}
	return c, raw, nil
}

func (p *tcpPeer) drain() {
	for {
		select {
		case e := <-p.q:
			p.t.Dropped.Add(int64(e.n))
		default:
			return
		}
	}
}

func (p *tcpPeer) write(c net.Conn) error {
	var buf []byte
	var bodies [][]byte
	for {
		var first encoded
		select {
		case <-p.t.ctx.Done():
			return nil
		case first = <-p.q:
		}
		// Coalesce everything else already queued for this peer, every
		// group's messages, into one frame and one write.
		bodies = append(bodies[:0], first.b)
		count, size := first.n, len(first.b)
	more:
		for size < 4<<20 {
			select {
			case e := <-p.q:
				bodies = append(bodies, e.b)
				count += e.n
				size += len(e.b)
			default:
				break more
			}
		}
		var err error
		buf, err = appendFrame(buf[:0], bodies, count)
		if err != nil {
			p.t.lg.Error().Err(err).Msg("raft transport: frame too large; dropped")
			p.t.Dropped.Add(int64(count))
			continue
		}
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(buf); err != nil {
			p.t.Dropped.Add(int64(count))
			return err
		}
	}
}
