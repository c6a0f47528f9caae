package quota

import (
	"math"
	"sync"
	"time"
)

// inactiveExpiry is when an idle sensor is dropped (Kafka's
// InactiveSensorExpirationTimeSeconds).
const inactiveExpiry = time.Hour

// Manager measures one kind of quota for every client that is under a
// quota of that kind.
type Manager struct {
	window Window
	// maxThrottle bounds a throttle time (0: unbounded). Kafka bounds
	// request_percentage throttles to one window, byte rates not at all.
	maxThrottle time.Duration

	mu      sync.Mutex
	sensors map[Key]*sensor
	swept   int64
}

type sensor struct {
	rate   rate
	bucket bucket
	last   int64
}

// NewManager returns a manager measuring over w; throttle times are
// bounded by maxThrottle unless it is 0.
func NewManager(w Window, maxThrottle time.Duration) *Manager {
	if w.Samples < 2 {
		w.Samples = 2
	}
	if w.Size <= 0 {
		w.Size = time.Second
	}
	return &Manager{window: w, maxThrottle: maxThrottle, sensors: map[Key]*sensor{}}
}

func (m *Manager) sensorLocked(k Key, now int64) *sensor {
	if now-m.swept > inactiveExpiry.Milliseconds()/10 {
		m.swept = now
		for key, s := range m.sensors {
			if now-s.last > inactiveExpiry.Milliseconds() {
				delete(m.sensors, key)
			}
		}
	}
	s := m.sensors[k]
	if s == nil {
		s = &sensor{}
		m.sensors[k] = s
	}
	s.last = now
	return s
}

// Record adds v to k's usage and returns how long the client must be
// throttled to bring its rate back under bound (0: it is under).
func (m *Manager) Record(k Key, bound, v float64, now time.Time) time.Duration {
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sensorLocked(k, ms)
	s.rate.record(m.window, v, ms)
	r := s.rate.measure(m.window, ms)
	if r <= bound {
		return 0
	}
	t := math.Round((r - bound) / bound * float64(s.rate.windowMs(m.window, ms)))
	d := time.Duration(t) * time.Millisecond
	if m.maxThrottle > 0 {
		d = min(d, m.maxThrottle)
	}
	return d
}

// Unrecord takes v back out of k's usage: what a throttled fetch, which
// answers empty, had recorded.
func (m *Manager) Unrecord(k Key, v float64, now time.Time) {
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sensorLocked(k, ms).rate.record(m.window, -v, ms)
}

// MaxInWindow is the most a client under bound can use at once without
// being throttled for sure: bound * (samples-1) * window size. Fetch caps
// its response size by it, as Kafka does.
func (m *Manager) MaxInWindow(bound float64) float64 {
	return bound * float64(m.window.Samples-1) * m.window.Size.Seconds()
}

// Spend is the controller mutation quota (token bucket). Strict (newer
// request versions): when k's bucket is already below zero nothing is
// taken and the answer is the throttle time with ok false, so the caller
// refuses the mutation with THROTTLING_QUOTA_EXCEEDED; otherwise v tokens
// are taken and ok is true. Permissive (older versions): v is always
// taken and ok is true; the throttle time is non-zero once the bucket is
// below zero.
func (m *Manager) Spend(k Key, bound, v float64, strict bool, now time.Time) (throttle time.Duration, ok bool) {
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sensorLocked(k, ms)
	b := burst(m.window, bound)
	s.bucket.refill(bound, b, ms)
	if strict && s.bucket.tokens < 0 {
		return bucketThrottle(s.bucket.tokens, bound), false
	}
	s.bucket.tokens = min(b, s.bucket.tokens-v)
	if !strict && s.bucket.tokens < 0 {
		return bucketThrottle(s.bucket.tokens, bound), true
	}
	return 0, true
}

func bucketThrottle(tokens, bound float64) time.Duration {
	return time.Duration(math.Round(-tokens/bound*1000)) * time.Millisecond
}
