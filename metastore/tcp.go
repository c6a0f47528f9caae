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
	"google.golang.org/protobuf/encoding/protowire"
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
// The acceptor reads a frame's length and kind before anything else and
// refuses (closing the connection) a frame above the kind's limit before
// allocating: a raft frame up to 256 MiB (a snapshot image travels in
// one) only once the connection speaks for a member (a raft message on
// it passed the member check below; for a large first frame, its first
// message's sender, read from the message's first bytes, did), 4 MiB
// before; a request up to 64 MiB; and a body's memory is taken as its
// bytes arrive (peerlink.ReadBody). The port accepts at most 1024 connections, at most
// 64 of them before their first frame (or TLS handshake), which must come
// within 10 s (a member sends an empty raft frame as soon as it has
// dialled); a connection that sends no frame for 10 minutes is closed,
// unless it comes from a member's address (or certificate).
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

	// MaxUnboundRaftFrame bounds a raft frame from a connection not yet
	// bound to a member; MaxRequestFrame a request frame from anyone.
	MaxUnboundRaftFrame = 4 << 20
	MaxRequestFrame     = 64 << 20
	// MaxConns bounds the port's connections, MaxHandshaking those that
	// sent no frame yet (or are in their TLS handshake); FirstFrameTimeout
	// bounds the wait for the first frame, IdleTimeout for any next one.
	MaxConns          = 1024
	MaxHandshaking    = 64
	FirstFrameTimeout = 10 * time.Second
	IdleTimeout       = 10 * time.Minute
	// QueuedMaxRequestBytes bounds the bytes of the frames the port's
	// connections are reading or handling, over all of them, counting
	// every frame but the raft frames of a connection bound to a member
	// (peerlink.Budget, Kafka's queued.max.request.bytes for this port):
	// a connection that finds no room is not read until there is.
	// FrameBodyTimeout bounds the reading of a counted frame's body, so
	// that a frame announced and not sent holds its room that long at
	// most.
	QueuedMaxRequestBytes = 128 << 20
	FrameBodyTimeout      = 30 * time.Second
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

	// bounds are the port's connection bounds (the exported constants;
	// tests shorten them before Start).
	bounds portBounds

	ln     *peerlink.Listener
	budget *peerlink.Budget // bounds.queuedBytes, made by Start
	h      Handler
	mu     sync.Mutex
	peers  map[uint64]*tcpPeer
	closed chan struct{}
}

type portBounds struct {
	maxConns, maxHandshaking int
	firstFrame, idle         time.Duration
	queuedBytes              int64
	frameBody                time.Duration
}

// The reasons Refused reports, in peerlink.Refusals' order.
const (
	refusedTLS = iota
	refusedIdentity
	refusedUnknown
	refusedAddress
	refusedBusy      // over MaxConns or MaxHandshaking
	refusedFrame     // a frame over its kind's limit, of no known kind, or that does not decode
	refusedHandshake // no first frame within FirstFrameTimeout
	refusedSlowFrame // a counted frame's body not read within FrameBodyTimeout
)

// NewTCPTransport makes a transport listening on listen once started.
func NewTCPTransport(id uint64, listen string, lg zerolog.Logger) *TCPTransport {
	lg = lg.With().Str("component", "metastore_transport").Uint64("meta_id", id).Logger()
	return &TCPTransport{
		id: id, listen: listen, lg: lg,
		refused: peerlink.NewRefusals(lg, "metastore: refused a connection (further refusals for 10s are only counted)", connRefusalNames...),
		peers:   map[uint64]*tcpPeer{},
		closed:  make(chan struct{}),
		bounds:  portBounds{MaxConns, MaxHandshaking, FirstFrameTimeout, IdleTimeout, QueuedMaxRequestBytes, FrameBodyTimeout},
	}
}

// SetTLS makes the transport's connections mutual TLS; call it before
// Start.
func (t *TCPTransport) SetTLS(l *tlsconfig.Loader) { t.tls = l }

// Refused returns the connections refused, by reason: "tls" (a failed
// handshake: no certificate, or one the trust store did not sign),
// "identity" (raft messages from another member than the certificate
// names, or than the connection already spoke for), without TLS
// "unknown_node" (raft messages from a sender that is not a member, or
// from this member) and "address" (from a member registered at another
// IP than the connection's), "busy" (MaxConns or MaxHandshaking
// reached), "frame" (a frame over its limit, of no known kind, or that
// does not decode), "handshake" (no first frame in time) and
// "frame_timeout" (a frame that counts against QueuedMaxRequestBytes not
// read whole within FrameBodyTimeout of its room being granted).
func (t *TCPTransport) Refused() map[string]int64 {
	out := map[string]int64{}
	t.refused.Snapshot(out, true)
	return out
}

var connRefusalNames = []string{"tls", "identity", "unknown_node", "address", "busy", "frame", "handshake", "frame_timeout"}

// RefusalReasons are the keys Node.Refused reports: the transport's
// (TCPTransport.Refused) and the raft messages' (guard.go).
var RefusalReasons = append(append([]string{}, connRefusalNames...), msgRefusalNames...)

// checkMember refuses a raft message a connection without TLS carries
// unless its sender is a known member dialling from its registered IP.
func (t *TCPTransport) checkMember(wc *wireConn, from uint64) bool {
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
	t.budget = peerlink.NewBudget(t.bounds.queuedBytes)
	ln, err := peerlink.Listen(t.listen, peerlink.ListenConfig{
		MaxConns:       t.bounds.maxConns,
		MaxHandshaking: t.bounds.maxHandshaking,
		OnBusy:         func(c net.Conn) { t.refuse(refusedBusy, c, errors.New("too many connections")) },
		Logger:         t.lg,
	})
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
	t.serveConn(newWireConn(c), peer, a.Ready)
}

// tlsHandshakeTimeout bounds a TLS handshake on the metastore port.
const tlsHandshakeTimeout = 10 * time.Second

// serveConn reads frames from an inbound connection; peer is the
// client's verified certificate (nil without TLS); ready (optional) is
// told once the first frame arrived.
func (t *TCPTransport) serveConn(wc *wireConn, peer *x509.Certificate, ready func()) {
	defer wc.close()
	// bound is the member this connection speaks for, once its hello or
	// first raft message passed the check: later raft messages must come
	// from it.
	var bound uint64
	member := func(from uint64) bool {
		if peer == nil {
			return t.checkMember(wc, from)
		}
		if err := tlsconfig.CertNames(peer, tlsconfig.MetaName(from)); err != nil || from == t.id || from == 0 {
			if err == nil {
				err = fmt.Errorf("raft message from %d", from)
			}
			t.refuse(refusedIdentity, wc.c, err)
			return false
		}
		return true
	}
	check := func(from uint64) bool {
		if bound != 0 {
			if from != bound {
				t.refuse(refusedIdentity, wc.c, fmt.Errorf("raft message from %d on member %d's connection", from, bound))
				return false
			}
			return true
		}
		if !member(from) {
			return false
		}
		bound = from
		return true
	}
	// limit also says whether the frame counts against the port's
	// budget: all but the raft frames of a connection bound to a
	// member (the quorum never waits behind strangers' frames, and
	// those frames are a member's, checked before their body is read).
	limit := func(kind byte, n int) (int, bool) {
		switch kind {
		case frameRaft:
			if bound == 0 && n > MaxUnboundRaftFrame {
				// A large first frame (a snapshot): its sender must
				// pass the check before the body is read.
				if from, ok := peekRaftFrom(wc.r); ok {
					check(from)
				}
			}
			if bound != 0 {
				return maxFrame, false
			}
			return MaxUnboundRaftFrame, true
		case frameRequest:
			return MaxRequestFrame, true
		}
		return -1, false
	}
	idle := t.bounds.idle
	if t.fromMemberHost(wc.c, peer) {
		idle = 0
	}
	serveFrames(wc, t.h, t.closed, limit, check, func(why int, err error) { t.refuse(why, wc.c, err) }, ready, t.bounds.firstFrame, idle, t.budget, t.bounds.frameBody)
}

// fromMemberHost: the connection comes from a member's registered
// address (peerlink.FromHost) or, with TLS, carries a member's
// certificate. Its members' raft streams may stay idle for long (two
// followers have nothing to tell each other) and a stream learns of a
// close only when its next message is lost: such a connection is not
// closed for idleness.
func (t *TCPTransport) fromMemberHost(c net.Conn, peer *x509.Certificate) bool {
	if peer != nil {
		return tlsconfig.CertNamesMeta(peer) == nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, p := range t.peers {
		if id != t.id && peerlink.FromHost(c.RemoteAddr(), p.addr) {
			return true
		}
	}
	return false
}

// serveFrames is the acceptor's side of a connection. limit gives each
// kind's frame limit (-1: a kind an acceptor does not take) and whether
// the frame counts against budget; check judges the sender of a raft
// message; refuse counts what is refused. A refused frame or raft
// message closes the connection. The first frame must come within
// firstFrame; each next one, when idle is not 0, within idle of the
// previous one. A counted frame waits for room in budget after its
// length and kind are read and before its body is (the connection is not
// read meanwhile), its body must then arrive within frameBody, and it
// holds its room until it is handled: a raft frame once stepped, a
// request once answered.
func serveFrames(wc *wireConn, h Handler, closed <-chan struct{}, limit func(kind byte, n int) (int, bool), check func(uint64) bool, refuse func(int, error), ready func(), firstFrame, idle time.Duration, budget *peerlink.Budget, frameBody time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	first := true
	for {
		switch {
		case first:
			_ = wc.c.SetReadDeadline(time.Now().Add(firstFrame))
		case idle > 0:
			_ = wc.c.SetReadDeadline(time.Now().Add(idle))
		default:
			_ = wc.c.SetReadDeadline(time.Time{})
		}
		var held int64
		admit := func(n int) bool {
			var ok bool
			if held, ok = budget.Take(int64(n), closed); !ok {
				return false
			}
			if frameBody > 0 {
				_ = wc.c.SetReadDeadline(time.Now().Add(frameBody))
			}
			return true
		}
		kind, payload, err := wc.readFrame(limit, admit)
		if err != nil {
			defer budget.Release(held)
			switch {
			case errors.Is(err, peerlink.ErrFrameTooLarge), errors.Is(err, errFrameKind):
				refuse(refusedFrame, err)
			case held > 0 && isTimeout(err):
				refuse(refusedSlowFrame, err)
			case first && isTimeout(err):
				refuse(refusedHandshake, err)
			}
			return
		}
		if first {
			first = false
			if ready != nil {
				ready()
			}
		}
		switch kind {
		case frameRaft:
			msgs, err := decodeRaftBatch(payload)
			payload = nil
			if err != nil {
				budget.Release(held)
				refuse(refusedFrame, err)
				return
			}
			for _, m := range msgs {
				if !check(m.GetFrom()) {
					budget.Release(held)
					return
				}
			}
			for _, m := range msgs {
				h.HandleRaft(m)
			}
			budget.Release(held)
		case frameRequest:
			if len(payload) < 8 {
				budget.Release(held)
				refuse(refusedFrame, errors.New("short request frame"))
				return
			}
			id := binary.BigEndian.Uint64(payload)
			var req Request
			err := json.Unmarshal(payload[8:], &req)
			payload = nil
			if err != nil {
				budget.Release(held)
				refuse(refusedFrame, fmt.Errorf("request frame: %w", err))
				return
			}
			go func() {
				defer budget.Release(held)
				resp := h.HandleRequest(ctx, &req)
				body, _ := json.Marshal(resp)
				_ = wc.writeFrame(frameResponse, id, body)
			}()
		default:
			budget.Release(held)
		}
	}
}

// peekRaftFrom reads, without consuming it, the sender (From) of the
// first message of a raft frame whose kind byte was just read: protobuf
// writes fields in number order, and From (3) comes before anything
// large (entries 7, snapshot 9).
func peekRaftFrom(r *bufio.Reader) (uint64, bool) {
	b, _ := r.Peek(64)
	if len(b) < 4 {
		return 0, false
	}
	b = b[4:]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == 3 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			return v, n > 0
		}
		if num > 3 {
			return 0, false
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return 0, false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
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
	if c.id != 0 {
		// A member's first frame at once, an empty raft batch (nothing
		// for the acceptor to step, in any version): the acceptor counts
		// a connection that has sent no frame against its handshake
		// bound and closes it after FirstFrameTimeout, and a member's
		// raft stream may have nothing to send for long.
		_ = conn.SetWriteDeadline(time.Now().Add(tlsHandshakeTimeout))
		_, err := conn.Write(emptyRaftFrame)
		_ = conn.SetWriteDeadline(time.Time{})
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
	}
	return conn, nil
}

// emptyRaftFrame is a raft frame without messages.
var emptyRaftFrame = []byte{0, 0, 0, 1, frameRaft}

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

// errFrameKind: a frame of a kind the reader does not take.
var errFrameKind = errors.New("metastore: unexpected frame kind")

// readFrame reads one frame; limit gives the largest frame (kind byte
// included) of each kind, -1 for a kind not taken, and whether admit
// (called with the frame's length) must let it in before its body is
// read: false from admit ends the read. The length and kind are read
// first: a frame over its limit is refused before its body is
// allocated.
func (w *wireConn) readFrame(limit func(kind byte, n int) (int, bool), admit func(n int) bool) (byte, []byte, error) {
	n, err := peerlink.ReadHeader(w.r)
	if err != nil {
		return 0, nil, err
	}
	if n < 1 {
		return 0, nil, fmt.Errorf("%w: empty frame", errFrameKind)
	}
	kind, err := w.r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	max, counted := limit(kind, n)
	if max < 0 {
		return 0, nil, fmt.Errorf("%w: %d", errFrameKind, kind)
	}
	if n > max {
		return 0, nil, fmt.Errorf("%w: kind %d, %d bytes, limit %d", peerlink.ErrFrameTooLarge, kind, n, max)
	}
	if counted && admit != nil && !admit(n) {
		return 0, nil, ErrStopped
	}
	b, err := peerlink.ReadBody(w.r, nil, n-1)
	if err != nil {
		return 0, nil, err
	}
	return kind, b, nil
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

// responseLimit: a dialer takes responses, from the node it dialled.
func responseLimit(kind byte, _ int) (int, bool) {
	if kind == frameResponse {
		return maxFrame, false
	}
	return -1, false
}

// readResponses is the dialer's reader: it routes responses to callers.
func (w *wireConn) readResponses() {
	defer w.close()
	for {
		kind, payload, err := w.readFrame(responseLimit, nil)
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
