package server

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/configs"
)

func TestConnLimits(t *testing.T) {
	cfg := configs.Default()
	cfg.MaxConnections = 3
	cfg.MaxConnectionsPerIP = 2
	cfg.MaxConnectionsPerIPOverrides = "127.0.0.9:0, ::1:1"
	l, err := newConnLimits(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	admit := func(ip netip.Addr) bool {
		t.Helper()
		if _, err := l.waitRoom(ctx); err != nil {
			t.Fatal(err)
		}
		ok, _, err := l.admit(ctx, ip)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !admit(a) || !admit(a) {
		t.Fatal("refused below max.connections.per.ip")
	}
	if admit(a) {
		t.Fatal("a third connection from one address admitted past max.connections.per.ip=2")
	}
	if admit(netip.MustParseAddr("127.0.0.9")) {
		t.Fatal("an address overridden to 0 connected")
	}
	if !admit(netip.MustParseAddr("::1")) {
		t.Fatal("the IPv6 override of 1 refused its first connection")
	}
	// Three open: max.connections makes the accept loop wait.
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := l.waitRoom(wctx); err == nil {
		t.Fatal("waitRoom passed with max.connections open")
	}
	done := make(chan bool)
	go func() {
		l.waitRoom(ctx)
		ok, _, _ := l.admit(ctx, b)
		done <- ok
	}()
	time.Sleep(20 * time.Millisecond)
	l.release(a)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("refused after a connection closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after a connection closed")
	}
	// a has one connection left open; with room again, a second fits.
	l.release(b)
	l.release(netip.MustParseAddr("::1"))
	if !admit(a) {
		t.Fatal("per-IP count not given back")
	}
	if admit(a) {
		t.Fatal("a third connection from one address admitted past max.connections.per.ip=2")
	}
}

func TestConnCreationRate(t *testing.T) {
	cfg := configs.Default()
	cfg.MaxConnectionCreationRate = 20
	l, err := newConnLimits(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < 30; i++ { // a burst of 20, then 10 at 20/s
		if _, err := l.waitRoom(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 2*time.Second {
		t.Errorf("30 connections at 20/s took %v, want about 500ms", d)
	}
}
