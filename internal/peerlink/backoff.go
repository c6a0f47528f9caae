package peerlink

import (
	"math/rand/v2"
	"time"
)

// Backoff spaces out attempts to reach a peer: each wait doubles from Min
// up to Max, and is drawn from the upper half of its interval ("equal
// jitter"), so nodes that lost a peer at the same moment do not redial it
// in lockstep. The zero value waits 50 ms to 2 s. Not safe for concurrent
// use: each dialling goroutine has its own.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Next returns the wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 50 * time.Millisecond
	}
	if hi < lo {
		hi = max(lo, 2*time.Second)
	}
	if b.next < lo {
		b.next = lo
	}
	d := b.next
	b.next = min(2*b.next, hi)
	return d/2 + rand.N(d/2+1)
}

// Reset starts again from Min, after a success.
func (b *Backoff) Reset() { b.next = 0 }
