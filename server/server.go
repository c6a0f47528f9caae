package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/txn"
)

// Options wires a Server. Everything it needs is passed in; it opens no
// storage of its own.
type Options struct {
	Config  configs.Config
	Catalog Catalog
	// Raft hosts this broker's partitions, each a raft group (one-voter
	// groups on a single node).
	Raft partition.Host
	// Shared hosts the partitions of topics in replication.mode=shared;
	// nil: the broker has no shared storage, and such a topic's
	// partitions are offline here (KAFKA_STORAGE_ERROR).
	Shared  partition.SharedHost
	Logger  zerolog.Logger
	Metrics *Metrics // nil: a private registry
	// Groups is the group coordinator of a broker with the read role;
	// nil: the group APIs answer COORDINATOR_NOT_AVAILABLE.
	Groups *coordinator.Coordinator
	// ACLs stores the ACLs and feeds the authorizer; required when the
	// config turns the authorizer on (authorize.go).
	ACLs ACLStore
	// OffsetsLogs holds the local logs of the read-only __consumer_offsets
	// view (offsets_topic.go), fed from the Catalog, which must then be
	// an OffsetsSource; nil: no view.
	OffsetsLogs partition.LocalLogs
	// LeaseValid says whether this broker's metastore lease certainly
	// still holds (Lease.Valid); an async master refuses writes when it
	// does not (async_master.go). Nil: always.
	LeaseValid func() bool
	// LeaseIncarnation is the incarnation of this broker's current
	// registration (Lease.Incarnation): an async master acknowledges
	// nothing until its metastore view holds that registration
	// (masterFenced). Nil: not checked.
	LeaseIncarnation func() uint64
}

type listener struct {
	cfg  configs.Listener
	ln   net.Listener
	host string
	port int32

	// failedAt is when an accept last failed (Server.since; 0 once one
	// succeeds again); stopped is set if the accept loop ended
	// before the server closed. Either makes ListenerError report.
	failedAt atomic.Int64
	stopped  atomic.Bool

	metrics *viewMetrics // the per-API series of the listener's view
	sec     *listenerSecurity
}

// Server serves the Kafka protocol on the configured listeners.
type Server struct {
	cfg struct {
		configs.Config
		MaxFrameBytes int32
	}
	catalog          Catalog
	raft             partition.Host
	shared           partition.SharedHost
	leaseValid       func() bool
	leaseIncarnation func() uint64
	// handingOver holds the async partitions (partition.Key) this broker
	// is handing its master's place over for: they take no writes.
	handingOver sync.Map
	log         zerolog.Logger
	metrics     *Metrics
	producers   *producerIDs

	// Topic config defaults from this broker's static config and from
	// Sluice's built-in defaults, computed once: they are consulted on
	// every produce.
	staticTopicDefaults, builtinTopicDefaults map[string]string
	fwd                                       forwarder
	groups                                    *coordinator.Coordinator
	quotas                                    *clientQuotas
	acls                                      ACLStore
	authz                                     *acl.Authorizer // nil: no authorizer
	offsets                                   *offsetsView    // nil: no __consumer_offsets view
	fetchSessions                             *fetchSessionCache
	topicSeries                               topicSeries
	// txn is the transaction coordinator, nil without the write role.
	txn *txn.Coordinator

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	listeners []*listener
	conns     map[*conn]struct{}

	requestBytes requestBudget // queued.max.request.bytes (conn.go)
	// perConnBytes is what one connection's frame may hold of it
	// (queued.max.request.bytes.per.connection resolved; 0: no cap).
	perConnBytes int64
	// largeDecode is held by the one request being decoded whose
	// decoding may take more than an eighth of queued.max.request.bytes
	// (decode_budget.go).
	largeDecode chan struct{}
	limits      *connLimits // max.connections and friends (connlimits.go)
	// connGone wakes an accept loop backing off after a failure when a
	// connection closes: a descriptor may be free (connClosed).
	connGone chan struct{}
	// clock is a coarse monotonic time, nanoseconds since epoch plus one
	// (so never 0), that the reaper keeps: connections stamp their
	// activity with it without a clock read per request.
	epoch time.Time
	clock atomic.Int64

	cleaner atomic.Pointer[Cleaner] // set by RunCleaner, for metrics
}

// now is the reaper's clock: at most one reaper tick old.
func (s *Server) now() int64 { return s.clock.Load() }

// since is the precise clock in now's units.
func (s *Server) since() int64 { return int64(time.Since(s.epoch)) + 1 }

func (s *Server) trackConn(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.ctx.Err() != nil {
			return false
		}
		if s.conns == nil {
			s.conns = make(map[*conn]struct{})
		}
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
		s.connClosed()
	}
	return true
}

// connClosed tells an accept loop pausing after a failure that a
// connection closed, so a descriptor may be free.
func (s *Server) connClosed() {
	select {
	case s.connGone <- struct{}{}:
	default:
	}
}

func (s *Server) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.cancel()
		c.nc.Close()
	}
}

// perConnectionBytes resolves queued.max.request.bytes.per.connection: 0
// is a quarter of queued.max.request.bytes, at least firstWindow; -1, or
// an unbounded budget, no cap (0).
func perConnectionBytes(c configs.Config) int64 {
	limit, n := c.QueuedMaxRequestBytes, c.QueuedMaxRequestBytesPerConnection
	switch {
	case limit <= 0 || n < 0:
		return 0
	case n == 0:
		return max(limit/4, firstWindow)
	}
	return n
}

// New creates a server; Start binds its listeners.
func New(opts Options) (*Server, error) {
	if opts.Catalog == nil || opts.Raft == nil {
		return nil, errors.New("server: Catalog and Raft are required")
	}
	s := &Server{
		largeDecode:      make(chan struct{}, 1),
		requestBytes:     requestBudget{blocked: make(chan struct{}, 1)},
		catalog:          opts.Catalog,
		raft:             opts.Raft,
		shared:           opts.Shared,
		leaseValid:       opts.LeaseValid,
		leaseIncarnation: opts.LeaseIncarnation,
		log:              opts.Logger.With().Str("component", "server").Logger(),
		metrics:          opts.Metrics,
		groups:           opts.Groups,
		acls:             opts.ACLs,
	}
	s.catalog.SetPartitionLimit(int64(opts.Config.MaxPartitions))
	if opts.Config.AuthorizerEnabled() {
		if opts.ACLs == nil {
			return nil, errors.New("server: the authorizer is on but no ACL store was given")
		}
		s.authz = acl.New(acl.Config{
			SuperUsers:   opts.Config.SuperUserList(),
			AllowIfNoACL: opts.Config.AllowEveryoneIfNoACL,
		}, opts.ACLs)
		if s.groups != nil {
			// KIP-848 regex subscriptions reach only the topics the
			// member's principal may DESCRIBE.
			authz := s.authz
			s.groups.SetTopicAuthorizer(func(principal, host, topic string) bool {
				return authz.Authorize(acl.Request{Principal: principal, Host: host}, acl.OpDescribe, acl.ResourceTopic, topic)
			})
		}
	}
	if opts.OffsetsLogs != nil {
		src, ok := opts.Catalog.(OffsetsSource)
		if !ok {
			return nil, errors.New("server: OffsetsLogs needs a Catalog that is an OffsetsSource")
		}
		s.offsets = newOffsetsView(opts.OffsetsLogs, src, opts.Config.OffsetsTopicNumPartitions, s.log)
	}
	if s.metrics == nil {
		s.metrics = NewMetrics(nil)
	}
	s.metrics.reg.MustRegister(collector{s})
	limits, err := newConnLimits(opts.Config)
	if err != nil {
		return nil, err
	}
	s.limits = limits
	s.epoch = time.Now()
	s.clock.Store(s.since())
	s.cfg.Config = opts.Config
	s.cfg.MaxFrameBytes = opts.Config.SocketRequestMaxBytes
	s.perConnBytes = perConnectionBytes(opts.Config)
	s.producers = newProducerIDs(opts.Catalog)
	s.fetchSessions = newFetchSessionCache(int(opts.Config.FetchSessionCacheSlots), int64(opts.Config.FetchSessionEvictionMs))
	s.quotas = newClientQuotas(s)
	s.staticTopicDefaults = opts.Config.TopicDefaults()
	s.builtinTopicDefaults = configs.Default().TopicDefaults()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.connGone = make(chan struct{}, 1)
	if s.txn, err = s.newTxnCoordinator(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start binds every listener and serves connections in the background.
func (s *Server) Start() error {
	s.wg.Add(1)
	go s.reapConns()
	if s.groups != nil && s.cfg.ReplicaListen != "" && s.cfg.HasRole("read") {
		s.wg.Add(1)
		go s.shareReleaseLoop()
	}
	if s.txn != nil {
		s.txn.Start()
	}
	for _, lc := range s.cfg.Listeners {
		sec, err := s.newListenerSecurity(lc)
		if err != nil {
			s.Close()
			return err
		}
		ln, err := net.Listen("tcp", lc.Address)
		if err != nil {
			s.Close()
			return fmt.Errorf("listener %s: %w", lc.Name, err)
		}
		adv := lc.Advertised
		if adv == "" {
			adv = ln.Addr().String()
		}
		host, portStr, err := net.SplitHostPort(adv)
		if err != nil {
			ln.Close()
			s.Close()
			return fmt.Errorf("listener %s: advertised address: %w", lc.Name, err)
		}
		port, _ := strconv.Atoi(portStr)
		l := &listener{cfg: lc, ln: ln, host: host, port: int32(port), metrics: s.metrics.view(lc.View), sec: sec}
		// Start the listener's counters at 0, so that rate() and
		// increase() see their first event.
		s.metrics.acceptErrors.WithLabelValues(lc.Name)
		s.metrics.acceptBlocked.WithLabelValues(lc.Name)
		s.metrics.connsRefused.WithLabelValues(lc.Name)
		s.metrics.connections.WithLabelValues(lc.Name, lc.View)
		s.mu.Lock()
		s.listeners = append(s.listeners, l)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.acceptLoop(l)
		s.log.Info().Str("listener", lc.Name).Str("view", lc.View).Str("protocol", sec.cfg.Protocol).Str("addr", ln.Addr().String()).Msg("kafka listener up")
	}
	return nil
}

// Addrs returns the bound address of each listener, in config order.
func (s *Server) Addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.listeners))
	for i, l := range s.listeners {
		out[i] = l.ln.Addr().String()
	}
	return out
}

// Accept failures (out of file descriptors, most likely) pause the loop,
// doubling from acceptBackoffMin to acceptBackoffMax or until a connection
// closes (connClosed), instead of ending it;
// a listener whose last failure is under acceptFailWindow old (longer than
// the longest pause, so a failure that persists keeps it failing) is
// reported by ListenerError.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
	acceptFailWindow = 3 * time.Second
)

func (s *Server) acceptLoop(l *listener) {
	defer s.wg.Done()
	var backoff time.Duration
	errLog, refusedLog := everyFewSeconds(), everyFewSeconds()
	againLog, shedLog := everyFewSeconds(), everyFewSeconds()
	for {
		waited, err := s.limits.waitRoom(s.ctx)
		if waited > 0 {
			s.metrics.acceptBlocked.WithLabelValues(l.cfg.Name).Add(waited.Seconds())
		}
		if err != nil {
			return // closing
		}
		nc, err := l.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				l.stopped.Store(true)
				s.log.Error().Str("listener", l.cfg.Name).Msg("kafka listener closed: no longer accepting")
				return
			}
			l.failedAt.Store(s.since())
			s.metrics.acceptErrors.WithLabelValues(l.cfg.Name).Inc()
			backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
			if n, ok := errLog.allow(); ok {
				s.log.Error().Err(err).Str("listener", l.cfg.Name).Int("failures", n).Dur("retry_in", backoff).Msg("accept failed")
			}
			// Out of descriptors (the usual failure), the next accept
			// can only succeed once a connection closes: close one
			// that has said nothing since it was accepted (fdshed.go),
			// and wait for that rather than the whole pause.
			wait := backoff
			if isDescriptorErr(err) {
				if shed, retry := s.shedSilent(); shed > 0 {
					wait = min(wait, acceptBackoffMin)
					if n, ok := shedLog.allow(); ok {
						s.log.Warn().Str("listener", l.cfg.Name).Int("times", n).Int("closed", shed).Msg("out of file descriptors: closed connections that had sent nothing")
					}
				} else if retry > 0 {
					wait = min(wait, retry)
				}
			}
			select {
			case <-time.After(wait):
			case <-s.connGone:
			case <-s.ctx.Done():
				return
			}
			continue
		}
		if backoff > 0 {
			backoff = 0
			l.failedAt.Store(0)
			if n, ok := againLog.allow(); ok {
				s.log.Info().Str("listener", l.cfg.Name).Int("times", n).Msg("accepting connections again")
			}
		}
		ip := remoteIP(nc)
		ok, limit, err := s.limits.admit(s.ctx, ip)
		if err != nil {
			nc.Close()
			return
		}
		if !ok {
			nc.Close()
			s.metrics.connsRefused.WithLabelValues(l.cfg.Name).Inc()
			if n, ok := refusedLog.allow(); ok {
				s.log.Info().Str("listener", l.cfg.Name).Stringer("ip", ip).Int("limit", limit).Int("refused", n).Msg("connection refused: its address has max.connections.per.ip open")
			}
			continue
		}
		if !s.quotas.admitConnection(ip) {
			s.limits.release(ip)
			nc.Close()
			s.metrics.connsRefused.WithLabelValues(l.cfg.Name).Inc()
			if n, ok := refusedLog.allow(); ok {
				s.log.Info().Str("listener", l.cfg.Name).Stringer("ip", ip).Int("refused", n).Msg("connection refused: its address is past its connection_creation_rate quota")
			}
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(l, nc, ip)
		}()
	}
}

// ListenerError says why a Kafka listener cannot take connections now (its
// accepts are failing, or it stopped), or nil: the broker's readiness.
func (s *Server) ListenerError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.listeners {
		if l.stopped.Load() {
			return fmt.Errorf("kafka listener %s stopped", l.cfg.Name)
		}
		if t := l.failedAt.Load(); t != 0 && time.Duration(s.since()-t) < acceptFailWindow {
			return fmt.Errorf("kafka listener %s: accepts failing", l.cfg.Name)
		}
	}
	return nil
}

// reapConns keeps s.clock and closes connections past their timeouts:
// a frame still arriving after socket.request.timeout.ms, or nothing read
// or written for connections.max.idle.ms while no request is pending; and,
// while frames wait for room under queued.max.request.bytes, frames that
// stalled for queued.max.request.stall.ms or arrive slower than
// queued.min.request.bytes.per.second (evictStalled). Closing the
// socket ends the connection's reads and writes at once, and with them
// its claim on queued.max.request.bytes.
func (s *Server) reapConns() {
	defer s.wg.Done()
	frameLimit := time.Duration(s.cfg.SocketRequestTimeoutMs) * time.Millisecond
	idleLimit := time.Duration(s.cfg.ConnectionsMaxIdleMs) * time.Millisecond
	stall := time.Duration(s.cfg.QueuedMaxRequestStallMs) * time.Millisecond
	minRate := s.cfg.QueuedMinRequestBytesPerSecond
	if s.cfg.QueuedMaxRequestBytes <= 0 {
		stall, minRate = 0, 0 // nothing ever waits for room
	}
	stall, minRate = max(stall, 0), max(minRate, 0)
	// While someone waits for room, stalled and slow frames are looked
	// for every quarter of the stall time (or of the rate's window).
	evictEvery := slowFrameWindow / 4
	if stall > 0 {
		evictEvery = max(stall/4, time.Millisecond)
	}
	tick := time.Second
	for _, d := range []time.Duration{frameLimit, idleLimit} {
		if d > 0 {
			tick = min(tick, max(d/10, 5*time.Millisecond))
		}
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var stallTick <-chan time.Time
	dropLog, stallLog := everyFewSeconds(), [2]*logLimiter{everyFewSeconds(), everyFewSeconds()}
	var victims []*conn
	for {
		timeouts := false
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			timeouts = true
		case <-s.requestBytes.blocked:
		case <-stallTick:
		}
		s.clock.Store(s.since())
		now := s.now()
		victims = victims[:0]
		if stall > 0 || minRate > 0 {
			stallTick = nil
			if _, waiting := s.requestBytes.full(); waiting {
				victims = s.evictStalled(victims, now, stall, minRate, stallLog)
				stallTick = time.After(evictEvery)
			}
		}
		if timeouts {
			s.mu.Lock()
			for c := range s.conns {
				start := c.frameStart.Load()
				switch {
				case start > 0 && frameLimit > 0 && time.Duration(now-start) > frameLimit:
					victims = append(victims, c)
					s.metrics.connsDropped.WithLabelValues("request_timeout").Inc()
					if n, ok := dropLog.allow(); ok {
						c.log.Info().Int("dropped", n).Msg("closing connection: its request did not arrive within socket.request.timeout.ms")
					}
				case start == 0 && idleLimit > 0 && c.pending.Load() == 0 && time.Duration(now-c.lastActive.Load()) > idleLimit:
					victims = append(victims, c)
					s.metrics.connsDropped.WithLabelValues("idle").Inc()
					c.log.Debug().Msg("closing connection idle past connections.max.idle.ms")
				}
			}
			s.mu.Unlock()
		}
		for _, c := range victims {
			c.cancel()
			c.nc.Close()
		}
	}
}

// slowFrameWindow is the time over which a frame's rate is averaged for
// queued.min.request.bytes.per.second: about its last second of reading.
const slowFrameWindow = time.Second

// rateSamples are a frame's progress samples (in Server.now units, time
// waiting for room excluded), at least a quarter of slowFrameWindow apart,
// the last few kept: enough to average over the last window or a little
// more, so that what a frame sent in a burst stops counting a window
// after the burst.
type rateSamples struct {
	t, p [5]int64
	n    int // samples taken; the last len(t) are kept, at n%len(t) the oldest
}

func (r *rateSamples) reset(t, p int64) {
	r.n = 0
	r.push(t, p)
}

func (r *rateSamples) push(t, p int64) {
	i := r.n % len(r.t)
	r.t[i], r.p[i] = t, p
	r.n++
}

// add samples progress p at t and returns the rate, bytes a second, since
// the oldest sample kept, once that is at least slowFrameWindow old.
func (r *rateSamples) add(t, p int64) (float64, bool) {
	if last := (r.n - 1) % len(r.t); time.Duration(t-r.t[last]) >= slowFrameWindow/4 {
		r.push(t, p)
	}
	oldest := 0
	if r.n > len(r.t) {
		oldest = r.n % len(r.t)
	}
	el := time.Duration(t - r.t[oldest])
	if el < slowFrameWindow {
		return 0, false
	}
	return float64(p-r.p[oldest]) / el.Seconds(), true
}

// evictStalled runs while frames wait for room under
// queued.max.request.bytes: it appends to victims the connections to close
// so that the budget has room again, among those reading a frame that
// holds part of the budget and either has received no byte for stall
// (seen over the reaper's samples since the wait began) or has arrived
// slower than minRate bytes a second over its last slowFrameWindow of
// reading (waits for room excluded; 0: no rate bound), the largest
// holding first, then the slowest. It closes them until large frames
// have room again (under largeShare) and the frame past the bound, if
// it is one of them, is closed too. A frame whose bytes keep arriving
// fast enough, one waiting for room itself, and a request read whole are
// never chosen. Closing the socket ends the frame's read, which gives its
// bytes back at once.
func (s *Server) evictStalled(victims []*conn, now int64, stall time.Duration, minRate int64, lg [2]*logLimiter) []*conn {
	type candidate struct {
		c    *conn
		held int64
		slow bool    // too slow, not stalled
		rate float64 // bytes a second, when slow
	}
	var found []candidate
	s.mu.Lock()
	for c := range s.conns {
		start, held, p := c.frameStart.Load(), c.frameHeld.Load(), c.progress.Load()
		if start <= 0 || held == 0 {
			c.stallSeen, c.stallSince = p, now
			continue
		}
		if p != c.stallSeen {
			c.stallSeen, c.stallSince = p, now
		} else if stall > 0 && time.Duration(now-c.stallSince) >= stall {
			found = append(found, candidate{c: c, held: held})
			continue
		}
		if minRate <= 0 {
			continue
		}
		active := now - c.waited.Load()
		if seq := c.frameSeq.Load(); seq != c.rateSeq {
			c.rateSeq = seq
			c.rate.reset(c.frameBaseT.Load(), c.frameBaseP.Load())
		}
		if rate, ok := c.rate.add(active, p); ok && rate < float64(minRate) {
			found = append(found, candidate{c: c, held: held, slow: true, rate: rate})
		}
	}
	s.mu.Unlock()
	if len(found) == 0 {
		return victims
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].held != found[j].held {
			return found[i].held > found[j].held
		}
		return found[i].slow && (!found[j].slow || found[i].rate < found[j].rate)
	})
	used, _ := s.requestBytes.full()
	over, past := s.requestBytes.pastBound()
	share := largeShare(s.cfg.QueuedMaxRequestBytes)
	for _, f := range found {
		if used < share && f.c != over {
			continue // room again: the rest may still resume
		}
		held := f.held
		if f.c == over {
			held -= past // what it holds within the bound
		}
		used -= held
		victims = append(victims, f.c)
		if f.slow {
			s.metrics.connsDropped.WithLabelValues("slow_frame").Inc()
			if d, ok := lg[1].allow(); ok {
				f.c.log.Info().Int64("held", f.held).Int64("bytes_per_second", int64(f.rate)).Int("dropped", d).Msg("closing connection: its incomplete request arrived slower than queued.min.request.bytes.per.second while others waited for queued.max.request.bytes")
			}
			continue
		}
		s.metrics.connsDropped.WithLabelValues("stalled_frame").Inc()
		if d, ok := lg[0].allow(); ok {
			f.c.log.Info().Int64("held", f.held).Int("dropped", d).Msg("closing connection: its incomplete request received nothing for queued.max.request.stall.ms while others waited for queued.max.request.bytes")
		}
	}
	return victims
}

// logLimiter lets a repeated log line through once per period, counting
// the occurrences in between, so that a flood (a failing accept, many bad
// clients) costs a line every few seconds.
type logLimiter struct {
	mu     sync.Mutex
	period time.Duration
	last   time.Time
	count  int
}

func everyFewSeconds() *logLimiter { return &logLimiter{period: 5 * time.Second} }

// allow counts one occurrence and reports whether to log it, with the
// occurrences since the last line logged (this one included).
func (l *logLimiter) allow() (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count++
	if now := time.Now(); now.Sub(l.last) >= l.period {
		n := l.count
		l.last, l.count = now, 0
		return n, true
	}
	return 0, false
}

// Close stops accepting, closes every connection and waits for them.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	for _, l := range s.listeners {
		l.ln.Close()
	}
	s.mu.Unlock()
	s.closeConns()
	s.wg.Wait()
	if s.txn != nil {
		s.txn.Close()
	}
	s.closeForwarder()
	return nil
}
