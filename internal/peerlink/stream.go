package peerlink

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Item is what a Stream carries: B holds N messages already encoded by
// the caller (raft's doc asks that messages be marshalled before the
// raft loop moves on). Done, when set, learns whether the item went out
// (ok) or was dropped; a raft snapshot's sender reports it to raft.
type Item struct {
	N    int
	B    []byte
	Done func(ok bool)
}

// StreamConfig configures a Stream.
type StreamConfig struct {
	// QueueLen bounds the items waiting (default 1024); Send drops when
	// it is full.
	QueueLen int
	// MaxWrite bounds the bytes coalesced into one write (default 4 MiB;
	// one item larger than that goes alone).
	MaxWrite int
	// WriteTimeout bounds one write (default 5 s); a peer that does not
	// read is treated as down.
	WriteTimeout time.Duration
	// Dial connects to the peer, including any TLS and hello; the stream
	// closes what it returns (and, for a *tls.Conn, the connection under
	// it first, so a close alert never waits on a stuck peer).
	Dial func(ctx context.Context) (net.Conn, error)
	// Encode appends the bytes of one write holding items to dst.
	Encode func(dst []byte, items []Item) ([]byte, error)
	// Down, when set, is told each time the peer could not be reached or
	// a write failed (raft's ReportUnreachable).
	Down func(err error)
	// Backoff between attempts to dial (zero value: 50 ms to 2 s).
	Backoff Backoff
}

// Stream is the outbound side towards one peer: a bounded queue that
// Send never blocks on, drained by one goroutine that coalesces
// everything queued into one write, dials when it has no connection, and
// waits with backoff after a failure. Items queued while the peer cannot
// be reached are dropped (and counted): by the time it returns they are
// stale, and raft resends what matters.
type Stream struct {
	cfg StreamConfig
	q   chan Item

	// Dropped counts the messages (Item.N) dropped: queue full, peer
	// unreachable, write failed.
	Dropped atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	conn   net.Conn
	done   chan struct{}
}

// NewStream starts a stream; Close stops it.
func NewStream(cfg StreamConfig) *Stream {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 1024
	}
	if cfg.MaxWrite <= 0 {
		cfg.MaxWrite = 4 << 20
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	s := &Stream{cfg: cfg, q: make(chan Item, cfg.QueueLen), done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.run()
	return s
}

// Send queues it; false when the queue is full and it was dropped.
func (s *Stream) Send(it Item) bool {
	select {
	case s.q <- it:
		return true
	default:
		s.drop(it)
		return false
	}
}

func (s *Stream) drop(it Item) {
	s.Dropped.Add(int64(it.N))
	if it.Done != nil {
		it.Done(false)
	}
}

// Close stops the stream, closes its connection, drops what is queued
// and waits for its goroutine.
func (s *Stream) Close() {
	s.cancel()
	s.mu.Lock()
	if s.conn != nil {
		closeConn(s.conn)
	}
	s.mu.Unlock()
	<-s.done
	s.drain()
}

var errStopped = errors.New("peerlink: stream closed")

func (s *Stream) run() {
	defer close(s.done)
	b := s.cfg.Backoff
	for s.ctx.Err() == nil {
		c, err := s.cfg.Dial(s.ctx)
		if err == nil {
			s.mu.Lock()
			if s.ctx.Err() != nil {
				s.mu.Unlock()
				closeConn(c)
				return
			}
			s.conn = c
			s.mu.Unlock()
			b.Reset()
			err = s.write(c)
			s.mu.Lock()
			s.conn = nil
			s.mu.Unlock()
			closeConn(c)
		}
		if s.ctx.Err() != nil {
			return
		}
		if s.cfg.Down != nil {
			s.cfg.Down(err)
		}
		s.drain()
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(b.Next()):
		}
	}
}

func (s *Stream) drain() {
	for {
		select {
		case it := <-s.q:
			s.drop(it)
		default:
			return
		}
	}
}

// write sends what is queued until the connection fails or the stream
// closes.
func (s *Stream) write(c net.Conn) error {
	var buf []byte
	var items []Item
	for {
		var ok bool
		items, ok = gather(s.q, s.ctx.Done(), items[:0], s.cfg.MaxWrite, func(it Item) int { return len(it.B) })
		if !ok {
			return errStopped
		}
		var err error
		buf, err = s.cfg.Encode(buf[:0], items)
		if err == nil {
			_ = c.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
			_, err = c.Write(buf)
			if err != nil {
				for _, it := range items {
					s.drop(it)
				}
				return err
			}
		} else {
			// The caller's encoding refused these items (too large):
			// dropped, the connection is fine.
			for _, it := range items {
				s.drop(it)
			}
		}
		for _, it := range items {
			if it.Done != nil && err == nil {
				it.Done(true)
			}
		}
		clear(items)
		if cap(buf) > 4*s.cfg.MaxWrite {
			buf = nil
		}
	}
}

// gather waits for one item, then takes whatever else is queued while the
// total stays under max bytes. false when stop closed first.
func gather[T any](q <-chan T, stop <-chan struct{}, out []T, max int, size func(T) int) ([]T, bool) {
	select {
	case it := <-q:
		out = append(out, it)
	case <-stop:
		return out, false
	}
	n := size(out[0])
	for n < max {
		select {
		case it := <-q:
			out = append(out, it)
			n += size(it)
		default:
			return out, true
		}
	}
	return out, true
}

// closeConn closes c, and first the connection under it when it is a
// TLS connection, so the close alert does not wait on a peer that stopped
// reading.
func closeConn(c net.Conn) {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		nc.NetConn().Close()
	}
	c.Close()
}
