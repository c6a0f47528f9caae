package peerlink

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// ListenConfig configures a Listener.
type ListenConfig struct {
	// MaxHandshaking bounds the accepted connections still in their
	// handshake (TLS, a hello); more are closed at once, after OnBusy
	// (optional) is told. 0 means no bound.
	MaxHandshaking int
	// MaxConns bounds the accepted connections open at once; more are
	// closed at once, after OnBusy is told. 0 means no bound.
	MaxConns int
	OnBusy   func(c net.Conn)
	// Logger gets a warning when Accept fails (at most one per 10 s).
	Logger zerolog.Logger
}

// Listener accepts peers' connections and serves each in its own
// goroutine. Accept errors other than the listener's close (a process
// out of file descriptors, EMFILE, is the common one) are counted and
// waited out with backoff: the listener keeps listening. Every accepted
// connection, and every outbound one a caller Tracks, is closed by Close,
// which waits for the serving goroutines.
type Listener struct {
	ln  net.Listener
	cfg ListenConfig

	handshaking atomic.Int32
	open        atomic.Int32 // accepted connections not yet closed
	// AcceptErrors counts failed Accepts.
	AcceptErrors atomic.Int64
	lastLog      atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// Listen listens on addr; Serve starts accepting.
func Listen(addr string, cfg ListenConfig) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Listener{ln: ln, cfg: cfg, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}, nil
}

// Addr is the bound address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Open is how many accepted connections are being served (what MaxConns
// bounds).
func (l *Listener) Open() int { return int(l.open.Load()) }

// Handshaking is the number of accepted connections in their handshake.
func (l *Listener) Handshaking() int { return int(l.handshaking.Load()) }

// Closed is closed once Close has begun.
func (l *Listener) Closed() <-chan struct{} { return l.done }

// Accepted is one inbound connection, handed to the serve function.
type Accepted struct {
	net.Conn
	l    *Listener
	once sync.Once
}

// Ready tells the listener that the connection's handshake is over: it no
// longer counts against MaxHandshaking. Returning from the serve function
// does it too.
func (a *Accepted) Ready() {
	a.once.Do(func() { a.l.handshaking.Add(-1) })
}

// Serve accepts connections until Close, calling serve for each in its
// own goroutine; the connection is closed when serve returns.
func (l *Listener) Serve(serve func(*Accepted)) {
	l.wg.Add(1)
	go l.accept(serve)
}

func (l *Listener) accept(serve func(*Accepted)) {
	defer l.wg.Done()
	var b Backoff
	b.Min, b.Max = 5*time.Millisecond, time.Second
	for {
		c, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			l.AcceptErrors.Add(1)
			l.warn(err)
			select {
			case <-l.done:
				return
			case <-time.After(b.Next()):
			}
			continue
		}
		b.Reset()
		_ = SetAckTimeout(c, AckTimeout) // answers written back are bounded too
		if max := l.cfg.MaxConns; max > 0 && int(l.open.Load()) >= max {
			if l.cfg.OnBusy != nil {
				l.cfg.OnBusy(c)
			}
			c.Close()
			continue
		}
		if max := l.cfg.MaxHandshaking; max > 0 && int(l.handshaking.Add(1)) > max {
			l.handshaking.Add(-1)
			if l.cfg.OnBusy != nil {
				l.cfg.OnBusy(c)
			}
			c.Close()
			continue
		} else if max <= 0 {
			l.handshaking.Add(1)
		}
		if !l.Track(c) {
			l.handshaking.Add(-1)
			return
		}
		a := &Accepted{Conn: c, l: l}
		l.open.Add(1)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.open.Add(-1)
			defer l.Untrack(c)
			defer a.Ready()
			serve(a)
		}()
	}
}

func (l *Listener) warn(err error) {
	now := time.Now().UnixNano()
	last := l.lastLog.Load()
	if now-last < int64(10*time.Second) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	l.cfg.Logger.Warn().Err(err).Str("addr", l.ln.Addr().String()).
		Msg("accepting a peer's connection failed; still listening (further failures for 10s are only counted)")
}

// Track registers a connection for Close to end; false (and c closed)
// when the listener is already closed.
func (l *Listener) Track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

// Untrack forgets and closes c.
func (l *Listener) Untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

// Close stops accepting, closes every tracked connection and waits for
// the serving goroutines.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}
