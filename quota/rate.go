package quota

import "time"

// Window is how usage is measured: Samples windows of Size each
// (quota.window.num, quota.window.size.seconds).
type Window struct {
	Samples int
	Size    time.Duration
}

// rate is Kafka's Rate over a SampledStat of sums: Samples+1 samples,
// each covering Size from its start; samples idle for Samples*Size are
// reset. Times are unix milliseconds, as in Kafka, so the arithmetic
// (and the throttle times it gives) matches Kafka's.
type rate struct {
	samples []sample
	cur     int
}

type sample struct {
	value       float64
	start, last int64
}

func (s *sample) reset(now int64) { *s = sample{start: now, last: now} }

func (r *rate) record(w Window, v float64, now int64) {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{start: now, last: now})
	}
	s := &r.samples[r.cur]
	if now-s.start >= w.Size.Milliseconds() {
		// Advance, keeping one extra sample for the one that overlaps
		// the start of the window.
		r.cur = (r.cur + 1) % (w.Samples + 1)
		if r.cur >= len(r.samples) {
			r.samples = append(r.samples, sample{start: now, last: now})
		} else {
			r.samples[r.cur].reset(now)
		}
		s = &r.samples[r.cur]
	}
	s.value += v
	s.last = now
}

func (r *rate) purge(w Window, now int64) {
	expire := int64(w.Samples) * w.Size.Milliseconds()
	for i := range r.samples {
		if now-r.samples[i].last >= expire {
			r.samples[i].reset(now)
		}
	}
}

// windowMs is the span the rate divides by: since the oldest sample
// began, but at least Samples-1 full windows, so that a burst right after
// a quiet spell is not measured over a few milliseconds.
func (r *rate) windowMs(w Window, now int64) int64 {
	r.purge(w, now)
	oldest := now
	for i := range r.samples {
		oldest = min(oldest, r.samples[i].start)
	}
	elapsed := now - oldest
	size := w.Size.Milliseconds()
	if full, least := elapsed/size, int64(w.Samples-1); full < least {
		elapsed += (least - full) * size
	}
	return max(elapsed, 1)
}

// measure is the rate per second.
func (r *rate) measure(w Window, now int64) float64 {
	span := r.windowMs(w, now) // purges
	var sum float64
	for i := range r.samples {
		sum += r.samples[i].value
	}
	return sum / (float64(span) / 1000)
}

// bucket is Kafka's TokenBucket: up to burst tokens, refilled at the
// bound per second; a record takes tokens and may take it below zero.
type bucket struct {
	tokens float64
	last   int64
	init   bool
}

func (b *bucket) refill(bound, burst float64, now int64) {
	if !b.init {
		b.tokens, b.last, b.init = burst, now, true
	}
	b.tokens = min(burst, b.tokens+bound*float64(now-b.last)/1000)
	b.last = now
}

func burst(w Window, bound float64) float64 {
	return float64(w.Samples) * w.Size.Seconds() * bound
}
