package log

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// Size returns the bytes of whole batches in the log's segments and the
// number of segments, for the metrics endpoint.
func (l *Log) Size() (bytes int64, segments int) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs {
		bytes += s.size
	}
	return bytes, len(l.segs)
}

// syncObserver receives the duration of every segment, index and WAL sync.
var syncObserver atomic.Pointer[func(time.Duration)]

// SetSyncObserver makes fn receive the duration of every fdatasync the
// package makes (segment, index and WAL files), so a broker can export
// flush latency; nil stops it. fn must be cheap and safe for concurrent
// use (a Prometheus histogram's Observe).
func SetSyncObserver(fn func(time.Duration)) {
	if fn == nil {
		syncObserver.Store(nil)
		return
	}
	syncObserver.Store(&fn)
}

// observedSync is fdatasync timed for the sync observer.
func observedSync(f *os.File) error {
	fn := syncObserver.Load()
	if fn == nil {
		return fsutil.Fdatasync(f)
	}
	t0 := time.Now()
	err := fsutil.Fdatasync(f)
	(*fn)(time.Since(t0))
	return err
}
