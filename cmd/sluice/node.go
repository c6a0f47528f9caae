package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/replica"
	"github.com/sluice-broker/sluice/server"
)

func newLogger(cfg configs.Config) zerolog.Logger {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || cfg.LogLevel == "" {
		level = zerolog.InfoLevel
	}
	var l zerolog.Logger
	console := cfg.LogFormat == "console"
	if cfg.LogFormat == "" {
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			console = true
		}
	}
	if console {
		l = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.RFC3339Nano})
	} else {
		l = zerolog.New(os.Stderr)
	}
	return l.Level(level).With().Timestamp().Int32("node_id", cfg.NodeID).Logger()
}

// runNode wires the roles cfg asks for and serves until ctx ends.
func runNode(ctx context.Context, cfg configs.Config) error {
	lg := newLogger(cfg)
	lg.Info().Str("version", version).Strs("roles", cfg.Roles).Str("data_dir", cfg.DataDir).Msg("starting sluice")
	if cfg.ReplicaOneVoter {
		lg.Warn().Msg("replica.one.voter is deprecated and ignored: every partition is a raft group, a one-voter group on a broker without replica.listen; remove the key")
	}
	if err := fsutil.MkdirAllSync(cfg.DataDir, 0o755); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerProcessMetrics(reg)
	var ready atomic.Bool
	token, err := adminToken(cfg)
	if err != nil {
		return err
	}
	guard := adminGuard{token: token, requireAuth: cfg.AdminHTTPRequireAuth, superUsers: cfg.SuperUserList()}
	if o, ok := cfg.AdminTLS(); ok {
		ld, err := tlsconfig.NewLoader(o)
		if err != nil {
			return fmt.Errorf("admin.http.ssl: %w", err)
		}
		guard.tls = ld.ServerConfig()
	}
	admin, err := startAdmin(cfg.AdminAddr, guard, reg, &ready, lg)
	if err != nil {
		return err
	}
	defer admin.Close()
	_, stopPprof, err := startPprof(cfg.PprofListen, admin.guard, lg)
	if err != nil {
		return err
	}
	defer stopPprof()
	admin.cfg.Store(&cfg)

	var catalog *metastore.Client
	leaseDuration := time.Duration(cfg.BrokerSessionTimeoutMs) * time.Millisecond
	var internalTLS *tlsconfig.Loader
	if o, ok := cfg.InternalTLS(); ok {
		if internalTLS, err = tlsconfig.NewLoader(o); err != nil {
			return fmt.Errorf("internal.ssl: %w", err)
		}
	}
	if cfg.HasRole("meta") {
		mcfg := metastore.Default()
		mcfg.ID = cfg.MetaID
		mcfg.DataDir = filepath.Join(cfg.DataDir, "meta")
		mcfg.Listen = cfg.MetaListen
		mcfg.PeerList = cfg.MetaPeers
		mcfg.Join = cfg.MetaJoin
		mcfg.LearnerGrace = time.Duration(cfg.MetaLearnerGraceMs) * time.Millisecond
		mcfg.LeaseDuration = leaseDuration
		mcfg.Logger = lg
		mcfg.TLS = internalTLS
		meta, err := metastore.Open(mcfg)
		if err != nil {
			return fmt.Errorf("metastore: %w", err)
		}
		defer meta.Close()
		admin.meta.Store(meta)
		registerMetaMetrics(reg, meta)
		if !cfg.MetaJoin {
			wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			err = meta.WaitReady(wctx)
			cancel()
			if err != nil {
				return fmt.Errorf("metastore not ready: %w", err)
			}
		}
		catalog = meta.Client()
		leaseDuration = mcfg.LeaseDuration
	} else {
		dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		c, err := metastore.Dial(dctx, metastore.ClientConfig{Addrs: cfg.MetaAddrs, Logger: lg, TLS: internalTLS})
		cancel()
		if err != nil {
			return fmt.Errorf("connecting to the metastore at %v: %w", cfg.MetaAddrs, err)
		}
		defer c.Close()
		catalog = c
	}

	admin.catalog.Store(catalog)
	if err := bootstrapUser(ctx, cfg, catalog, lg); err != nil {
		return err
	}

	if !cfg.HasRole("write") && !cfg.HasRole("read") {
		ready.Store(true)
		lg.Info().Msg("metastore node serving")
		<-ctx.Done()
		return nil
	}

	flusher, err := newFlusher(ctx, cfg, lg)
	if err != nil {
		return err
	}
	flusher.Start()
	defer flusher.Close()
	// Every partition is a raft group. With replica.listen its voters are
	// the brokers the metastore assigns; without it (`sluice dev`) this
	// broker has no replication port and each group is a one-voter group
	// of this broker alone over an in-process transport, whose raft sends
	// nothing over a network.
	var host *replica.Host
	var transport replica.Transport
	var tcp *replica.TCPTransport
	// Before any replica is opened: the directory must be this node's and
	// this cluster's, and a raft voter must not come back on an empty disk;
	// a directory written by the plain local logs of earlier versions is
	// refused.
	if err := claimDataDir(ctx, catalog, cfg, lg); err != nil {
		return err
	}
	if cfg.ReplicaListen == "" {
		transport = replica.NewLocalTransport()
	} else {
		tcp, err = replica.NewTCPTransport(replica.TCPConfig{
			Self:    replica.NodeID(cfg.NodeID),
			Listen:  cfg.ReplicaListen,
			Resolve: replicationAddr(catalog),
			TLS:     internalTLS,
			Logger:  lg,
		})
		if err != nil {
			return fmt.Errorf("replication listener: %w", err)
		}
		transport = tcp
	}
	publisher := newLeaderPublisher(ctx, catalog, cfg.NodeID, lg)
	leaderChanges := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_raft_leader_changes_total",
		Help: "Leader or term changes seen by the partitions' raft replicas on this broker (elections, hand-offs).",
	})
	reg.MustRegister(leaderChanges)
	host, err = replica.NewHost(replica.HostConfig{
		Node:                 replica.NodeID(cfg.NodeID),
		Dir:                  filepath.Join(cfg.DataDir, "logs"),
		Transport:            transport,
		Flusher:              flusher,
		Logger:               lg,
		EntryCacheBytes:      cfg.RaftEntryCacheMaxBytes,
		MaxFollowerLag:       time.Duration(cfg.ReplicaLagTimeMaxMs) * time.Millisecond,
		MemberSilence:        time.Duration(cfg.BrokerSessionTimeoutMs) * time.Millisecond,
		ProducerIDExpiration: time.Duration(cfg.ProducerIDExpirationMs) * time.Millisecond,
		OnLeaderChange: func(key replica.Key, leader replica.NodeID, term uint64) {
			leaderChanges.Inc()
			publisher.publish(key, int32(leader), int32(term))
		},
		OnISRChange: func(key replica.Key, term uint64, isr []replica.NodeID) {
			publisher.publishISR(key, int32(term), isr)
		},
		// A replica whose storage or raft fails is offline here and
		// the broker goes on (replica.Replica.Failed); the metric
		// below counts it.
		Assigned:    assignedTo(catalog),
		AsyncMaster: asyncMasterOf(catalog),
	})
	if err != nil {
		return err
	}
	defer host.Close()
	reg.MustRegister(newRaftCollector(host, tcp))

	// Read brokers coordinate groups (docs/architecture.md, "Consumer
	// groups"); offsets and group state live in the metastore. Every
	// broker places groups for FindCoordinator; one without the read role
	// coordinates none itself. The coordinator fences its group writes
	// with the lease, which is made below once the server is up.
	var leaseRef atomic.Pointer[server.Lease]
	groups, err := coordinator.New(coordinator.Config{BrokerID: cfg.NodeID, NoGroups: !cfg.HasRole("read"), Store: catalog, Logger: lg,
		MaxGroupSize: int(cfg.GroupMaxSize), ConsumerMaxGroupSize: int(cfg.GroupConsumerMaxSize),
		MinSessionTimeout:         time.Duration(cfg.GroupMinSessionTimeoutMs) * time.Millisecond,
		MaxSessionTimeout:         time.Duration(cfg.GroupMaxSessionTimeoutMs) * time.Millisecond,
		ConsumerSessionTimeout:    time.Duration(cfg.GroupConsumerSessionTimeoutMs) * time.Millisecond,
		ConsumerHeartbeatInterval: time.Duration(cfg.GroupConsumerHeartbeatIntervalMs) * time.Millisecond,
		OffsetsRetention:          time.Duration(cfg.OffsetsRetentionMinutes) * time.Minute,
		CommitTimeout:             time.Duration(cfg.OffsetsCommitTimeoutMs) * time.Millisecond,
		InitialRebalanceDelay:     time.Duration(cfg.GroupInitialRebalanceDelayMs) * time.Millisecond,
		Share: coordinator.ShareLimits{
			LockDuration:  time.Duration(cfg.GroupShareRecordLockDurationMs) * time.Millisecond,
			DeliveryLimit: int16(cfg.GroupShareDeliveryCountLimit),
			MaxLocks:      int(cfg.GroupSharePartitionMaxLocks),
		},
		ShareSessionTimeout:    time.Duration(cfg.GroupShareSessionTimeoutMs) * time.Millisecond,
		ShareHeartbeatInterval: time.Duration(cfg.GroupShareHeartbeatIntervalMs) * time.Millisecond,
		ShareMaxGroupSize:      int(cfg.GroupShareMaxSize),
		// A single node coordinates every group whose share-partitions it
		// holds; in a cluster the holder is the partition's read leader.
		ShareCheckMembers: cfg.ReplicaListen == "",
		GroupConfig:       catalog.GroupConfig,
		Incarnation: func() uint64 {
			if l := leaseRef.Load(); l != nil {
				return l.Incarnation()
			}
			return 0
		},
		LeaseValid: func() bool {
			l := leaseRef.Load() // none before the broker registered
			return l != nil && l.Valid()
		},
	})
	if err != nil {
		return err
	}
	defer groups.Close()
	// The read-only __consumer_offsets view's local logs (server's
	// offsets_topic.go), fed from the metastore's committed offsets.
	offsetLogs, err := replica.NewManager(filepath.Join(cfg.DataDir, "consumer-offsets"), flusher, lg)
	if err != nil {
		return err
	}
	defer offsetLogs.Close()
	sharedHost, sharedStore, err := openSharedStorage(cfg, catalog, func() uint64 {
		if l := leaseRef.Load(); l != nil {
			return l.Incarnation()
		}
		return 0
	}, lg)
	if err != nil {
		return err
	}
	var sharedParts partition.SharedHost
	if sharedHost != nil {
		defer sharedStore.Close()
		defer sharedHost.Close()
		sharedParts = sharedHost
		sharedMetrics(reg, sharedHost)
	}
	metrics := server.NewMetrics(reg)
	srv, err := server.New(server.Options{Config: cfg, Catalog: catalog, Raft: host.Hosted(), Shared: sharedParts, Logger: lg, Metrics: metrics, Groups: groups, ACLs: catalog,
		OffsetsLogs: offsetLogs.Local(),
		LeaseValid: func() bool {
			l := leaseRef.Load() // none before the broker registered
			return l != nil && l.Valid()
		},
		LeaseIncarnation: func() uint64 {
			if l := leaseRef.Load(); l != nil {
				return l.Incarnation()
			}
			return 0
		}})
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Close()
	admin.kafka.Store(srv)

	// Register with the endpoints actually bound (ports may be :0 in tests).
	reg_ := metastore.Broker{ID: cfg.NodeID, Role: brokerRole(cfg), Rack: cfg.Rack}
	for i, addr := range srv.Addrs() {
		l := cfg.Listeners[i]
		adv := l.Advertised
		if adv == "" {
			adv = addr
		}
		h, portStr, _ := net.SplitHostPort(adv)
		port, _ := strconv.Atoi(portStr)
		reg_.Endpoints = append(reg_.Endpoints, metastore.Endpoint{Name: l.Name, View: l.View, Host: h, Port: int32(port), Protocol: l.Protocol})
	}
	if tcp != nil {
		h, p, _ := net.SplitHostPort(tcp.Addr())
		port, _ := strconv.Atoi(p)
		reg_.Endpoints = append(reg_.Endpoints, metastore.Endpoint{Name: replicationEndpoint, View: "internal", Host: h, Port: int32(port)})
	}
	lease := server.NewLease(catalog, reg_, leaseDuration, lg)
	lease.Recorded = catalog.BrokerLease
	lapses := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_lease_lapses_total",
		Help: "Times the metastore said this broker's lease had lapsed (expired unrenewed) and it registered again.",
	})
	reg.MustRegister(lapses)
	lease.OnLapse = func() {
		lapses.Inc()
		groups.DropAll()
	}
	if err := registerBroker(ctx, lease, lg); err != nil {
		return fmt.Errorf("registering broker: %w", err)
	}
	leaseRef.Store(lease)
	admin.lease.Store(lease)
	// The Kafka listener is up: a flood of connections may use up the
	// descriptors partitions need. Opening waits for them rather than
	// exiting (it is idempotent: what opened stays open).
	for warned := false; ; warned = true {
		err := srv.OpenPartitions()
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
			return err
		}
		if !warned {
			lg.Warn().Err(err).Msg("out of file descriptors opening partitions (connections hold them; max.connections bounds them): retrying every second")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	// Every partition this broker hosts has replayed its WAL records;
	// records of partitions deleted while it was down can go.
	flusher.ForgetUnopened()
	go lease.Run(ctx)
	go srv.RunRetention(ctx, time.Duration(cfg.LogRetentionCheckInterval)*time.Millisecond)
	go groups.RunOffsetExpiry(ctx, time.Duration(cfg.OffsetsRetentionCheckIntervalMs)*time.Millisecond)
	go srv.RunProducerExpiry(ctx, time.Duration(cfg.ProducerIDExpirationCheckIntervalMs)*time.Millisecond)
	if cfg.LogCleanerEnable {
		// The raft replicas, cleaned below their high watermarks keeping
		// every batch (they are raft entries), and the compacted
		// __consumer_offsets view's logs.
		cleanTargets := func() []log.CleanTarget {
			return append(host.CleanTargets(), offsetLogs.CleanTargets()...)
		}
		go srv.RunCleaner(ctx, log.NewCleaner(log.CleanerConfig{
			Threads:             int(cfg.LogCleanerThreads),
			DedupeBufferSize:    cfg.LogCleanerDedupeBufferSize,
			IOMaxBytesPerSecond: cfg.LogCleanerIOMaxBytesPerSecond,
			Backoff:             time.Duration(cfg.LogCleanerBackoffMs) * time.Millisecond,
			Targets:             cleanTargets,
			Logger:              lg.With().Str("component", "cleaner").Logger(),
		}))
	}
	go srv.FollowCatalog(ctx)
	// Reassignments and read brokers joining or leaving change partitions'
	// raft configurations; the partition leaders carry them out.
	go srv.RunReassignments(ctx, 250*time.Millisecond)
	// Async partitions' failover: claims and promotion when a master's
	// lease lapsed, and following a new master.
	go srv.RunAsyncFailover(ctx, 250*time.Millisecond)
	if cfg.AutoLeaderRebalance {
		go srv.RunLeaderBalance(ctx, time.Duration(cfg.LeaderImbalanceCheckSeconds)*time.Second)
	}

	ready.Store(true)
	lg.Info().Strs("kafka", srv.Addrs()).Str("admin", admin.Addr()).Msg("sluice is serving")
	<-ctx.Done()
	lg.Info().Msg("shutting down")
	ready.Store(false)
	if cfg.ControlledShutdown {
		controlledShutdown(cfg, srv, lease, lg)
	}
	return nil
}

// controlledShutdown runs before the servers close (they still serve
// meanwhile): the broker is marked shutting down in the metastore, hands
// the leadership of its partitions to other voters, hands its place as
// async master to a write replica that holds its whole log, and releases
// its lease, so that producers move after a leadership transfer instead of
// an election timeout, an async partition loses nothing, and its groups
// move at once. Each step is bounded.
func controlledShutdown(cfg configs.Config, srv *server.Server, lease *server.Lease, lg zerolog.Logger) {
	start := time.Now()
	backoff := time.Duration(cfg.ControlledShutdownRetryBackoffMs) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), backoff*time.Duration(cfg.ControlledShutdownMaxRetries)+10*time.Second)
	defer cancel()
	if err := lease.ShuttingDown(ctx); err != nil {
		lg.Warn().Err(err).Msg("controlled shutdown: marking the broker shutting down")
	}
	left := srv.HandOffLeadership(ctx, int(cfg.ControlledShutdownMaxRetries), backoff)
	if handed, failed := srv.HandOffAsyncMasters(ctx, backoff*time.Duration(cfg.ControlledShutdownMaxRetries)); handed+failed > 0 {
		lg.Info().Int("handed_over", handed).Int("not_handed_over", failed).Msg("controlled shutdown: async master handover")
	}
	if err := lease.Release(ctx); err != nil {
		lg.Warn().Err(err).Msg("controlled shutdown: releasing the lease")
	}
	lg.Info().Int("still_leading", left).Dur("took", time.Since(start)).Msg("controlled shutdown done")
}

// registerBroker registers the broker, trying again every second while
// the metastore cannot commit: its database's disk is full (it retries
// the transaction until space is freed) or it has no quorum. The broker
// then comes up by itself once the metastore can take the registration,
// instead of exiting into a restart loop. Any other error, or ctx ending,
// is returned.
func registerBroker(ctx context.Context, lease *server.Lease, lg zerolog.Logger) error {
	for logged := false; ; logged = true {
		err := lease.Register(ctx)
		if err == nil || ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) ||
			errors.Is(err, metastore.ErrTimeout) || errors.Is(err, metastore.ErrNotLeader) ||
			errors.Is(err, metastore.ErrUnreachable)) {
			return err
		}
		if !logged {
			lg.Warn().Err(err).Msg("cannot register in the metastore yet; retrying every second")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func brokerRole(cfg configs.Config) metastore.BrokerRole {
	switch {
	case cfg.HasRole("write") && cfg.HasRole("read"):
		return metastore.RoleCombined
	case cfg.HasRole("write"):
		return metastore.RoleWrite
	default:
		return metastore.RoleRead
	}
}

// newFlusher opens the broker-wide flusher. Its write-ahead log in
// data.dir/wal makes one fdatasync cover every partition's appends (see
// the log package's documentation for the measurements behind it).
//
// Opening the write-ahead log writes a new file's header: on a full disk
// it waits, retrying every second, until space is freed (or ctx ends), as
// the metastore does, rather than exit.
func newFlusher(ctx context.Context, cfg configs.Config, lg zerolog.Logger) (*log.Flusher, error) {
	fc := log.FlusherConfig{
		Logger:   lg,
		Interval: time.Duration(cfg.LogFlushIntervalMs) * time.Millisecond,
		// Drop-behind: see log.FlusherConfig.CacheTailBytes.
		CacheTailBytes: cfg.LogCacheTailBytes,
	}
	if cfg.LogWAL {
		fc.Dir = filepath.Join(cfg.DataDir, "wal")
	}
	switch strings.ToLower(cfg.LogFsync) {
	case "group":
		fc.Policy = log.FlushGroup
	case "interval":
		fc.Policy = log.FlushInterval
	case "never":
		fc.Policy = log.FlushNever
	default:
		return nil, fmt.Errorf("log.fsync %q", cfg.LogFsync)
	}
	for warned := false; ; warned = true {
		f, err := log.OpenFlusher(fc)
		if err == nil || !log.IsNoSpace(err) {
			return f, err
		}
		if !warned {
			lg.Warn().Err(err).Str("dir", fc.Dir).Msg("disk full: waiting for space to open the write-ahead log")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

type adminServer struct {
	ln   net.Listener
	srv  *http.Server
	meta atomic.Pointer[metastore.Node] // set on meta nodes: membership changes
	// kafka is the broker's Kafka server once it listens: /readyz fails
	// while one of its listeners cannot accept.
	kafka atomic.Pointer[server.Server]
	// lease is the broker's metastore lease once registered: /readyz
	// fails while it is not certainly valid (the metastore unreachable
	// for a lease duration, or the broker paused past it).
	lease atomic.Pointer[server.Lease]
	// catalog and cfg serve the status page and the broker commands
	// (status_page.go, broker.go).
	catalog atomic.Pointer[metastore.Client]
	cfg     atomic.Pointer[configs.Config]
	lg      zerolog.Logger
	// guard protects the mutating endpoints, and pprof.listen under
	// admin.http.require.auth.
	guard adminGuard
}

func (a *adminServer) Addr() string { return a.ln.Addr().String() }
func (a *adminServer) Close() error { return a.srv.Close() }

// startAdmin serves /metrics, /healthz (the process is up), /readyz (the
// Kafka listeners serve: 503 until the node is up, while a listener's
// accepts fail and while the broker's metastore lease is not certainly
// valid) and the metastore's membership endpoints, the mutating ones
// behind adminGuard (admin_http.go). pprof has its own address
// (pprof.listen).
func startAdmin(addr string, guard adminGuard, reg *prometheus.Registry, ready *atomic.Bool, lg zerolog.Logger) (*adminServer, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener: %w", err)
	}
	a := &adminServer{ln: ln, lg: lg}
	if guard.tls != nil {
		ln = tls.NewListener(ln, guard.tls)
	}
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if srv := a.kafka.Load(); srv != nil {
			if err := srv.ListenerError(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		if l := a.lease.Load(); l != nil && !l.Valid() {
			http.Error(w, "not ready: the metastore lease was not renewed within its duration", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	guard.loopback = isLoopback(ln.Addr())
	guard.catalog = a.catalog.Load
	a.guard = guard
	mux.HandleFunc("POST /meta/voters", guard.wrap(a.handleAddVoter))
	mux.HandleFunc("DELETE /meta/voters/{id}", guard.wrap(a.handleRemoveVoter))
	mux.HandleFunc("GET /meta/status", a.handleMetaStatus)
	// The backup holds every secret the metastore keeps: guarded as
	// the mutating endpoints are.
	mux.HandleFunc("GET /meta/backup", guard.wrap(a.handleMetaBackup))
	mux.HandleFunc("GET /{$}", a.handleStatus)
	mux.HandleFunc("GET /status", a.handleStatus)
	a.brokerRoutes(mux, guard)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	a.srv = srv
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error().Err(err).Msg("admin http")
		}
	}()
	return a, nil
}
