package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// hist is a log-linear histogram of durations in nanoseconds, in the manner of
// HdrHistogram: values are grouped by their power of two, and each power of
// two is split into 2^subBits equal sub-buckets, so a reported percentile is
// within 1/2^subBits (0.8 %) of the true value at any magnitude. Recording is
// lock-free (one atomic add), so producer callbacks and consumer goroutines
// share one histogram.
type hist struct {
	counts [64 << subBits]atomic.Uint64
	n      atomic.Uint64
	max    atomic.Int64
}

const subBits = 7

func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v) // exact below 2^subBits
	}
	e := bits.Len64(v) - 1 // 2^e <= v < 2^(e+1), e >= subBits
	sub := (v >> (uint(e) - subBits)) & (1<<subBits - 1)
	return (e-subBits+1)<<subBits | int(sub)
}

// lowOf is the smallest value that falls in bucket b; highOf the largest.
func lowOf(b int) uint64 {
	if b < 1<<subBits {
		return uint64(b)
	}
	e := uint(b>>subBits) + subBits - 1
	sub := uint64(b & (1<<subBits - 1))
	return 1<<e | sub<<(e-subBits)
}

func highOf(b int) uint64 {
	if b < 1<<subBits {
		return uint64(b)
	}
	e := uint(b>>subBits) + subBits - 1
	return lowOf(b) + 1<<(e-subBits) - 1
}

func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))].Add(1)
	h.n.Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

func (h *hist) count() uint64 { return h.n.Load() }

// quantile returns the value at quantile q (0..1): the upper end of the
// bucket holding the ceil(q*n)-th value, capped at the recorded maximum.
func (h *hist) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for b := range h.counts {
		seen += h.counts[b].Load()
		if seen >= rank {
			v := time.Duration(highOf(b))
			if m := time.Duration(h.max.Load()); v > m {
				v = m
			}
			return v
		}
	}
	return time.Duration(h.max.Load())
}

func (h *hist) maxValue() time.Duration { return time.Duration(h.max.Load()) }

// summary is the JSON form of a histogram, in milliseconds.
type summary struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func (h *hist) summary() summary {
	return summary{
		Count: h.count(),
		P50:   ms(h.quantile(0.50)),
		P99:   ms(h.quantile(0.99)),
		P999:  ms(h.quantile(0.999)),
		Max:   ms(h.maxValue()),
	}
}
