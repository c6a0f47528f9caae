package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/protocol"
)

// maxInFlight bounds the requests a connection may have read but not yet
// answered; the reader stops reading (TCP backpressure) beyond it.
const maxInFlight = 64

// requestBudget bounds the bytes of request frames a server holds at once,
// over all connections: Kafka's queued.max.request.bytes. A frame counts
// from the moment its bytes are read: a small one whole, after its size
// prefix; a large one a window at a time as its bytes arrive (see
// conn.readFrame), so a client that sends a size prefix and then stalls
// holds one window, not the size it announced. A full budget stops
// reading sockets rather than growing memory. Produce requests on local
// partitions give their bytes back as soon as their batches are written
// (before the acks=all wait); other requests when they are answered.
//
// Large frames still arriving share at most largeShare of the bound, and
// each at most its connection's cap (queued.max.request.bytes.per.connection):
// the rest is kept for small frames (up to firstWindow) and decoding, so
// that clients that announce large frames and trickle their bytes cannot
// keep others' small requests out. A large frame past its cap or the
// share goes on only as the one frame past the bound (over), and what it
// takes then is counted in past as well as used: outside the bound, which
// admissions compare used-past with.
type requestBudget struct {
	mu   sync.Mutex
	used int64
	past int64
	room chan struct{} // closed and replaced when bytes are released; nil until someone waits
	// inflating counts compressed batches holding inflation bytes
	// (inflate.go).
	inflating int
	// over is the one partly read frame allowed past the bound: without
	// it, frames that each hold part of the budget and wait for more
	// could wait for each other forever.
	over *conn
	// promised is the size of the large frames being read that took a
	// buffer of their whole size before their bytes arrived (see
	// conn.readFrame); it stays under the bound too.
	promised int64
	// waiting counts the callers of await waiting for room; the first to
	// begin a wait signals blocked (if set), which wakes the reaper to
	// close stalled frames (Server.evictStalled).
	waiting int
	blocked chan struct{}
}

// full reports the bytes held within the bound (what the frame past the
// bound took past it excluded) and whether anyone waits for room.
func (b *requestBudget) full() (used int64, waiting bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used - b.past, b.waiting > 0
}

// pastBound reports the frame going past the bound, if any, and what it
// holds outside the bound.
func (b *requestBudget) pastBound() (*conn, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over, b.past
}

// largeShare is the part of the bound limit that large frames still
// arriving may hold between them: all but an eighth, which is kept for
// small frames and decoding.
func largeShare(limit int64) int64 { return limit - limit/8 }

// promise reports whether a large frame of n bytes may take a buffer of its
// whole size now, before its bytes arrive: when n is at most an eighth of
// limit and the frames that did so and are still arriving stay under
// limit. Then memory is one allocation (or a pooled buffer) and no copy,
// as for small frames; a client that stalls in such a frame pins at most
// an eighth of limit, and only eight such clients make the others' large
// frames grow as they arrive instead. Unbounded (limit <= 0): always.
// A true answer is given back with unpromise once the frame is read.
func (b *requestBudget) promise(n, limit int64) bool {
	if limit <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > limit/8 || b.promised+n > limit {
		return false
	}
	b.promised += n
	return true
}

func (b *requestBudget) unpromise(n, limit int64) {
	if limit <= 0 {
		return
	}
	b.mu.Lock()
	b.promised -= n
	b.mu.Unlock()
}

// acquire waits until less than limit bytes are held, then counts n more
// and returns what to release later (0 when limit <= 0: unbounded, and
// nothing is counted). Like Kafka's memory pool it admits a frame while
// any room is left, even one larger than the room, so a frame larger than
// the whole budget is not refused forever.
func (b *requestBudget) acquire(ctx context.Context, n, limit int64) (int64, error) {
	return b.take(ctx, n, limit, nil)
}

// grow counts n more bytes of a request c has read (its decoding). Past
// the bound one connection at a time, the first to ask, may go on (it
// holds b.over until its frame or decoding ends) while the others wait:
// reading goes past the bound by one frame at a time, as with Kafka's
// memory pool, plus what finished frames still hold until they are
// handled.
func (b *requestBudget) grow(ctx context.Context, n, limit int64, c *conn) (int64, error) {
	return b.take(ctx, n, limit, c)
}

func (b *requestBudget) take(ctx context.Context, n, limit int64, c *conn) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	err := b.await(ctx, func() bool {
		used := b.used - b.past
		if used < limit || (c != nil && (b.over == nil || b.over == c)) {
			if used >= limit {
				b.over = c
			}
			b.used += n
			return true
		}
		return false
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// window counts the n bytes of a large frame's next window, c's frame
// holding held already (0: its first window). It is admitted while it
// fits in largeShare of limit with what is held (or nothing is) and the
// frame stays within perConn (<= 0: no cap); otherwise a frame that holds
// bytes already may go on as the one frame past the bound, whose windows
// then count in b.past too, while the others wait. A first window waits
// for room.
func (b *requestBudget) window(ctx context.Context, n, held, limit, perConn int64, c *conn) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	share := largeShare(limit)
	err := b.await(ctx, func() bool {
		used := b.used - b.past
		if (used+n <= share || used == 0) && (perConn <= 0 || held == 0 || held+n <= perConn) {
			b.used += n
			return true
		}
		if held > 0 && (b.over == nil || b.over == c) {
			b.over = c
			b.used += n
			b.past += n
			return true
		}
		return false
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// await calls admit under b.mu until it returns true, waiting for bytes to
// be released in between; ctx ends the wait. admit counts what it admits.
func (b *requestBudget) await(ctx context.Context, admit func() bool) error {
	waiting := false
	for {
		b.mu.Lock()
		if admit() {
			if waiting {
				b.waiting--
			}
			b.mu.Unlock()
			return nil
		}
		if !waiting {
			waiting = true
			b.waiting++
			select {
			case b.blocked <- struct{}{}:
			default:
			}
		}
		if b.room == nil {
			b.room = make(chan struct{})
		}
		room := b.room
		b.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
			return ctx.Err()
		}
	}
}

// endFrame ends c's frame's claim to go past the bound, if it had one:
// what it took past the bound counts within it from now on (until the
// request gives it back).
func (b *requestBudget) endFrame(c *conn) {
	b.mu.Lock()
	if b.over == c {
		b.over = nil
		b.past = 0
		b.wakeLocked()
	}
	b.mu.Unlock()
}

func (b *requestBudget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.wakeLocked()
	b.mu.Unlock()
}

func (b *requestBudget) wakeLocked() {
	if b.room != nil {
		close(b.room)
		b.room = nil
	}
}

// slot is one request's place in the connection's response order.
type slot struct {
	done   chan struct{}
	corrID int32
	skip   bool // nothing to send: acks=0 produce
	// close, set before the slot finishes, closes the connection once
	// the responses before it are written (a panicked second stage).
	close bool
	// raw, with rawToken set, is sent as a bare size-prefixed SASL token
	// (SaslHandshake v0's exchange, security.go) instead of resp.
	raw      []byte
	rawToken bool
	// api and start time the request for sluice_request_seconds: the
	// writer observes once the response is on the socket.
	api   *apiMetrics
	start time.Time
	// out is the response encoded when it was answered (conn.encode),
	// with splices (a Fetch's file ranges) and spliced to release once
	// sent; resp is then dropped, so a response waiting for a client
	// that does not read holds its encoded bytes only, counted in
	// conn.unsent.
	out     []byte
	splices []splice
	spliced splicedResponse
}

func (s *slot) finish() { close(s.done) }

type conn struct {
	srv      *Server
	nc       net.Conn
	listener *listener
	log      zerolog.Logger
	// sasl is the authentication state on a SASL_* listener (nil on
	// others); closeAfter, set by a handler, closes the connection once
	// that handler's answer is written. Read loop only.
	sasl       *saslConn
	closeAfter error

	// What the reaper (Server.reapConns) reads, in Server.now units:
	// frameStart is when the frame being read began (0 between frames,
	// -1 while it waits for budget room: that is not the client's
	// delay), lastActive when a frame was last read or a response
	// written; pending counts requests whose handlers have not answered.
	frameStart atomic.Int64
	lastActive atomic.Int64
	pending    atomic.Int32
	// opened is when the connection was accepted (Server.since); spoke
	// is set once its first frame is read, or once the accept loop found
	// its first bytes waiting or closed it as silent (fdshed.go).
	opened int64
	spoke  atomic.Bool
	// progress counts the bytes read from the socket, plus one for each
	// window of a frame granted room; frameHeld is what the frame being
	// read holds in queued.max.request.bytes (0 between frames). The
	// reaper alone keeps stallSeen, the progress it last saw, and
	// stallSince, when it saw it change (Server.evictStalled).
	progress   atomic.Int64
	frameHeld  atomic.Int64
	stallSeen  int64
	stallSince int64
	// For queued.min.request.bytes.per.second: waited is the time the
	// connection's frames spent waiting for budget room (not the
	// client's time); frameSeq counts the frames begun, frameBaseT and
	// frameBaseP are the time (now less waited) and progress when the
	// last one began. The reaper alone keeps rateSeq, the frame its
	// samples are of, and the samples (Server.evictStalled).
	waited     atomic.Int64
	frameSeq   atomic.Int64
	frameBaseT atomic.Int64
	frameBaseP atomic.Int64
	rateSeq    int64
	rate       rateSamples

	ctx    context.Context
	cancel context.CancelFunc
	slots  chan *slot
	wg     sync.WaitGroup // second stages

	// fwdTail is closed once the last request that forwarded a produce
	// has sent its forwards (see forwardTurn); read loop only.
	fwdTail chan struct{}

	// principal is who the connection speaks for, in Kafka's
	// "User:name" form: User:ANONYMOUS until authentication sets it
	// (SASL, security.go), or the client certificate's subject on an
	// SSL listener with client auth (read loop only; handlers read it
	// through reqCtx.who). host is
	// the client's IP address as the authorizer matches it.
	principal string
	host      string
	// muteUntil is when a client quota's throttle of the connection ends
	// (unix ns): its next request is not read before (KIP-219).
	muteUntil atomic.Int64
	// unsent is the bytes of responses answered and not yet handed to
	// the socket; past queued.max.response.bytes the next request is
	// not read (waitUnsent) until the writer signals drained.
	unsent  atomic.Int64
	drained chan struct{}

	// id names the connection to the group coordinator, and shares are
	// the share sessions opened on it, released when it closes
	// (server/share.go).
	id     uint64
	shares shareSessions
}

func (s *Server) serveConn(l *listener, nc net.Conn, ip netip.Addr) {
	defer s.limits.release(ip)
	principal := acl.Anonymous
	if l.sec.tls != nil {
		tc, p, err := s.handshakeTLS(l, nc)
		if err != nil {
			s.metrics.saslAuth(l.cfg.Name, "TLS", false)
			if errors.Is(err, errPrincipalMapping) {
				s.log.Warn().Err(err).Str("conn", nc.RemoteAddr().String()).Str("listener", l.cfg.Name).Msg("client certificate refused")
				nc.Close()
				return
			}
			s.log.Debug().Err(err).Str("conn", nc.RemoteAddr().String()).Str("listener", l.cfg.Name).Msg("TLS handshake failed")
			nc.Close()
			return
		}
		nc, principal = tc, p
	}
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{
		srv:       s,
		nc:        nc,
		listener:  l,
		log:       s.log.With().Str("conn", nc.RemoteAddr().String()).Str("listener", l.cfg.Name).Logger(),
		ctx:       ctx,
		cancel:    cancel,
		slots:     make(chan *slot, maxInFlight),
		principal: principal,
		host:      ip.String(),
		drained:   make(chan struct{}, 1),
		id:        connSeq.Add(1),
	}
	if l.sec.cfg.UsesSASL() {
		c.sasl = &saslConn{}
	}
	c.lastActive.Store(s.now())
	c.opened = s.since()
	if !s.trackConn(c, true) {
		nc.Close()
		cancel()
		return
	}
	defer s.trackConn(c, false)
	conns := s.metrics.connections.WithLabelValues(l.cfg.Name, l.cfg.View)
	conns.Inc()
	defer conns.Dec()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	err := c.readLoop()
	if isAuthClose(err) {
		c.log.Info().Err(err).Msg("closing connection")
	} else if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
		c.log.Warn().Err(err).Msg("closing connection")
	}
	close(c.slots)
	<-writerDone
	cancel()
	c.wg.Wait()
	nc.Close()
	s.shareConnClosed(c)
}

func (c *conn) readLoop() error {
	br := bufio.NewReaderSize(progressReader{c}, 64<<10)
	for {
		if err := c.waitMuted(); err != nil {
			return err
		}
		if err := c.waitUnsent(); err != nil {
			return err
		}
		n, err := protocol.ReadFrameSize(br, c.srv.cfg.MaxFrameBytes)
		if err != nil {
			return err
		}
		now := c.srv.now()
		c.frameBaseT.Store(now - c.waited.Load())
		c.frameBaseP.Store(c.progress.Load())
		c.frameSeq.Add(1)
		c.frameStart.Store(now)
		var frame []byte
		var split *protocol.ProduceFrame
		var held int64
		if c.splitProduce(br, n) {
			var stream *produceStream
			split, stream, held, err = c.readProduceFrame(br, n)
			if err != nil {
				return err
			}
			if stream != nil {
				if err := c.handleProduceStream(stream); err != nil {
					return err
				}
				continue
			}
			frame = split.Frame
		} else {
			frame, held, err = c.readFrame(br, n)
		}
		if err != nil {
			return err
		}
		c.frameStart.Store(0)
		c.lastActive.Store(c.srv.now())
		c.spoke.Store(true)
		// A throttle may have begun while the frame was read (the
		// previous request answered late): the request waits it out.
		if err := c.waitMuted(); err != nil {
			c.srv.requestBytes.release(held)
			return err
		}
		if c.sasl != nil && c.sasl.rawTokens {
			err = c.handleRawToken(frame, held)
		} else {
			err = c.handle(frame, split, held)
		}
		if err != nil {
			return err
		}
	}
}

// progressReader reads c's socket, counting the bytes in c.progress.
type progressReader struct{ c *conn }

func (r progressReader) Read(p []byte) (int, error) {
	n, err := r.c.nc.Read(p)
	if n > 0 {
		r.c.progress.Add(int64(n))
	}
	return n, err
}

// waitMuted waits out a client quota's throttle of the connection.
func (c *conn) waitMuted() error {
	until := c.muteUntil.Load()
	if until == 0 {
		return nil // never throttled: no clock read per frame
	}
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// waitUnsent waits while the connection's responses not yet written hold
// more than queued.max.response.bytes: a client that does not read what
// it asked for is not read either (as Kafka mutes a connection while a
// response is pending), so its answers stop piling up in the broker.
// The wait is on this connection alone; connections.max.idle.ms closes
// it if the client never reads again.
func (c *conn) waitUnsent() error {
	limit := c.srv.cfg.QueuedMaxResponseBytes
	if limit <= 0 || c.unsent.Load() <= limit {
		return nil
	}
	c.srv.metrics.responseWaits.Inc()
	for c.unsent.Load() > limit {
		select {
		case <-c.drained:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
	}
	return nil
}

// mute stops reading the connection for d from now (or longer, if it is
// muted longer already).
func (c *conn) mute(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.muteUntil.Load()
		if until <= cur || c.muteUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// Frame windows. A frame up to firstWindow bytes counts against
// queued.max.request.bytes whole once its size prefix is read, as the
// bufio buffer every connection has already holds that much. A larger one
// counts a window at a time, each as large as what has arrived so far
// (at least firstWindow, at most maxWindow), and each before it is read:
// a client that stops mid-frame holds at most about twice what it sent.
// Its memory is a buffer of its whole size at once while requestBudget's
// promise allows (frames up to an eighth of the bound: the produce path,
// one allocation or a pooled buffer, no copy); otherwise the buffer
// grows, doubling, as the windows arrive, so that the memory follows the
// bytes too rather than what the size prefix claims.
const (
	firstWindow = 64 << 10
	maxWindow   = 1 << 20
)

// readFrame reads the n-byte body after a size prefix, counting it against
// queued.max.request.bytes as above; it returns the frame and the bytes it
// holds there (given back on error).
func (c *conn) readFrame(br *bufio.Reader, n int) (frame []byte, held int64, err error) {
	budget := &c.srv.requestBytes
	if n <= firstWindow {
		if held, err = c.reserve(int64(n), -1); err != nil {
			return nil, 0, err
		}
		c.frameHeld.Store(held)
		defer c.frameHeld.Store(0)
		// Each frame gets a buffer of its own from the pool: a request
		// decoded from it (and its records) may live on in a second
		// stage. Handlers that are done with it early give it back (see
		// reqCtx.releaseFrame); the rest are left to the collector.
		frame = protocol.GetFrameBuffer(n)
		if err := protocol.ReadFrameBody(br, frame); err != nil {
			protocol.PutFrameBuffer(frame)
			budget.release(held)
			return nil, 0, err
		}
		return frame, held, nil
	}
	defer budget.endFrame(c)
	defer c.frameHeld.Store(0)
	limit := c.srv.cfg.QueuedMaxRequestBytes
	var pooled bool
	if budget.promise(int64(n), limit) {
		// The common case: a buffer of the whole frame now.
		defer budget.unpromise(int64(n), limit)
		frame, pooled = protocol.GetFrameBuffer(n)[:0], true
	} else {
		// Start in a free pooled buffer (one that holds the frame, or
		// else the largest) or a small plain one, and grow, doubling,
		// through plain ones to a pool buffer of the whole frame. Only
		// pool buffers go back to the pool, so that growth does not
		// crowd its few buffers out.
		frame = protocol.FreeFrameBuffer(n)
		pooled = frame != nil
		if !pooled {
			frame = make([]byte, 0, firstWindow)
		}
	}
	got := 0
	for got < n {
		w := min(n-got, max(firstWindow, min(got, maxWindow)))
		h, err := c.reserve(int64(w), held)
		held += h
		c.frameHeld.Store(held)
		if err == nil && cap(frame) < got+w {
			var grown []byte
			size := min(n, max(2*cap(frame), got+w))
			if size == n {
				grown = protocol.GetFrameBuffer(n)
			} else {
				grown = make([]byte, size)
			}
			copy(grown, frame[:got])
			if pooled {
				protocol.PutFrameBuffer(frame)
			}
			frame, pooled = grown, size == n
		}
		if err == nil {
			frame = frame[:got+w]
			err = protocol.ReadFrameBody(br, frame[got:])
		}
		if err != nil {
			if pooled {
				protocol.PutFrameBuffer(frame)
			}
			// What it took past the bound counts within it again
			// before it is given back, not after.
			budget.endFrame(c)
			budget.release(held)
			return nil, 0, err
		}
		got += w
	}
	return frame, held, nil
}

// splitProduce reports whether the n-byte frame whose size prefix was
// just read is a Produce request large enough to be read by
// readProduceFrame: each large batch into a buffer of its own, so that the
// memory a connection holds follows the bytes that have arrived and each
// batch goes back to the pool once it is written, instead of a buffer of
// the whole frame (about 8 MB from producers that fill a request with a
// 1 MB batch per partition) being held from its first byte to the end of
// its first stage on every producer's connection at once.
func (c *conn) splitProduce(br *bufio.Reader, n int) bool {
	if n <= firstWindow || (c.sasl != nil && c.sasl.rawTokens) {
		return false
	}
	h, err := br.Peek(4)
	if err != nil {
		return false // readFrame meets the same error
	}
	key, version := int16(binary.BigEndian.Uint16(h)), int16(binary.BigEndian.Uint16(h[2:]))
	return key == 0 && version >= protocol.ProduceMinServed && protocol.Supported(key, version)
}

// readProduceFrame is readFrame for a large Produce frame (splitProduce):
// the same windows of queued.max.request.bytes, each counted before it is
// read. It reads the request's header and the fields before its topics;
// a request that can be handled as it arrives (ProduceStream.Streamable)
// is returned as a stream for handleProduceStream, which reads the rest;
// any other is read whole, each large batch into a buffer of its own
// (protocol.ReadProduceFrame).
func (c *conn) readProduceFrame(br *bufio.Reader, n int) (f *protocol.ProduceFrame, s *produceStream, held int64, err error) {
	wr := &windowReader{c: c, r: br, n: n}
	ps := protocol.NewProduceStream(wr, n)
	err = ps.ReadPrefix()
	if err == nil && ps.Streamable() {
		return nil, &produceStream{c: c, wr: wr, ps: ps}, 0, nil
	}
	if err == nil {
		f, err = ps.ReadAll()
	} else {
		ps.Frame().Release()
	}
	budget := &c.srv.requestBytes
	budget.endFrame(c)
	c.frameHeld.Store(0)
	if err != nil {
		// What it took past the bound counts within it again before
		// it is given back, not after.
		budget.release(wr.held)
		return nil, nil, 0, err
	}
	return f, nil, wr.held, nil
}

// windowReader reads a frame's n bytes from r, counting each window
// against queued.max.request.bytes (conn.reserve) before it reads it, as
// readFrame does.
type windowReader struct {
	c    *conn
	r    io.Reader
	n    int   // frame bytes
	got  int   // read so far
	room int   // bytes of the current window not read yet
	held int64 // what the frame holds in the budget
}

func (w *windowReader) Read(p []byte) (int, error) {
	if w.got >= w.n {
		return 0, io.EOF
	}
	if w.room == 0 {
		win := min(w.n-w.got, max(firstWindow, min(w.got, maxWindow)))
		h, err := w.c.reserve(int64(win), w.held)
		w.held += h
		w.c.frameHeld.Store(w.held)
		if err != nil {
			return 0, err
		}
		w.room = win
	}
	if len(p) > w.room {
		p = p[:w.room]
	}
	k, err := w.r.Read(p)
	w.got += k
	w.room -= k
	return k, err
}

// reserve counts n bytes of the frame being read against
// queued.max.request.bytes, waiting for room: a small frame whole (held
// < 0), or a large frame's window, the frame holding held already
// (requestBudget.window). The wait does not count towards
// socket.request.timeout.ms nor the frame's rate.
func (c *conn) reserve(n, held int64) (int64, error) {
	b, limit := &c.srv.requestBytes, c.srv.cfg.QueuedMaxRequestBytes
	start := c.frameStart.Swap(-1)
	t0 := c.srv.now()
	var got int64
	var err error
	if held < 0 {
		got, err = b.acquire(c.ctx, n, limit)
	} else {
		got, err = b.window(c.ctx, n, held, limit, c.srv.perConnBytes, c)
	}
	c.progress.Add(1) // granted room (or closing): not the client's stall
	waited := c.srv.now() - t0
	c.waited.Add(waited)
	c.frameStart.Store(start + waited)
	return got, err
}

// handle runs one request's first stage. A returned error closes the
// connection. held is what the frame counts against
// queued.max.request.bytes; the request's reqCtx gives it back.
func (c *conn) handle(frame []byte, split *protocol.ProduceFrame, held int64) error {
	defer func() {
		if held > 0 { // no reqCtx took it over
			c.srv.requestBytes.release(held)
		}
	}()
	key, version, corrID := protocol.PeekHeader(frame)
	if err := c.checkAuth(key); err != nil {
		return err
	}
	sl := &slot{done: make(chan struct{}), corrID: corrID}
	req := kmsg.RequestForKey(key)
	if key == protocol.ApiVersionsKey && !protocol.Supported(key, version) {
		// KIP-511: answer an ApiVersions we do not know with
		// UNSUPPORTED_VERSION in a v0 body listing what we do speak,
		// so the client can retry with a version we share.
		resp := c.srv.apiVersionsResponse(0, c.listener)
		resp.ErrorCode = errUnsupportedVersion
		sl.api, sl.start = c.listener.metrics.api(key), time.Now()
		c.enqueue(sl)
		sl.api.requests.Inc()
		c.answer(sl, resp)
		return nil
	}
	if req == nil || !protocol.Supported(key, version) {
		c.srv.metrics.badRequests.Inc()
		return errUnsupportedRequest{key: key, version: version}
	}
	if key == 0 && version < protocol.ProduceMinServed {
		// Produce v0-v2 are advertised only so librdkafka keeps
		// compression on; like Kafka 4 we refuse them by closing.
		c.srv.metrics.badRequests.Inc()
		return errUnsupportedRequest{key: key, version: version}
	}
	req.SetVersion(version)
	hdr, body, err := protocol.ParseRequestHeader(frame, req.IsFlexible())
	if err != nil {
		c.srv.metrics.badRequests.Inc()
		return err
	}
	// What decoding may allocate counts against the budget before it
	// runs, and what the request holds once decoded until it is answered
	// (decode_budget.go).
	limit := c.srv.cfg.QueuedMaxRequestBytes
	bound, exact := decodeBound(key, version, body)
	if limit > 0 && bound > limit && len(body) > firstWindow {
		c.srv.metrics.badRequests.Inc()
		return errMalformed{key: key, version: version, err: fmt.Errorf("%d bytes could decode into %d, more than queued.max.request.bytes (%d)", len(frame), bound, limit)}
	}
	if err := c.decode(req, body, bound, exact, &held); err != nil {
		if c.ctx.Err() != nil {
			return err // closing while it waited for room
		}
		c.srv.metrics.badRequests.Inc()
		return errMalformed{key: key, version: version, err: err}
	}
	size := len(frame)
	if split != nil {
		// The large batches, read into buffers of their own, go back
		// into the decoded request.
		if err := split.Attach(req.(*kmsg.ProduceRequest)); err != nil {
			c.srv.metrics.badRequests.Inc()
			return errMalformed{key: key, version: version, err: err}
		}
		size = split.Size
	}
	sl.api, sl.start = c.listener.metrics.api(key), time.Now()
	c.enqueue(sl)
	rc := &reqCtx{conn: c, hdr: hdr, slot: sl, start: sl.start, frame: frame, split: split, size: size}
	rc.held.Store(held)
	held = 0
	sl.api.requests.Inc()
	resp, err := c.srv.dispatch(rc, req)
	return c.complete(rc, key, resp, err)
}

// complete ends a dispatched request: its handling time is charged to the
// client's request quota, and a synchronous answer is sent (or, when the
// handler failed, its slot ends unanswered).
func (c *conn) complete(rc *reqCtx, key int16, resp kmsg.Response, err error) error {
	c.srv.quotas.recordRequestTime(rc, key, time.Since(rc.slot.start))
	if err != nil {
		if !rc.async {
			// Nothing will finish it: its slot ends unanswered so
			// the writer, which waits for it, lets the connection
			// close.
			rc.releaseBytes()
			rc.slot.skip = true
			c.answer(rc.slot, nil)
		}
		return err
	}
	if !rc.async {
		rc.finish(resp)
	}
	return c.closeAfter
}

// decode decodes req from body under queued.max.request.bytes
// (decode_budget.go), adding what it then holds there to *held. A request
// whose bound is at most an eighth of the limit reserves its bound first
// and keeps what it measures; a larger one waits for its turn to decode
// (Server.largeDecode), decodes outside the budget, and charges what it
// measures before the next such request may start, so that at most one
// decoded request is ever uncounted.
func (c *conn) decode(req kmsg.Request, body []byte, bound int64, exact bool, held *int64) error {
	budget, limit := &c.srv.requestBytes, c.srv.cfg.QueuedMaxRequestBytes
	defer budget.endFrame(c)
	if limit <= 0 {
		return req.ReadFrom(body)
	}
	if bound > limit/8 {
		select {
		case c.srv.largeDecode <- struct{}{}:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
		defer func() { <-c.srv.largeDecode }()
		if err := req.ReadFrom(body); err != nil {
			return err
		}
		size := bound
		if !exact {
			size = decodedSize(req)
		}
		n, err := budget.grow(c.ctx, size, limit, c)
		*held += n
		return err
	}
	n, err := budget.grow(c.ctx, bound, limit, c)
	*held += n
	if err != nil {
		return err
	}
	if err := req.ReadFrom(body); err != nil {
		return err
	}
	if !exact && bound > decodeWalkMin {
		if size := decodedSize(req); size < bound {
			budget.release(bound - size)
			*held -= bound - size
		}
	}
	return nil
}

// enqueue reserves the request's place in the response order; it blocks
// while maxInFlight requests are unanswered.
func (c *conn) enqueue(sl *slot) {
	c.pending.Add(1)
	c.slots <- sl
}

// answer hands a request's response (nil: none) to the writer, encoded.
func (c *conn) answer(sl *slot, resp kmsg.Response) {
	c.encode(sl, resp)
	sl.finish()
	c.pending.Add(-1)
}

// encode encodes a slot's response into sl.out (Fetch's records as file
// ranges to splice in) and counts it in c.unsent until the writer has
// handed it to the socket.
func (c *conn) encode(sl *slot, resp kmsg.Response) {
	if resp == nil && !sl.rawToken {
		return
	}
	out := getOutBuffer()
	switch sp, spliced := resp.(splicedResponse); {
	case sl.rawToken:
		out = binary.BigEndian.AppendUint32(out, uint32(len(sl.raw)))
		out = append(out, sl.raw...)
		sl.raw = nil
	case spliced:
		out, sl.splices = sp.appendFrame(out, sl.corrID)
		sl.spliced = sp
	default:
		out = protocol.AppendResponse(out, sl.corrID, resp)
	}
	sl.out = out
	c.unsent.Add(int64(len(out)))
}

// sent ends the count of a slot's encoded response in c.unsent and wakes
// a reader waiting for it to drop.
func (c *conn) sent(sl *slot) {
	if sl.out == nil {
		return
	}
	c.unsent.Add(-int64(len(sl.out)))
	putOutBuffer(sl.out)
	sl.out, sl.splices = nil, nil
	select {
	case c.drained <- struct{}{}:
	default:
	}
}

// outBuffers recycles the buffers responses are encoded into: most are
// small, and a connection's writer used to reuse one buffer; a buffer
// over outPoolMax is left to the collector.
var outBuffers = sync.Pool{New: func() any { return new([]byte) }}

const outPoolMax = 64 << 10

func getOutBuffer() []byte {
	return (*outBuffers.Get().(*[]byte))[:0]
}

func putOutBuffer(b []byte) {
	if cap(b) == 0 || cap(b) > outPoolMax {
		return
	}
	outBuffers.Put(&b)
}

func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	failed := false
	// sent: responses written since the last flush, whose time is
	// observed once they are on the socket.
	var sent []*slot
	flush := func() {
		if !failed && bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				failed = true
				c.cancel()
				c.nc.Close() // unblock the reader
			}
		}
		if !failed && len(sent) > 0 {
			now := time.Now()
			for _, sl := range sent {
				sl.api.latency.Observe(now.Sub(sl.start).Seconds())
			}
		}
		clear(sent)
		sent = sent[:0]
	}
	for {
		// Flush only when the writer would otherwise block, so
		// responses that are ready together share one syscall.
		var sl *slot
		var ok bool
		select {
		case sl, ok = <-c.slots:
		default:
			flush()
			sl, ok = <-c.slots
		}
		if !ok {
			flush()
			return
		}
		select {
		case <-sl.done:
		default:
			flush()
			<-sl.done // second stages watch ctx and finish promptly
		}
		if sl.close && !failed {
			flush()
			failed = true
			c.cancel()
			c.nc.Close() // unblock the reader
		}
		if sl.skip || failed || sl.out == nil {
			if sl.spliced != nil {
				sl.spliced.release()
			}
			c.sent(sl)
			continue
		}
		var err error
		if sl.spliced != nil {
			err = writeSpliced(bw, c.nc, sl.out, sl.splices)
			sl.spliced.release()
		} else {
			_, err = bw.Write(sl.out)
		}
		c.sent(sl)
		if err != nil {
			failed = true
			c.cancel()
			c.nc.Close()
		} else {
			c.lastActive.Store(c.srv.now())
			if sl.api != nil {
				sent = append(sent, sl)
			}
		}
	}
}

// reqCtx carries one request through its handler.
type reqCtx struct {
	conn  *conn
	hdr   protocol.RequestHeader
	slot  *slot
	start time.Time
	async bool
	// frame is the request's frame buffer until releaseFrame gives it
	// back to the pool; the decoded request's byte fields alias it.
	frame []byte
	// split, for a large Produce frame read batch by batch
	// (conn.readProduceFrame), holds frame and the batches' buffers.
	split *protocol.ProduceFrame
	// held is what the request counts against queued.max.request.bytes
	// until releaseFrame or finish, whichever comes first, gives it back.
	held atomic.Int64
	// size is the request frame's length, what produce_byte_rate counts.
	size int
	// throttleNs is the longest client quota throttle the request
	// incurred (see reqCtx.throttle).
	throttleNs atomic.Int64
}

func (rc *reqCtx) ctx() context.Context { return rc.conn.ctx }
func (rc *reqCtx) view() string         { return rc.conn.listener.cfg.View }

// releaseFrame returns the request's frame buffer to the pool at once, so
// that a request waiting long in its second stage (acks=all produce waits
// for a flush round) does not hold megabytes it no longer needs. Call it
// in the first stage, and only when nothing decoded from the request is
// used any more: kmsg copies strings out of the frame, but byte fields
// (produce records, tags) alias it.
func (rc *reqCtx) releaseFrame() {
	if rc.split != nil {
		rc.split.Release()
		rc.split = nil
	} else if rc.frame != nil {
		protocol.PutFrameBuffer(rc.frame)
	}
	rc.frame = nil
	rc.releaseBytes()
}

// releaseBytes ends the request's claim on queued.max.request.bytes. A
// finished request's frame may still be referenced (a coordinator keeps
// group members' metadata), but it is no longer in flight, which is what
// the bound counts, as in Kafka.
func (rc *reqCtx) releaseBytes() {
	if n := rc.held.Swap(0); n > 0 {
		rc.conn.srv.requestBytes.release(n)
	}
}

func (rc *reqCtx) finish(resp kmsg.Response) {
	rc.releaseBytes()
	if d := time.Duration(rc.throttleNs.Load()); d > 0 && rc.throttled(resp, d) {
		return
	}
	rc.answer(resp)
}

// throttled applies a client quota throttle of d to rc's response and
// connection. It reports true when the response is to be sent after d
// (a client too old to throttle itself, as Kafka does for it): it then
// answers on its own.
func (rc *reqCtx) throttled(resp kmsg.Response, d time.Duration) bool {
	rc.conn.mute(d)
	if resp == nil {
		return false
	}
	clientThrottles := false
	if tr, ok := resp.(kmsg.ThrottleResponse); ok {
		ms := int32(min(d.Milliseconds(), int64(1<<31-1)))
		var cur int32
		cur, clientThrottles = tr.Throttle()
		if st, ok := resp.(kmsg.SetThrottleResponse); ok && ms > cur {
			st.SetThrottle(ms)
		}
	}
	if clientThrottles {
		return false
	}
	rc.conn.wg.Add(1)
	go func() {
		defer rc.conn.wg.Done()
		answered := false
		// A panic here (encoding the response, say) is contained as one
		// in a handler's second stage: logged and counted under the
		// request's API, the request ends unanswered and the writer
		// closes the connection when it reaches it.
		defer rc.containPanic("answering a throttled response panicked: closing its connection", func(any) {
			rc.slot.close = true
			if !answered {
				rc.answer(nil)
			}
		})
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-rc.ctx().Done():
		}
		if throttleFault != nil {
			throttleFault(rc.hdr.Key)
		}
		rc.answer(resp)
		answered = true
	}()
	return true
}

// throttleFault, set by tests only, runs in the goroutine that delays a
// throttled response, before it answers: a panic injected there is one
// in the broker's own code.
var throttleFault func(api int16)

func (rc *reqCtx) answer(resp kmsg.Response) {
	if resp == nil {
		rc.slot.skip = true
		// Nothing to send: the request ends here.
		rc.slot.api.latency.Observe(time.Since(rc.start).Seconds())
	}
	rc.conn.answer(rc.slot, resp)
}

// later runs a handler's second stage on its own goroutine; the handler
// then returns (nil, nil). fn must watch rc.ctx() and return promptly when
// the connection closes.
func (rc *reqCtx) later(fn func() kmsg.Response) {
	rc.async = true
	rc.conn.wg.Add(1)
	go func() {
		defer rc.conn.wg.Done()
		rc.finish(rc.contain(fn))
	}()
}

// contain runs a second stage, and when it panics logs and counts it as
// dispatch does a first stage's and returns nil: the request ends
// unanswered, and the writer closes the connection when it reaches it.
func (rc *reqCtx) contain(fn func() kmsg.Response) (resp kmsg.Response) {
	defer rc.containPanic("request handler panicked in its second stage: closing its connection", func(any) {
		rc.slot.close = true
		resp = nil
	})
	return fn()
}
