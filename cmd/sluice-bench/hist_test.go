package main

import (
	"math/rand"
	"sort"
	"testing"
	"time"
)

func TestBucketBounds(t *testing.T) {
	prevHigh := uint64(0)
	for b := 1; b < (64-subBits+1)<<subBits; b++ {
		lo, hi := lowOf(b), highOf(b)
		if lo != prevHigh+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", b, lo, prevHigh)
		}
		if bucketOf(lo) != b || bucketOf(hi) != b {
			t.Fatalf("bucket %d: [%d,%d] maps to %d,%d", b, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		prevHigh = hi
	}
}

func TestQuantileError(t *testing.T) {
	var h hist
	r := rand.New(rand.NewSource(1))
	vals := make([]int64, 100000)
	for i := range vals {
		// log-uniform between 1µs and 10s
		v := int64(1e3 * pow10(r.Float64()*7))
		vals[i] = v
		h.record(time.Duration(v))
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		idx := int(q*float64(len(vals))+0.999999) - 1
		want := float64(vals[idx])
		got := float64(h.quantile(q))
		if got < want || got > want*(1+1.0/(1<<subBits)) {
			t.Errorf("q%.3f: got %v want %v", q, got, want)
		}
	}
	if h.maxValue() != time.Duration(vals[len(vals)-1]) {
		t.Errorf("max %v", h.maxValue())
	}
}

func pow10(x float64) float64 {
	r := 1.0
	for x >= 1 {
		r *= 10
		x--
	}
	// 10^x for x in [0,1) by e^(x ln 10)
	s, term := 1.0, 1.0
	for i := 1; i < 30; i++ {
		term *= x * 2.302585092994046 / float64(i)
		s += term
	}
	return r * s
}
