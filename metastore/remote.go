package metastore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
)

// ClientConfig configures a remote client: a broker that is not itself a
// metastore node. mapstructure tags let cmd fill it from viper.
type ClientConfig struct {
	// Addrs are the internal listeners of the metastore nodes (any subset;
	// a request that reaches a follower is handled there or forwarded).
	Addrs []string `mapstructure:"addrs"`
	// RequestTimeout bounds a call whose context has no deadline. Zero: 10s.
	RequestTimeout time.Duration `mapstructure:"request_timeout"`
	// WatchWait is how long one watch long-poll waits. Zero: 1s.
	WatchWait time.Duration  `mapstructure:"watch_wait"`
	Logger    zerolog.Logger `mapstructure:"-"`
	// TLS makes the connections mutual TLS: the client presents its
	// certificate and accepts a server whose certificate the trust store
	// signed and that names a metastore node (tlsconfig.MetaName).
	TLS *tlsconfig.Loader `mapstructure:"-"`
}

type callFunc func(ctx context.Context, req *Request) (*Response, error)

// Dial returns a Client that talks to the metastore over TCP. It returns
// once the cache holds a full image (or ctx ends).
func Dial(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("metastore: no addresses to dial")
	}
	var mu sync.Mutex
	peers := map[string]*caller{}
	dial := func(addr string) callFunc {
		mu.Lock()
		p, ok := peers[addr]
		if !ok {
			p = &caller{addr: addr, tls: cfg.TLS, stopc: make(chan struct{})}
			peers[addr] = p
		}
		mu.Unlock()
		return func(ctx context.Context, req *Request) (*Response, error) {
			wc, err := p.conn(ctx)
			if err != nil {
				return nil, errDial
			}
			return wc.call(ctx, req)
		}
	}
	var eps []callFunc
	for _, a := range cfg.Addrs {
		eps = append(eps, dial(a))
	}
	c := newRemoteClient(eps, cfg)
	// The watch goroutine already runs and may report a leader (setLeader
	// reads dial), so dial is set under the backend's lock.
	rb := c.b.(*remoteBackend)
	rb.mu.Lock()
	rb.dial = dial
	rb.mu.Unlock()
	stopWatch := c.stop
	c.stop = func() {
		stopWatch()
		mu.Lock()
		for _, p := range peers {
			p.stop()
		}
		mu.Unlock()
	}
	if err := c.Sync(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

var errDial = errors.New("metastore: dial failed")

// remoteBackend sends requests to one node at a time and moves to the next
// when that one is unreachable or cannot serve (no leader).
type remoteBackend struct {
	eps []callFunc
	mu  sync.Mutex
	cur int
	// dial, when set (TCP), reaches any address: writes then go straight
	// to the leader the watch reported, saving the follower's forward.
	dial       func(addr string) callFunc
	leaderAddr string
	leader     callFunc
}

func (r *remoteBackend) setLeader(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dial == nil {
		return
	}
	if addr == r.leaderAddr && (r.leader != nil || addr == "") {
		return
	}
	r.leaderAddr, r.leader = addr, nil
	if addr != "" {
		r.leader = r.dial(addr)
	}
}

func (r *remoteBackend) leaderCall() (string, callFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leaderAddr, r.leader
}

func (r *remoteBackend) dropLeader(addr string) {
	r.mu.Lock()
	if r.leaderAddr == addr {
		r.leader = nil
	}
	r.mu.Unlock()
}

func (r *remoteBackend) pick() (int, callFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur, r.eps[r.cur]
}

func (r *remoteBackend) next(from int) {
	r.mu.Lock()
	if r.cur == from {
		r.cur = (r.cur + 1) % len(r.eps)
	}
	r.mu.Unlock()
}

func (r *remoteBackend) do(ctx context.Context, req *Request) (*Response, error) {
	// A request that surely never reached a node (dial failure, unreachable)
	// or that a node refused without acting (ErrNotLeader: never proposed)
	// is retried on the next node. A write lost in flight is ambiguous and
	// returns ErrTimeout.
	write := req.Kind == reqCmd || req.Kind == reqAddVoter || req.Kind == reqRemoveVoter
	if addr, lc := r.leaderCall(); lc != nil && (write || req.Kind == reqHeartbeat) {
		resp, err := lc(ctx, req)
		switch {
		case err == nil && resp.Err != errCode(ErrNotLeader) && resp.Err != errCode(ErrStopped):
			return resp, nil
		case err != nil && write && !errors.Is(err, errDial) && !errors.Is(err, ErrUnreachable):
			return nil, ErrTimeout
		}
		r.dropLeader(addr) // unreachable or deposed: back to the list
	}
	for {
		i, call := r.pick()
		resp, err := call(ctx, req)
		if err == nil {
			if resp.Err != errCode(ErrNotLeader) && resp.Err != errCode(ErrStopped) {
				return resp, nil
			}
		} else if write && !errors.Is(err, errDial) && !errors.Is(err, ErrUnreachable) {
			return nil, ErrTimeout
		}
		r.next(i)
		select {
		case <-ctx.Done():
			if err == nil {
				return resp, nil
			}
			return nil, ErrTimeout
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func newRemoteClient(eps []callFunc, cfg ClientConfig) *Client {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.WatchWait <= 0 {
		cfg.WatchWait = time.Second
	}
	rb := &remoteBackend{eps: eps}
	v := newView()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c := newClient(rb, v, func() { cancel(); <-done })
	c.timeout = cfg.RequestTimeout
	c.pull = func(ctx context.Context) error {
		i, call := rb.pick()
		resp, err := call(ctx, &Request{Kind: reqWatch, FromRev: v.revision()})
		if err != nil || resp.Err != "" {
			rb.next(i)
			return ErrUnreachable
		}
		applyWatch(rb, v, resp)
		return nil
	}
	go func() {
		defer close(done)
		watchLoop(ctx, rb, v, cfg.WatchWait)
	}()
	return c
}

// watchLoop keeps v following the quorum: long-polls for events after the
// view's revision; a full image replaces the view when the node's history
// no longer reaches back that far.
func watchLoop(ctx context.Context, rb *remoteBackend, v *view, wait time.Duration) {
	first := true
	for ctx.Err() == nil {
		from := v.revision()
		w := wait
		if first {
			from, w = 0, 0
		}
		cctx, cancel := context.WithTimeout(ctx, w+5*time.Second)
		i, call := rb.pick()
		resp, err := call(cctx, &Request{Kind: reqWatch, FromRev: from, WaitMs: w.Milliseconds()})
		cancel()
		if err != nil || resp.Err != "" {
			rb.next(i)
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		first = false
		applyWatch(rb, v, resp)
	}
}

func applyWatch(rb *remoteBackend, v *view, resp *Response) {
	if rb != nil {
		rb.setLeader(resp.LeaderAddr)
	}
	if resp.Image != nil {
		v.loadImage(resp.Image)
	} else {
		v.apply(resp.Events, resp.Rev)
	}
}
