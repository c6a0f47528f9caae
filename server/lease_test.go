package server

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/metastore"
)

// TestLeaseHeldForRecordedLength: a broker configured with a longer lease
// than the cluster recorded holds its lease only for the recorded length
// (the metastore may expire it then), and heartbeats often enough for
// that length to stay valid while it runs.
func TestLeaseHeldForRecordedLength(t *testing.T) {
	const lease = 3 * time.Second
	meta := openTestMetaWith(t, t.TempDir(), zerolog.Nop(), func(mc *metastore.Config) { mc.LeaseDuration = lease })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := meta.Client()
	for cl.BrokerLease() != lease {
		if ctx.Err() != nil {
			t.Fatalf("recorded broker lease %v, want %v", cl.BrokerLease(), lease)
		}
		time.Sleep(10 * time.Millisecond)
	}

	l := NewLease(cl, metastore.Broker{ID: 3, Role: metastore.RoleWrite}, 30*time.Second, zerolog.Nop())
	l.Recorded = cl.BrokerLease
	if err := l.Register(ctx); err != nil {
		t.Fatal(err)
	}
	// Running, it heartbeats by the recorded length and stays valid.
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(rctx) }()
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if !l.Valid() {
			t.Fatal("lease invalid while heartbeating")
		}
	}
	// Stopped (a paused or cut-off broker), it is invalid within the
	// recorded length, not the configured 30 s.
	stop()
	<-done
	start := time.Now()
	for l.Valid() {
		if time.Since(start) > 2*lease {
			t.Fatalf("lease still valid %v after the last heartbeat; the cluster's lease is %v", time.Since(start), lease)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("invalid %v after the heartbeats stopped", time.Since(start).Round(time.Millisecond))
}
