package shared

import (
	"context"
	"slices"
	"sort"
)

// readaheadMax bounds the read-aheads in flight on one Host: each holds a
// chunk's bytes (at most a few MiB) until the cache takes them.
const readaheadMax = 4

// readAhead starts reading, in the background, up to Readahead known
// chunks of p from the one holding offset on, into the cache: a consumer
// replaying history then finds its next chunks there instead of waiting
// for one ranged GET per chunk. Chunks cached, being read ahead, or past
// what p knows are skipped; when every slot is taken the rest is left (the
// Fetch path never waits for a read-ahead).
func (p *Partition) readAhead(offset int64) {
	h := p.h
	n := h.cfg.Readahead
	if n <= 0 {
		return
	}
	p.mu.Lock()
	i := sort.Search(len(p.chunks), func(i int) bool { return p.chunks[i].LastOffset >= offset })
	want := slices.Clone(p.chunks[i:min(i+n, len(p.chunks))])
	p.mu.Unlock()
	for _, ch := range want {
		k := cacheKey{ch.Key, ch.Pos}
		if _, ok := h.cache.get(ch.Key, ch.Pos); ok {
			continue
		}
		select {
		case h.ahead <- struct{}{}:
		default:
			return
		}
		done := make(chan struct{})
		h.aheadMu.Lock()
		_, busy := h.aheadKeys[k]
		if !busy {
			h.aheadKeys[k] = done
		}
		h.aheadMu.Unlock()
		if busy {
			<-h.ahead
			continue
		}
		finish := func() {
			h.aheadMu.Lock()
			delete(h.aheadKeys, k)
			h.aheadMu.Unlock()
			close(done)
			<-h.ahead
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			finish()
			return
		}
		h.wg.Add(1)
		h.mu.Unlock()
		go func() {
			defer h.wg.Done()
			defer finish()
			ctx, cancel := h.ctx()
			defer cancel()
			go func() {
				select {
				case <-h.stop:
					cancel()
				case <-ctx.Done():
				}
			}()
			if _, err := h.fetchChunk(ctx, ch); err == nil {
				h.readaheads.Add(1)
			}
		}()
	}
}

// awaitReadahead waits, up to ctx, for a read-ahead of k in flight.
func (h *Host) awaitReadahead(ctx context.Context, k cacheKey) {
	h.aheadMu.Lock()
	done, ok := h.aheadKeys[k]
	h.aheadMu.Unlock()
	if !ok {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}
