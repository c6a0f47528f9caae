package peerlink

import (
	"testing"
	"time"
)

// TestBudget: small frames come out of the last eighth, large ones only
// within the first seven eighths or alone, a waiting reader is let in when
// room is given back, and done ends a wait without counting.
func TestBudget(t *testing.T) {
	b := NewBudget(8 << 20)
	never := make(chan struct{})
	take := func(n int64) (int64, bool) {
		done := make(chan struct{})
		time.AfterFunc(100*time.Millisecond, func() { close(done) })
		return b.Take(n, done)
	}
	big, ok := b.Take(5<<20, never)
	if !ok || big != 5<<20 {
		t.Fatalf("first large frame: %d %v", big, ok)
	}
	if _, ok := take(3 << 20); ok {
		t.Fatal("a large frame past seven eighths was admitted")
	}
	var small []int64
	for b.Used() < 8<<20 {
		n, ok := take(SmallFrame)
		if !ok {
			t.Fatalf("a small frame waited at %d of %d", b.Used(), b.Limit())
		}
		small = append(small, n)
	}
	if _, ok := take(1); ok {
		t.Fatal("a small frame was admitted with the budget full")
	}
	if b.Peak() != 8<<20 || b.Waits() != 2 {
		t.Fatalf("peak %d waits %d", b.Peak(), b.Waits())
	}
	// A large frame waiting is let in once the room is back.
	got := make(chan int64)
	go func() { n, _ := b.Take(2<<20, never); got <- n }()
	time.Sleep(20 * time.Millisecond)
	b.Release(big)
	for _, n := range small {
		b.Release(n)
	}
	if n := <-got; n != 2<<20 || b.Used() != 2<<20 {
		t.Fatalf("after release: took %d, used %d", n, b.Used())
	}
	// Alone, a frame larger than the whole budget is admitted.
	b.Release(2 << 20)
	if n, ok := take(64 << 20); !ok || n != 64<<20 {
		t.Fatalf("a lone frame larger than the budget: %d %v", n, ok)
	}
	// Unbounded counts nothing.
	if n, ok := NewBudget(0).Take(1<<30, never); !ok || n != 0 {
		t.Fatalf("unbounded: %d %v", n, ok)
	}
}
