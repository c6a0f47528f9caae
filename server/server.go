package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/replica"
)

// Options wires a Server. Everything it needs is passed in; it opens no
// storage of its own.
type Options struct {
	Config     configs.Config
	Catalog    Catalog
	Partitions *replica.Manager
	// Raft, when set, hosts this broker's partitions as raft replicas (a
	// cluster); otherwise Partitions hosts them as local logs.
	Raft    *replica.Host
	Logger  zerolog.Logger
	Metrics *Metrics // nil: a private registry
	// Groups is the group coordinator of a broker with the read role;
	// nil: the group APIs answer COORDINATOR_NOT_AVAILABLE.
	Groups *coordinator.Coordinator
}

type listener struct {
	cfg  configs.Listener
	ln   net.Listener
	host string
	port int32
}

// Server serves the Kafka protocol on the configured listeners.
type Server struct {
	cfg struct {
		configs.Config
		MaxFrameBytes int32
	}
	catalog    Catalog
	partitions *replica.Manager
	raft       *replica.Host
	log        zerolog.Logger
	metrics    *Metrics
	producers  *producerIDs

	// Topic config defaults from this broker's static config and from
	// Sluice's built-in defaults, computed once: they are consulted on
	// every produce.
	staticTopicDefaults, builtinTopicDefaults map[string]string
	fwd                                       forwarder
	groups                                    *coordinator.Coordinator
	fetchSessions                             *fetchSessionCache

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	listeners []*listener
	conns     map[*conn]struct{}

	requestBytes requestBudget // queued.max.request.bytes (conn.go)
}

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
	}
	return true
}

func (s *Server) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.cancel()
		c.nc.Close()
	}
}

// New creates a server; Start binds its listeners.
func New(opts Options) (*Server, error) {
	if opts.Catalog == nil || (opts.Partitions == nil && opts.Raft == nil) {
		return nil, errors.New("server: Catalog and Partitions or Raft are required")
	}
	s := &Server{
		catalog:    opts.Catalog,
		partitions: opts.Partitions,
		raft:       opts.Raft,
		log:        opts.Logger.With().Str("component", "server").Logger(),
		metrics:    opts.Metrics,
		groups:     opts.Groups,
	}
	if s.metrics == nil {
		s.metrics = NewMetrics(nil)
	}
	s.cfg.Config = opts.Config
	s.cfg.MaxFrameBytes = opts.Config.SocketRequestMaxBytes
	s.producers = newProducerIDs(opts.Catalog)
	s.fetchSessions = newFetchSessionCache(int(opts.Config.FetchSessionCacheSlots), int64(opts.Config.FetchSessionEvictionMs))
	s.staticTopicDefaults = opts.Config.TopicDefaults()
	s.builtinTopicDefaults = configs.Default().TopicDefaults()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Start binds every listener and serves connections in the background.
func (s *Server) Start() error {
	for _, lc := range s.cfg.Listeners {
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
		l := &listener{cfg: lc, ln: ln, host: host, port: int32(port)}
		s.mu.Lock()
		s.listeners = append(s.listeners, l)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.acceptLoop(l)
		s.log.Info().Str("listener", lc.Name).Str("view", lc.View).Str("addr", ln.Addr().String()).Msg("kafka listener up")
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

func (s *Server) acceptLoop(l *listener) {
	defer s.wg.Done()
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if s.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				s.log.Error().Err(err).Msg("accept failed")
			}
			return
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(l, nc)
		}()
	}
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
	s.closeForwarder()
	return nil
}
