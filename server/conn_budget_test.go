package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/configs"
)

func TestRequestBudget(t *testing.T) {
	var b requestBudget
	ctx := context.Background()
	if n, err := b.acquire(ctx, 10, 0); n != 0 || err != nil {
		t.Fatalf("unbounded: %d, %v", n, err)
	}
	// Admitted while any room is left, even past the bound.
	n1, _ := b.acquire(ctx, 80, 100)
	n2, _ := b.acquire(ctx, 80, 100)
	if n1 != 80 || n2 != 80 {
		t.Fatalf("held %d, %d", n1, n2)
	}
	got := make(chan int64)
	go func() {
		n, _ := b.acquire(ctx, 5, 100)
		got <- n
	}()
	select {
	case <-got:
		t.Fatal("admitted with the budget full")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(n1)
	select {
	case n := <-got:
		b.release(n)
	case <-time.After(5 * time.Second):
		t.Fatal("not admitted after a release")
	}
	cctx, cancel := context.WithCancel(ctx)
	b.acquire(ctx, 100, 100)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := b.acquire(cctx, 1, 100); err == nil {
		t.Fatal("a cancelled wait succeeded")
	}
}

// With a budget far below one request, every request must still be served,
// one at a time: a request that never gave its bytes back (an error path,
// acks=0, a second stage) would stop the broker reading altogether.
func TestQueuedMaxRequestBytesServesEverything(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) {
		c.LogFsync = "group"
		c.QueuedMaxRequestBytes = 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.LeaderAck(), kgo.NoAck()} {
		opts := []kgo.Opt{kgo.DefaultProduceTopic("budget"), kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(acks)}
		if acks != kgo.AllISRAcks() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl := b.client(t, opts...)
		for i := 0; i < 300; i++ {
			cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b.requestBytesIdle(t)
}

// requestBytesIdle waits until no request holds budget bytes.
func (b *testBroker) requestBytesIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.srv.requestBytes.mu.Lock()
		used := b.srv.requestBytes.used
		b.srv.requestBytes.mu.Unlock()
		if used == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d request bytes still held with nothing in flight", used)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
