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

	"github.com/sluice-broker/sluice/internal/peerlink"
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
	// QueuedBytes bounds the bytes of the frames the port's inbound
	// connections are reading or handling, over all of them
	// (peerlink.Budget, the semantics of Kafka's queued.max.request.bytes):
	// 0 is DefaultQueuedBytes, below 0 unbounded.
	QueuedBytes int64
}

// DefaultQueuedBytes is the replication port's frame budget by default:
// two frames of the largest size.
const DefaultQueuedBytes = 2 * maxFrameBytes

// TCPTransport is the production Transport: one outbound TCP connection
// per peer broker, written by one goroutine that coalesces everything
// queued for that peer, across groups, into one frame per write; inbound
// connections are read by one goroutine each. The connections, queues,
// backoff and accept loop are internal/peerlink's, shared with the
// metastore's transport; this file is the protocol on top. A connection starts with
// "SLRT" | version u16 | node i32, then frames (see encodeFrame).
//
// An inbound connection is kept only if the node it declares resolves
// (Resolve: a registered broker) and, when that broker's address is a
// specific IP, the connection comes from that IP (loopback from loopback:
// peerlink.FromHost); a broker dials from the
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
	ln  *peerlink.Listener
	// local is the IP outbound connections are made from: the listening
	// IP, unless that is unspecified.
	local net.IP

	h atomic.Pointer[func(NodeID, []Envelope)]

	mu      sync.Mutex
	peers   map[NodeID]*peerlink.Stream
	inbound map[NodeID]net.Conn
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc

	refused *peerlink.Refusals
	// budget is what the inbound connections' frames hold, from the
	// moment their length is read until they are handled (QueuedBytes).
	budget *peerlink.Budget

	dropped atomic.Int64 // by streams already closed
}

const tcpMagic = 0x534c5254 // "SLRT"

// helloTimeout bounds the wait for a new connection's hello (a variable
// for tests).
var helloTimeout = 10 * time.Second

// frameBodyTimeout bounds the wait for a frame's body once it has room in
// the budget, so a peer that stops sending in the middle of a frame gives
// its room back (a variable for tests).
var frameBodyTimeout = 30 * time.Second

// keepFrameBuf is the largest buffer an inbound connection keeps between
// frames for the next one (larger ones are allocated per frame): outside
// the budget, so bounded here.
const keepFrameBuf = 4 << 20

// maxHandshaking bounds the inbound connections that have not sent their
// hello yet; more are closed at once.
const maxHandshaking = 64

// NewTCPTransport listens and returns the transport; peers are dialled on
// first Send.
func NewTCPTransport(cfg TCPConfig) (*TCPTransport, error) {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 1024
	}
	if cfg.QueuedBytes == 0 {
		cfg.QueuedBytes = DefaultQueuedBytes
	}
	lg := cfg.Logger.With().Str("component", "raft-transport").Logger()
	t := &TCPTransport{
		cfg: cfg, lg: lg,
		peers:   map[NodeID]*peerlink.Stream{},
		inbound: map[NodeID]net.Conn{},
		refused: newRefusals(lg),
		budget:  peerlink.NewBudget(cfg.QueuedBytes),
	}
	ln, err := peerlink.Listen(cfg.Listen, peerlink.ListenConfig{
		MaxHandshaking: maxHandshaking,
		OnBusy:         func(c net.Conn) { t.refuse(RefusedBusy, c, -1, nil) },
		Logger:         lg,
	})
	if err != nil {
		return nil, err
	}
	t.ln = ln
	t.local = peerlink.LocalIP(ln.Addr())
	t.ctx, t.cancel = context.WithCancel(context.Background())
	ln.Serve(t.read)
	return t, nil
}

// Addr is the listening address.
func (t *TCPTransport) Addr() string { return t.ln.Addr().String() }

// Refused returns the connections and frames refused, by reason (see
// Refusal).
func (t *TCPTransport) Refused() map[string]int64 {
	out := map[string]int64{}
	t.refused.Snapshot(out, false)
	return out
}

// Dropped is the number of messages dropped on the way out: a peer's
// queue full, the peer unreachable, a write failed.
func (t *TCPTransport) Dropped() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.dropped.Load()
	for _, p := range t.peers {
		n += p.Dropped.Load()
	}
	return n
}

func (t *TCPTransport) refuse(why Refusal, c net.Conn, node NodeID, err error) {
	t.refused.Add(int(why), func(e *zerolog.Event) {
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
		p = peerlink.NewStream(peerlink.StreamConfig{
			QueueLen: t.cfg.QueueLen,
			Dial:     func(ctx context.Context) (net.Conn, error) { return t.dial(ctx, to) },
			Encode:   encodeItems,
			Down: func(err error) {
				if t.ctx.Err() == nil {
					t.lg.Debug().Err(err).Int32("peer", int32(to)).Msg("raft transport: peer unreachable or connection lost")
				}
			},
		})
		t.peers[to] = p
	}
	t.mu.Unlock()
	// Encode now, in the caller's goroutine: raft's doc.go asks that
	// messages be marshalled before the raft loop moves on.
	// Into a pooled buffer, given back once the stream has copied it
	// into its write (or dropped it): a leader encodes every batch once
	// per peer, so fresh buffers made each write broker allocate several
	// times the bytes it replicated, and collect that often.
	bp := sendBufs.Get().(*[]byte)
	b, err := encodeEnvelopes((*bp)[:0], msgs)
	if err != nil {
		sendBufs.Put(bp)
		t.lg.Error().Err(err).Msg("raft transport: encoding messages")
		return
	}
	p.Send(peerlink.Item{N: len(msgs), B: b, Done: func(bool) {
		if cap(b) <= keepSendBuf {
			*bp = b[:0]
			sendBufs.Put(bp)
		}
	}})
}

// sendBufs holds encoding buffers for Send; keepSendBuf bounds the ones
// kept (a buffer is as large as the largest batch of messages it held).
var sendBufs = sync.Pool{New: func() any { return new([]byte) }}

const keepSendBuf = 8 << 20

// encodeItems makes one frame of every queued batch (see encodeFrame).
func encodeItems(dst []byte, items []peerlink.Item) ([]byte, error) {
	bodies := make([][]byte, len(items))
	count := 0
	for i, it := range items {
		bodies[i] = it.B
		count += it.N
	}
	return appendFrame(dst, bodies, count)
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
	peers := t.peers
	t.mu.Unlock()
	t.cancel()
	for _, p := range peers {
		p.Close()
		t.dropped.Add(p.Dropped.Load())
	}
	t.mu.Lock()
	t.peers = map[NodeID]*peerlink.Stream{}
	t.mu.Unlock()
	return t.ln.Close()
}

// hello runs the TLS handshake when configured, reads and checks a new
// connection's hello and returns the peer and the connection to read.
func (t *TCPTransport) hello(a *peerlink.Accepted) (NodeID, net.Conn, *bufio.Reader, bool) {
	defer a.Ready()
	var c net.Conn = a.Conn
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
	if !peerlink.FromHost(c.RemoteAddr(), addr) {
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

// read serves one inbound connection: the hello, then frames.
func (t *TCPTransport) read(a *peerlink.Accepted) {
	c := a.Conn
	from, rc, br, ok := t.hello(a)
	if !ok {
		return
	}
	t.adopt(from, c)
	defer t.disown(from, c)
	if rc != c {
		// Close the TLS connection too, so the alert goes out.
		defer rc.Close()
	}
	var buf []byte
	for {
		b, held, err := t.readFrame(rc, br, buf)
		if err != nil {
			switch {
			case errors.Is(err, peerlink.ErrFrameTooLarge):
				t.refuse(RefusedFrame, c, from, err)
			case held >= 0 && isTimeout(err):
				t.refuse(RefusedFrameTimeout, c, from, err)
			}
			return
		}
		msgs, err := decodeFrame(b)
		if err == nil {
			if h := t.h.Load(); h != nil {
				(*h)(from, msgs)
			}
		}
		t.budget.Release(held)
		if err != nil {
			t.refuse(RefusedFrame, c, from, err)
			return
		}
		if cap(b) <= keepFrameBuf {
			buf = b
		} else {
			buf = nil
		}
	}
}

// readFrame reads one frame of an inbound connection: its length, then,
// once the budget has room for it, its body within frameBodyTimeout (the
// body's memory is taken as its bytes arrive). The frame holds its room
// until the caller releases held, after handling it. On an error, held
// is -1 if the frame never had room, otherwise 0 (already given back:
// a timeout then was the body's).
func (t *TCPTransport) readFrame(rc net.Conn, br *bufio.Reader, buf []byte) ([]byte, int64, error) {
	n, err := peerlink.ReadHeader(br)
	if err != nil {
		return nil, -1, err
	}
	if n > maxFrameBytes {
		return nil, -1, fmt.Errorf("%w: %d bytes, limit %d", peerlink.ErrFrameTooLarge, n, maxFrameBytes)
	}
	held, ok := t.budget.Take(int64(n), t.ctx.Done())
	if !ok {
		return nil, -1, t.ctx.Err()
	}
	rc.SetReadDeadline(time.Now().Add(frameBodyTimeout))
	b, err := peerlink.ReadBody(br, buf, n)
	rc.SetReadDeadline(time.Time{})
	if err != nil {
		t.budget.Release(held)
		return nil, 0, err
	}
	return b, held, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dial connects to a peer broker: TCP from the listening IP, mutual TLS
// when configured (the peer's certificate must name the node dialled),
// then the hello.
func (t *TCPTransport) dial(ctx context.Context, to NodeID) (net.Conn, error) {
	addr := ""
	if t.cfg.Resolve != nil {
		addr = t.cfg.Resolve(to)
	}
	if addr == "" {
		return nil, fmt.Errorf("no address for node %d", to)
	}
	c, err := peerlink.Dial(ctx, addr, t.local, 2*time.Second)
	if err != nil {
		return nil, err
	}
	if t.cfg.TLS != nil {
		tc, err := t.cfg.TLS.DialPeer(c, int64(to), helloTimeout)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("TLS with node %d: %w", to, err)
		}
		c = tc
	}
	var hello [10]byte
	binary.BigEndian.PutUint32(hello[:], tcpMagic)
	binary.BigEndian.PutUint16(hello[4:], 1)
	binary.BigEndian.PutUint32(hello[6:], uint32(t.cfg.Self))
	c.SetWriteDeadline(time.Now().Add(helloTimeout))
	if _, err := c.Write(hello[:]); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
