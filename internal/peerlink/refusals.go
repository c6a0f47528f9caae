package peerlink

import (
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Refusals counts what a transport refused (connections, frames,
// messages) by reason, and logs at most one warning per Every, so a
// flood of bad peers costs a counter each, not a log line each.
type Refusals struct {
	names   []string
	n       []atomic.Int64
	lastLog atomic.Int64 // unix nanos of the last warning
	lg      zerolog.Logger
	msg     string
	// Every is the least time between two warnings (default 10 s).
	Every time.Duration
}

// NewRefusals counts the reasons names (indexes into it are the reasons
// Add and Count take) and logs msg with lg.
func NewRefusals(lg zerolog.Logger, msg string, names ...string) *Refusals {
	return &Refusals{names: names, n: make([]atomic.Int64, len(names)), lg: lg, msg: msg}
}

// Add counts one refusal of reason why and logs it unless a warning went
// out less than Every ago; fn adds fields to the warning.
func (r *Refusals) Add(why int, fn func(e *zerolog.Event)) {
	r.n[why].Add(1)
	every := r.Every
	if every <= 0 {
		every = 10 * time.Second
	}
	now := time.Now().UnixNano()
	last := r.lastLog.Load()
	if now-last < int64(every) || !r.lastLog.CompareAndSwap(last, now) {
		return
	}
	e := r.lg.Warn().Str("reason", r.names[why])
	if fn != nil {
		fn(e)
	}
	e.Msg(r.msg)
}

// Count counts without logging, for refusals that are routine.
func (r *Refusals) Count(why int) { r.n[why].Add(1) }

// Snapshot adds the counts to into, by reason name; with all, reasons
// never seen are included as 0.
func (r *Refusals) Snapshot(into map[string]int64, all bool) {
	for i := range r.n {
		if v := r.n[i].Load(); v != 0 || all {
			into[r.names[i]] += v
		}
	}
}
