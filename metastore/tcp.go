package metastore

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/internal/peerlink"
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
// or requests, the acceptor answers requests on the same connection. A
// member streams its raft messages to a peer on one connection and makes
// its calls on another (an acceptor serves any frame on any connection).
// The connections, per-peer queues, backoff and accept loop are
// internal/peerlink's, shared with the partitions' raft transport; this
// file is the protocol on top.
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
// that IP (loopback from loopback: peerlink.FromHost); a member dials
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

	refused *peerlink.Refusals
	// local is the IP members are dialled from: the listening IP when
	// that is a specific one (see peerlink.FromHost). Atomic, not under
	// mu: a peer's stream dials while RemovePeer holds mu and waits for
	// that stream to stop.
	local atomic.Pointer[net.IP]

	ln     *peerlink.Listener
	h      Handler
	mu     sync.Mutex
	peers  map[uint64]*tcpPeer
	closed chan struct{}
}

// The reasons Refused reports, in peerlink.Refusals' order.
const (
	refusedTLS = iota
	refusedIdentity
	refusedUnknown
	refusedAddress
)

// NewTCPTransport makes a transport listening on listen once started.
func NewTCPTransport(id uint64, listen string, lg zerolog.Logger) *TCPTransport {
	lg = lg.With().Str("component", "metastore_transport").Uint64("meta_id", id).Logger()
	return &TCPTransport{
		id: id, listen: listen, lg: lg,
		refused: peerlink.NewRefusals(lg, "metastore: refused a connection (further refusals for 10s are only counted)", RefusalReasons...),
		peers:   map[uint64]*tcpPeer{},
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
	out := map[string]int64{}
	t.refused.Snapshot(out, true)
	return out
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
		t.refuse(refusedUnknown, wc.c, fmt.Errorf("raft message from %d, not a member", from))
		return false
	}
	if !peerlink.FromHost(wc.c.RemoteAddr(), addr) {
		t.refuse(refusedAddress, wc.c, fmt.Errorf("raft message from member %d, registered at %s", from, addr))
		return false
	}
	return true
}

// refuse counts a refusal and logs at most one in 10 s.
func (t *TCPTransport) refuse(why int, c net.Conn, err error) {
	t.refused.Add(why, func(e *zerolog.Event) {
		e.Str("remote", c.RemoteAddr().String()).AnErr("error", err)
	})
}

// Addr is the bound listen address (useful with port 0).
func (t *TCPTransport) Addr() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ln == nil {
		return t.listen
	}
	return t.ln.Addr().String()
}

func (t *TCPTransport) localIP() net.IP {
	if ip := t.local.Load(); ip != nil {
		return *ip
	}
	return nil
}

// Start implements Transport.
func (t *TCPTransport) Start(h Handler) error {
	t.h = h
	ln, err := peerlink.Listen(t.listen, peerlink.ListenConfig{Logger: t.lg})
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.ln = ln
	t.local.Store(new(peerlink.LocalIP(ln.Addr())))
	t.mu.Unlock()
	ln.Serve(t.serve)
	t.mu.Lock()
	for _, p := range t.peers {
		p.start()
	}
	t.mu.Unlock()
	return nil
}

// serve is the acceptor's side of one connection.
func (t *TCPTransport) serve(a *peerlink.Accepted) {
	var c net.Conn = a.Conn
	var peer *x509.Certificate
	if t.tls != nil {
		tc, err := t.tls.Server(c, tlsHandshakeTimeout)
		if err != nil {
			select {
			case <-t.closed:
			default:
				t.refuse(refusedTLS, c, err)
			}
			return
		}
		peer = tc.ConnectionState().PeerCertificates[0]
		c = tc
	}
	a.Ready()
	t.serveConn(newWireConn(c), peer)
}

// tlsHandshakeTimeout bounds a TLS handshake on the metastore port.
const tlsHandshakeTimeout = 10 * time.Second

// serveConn reads frames from an inbound connection; peer is the
// client's verified certificate (nil without TLS).
func (t *TCPTransport) serveConn(wc *wireConn, peer *x509.Certificate) {
	defer wc.close()
	check := func(m *pb.Message) bool { return t.checkMember(wc, m) }
	if peer != nil {
		check = func(m *pb.Message) bool {
			if err := tlsconfig.CertNames(peer, tlsconfig.MetaName(m.GetFrom())); err != nil {
				t.refuse(refusedIdentity, wc.c, err)
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
		if !ok || p.raft == nil {
			if ok && m.GetType() == pb.MsgSnap {
				go t.h.ReportSnapshot(m.GetTo(), false)
			}
			continue
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.lg.Error().Err(err).Msg("metastore: encoding a raft message")
			continue
		}
		it := peerlink.Item{N: 1, B: b}
		if m.GetType() == pb.MsgSnap {
			to := m.GetTo()
			// Done may run in this goroutine (a full queue), which is
			// raft's: report from another.
			it.Done = func(ok bool) { go t.h.ReportSnapshot(to, ok) }
		}
		// A full queue drops (etcd rafthttp does the same): raft retries.
		p.raft.Send(it)
	}
}

// encodeRaftItems makes one raft frame of queued messages.
func encodeRaftItems(dst []byte, items []peerlink.Item) ([]byte, error) {
	n := 1
	for _, it := range items {
		n += 4 + len(it.B)
	}
	if n > maxFrame {
		return dst, fmt.Errorf("metastore: raft frame of %d bytes exceeds %d", n, maxFrame)
	}
	dst = peerlink.AppendHeader(dst, n)
	dst = append(dst, frameRaft)
	for _, it := range items {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(it.B)))
		dst = append(dst, it.B...)
	}
	return dst, nil
}

// Call implements Transport.
func (t *TCPTransport) Call(ctx context.Context, to uint64, req *Request) (*Response, error) {
	t.mu.Lock()
	p, ok := t.peers[to]
	t.mu.Unlock()
	if !ok {
		return nil, ErrUnreachable
	}
	wc, err := p.calls.conn(ctx)
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
		go p.stop() // waits for its stream, which must not wait for mu
	}
	p := &tcpPeer{t: t, id: id, addr: addr}
	p.calls = &caller{id: id, addr: addr, tls: t.tls, local: t.localIP, stopc: make(chan struct{})}
	t.peers[id] = p
	if t.h != nil {
		p.start()
	}
}

// RemovePeer implements Transport.
func (t *TCPTransport) RemovePeer(id uint64) {
	t.mu.Lock()
	p, ok := t.peers[id]
	delete(t.peers, id)
	t.mu.Unlock()
	if ok {
		p.stop()
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
	peers := t.peers
	t.peers = map[uint64]*tcpPeer{}
	t.mu.Unlock()
	for _, p := range peers {
		p.stop()
	}
	t.mu.Lock()
	ln := t.ln
	t.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	return nil
}

// tcpPeer is the outbound side towards one member: a stream of raft
// messages (peerlink.Stream: a bounded queue drained by one writer into
// batched frames, redialling with backoff) and a connection for calls.
type tcpPeer struct {
	t     *TCPTransport
	id    uint64
	addr  string
	raft  *peerlink.Stream
	calls *caller
}

func (p *tcpPeer) start() {
	t := p.t
	p.raft = peerlink.NewStream(peerlink.StreamConfig{
		QueueLen:     peerQueueLen,
		MaxWrite:     1 << 20,
		WriteTimeout: 10 * time.Second,
		Dial:         p.calls.dial,
		Encode:       encodeRaftItems,
		Down:         func(error) { t.h.ReportUnreachable(p.id) },
	})
}

func (p *tcpPeer) stop() {
	if p.raft != nil {
		p.raft.Close()
	}
	p.calls.stop()
}

// caller makes calls to one node over a connection dialled when first
// needed and again after it fails; a member's peer and a broker's remote
// client both use one per address.
type caller struct {
	id    uint64 // the member dialled; 0 for a broker's client, which dials addresses
	addr  string
	tls   *tlsconfig.Loader
	local func() net.IP
	stopc chan struct{}
	once  sync.Once

	mu sync.Mutex
	wc *wireConn
}

func (c *caller) stop() {
	c.once.Do(func() {
		close(c.stopc)
		c.mu.Lock()
		if c.wc != nil {
			c.wc.close()
		}
		c.mu.Unlock()
	})
}

// dial connects to the node: TCP, then mutual TLS when configured (a
// member's certificate must name it; a broker's client accepts any
// metastore node's).
func (c *caller) dial(ctx context.Context) (net.Conn, error) {
	var local net.IP
	if c.id != 0 && c.local != nil {
		local = c.local()
	}
	conn, err := peerlink.Dial(ctx, c.addr, local, time.Second)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if c.tls != nil {
		var tc net.Conn
		if c.id != 0 {
			tc, err = c.tls.DialName(conn, tlsconfig.MetaName(c.id), tlsHandshakeTimeout)
		} else {
			tc, err = c.tls.DialAny(conn, tlsHandshakeTimeout, tlsconfig.CertNamesMeta)
		}
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("%w: TLS with %s: %v", ErrUnreachable, c.addr, err)
		}
		conn = tc
	}
	return conn, nil
}

// conn returns the live connection for calls, dialling if needed.
func (c *caller) conn(ctx context.Context) (*wireConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stopc:
		return nil, ErrStopped
	default:
	}
	if c.wc != nil && !c.wc.isClosed() {
		return c.wc, nil
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.wc = newWireConn(conn)
	go c.wc.readResponses()
	return c.wc, nil
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

// wireConn is one framed connection with calls multiplexed by id; its
// frames go out through a peerlink.Writer, which coalesces what many
// callers queue into one write.
type wireConn struct {
	c       net.Conn
	r       *bufio.Reader
	w       *peerlink.Writer
	nextID  atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]chan *Response
	closed  bool
}

func newWireConn(c net.Conn) *wireConn {
	wc := &wireConn{c: c, r: bufio.NewReaderSize(c, 64<<10), pending: map[uint64]chan *Response{}}
	wc.w = peerlink.NewWriter(c, 1024, 10*time.Second, wc.failPending)
	return wc
}

func (w *wireConn) isClosed() bool {
	select {
	case <-w.w.Done():
		return true
	default:
		return false
	}
}

// close closes the connection; calls waiting on it end.
func (w *wireConn) close() { w.w.Close() }

// failPending ends the calls still waiting, once the connection closed.
func (w *wireConn) failPending() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for id, ch := range w.pending {
		close(ch)
		delete(w.pending, id)
	}
}

func (w *wireConn) readFrame() (byte, []byte, error) {
	b, err := peerlink.ReadFrame(w.r, nil, maxFrame)
	if err != nil {
		return 0, nil, err
	}
	if len(b) < 1 {
		return 0, nil, errors.New("empty frame")
	}
	return b[0], b[1:], nil
}

func (w *wireConn) writeRaw(kind byte, payload []byte) error {
	if len(payload)+1 > maxFrame {
		return fmt.Errorf("frame too large: %d bytes", len(payload))
	}
	f := peerlink.AppendHeader(make([]byte, 0, peerlink.HeaderLen+1+len(payload)), len(payload)+1)
	f = append(f, kind)
	f = append(f, payload...)
	if err := w.w.Write(f); err != nil {
		return ErrUnreachable
	}
	return nil
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
	if w.closed {
		w.mu.Unlock()
		return nil, ErrUnreachable
	}
	w.pending[id] = ch
	w.mu.Unlock()
	if err := w.writeFrame(frameRequest, id, body); err != nil {
		w.close()
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
	defer w.close()
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
