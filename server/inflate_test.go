package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestInflateCharge: inflation bytes count against the request budget and
// wait while it is full, except that one inflation always proceeds, so
// requests holding frames and waiting to inflate cannot deadlock.
func TestInflateCharge(t *testing.T) {
	var b requestBudget
	ctx := context.Background()
	frame, _ := b.acquire(ctx, 100, 100) // the budget is full
	a := &inflateCharge{b: &b, ctx: ctx, limit: 100}
	if err := a.Reserve(50); err != nil {
		t.Fatal(err)
	}
	if err := a.Reserve(50); err != nil { // still the only inflation
		t.Fatal(err)
	}
	if b.used != 200 {
		t.Fatalf("used %d, want 200", b.used)
	}
	c := &inflateCharge{b: &b, ctx: ctx, limit: 100}
	done := make(chan error, 1)
	go func() { done <- c.Reserve(10) }()
	select {
	case err := <-done:
		t.Fatalf("a second inflation went past a full budget (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	// A frame waits too: inflation bytes count.
	fr := make(chan int64, 1)
	go func() { n, _ := b.acquire(ctx, 10, 100); fr <- n }()
	a.release()
	// The budget is still full (the first frame), but no inflation holds
	// bytes: the waiting one proceeds.
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting inflation never proceeded")
	}
	select {
	case <-fr:
		t.Fatal("a frame was admitted with the budget full")
	case <-time.After(50 * time.Millisecond):
	}
	c.release()
	b.release(frame)
	select {
	case n := <-fr:
		b.release(n)
	case <-time.After(5 * time.Second):
		t.Fatal("the frame never got room")
	}
	if b.used != 0 || b.inflating != 0 {
		t.Fatalf("left used %d, inflating %d", b.used, b.inflating)
	}

	// A waiting inflation gives up with its context.
	frame, _ = b.acquire(ctx, 100, 100)
	a = &inflateCharge{b: &b, ctx: ctx, limit: 100}
	a.Reserve(1)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	c = &inflateCharge{b: &b, ctx: cctx, limit: 100}
	if err := c.Reserve(1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
	c.release()
	a.release()
	b.release(frame)
	if b.used != 0 || b.inflating != 0 {
		t.Fatalf("left used %d, inflating %d", b.used, b.inflating)
	}
}
