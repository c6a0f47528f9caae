package replica

import "sync"

// scheduler runs raft groups on a fixed pool of workers, as CockroachDB's
// kvserver scheduler does: a group with pending work (messages, ticks,
// proposals, a Ready) sits in a FIFO queue at most once; a worker pops it,
// processes everything pending, and requeues it if more work arrived in the
// meantime. A group is never processed by two workers at once, and an idle
// group costs nothing but its ticks.
type scheduler struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*Replica
	head    int
	stopped bool
	wg      sync.WaitGroup
}

// schedState is the scheduler's per-group state, guarded by scheduler.mu.
type schedState struct {
	pending    bool // work arrived
	queued     bool // in queue
	processing bool // a worker has it
}

func newScheduler(workers int) *scheduler {
	s := &scheduler{}
	s.cond = sync.NewCond(&s.mu)
	for range workers {
		s.wg.Add(1)
		go s.worker()
	}
	return s
}

// enqueue marks r as having work and queues it unless it is queued or being
// processed (then the worker requeues it when done).
func (s *scheduler) enqueue(r *Replica) {
	s.mu.Lock()
	st := &r.sched
	st.pending = true
	if !st.queued && !st.processing && !s.stopped {
		st.queued = true
		s.queue = append(s.queue, r)
		s.cond.Signal()
	}
	s.mu.Unlock()
}

// enqueueAll is enqueue for many groups under one lock (the host's tick).
func (s *scheduler) enqueueAll(rs []*Replica) {
	s.mu.Lock()
	n := 0
	for _, r := range rs {
		st := &r.sched
		st.pending = true
		if !st.queued && !st.processing && !s.stopped {
			st.queued = true
			s.queue = append(s.queue, r)
			n++
		}
	}
	if n > 1 {
		s.cond.Broadcast()
	} else if n == 1 {
		s.cond.Signal()
	}
	s.mu.Unlock()
}

func (s *scheduler) worker() {
	defer s.wg.Done()
	s.mu.Lock()
	for {
		for s.head == len(s.queue) && !s.stopped {
			s.cond.Wait()
		}
		if s.stopped {
			s.mu.Unlock()
			return
		}
		r := s.queue[s.head]
		s.queue[s.head] = nil
		s.head++
		if s.head == len(s.queue) {
			s.queue, s.head = s.queue[:0], 0
		} else if s.head > 1024 && s.head*2 > len(s.queue) {
			n := copy(s.queue, s.queue[s.head:])
			s.queue, s.head = s.queue[:n], 0
		}
		st := &r.sched
		st.queued, st.pending, st.processing = false, false, true
		s.mu.Unlock()

		r.process()

		s.mu.Lock()
		st.processing = false
		if st.pending && !st.queued && !s.stopped {
			st.queued = true
			s.queue = append(s.queue, r)
			s.cond.Signal()
		}
	}
}

// stop makes the workers exit after the group each is processing and waits
// for them.
func (s *scheduler) stop() {
	s.mu.Lock()
	s.stopped = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
}
