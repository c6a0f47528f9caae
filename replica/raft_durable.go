package replica

import (
	"context"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
)

// durWait is one MsgStorageAppend whose writes are stored but may not be
// durable yet: its responses wait for the log's fsync to reach end.
type durWait struct {
	end      int64  // log end offset after the append
	last     uint64 // last entry index appended, 0 if none
	raftMark bool   // raft's own entries came: raft.state notes them once durable
	resps    []*raftpb.Message

	done bool
	err  error
}

// durQueue holds a group's appends waiting for durability, in order, and
// runs at most one goroutine that waits on the log for them (the log's
// Flusher syncs every dirty log of the broker in one round, so every group
// waiting is released by the same fsync). No raft worker ever waits for a
// sync: it stores the writes, queues their responses here and goes on;
// the waiter requeues the group, whose next round delivers them
// (Replica.durableLocked). mu is a leaf lock.
type durQueue struct {
	mu      sync.Mutex
	q       []*durWait
	running bool
	cancel  context.CancelFunc // the waiter's current wait
	wg      sync.WaitGroup
}

// add queues w (raftMu held). With nothing queued before it and nothing to
// wait for (no entries, or the log already durable past them, as with
// log.fsync=never), its responses are delivered at once.
// first is the first entry index w appended, 0 if none.
func (d *durQueue) add(r *Replica, w *durWait, first uint64) error {
	durable := first == 0 || r.log.DurableOffset() >= w.end
	d.mu.Lock()
	// A truncation (a follower's divergent tail replaced) may have cut
	// the log below what earlier appends wait for: their entries are gone
	// and they wait for no more than what is left. raft ignores their
	// stability (the term changed since), and the acknowledgements they
	// carry were true in their term.
	cut := false
	for _, q := range d.q {
		if q.end > w.end {
			q.end = w.end
			cut = true
		}
		if first > 0 && q.last >= first {
			q.last = first - 1
		}
	}
	if cut && d.cancel != nil {
		d.cancel()
	}
	if len(d.q) == 0 && durable {
		d.mu.Unlock()
		return r.durableNowLocked(w)
	}
	d.q = append(d.q, w)
	if !d.running {
		d.running = true
		d.wg.Add(1)
		go d.wait(r)
	}
	d.mu.Unlock()
	return nil
}

// wait waits for the log's durability of the queued appends, oldest
// first, marking every one the fsync covers done and requeueing the group.
func (d *durQueue) wait(r *Replica) {
	defer d.wg.Done()
	d.mu.Lock()
	for {
		var w *durWait
		for _, q := range d.q {
			if !q.done {
				w = q
				break
			}
		}
		if w == nil {
			d.running = false
			d.mu.Unlock()
			return
		}
		end := w.end
		ctx, cancel := context.WithCancel(r.host.ctx)
		d.cancel = cancel
		d.mu.Unlock()
		err := r.log.WaitDurable(ctx, end)
		cancel()
		d.mu.Lock()
		d.cancel = nil
		if err != nil && ctx.Err() != nil && r.host.ctx.Err() == nil {
			continue // cut by a truncation: wait again for what is left
		}
		for _, q := range d.q {
			if !q.done && (err != nil || q.end <= end) {
				q.done, q.err = true, err
			}
		}
		d.mu.Unlock()
		r.host.sched.enqueue(r)
		d.mu.Lock()
	}
}

// takeDone removes and returns the done appends at the head of the queue.
func (d *durQueue) takeDone() []*durWait {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for n < len(d.q) && d.q[n].done {
		n++
	}
	if n == 0 {
		return nil
	}
	done := make([]*durWait, n)
	copy(done, d.q)
	k := copy(d.q, d.q[n:])
	clear(d.q[k:])
	d.q = d.q[:k]
	return done
}

// durableNowLocked finishes w when nothing needs waiting for.
func (r *Replica) durableNowLocked(w *durWait) error {
	w.done = true
	r.dur.mu.Lock()
	r.dur.q = append(r.dur.q, w)
	r.dur.mu.Unlock()
	return r.durableLocked()
}
