package metastore

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
)

func testLogger(t testing.TB) zerolog.Logger {
	if os.Getenv("METASTORE_TEST_LOG") != "" {
		return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	}
	return zerolog.New(io.Discard)
}

func testConfig(t testing.TB, id uint64, dir string) Config {
	cfg := Default()
	cfg.ID = id
	cfg.DataDir = dir
	cfg.Logger = testLogger(t)
	cfg.TickInterval = 10 * time.Millisecond
	return cfg
}

func openSingle(t testing.TB, dir string) *Node {
	t.Helper()
	n, err := Open(testConfig(t, 1, dir))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return n
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkFor polls fn until it returns nil or total elapses (NATS checkFor).
func checkFor(t testing.TB, total, poll time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	var err error
	for time.Now().Before(deadline) {
		if err = fn(); err == nil {
			return
		}
		time.Sleep(poll)
	}
	t.Fatalf("condition not met after %v: %v", total, err)
}

// crashCopy copies a running node's data directory, raw bytes, while
// writes continue: a kill -9 image. A read transaction is held during the
// copy only so that bbolt does not reuse pages the copied meta page may
// still point at while the copy is half done (a real crash freezes the file
// at one instant and needs no such help).
func crashCopy(t testing.TB, n *Node, dst string) {
	t.Helper()
	if err := n.db.View(func(*bolt.Tx) error {
		copyDir(t, n.cfg.DataDir, dst)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o750); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// registerBrokers registers each broker with c, failing the test on an
// error.
func registerBrokers(t testing.TB, c *Client, bs ...Broker) {
	t.Helper()
	for _, b := range bs {
		if _, err := c.RegisterBroker(ctxT(t), b); err != nil {
			t.Fatal(err)
		}
	}
}
