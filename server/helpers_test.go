package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/replica"
)

// testBroker is one in-process broker on a free port over a real embedded
// metastore and real logs in t.TempDir().
type testBroker struct {
	srv  *Server
	meta *metastore.Node
	addr string
	host *replica.Host // the raft host the server serves from
}

// testLog logs warnings through t; under a fuzz test, whose *testing.F
// may not be used inside the fuzz target, errors to stderr.
func testLog(t testing.TB) zerolog.Logger {
	if _, fuzz := t.(*testing.F); fuzz {
		return zerolog.New(os.Stderr).Level(zerolog.ErrorLevel)
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
}

func startBroker(t testing.TB, mutate func(*configs.Config)) *testBroker {
	t.Helper()
	return startBrokerWith(t, mutate, nil)
}

// startBrokerWith is startBroker with opts adjusting the server's options
// (a group coordinator, say) once the metastore is up.
func startBrokerWith(t testing.TB, mutate func(*configs.Config), opts func(*Options, *metastore.Node)) *testBroker {
	t.Helper()
	b := startUnregistered(t, mutate, opts)
	b.register(t)
	return b
}

// register registers the broker in its metastore, as its lease does.
func (b *testBroker) register(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mb := metastore.Broker{ID: b.srv.cfg.NodeID, Role: metastore.RoleCombined,
		Endpoints: []metastore.Endpoint{{Name: "PLAINTEXT", View: "mixed", Host: "127.0.0.1"}}}
	if _, err := b.meta.Client().RegisterBroker(ctx, mb); err != nil {
		t.Error(err)
	}
}

// startUnregistered is startBrokerWith up to its listener serving, before
// the broker registers in the metastore.
func startUnregistered(t testing.TB, mutate func(*configs.Config), opts func(*Options, *metastore.Node)) *testBroker {
	t.Helper()
	dir := t.TempDir()
	lg := testLog(t)
	cfg := configs.Default()
	cfg.DataDir = dir
	cfg.Listeners = []configs.Listener{{Name: "PLAINTEXT", View: "mixed", Address: "127.0.0.1:0"}}
	cfg.LogFsync = "never"
	if mutate != nil {
		mutate(&cfg)
	}
	meta := openTestMeta(t, dir, lg)
	policy := log.FlushNever
	if cfg.LogFsync == "group" {
		policy = log.FlushGroup
	}
	fl := log.NewFlusher(log.FlusherConfig{Policy: policy, Logger: lg})
	fl.Start()
	t.Cleanup(func() { fl.Close() })
	// Every partition a one-voter raft group, as `sluice dev` runs them;
	// the leader and its term reach the metastore as cmd/sluice's
	// publisher sends them, so Metadata gives clients the raft term as
	// the leader epoch.
	mc := meta.Client()
	rh, err := replica.NewHost(replica.HostConfig{Node: replica.NodeID(cfg.NodeID), Dir: filepath.Join(dir, "logs"),
		Transport: replica.NewLocalTransport(), Flusher: fl, Logger: lg,
		OnLeaderChange: func(k replica.Key, leader replica.NodeID, term uint64) {
			if leader != replica.NodeID(cfg.NodeID) {
				return
			}
			go func() {
				tp, ok := mc.TopicByID(k.TopicID)
				if !ok {
					return
				}
				pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer pcancel()
				_ = mc.SetPartitionLeader(pctx, tp.Name, k.Index, int32(leader), int32(term), []int32{int32(leader)})
			}()
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rh.Close() })
	o := Options{Config: cfg, Catalog: meta.Client(), Raft: rh.Hosted(), Logger: lg, ACLs: meta.Client()}
	if opts != nil {
		opts(&o, meta)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &testBroker{srv: srv, meta: meta, addr: srv.Addrs()[0], host: rh}
}

func (b *testBroker) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// openTestMeta opens a single-node metastore in dir/meta, closed when the
// test ends, and waits until it serves.
func openTestMeta(t testing.TB, dir string, lg zerolog.Logger) *metastore.Node {
	t.Helper()
	return openTestMetaWith(t, dir, lg, nil)
}

// openTestMetaWith is openTestMeta with mod adjusting the configuration.
func openTestMetaWith(t testing.TB, dir string, lg zerolog.Logger, mod func(*metastore.Config)) *metastore.Node {
	t.Helper()
	mc := metastore.Default()
	mc.DataDir = filepath.Join(dir, "meta")
	mc.TickInterval = 10 * time.Millisecond
	mc.Logger = lg
	if mod != nil {
		mod(&mc)
	}
	meta, err := metastore.Open(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := meta.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return meta
}
