package metastore

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/internal/peeraddr"
	"github.com/sluice-broker/sluice/internal/tlsconfig"
)

// TCP transport: one listener per node carries raft messages (batched per
// peer: one frame holds every message queued for that peer) and requests,
// from peers forwarding to the leader and from brokers' remote clients.
//
// Frame: u32 big-endian length of what follows, u8 kind, payload.
//
//	kind 1 raft batch: repeated (u32 length, protobuf raftpb.Message)
//	kind 2 request:    u64 call id, JSON Request
//	kind 3 response:   u64 call id, JSON Response
//
// A connection is used in both directions: the dialer sends raft batches
// and requests, the acceptor answers requests on the same connection.
const (
	frameRaft     byte = 1
	frameRequest  byte = 2
	frameResponse byte = 3

	maxFrame     = 256 << 20 // a snapshot image travels in one frame
	peerQueueLen = 4096
)

// With TLS (SetTLS, internal.ssl.*) every connection is mutual TLS: both
// sides present a certificate the trust store signed. A quorum member's
// certificate names it by the DNS name meta-<meta.id> (tlsconfig.MetaName):
// a member dials a peer only if the peer's certificate names it, and the
// acceptor takes raft messages only when the connection's certificate
// names their sender (From); requests are served to any certificate the
// trust store signed (brokers and members alike). Without TLS the
// acceptor takes raft messages only from a member it knows (a peer of
// this transport: a member of the quorum other than itself), and, when
// that member's address is an IP literal, only over a connection from
// that IP (loopback from loopback: peeraddr.FromHost); a member dials
// its peers from the IP it listens on, when that is a specific one.
// This stops strays and misconfigured peers, not a process that can use
// a member's address (the same host): docs/security.md. Requests are
// served to anyone, as brokers' clients are not members. Refusals are
// logged and counted (Refused).

// TCPTransport implements Transport over TCP.
type TCPTransport struct {
	id     uint64
	listen string
	lg     zerolog.Logger
	tls    *tlsconfig.Loader

	refusedTLS, refusedIdentity    atomic.Int64
	refusedUnknown, refusedAddress atomic.Int64
	lastRefusalLog                 atomic.Int64
	// local is the IP members are dialled from: the listening IP when
	// that is a specific, non-loopback one (see peeraddr.FromHost).
	local net.IP

	ln      net.Listener
	h       Handler
	mu      sync.Mutex
	peers   map[uint64]*tcpPeer
	inbound map[*wireConn]struct{}
	closed  chan struct{}
	wg      sync.WaitGroup
}

// NewTCPTransport makes a transport listening on listen once started.
func NewTCPTransport(id uint64, listen string, lg zerolog.Logger) *TCPTransport {
	return &TCPTransport{
		id: id, listen: listen,
		lg:      lg.With().Str("component", "metastore_transport").Uint64("meta_id", id).Logger(),
		peers:   map[uint64]*tcpPeer{},
		inbound: map[*wireConn]struct{}{},
		closed:  make(chan struct{}),
	}
}

// SetTLS makes the transport's connections mutual TLS; call it before
// Start.
func (t *TCPTransport) SetTLS(l *tlsconfig.Loader) { t.tls = l }

// Refused returns the connections refused, by reason: "tls" (a failed
// handshake: no certificate, or one the trust store did not sign),
// "identity" (raft messages from another member than the certificate
// names), and without TLS "unknown_node" (raft messages from a sender
// that is not a member, or from this member) and "address" (from a
// member registered at another IP than the connection's).
func (t *TCPTransport) Refused() map[string]int64 {
	return map[string]int64{"tls": t.refusedTLS.Load(), "identity": t.refusedIdentity.Load(),
		"unknown_node": t.refusedUnknown.Load(), "address": t.refusedAddress.Load()}
}

// RefusalReasons are the keys Refused reports.
var RefusalReasons = []string{"tls", "identity", "unknown_node", "address"}

// checkMember refuses a raft message a connection without TLS carries
// unless its sender is a known member dialling from its registered IP.
func (t *TCPTransport) checkMember(wc *wireConn, m *pb.Message) bool {
	from := m.GetFrom()
	t.mu.Lock()
	p, ok := t.peers[from]
	addr := ""
	if ok {
		addr = p.addr
	}
	t.mu.Unlock()
	if !ok || from == t.id || from == 0 {
		t.refuse(&t.refusedUnknown, "unknown_node", wc.c, fmt.Errorf("raft message from %d, not a member", from))
		return false
	}
	if !peeraddr.FromHost(wc.c.RemoteAddr(), addr) {
		t.refuse(&t.refusedAddress, "address", wc.c, fmt.Errorf("raft message from member %d, registered at %s", from, addr))
		return false
	}
	return true
}

// refuse counts a refusal and logs at most one in 10 s.
func (t *TCPTransport) refuse(n *atomic.Int64, reason string, c net.Conn, err error) {
	n.Add(1)
	now := time.Now().UnixNano()
	last := t.lastRefusalLog.Load()
	if now-last < int64(10*time.Second) || !t.lastRefusalLog.CompareAndSwap(last, now) {
		return
	}
	t.lg.Warn().Str("reason", reason).Str("remote", c.RemoteAddr().String()).AnErr("error", err).
		Msg("metastore: refused a connection (further refusals for 10s are only counted)")
}

// Addr is the bound listen address (useful with port 0).
func (t *TCPTransport) Addr() string {
	if t.ln == nil {
		return t.listen
	}
	return t.ln.Addr().String()
}

// Start implements Transport.
func (t *TCPTransport) Start(h Handler) error {
	t.h = h
	ln, err := net.Listen("tcp", t.listen)
	if err != nil {
		return err
	}
	t.ln = ln
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsUnspecified() && !a.IP.IsLoopback() {
		t.local = a.IP
	}
	t.wg.Add(1)
	go t.accept()
	t.mu.Lock()
	for _, p := range t.peers {
		p.start()
	}
	t.mu.Unlock()
	return nil
}

func (t *TCPTransport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.closed:
				return
			default:
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			var peer *x509.Certificate
			if t.tls != nil {
				tc, err := t.tls.Server(c, tlsHandshakeTimeout)
				if err != nil {
					select {
					case <-t.closed:
					default:
						t.refuse(&t.refusedTLS, "tls", c, err)
					}
					c.Close()
					return
				}
				peer = tc.ConnectionState().PeerCertificates[0]
				c = tc
			}
			wc := newWireConn(c)
			t.mu.Lock()
			select {
			case <-t.closed:
				t.mu.Unlock()
				wc.close(ErrStopped)
				return
			default:
			}
			t.inbound[wc] = struct{}{}
			t.mu.Unlock()
			t.serveConn(wc, peer)
			t.mu.Lock()
			delete(t.inbound, wc)
			t.mu.Unlock()
		}()
	}
}

// tlsHandshakeTimeout bounds a TLS handshake on the metastore port.
const tlsHandshakeTimeout = 10 * time.Second

// serveConn reads frames from an inbound connection; peer is the
// client's verified certificate (nil without TLS).
func (t *TCPTransport) serveConn(wc *wireConn, peer *x509.Certificate) {
	defer wc.close(ErrUnreachable)
	check := func(m *pb.Message) bool { return t.checkMember(wc, m) }
	if peer != nil {
		check = func(m *pb.Message) bool {
			if err := tlsconfig.CertNames(peer, tlsconfig.MetaName(m.GetFrom())); err != nil {
				t.refuse(&t.refusedIdentity, "identity", wc.c, err)
				return false
			}
			return true
		}
	}
	serveFrames(wc, t.h, t.lg, t.closed, check)
}

// serveFrames is the acceptor's side of a connection; it is shared with
// nothing else but kept apart for clarity.
// A raft message check refuses closes the connection.
func serveFrames(wc *wireConn, h Handler, lg zerolog.Logger, closed <-chan struct{}, check func(*pb.Message) bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		kind, payload, err := wc.readFrame()
		if err != nil {
			return
		}
		switch kind {
		case frameRaft:
			msgs, err := decodeRaftBatch(payload)
			if err != nil {
				lg.Warn().Err(err).Msg("bad raft frame; closing connection")
				return
			}
			for _, m := range msgs {
				if check != nil && !check(m) {
					return
				}
			}
			for _, m := range msgs {
				h.HandleRaft(m)
			}
		case frameRequest:
			if len(payload) < 8 {
				return
			}
			id := binary.BigEndian.Uint64(payload)
			var req Request
			if err := json.Unmarshal(payload[8:], &req); err != nil {
				lg.Warn().Err(err).Msg("bad request frame; closing connection")
				return
			}
			go func() {
				resp := h.HandleRequest(ctx, &req)
				body, _ := json.Marshal(resp)
				_ = wc.writeFrame(frameResponse, id, body)
			}()
		default:
			lg.Warn().Uint8("kind", kind).Msg("unknown frame; closing connection")
			return
		}
	}
}

// Send implements Transport.
func (t *TCPTransport) Send(msgs []*pb.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		p, ok := t.peers[m.GetTo()]
		if !ok {
			continue
		}
		select {
		case p.q <- m:
		default:
			// Full: drop; raft retries (etcd rafthttp does the same).
			if m.GetType() == pb.MsgSnap {
				go t.h.ReportSnapshot(m.GetTo(), false)
			}
		}
	}
}

// Call implements Transport.
func (t *TCPTransport) Call(ctx context.Context, to uint64, req *Request) (*Response, error) {
	t.mu.Lock()
	p, ok := t.peers[to]
	t.mu.Unlock()
	if !ok {
		return nil, ErrUnreachable
	}
	wc, err := p.conn(ctx)
	if err != nil {
		return nil, err
	}
	return wc.call(ctx, req)
}

// AddPeer implements Transport.
func (t *TCPTransport) AddPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.peers[id]; ok {
		if p.addr == addr {
			return
		}
		p.stop()
	}
	p := &tcpPeer{t: t, id: id, addr: addr, q: make(chan *pb.Message, peerQueueLen), stopc: make(chan struct{})}
	t.peers[id] = p
	if t.h != nil {
		p.start()
	}
}

// RemovePeer implements Transport.
func (t *TCPTransport) RemovePeer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.peers[id]; ok {
		p.stop()
		delete(t.peers, id)
	}
}

// Close implements Transport.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	select {
	case <-t.closed:
		t.mu.Unlock()
		return nil
	default:
	}
	close(t.closed)
	for _, p := range t.peers {
		p.stop()
	}
	for wc := range t.inbound {
		wc.close(ErrStopped)
	}
	t.mu.Unlock()
	if t.ln != nil {
		t.ln.Close()
	}
	t.wg.Wait()
	return nil
}

// tcpPeer is the outbound side towards one peer: a queue of raft messages
// drained by one writer goroutine into batched frames, and the connection
// also used for calls.
type tcpPeer struct {
	t     *TCPTransport
	id    uint64
	addr  string
	q     chan *pb.Message
	stopc chan struct{}
	once  sync.Once

	mu sync.Mutex
	wc *wireConn
}

func (p *tcpPeer) start() {
	p.t.wg.Add(1)
	go p.writeLoop()
}

func (p *tcpPeer) stop() {
	p.once.Do(func() {
		close(p.stopc)
		p.mu.Lock()
		if p.wc != nil {
			p.wc.close(ErrStopped)
		}
		p.mu.Unlock()
	})
}

// conn returns the live connection, dialing if needed.
func (p *tcpPeer) conn(ctx context.Context) (*wireConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stopc:
		return nil, ErrStopped
	default:
	}
	if p.wc != nil && !p.wc.isClosed() {
		return p.wc, nil
	}
	d := net.Dialer{Timeout: time.Second}
	if p.id != 0 && p.t.local != nil {
		d.LocalAddr = &net.TCPAddr{IP: p.t.local}
	}
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if p.t.tls != nil {
		var tc net.Conn
		if p.id != 0 {
			tc, err = p.t.tls.DialName(c, tlsconfig.MetaName(p.id), tlsHandshakeTimeout)
		} else {
			// A broker's client dials addresses, not members.
			tc, err = p.t.tls.DialAny(c, tlsHandshakeTimeout, tlsconfig.CertNamesMeta)
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("%w: TLS with %s: %v", ErrUnreachable, p.addr, err)
		}
		c = tc
	}
	p.wc = newWireConn(c)
	wc := p.wc
	p.t.wg.Add(1)
	go func() {
		defer p.t.wg.Done()
		wc.readResponses()
	}()
	return wc, nil
}

func (p *tcpPeer) writeLoop() {
	defer p.t.wg.Done()
	var batch []*pb.Message
	for {
		batch = batch[:0]
		select {
		case m := <-p.q:
			batch = append(batch, m)
		case <-p.stopc:
			return
		}
	drain:
		for len(batch) < 1024 {
			select {
			case m := <-p.q:
				batch = append(batch, m)
			default:
				break drain
			}
		}
		err := p.writeBatch(batch)
		for _, m := range batch {
			if m.GetType() == pb.MsgSnap {
				p.t.h.ReportSnapshot(p.id, err == nil)
			}
		}
		if err != nil {
			p.t.h.ReportUnreachable(p.id)
			select {
			case <-p.stopc:
				return
			case <-time.After(50 * time.Millisecond): // back off before redialing
			}
		}
	}
}

func (p *tcpPeer) writeBatch(batch []*pb.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	wc, err := p.conn(ctx)
	if err != nil {
		return err
	}
	var buf []byte
	for _, m := range batch {
		b, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
		buf = append(buf, b...)
	}
	if err := wc.writeRaw(frameRaft, buf); err != nil {
		wc.close(ErrUnreachable)
		return err
	}
	return nil
}

func decodeRaftBatch(b []byte) ([]*pb.Message, error) {
	var out []*pb.Message
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, errors.New("truncated raft batch")
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, errors.New("truncated raft message")
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(b[:n], m); err != nil {
			return nil, err
		}
		out = append(out, m)
		b = b[n:]
	}
	return out, nil
}

// wireConn is one framed connection with calls multiplexed by id.
type wireConn struct {
	c       net.Conn
	r       *bufio.Reader
	out     chan []byte // whole frames, written by writeLoop
	nextID  atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]chan *Response
	err     error
	done    chan struct{}
}

func newWireConn(c net.Conn) *wireConn {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	w := &wireConn{c: c, r: bufio.NewReaderSize(c, 64<<10), out: make(chan []byte, 1024),
		pending: map[uint64]chan *Response{}, done: make(chan struct{})}
	go w.writeLoop()
	return w
}

// writeLoop writes queued frames, coalescing whatever is queued into one
// write (many concurrent calls, one syscall).
func (w *wireConn) writeLoop() {
	var buf []byte
	for {
		var f []byte
		select {
		case f = <-w.out:
		case <-w.done:
			return
		}
		buf = append(buf[:0], f...)
	more:
		for len(buf) < 1<<20 {
			select {
			case f = <-w.out:
				buf = append(buf, f...)
			default:
				break more
			}
		}
		_ = w.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := w.c.Write(buf); err != nil {
			w.close(ErrUnreachable)
			return
		}
		if cap(buf) > 4<<20 {
			buf = nil
		}
	}
}

func (w *wireConn) isClosed() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (w *wireConn) close(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	w.err = err
	close(w.done)
	w.c.Close()
	for id, ch := range w.pending {
		close(ch)
		delete(w.pending, id)
	}
}

func (w *wireConn) readFrame() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(w.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 1 || n > maxFrame {
		return 0, nil, fmt.Errorf("frame length %d out of range", n)
	}
	buf := make([]byte, n-1)
	if _, err := io.ReadFull(w.r, buf); err != nil {
		return 0, nil, err
	}
	return hdr[4], buf, nil
}

func (w *wireConn) writeRaw(kind byte, payload []byte) error {
	if len(payload)+1 > maxFrame {
		return fmt.Errorf("frame too large: %d bytes", len(payload))
	}
	f := make([]byte, 5, 5+len(payload))
	binary.BigEndian.PutUint32(f[:4], uint32(len(payload)+1))
	f[4] = kind
	f = append(f, payload...)
	select {
	case w.out <- f:
		return nil
	case <-w.done:
		return ErrUnreachable
	}
}

func (w *wireConn) writeFrame(kind byte, id uint64, body []byte) error {
	payload := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint64(payload, id)
	return w.writeRaw(kind, append(payload, body...))
}

// call sends a request and waits for the response with its id.
func (w *wireConn) call(ctx context.Context, req *Request) (*Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	id := w.nextID.Add(1)
	ch := make(chan *Response, 1)
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return nil, ErrUnreachable
	}
	w.pending[id] = ch
	w.mu.Unlock()
	if err := w.writeFrame(frameRequest, id, body); err != nil {
		w.close(ErrUnreachable)
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			// The connection died after the request went out: the
			// outcome is unknown.
			return nil, ErrTimeout
		}
		return resp, nil
	case <-ctx.Done():
		w.mu.Lock()
		delete(w.pending, id)
		w.mu.Unlock()
		return nil, ctx.Err()
	}
}

// readResponses is the dialer's reader: it routes responses to callers.
func (w *wireConn) readResponses() {
	defer w.close(ErrUnreachable)
	for {
		kind, payload, err := w.readFrame()
		if err != nil {
			return
		}
		if kind != frameResponse || len(payload) < 8 {
			return
		}
		id := binary.BigEndian.Uint64(payload)
		var resp Response
		if err := json.Unmarshal(payload[8:], &resp); err != nil {
			return
		}
		w.mu.Lock()
		ch, ok := w.pending[id]
		delete(w.pending, id)
		w.mu.Unlock()
		if ok {
			ch <- &resp
		}
	}
}
