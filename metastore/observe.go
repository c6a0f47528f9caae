package metastore

import (
	"sync/atomic"
	"time"
)

// writeObserver receives the duration of every committed write a Client
// makes: from the call to its effect being visible in the local cache.
var writeObserver atomic.Pointer[func(time.Duration)]

// SetWriteObserver makes fn receive the duration of every Client write
// that succeeds (proposal, commit, apply and the local cache catching up),
// so a broker can export metastore commit latency; nil stops it. fn must be
// cheap and safe for concurrent use.
func SetWriteObserver(fn func(time.Duration)) {
	if fn == nil {
		writeObserver.Store(nil)
		return
	}
	writeObserver.Store(&fn)
}

func observeWrite(since time.Time) {
	if fn := writeObserver.Load(); fn != nil {
		(*fn)(time.Since(since))
	}
}
