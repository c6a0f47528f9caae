package replica

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
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
	Logger   zerolog.Logger
}

// TCPTransport is the production Transport: one outbound TCP connection
// per peer broker, written by one goroutine that coalesces everything
// queued for that peer, across groups, into one frame per write; inbound
// connections are read by one goroutine each. A connection starts with
// "SLRT" | version u16 | node i32, then frames (see encodeFrame).
//
// An inbound connection is kept only if the node it declares resolves
// (Resolve: a registered broker) and, when that broker's address is a
// specific IP, the connection comes from that IP; a broker dials from the
// IP it listens on, so the check holds on multi-homed hosts. A later
// connection of the same node replaces the earlier one. This stops
// strays and misconfigured peers, not an attacker who can use a broker's
// address: the hello is not authenticated (TLS or a shared secret on this
// port is a separate piece of work).
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

// hello reads and checks a new connection's hello and returns the peer.
func (t *TCPTransport) hello(c net.Conn, br *bufio.Reader) (NodeID, bool) {
	defer t.handshaking.Add(-1)
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
	if !fromAddr(c.RemoteAddr(), addr) {
		t.refuse(RefusedAddress, c, from, fmt.Errorf("registered at %s", addr))
		return from, false
	}
	c.SetReadDeadline(time.Time{})
	return from, true
}

// fromAddr reports whether remote may be the broker registered at addr:
// the same IP, when addr names a specific one (a host name or an
// unspecified IP cannot be checked here).
func fromAddr(remote net.Addr, addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.IsUnspecified() {
		return true
	}
	ra, ok := remote.(*net.TCPAddr)
	return !ok || ra.IP.Equal(ip)
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
	br := bufio.NewReaderSize(c, 64<<10)
	from, ok := t.hello(c, br)
	if !ok {
		return
	}
	t.adopt(from, c)
	defer t.disown(from, c)
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
		c, err := p.dial()
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
		t.untrack(c)
		if err != nil && t.ctx.Err() == nil {
			t.lg.Debug().Err(err).Int32("peer", int32(p.id)).Msg("raft transport: connection lost")
		}
	}
}

func (p *tcpPeer) dial() (net.Conn, error) {
	t := p.t
	addr := ""
	if t.cfg.Resolve != nil {
		addr = t.cfg.Resolve(p.id)
	}
	if addr == "" {
		return nil, fmt.Errorf("no address for node %d", p.id)
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	if t.local != nil {
		// From the address peers know this broker by (see fromAddr).
		d.LocalAddr = &net.TCPAddr{IP: t.local}
	}
	c, err := d.DialContext(t.ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if !t.track(c) {
		return nil, errors.New("transport closed")
	}
	var hello [10]byte
	binary.BigEndian.PutUint32(hello[:], tcpMagic)
	binary.BigEndian.PutUint16(hello[4:], 1)
	binary.BigEndian.PutUint32(hello[6:], uint32(t.cfg.Self))
	if _, err := c.Write(hello[:]); err != nil {
		t.untrack(c)
		return nil, err
	}
	return c, nil
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
