package peerlink

import (
	"sync"
	"sync/atomic"
)

// Budget bounds the bytes of frames a port's connections are reading, or
// hold until their handling ends, over all those connections at once: the
// semantics of Kafka's queued.max.request.bytes on its client port (a
// memory pool the socket server allocates each request's buffer from,
// muting the connection, that is not reading it, while the pool is out of
// memory). A connection that finds no room is not read until room is
// given back: back-pressure, never an error, so many connections that
// each announce and send a large frame hold at most the budget between
// them instead of their sum.
//
// A frame counts whole before its body is read (the memory for it is
// still taken as its bytes arrive: ReadBody), so frames never hold part of
// the budget while waiting for more of it, and cannot wait for each other.
// Frames up to SmallFrame are admitted while any room is left, as Kafka's
// pool admits any request while it has memory (so the bound is passed by
// at most one small frame per waiting connection); larger ones only while
// they fit in the budget's first seven eighths, or when nothing else is
// held (a frame larger than that is admitted alone, not refused forever).
// The last eighth is kept for small frames: a small call is read while
// large frames fill the rest.
type Budget struct {
	limit int64

	mu   sync.Mutex
	used int64
	room chan struct{} // closed and replaced when bytes are given back; nil until someone waits

	peak   atomic.Int64
	waited atomic.Int64
}

// SmallFrame is the largest frame a Budget admits from its reserve.
const SmallFrame = 64 << 10

// NewBudget makes a budget of limit bytes; limit <= 0 is unbounded (Take
// counts nothing).
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Limit is the budget's bound.
func (b *Budget) Limit() int64 { return b.limit }

// Take waits until a frame of n bytes may be read, counts it and returns
// what to Release once the frame's handling ends (0 when unbounded). It
// returns false, counting nothing, when done closes first.
func (b *Budget) Take(n int64, done <-chan struct{}) (int64, bool) {
	if b == nil || b.limit <= 0 {
		return 0, true
	}
	counted := false
	for {
		b.mu.Lock()
		if b.admits(n) {
			b.used += n
			if b.used > b.peak.Load() {
				b.peak.Store(b.used)
			}
			b.mu.Unlock()
			return n, true
		}
		if !counted {
			counted = true
			b.waited.Add(1)
		}
		if b.room == nil {
			b.room = make(chan struct{})
		}
		room := b.room
		b.mu.Unlock()
		select {
		case <-room:
		case <-done:
			return 0, false
		}
	}
}

func (b *Budget) admits(n int64) bool {
	if n <= SmallFrame {
		return b.used < b.limit
	}
	return b.used == 0 || b.used+n <= b.limit-b.limit/8
}

// Release gives back what Take returned.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.room != nil {
		close(b.room)
		b.room = nil
	}
	b.mu.Unlock()
}

// Used is the bytes counted now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Peak is the most bytes ever counted at once.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// Waits is how many frames had to wait for room.
func (b *Budget) Waits() int64 { return b.waited.Load() }
