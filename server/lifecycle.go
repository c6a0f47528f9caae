package server

import (
	"context"
	"slices"
	"time"

	"github.com/sluice-broker/sluice/partition"
)

// OpenPartitions opens every partition the catalog assigns to this broker,
// so crash recovery runs at start rather than on first use, and deletes
// the data of topics deleted while the broker was down.
func (s *Server) OpenPartitions() error {
	if s.offsets != nil {
		if err := s.offsets.open(); err != nil {
			return err
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.offsets.run(s.ctx)
		}()
	}
	// Replicas of topics deleted, or of partitions reassigned away
	// (never one whose reassignment is still in progress), while this
	// broker was down.
	keep := make(map[partition.Key]bool)
	for _, t := range s.catalog.Topics() {
		for i, p := range t.Partitions {
			keep[partition.Key{TopicID: t.ID, Index: int32(i)}] = s.assigned(p) || p.Target != nil
		}
	}
	if err := s.raft.RemoveStale(func(id [16]byte, index int32) bool {
		return keep[partition.Key{TopicID: id, Index: index}]
	}); err != nil {
		return err
	}
	s.refreshPartitions()
	return nil
}

// revisionWatcher is implemented by catalogs that can say when they change.
type revisionWatcher interface {
	Revision() uint64
	WaitRevision(ctx context.Context, rev uint64) error
}

// FollowCatalog applies catalog changes made elsewhere (another broker's
// DeleteTopics or config change) to the local partitions until ctx ends.
// A refresh that left a partition unopened because a deleted topic of the
// same name still held its directory is retried after reopenRetry, even
// with no change to follow: a follower's replica must not wait for the
// next change to join its group.
func (s *Server) FollowCatalog(ctx context.Context) {
	w, ok := s.catalog.(revisionWatcher)
	complete := true
	for ctx.Err() == nil {
		if ok {
			wait, cancel := ctx, context.CancelFunc(func() {})
			if !complete {
				wait, cancel = context.WithTimeout(ctx, reopenRetry)
			}
			err := w.WaitRevision(wait, w.Revision()+1)
			retry := err != nil && !complete && ctx.Err() == nil && wait.Err() != nil
			cancel()
			if err != nil && !retry {
				if ctx.Err() == nil {
					time.Sleep(time.Second)
				}
				continue
			}
		} else {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		complete = s.refreshPartitions()
	}
}

// reopenRetry is how soon FollowCatalog refreshes again after a refresh
// that could not open every partition assigned here.
const reopenRetry = 500 * time.Millisecond

// RunRetention applies every hosted partition's retention each interval
// until ctx ends.
func (s *Server) RunRetention(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			type retained interface {
				ApplyRetention(time.Time) (int, error)
				LogStartOffset() int64
			}
			var all []retained
			for _, r := range s.raft.Replicas() {
				all = append(all, r)
			}
			for _, p := range all {
				if n, err := p.ApplyRetention(now); err != nil {
					s.log.Error().Err(err).Msg("retention")
				} else if n > 0 {
					s.log.Info().Int("segments", n).Int64("log_start", p.LogStartOffset()).Msg("retention deleted segments")
				}
			}
			s.applySharedRetention(now)
		}
	}
}

// applySharedRetention applies the topics' retention to the shared-mode
// partitions this broker writes, with the same resolved configs a log
// gets (logConfig).
func (s *Server) applySharedRetention(now time.Time) {
	if s.shared == nil {
		return
	}
	for _, k := range s.shared.Keys() {
		t, ok := s.catalog.TopicByID(k.TopicID)
		if !ok || !isShared(t) {
			continue
		}
		if n, err := s.shared.ApplyRetention(k, s.logConfig(t), now); err != nil {
			s.log.Warn().Err(err).Str("topic", t.Name).Int32("partition", k.Index).Msg("shared retention")
		} else if n > 0 {
			s.log.Info().Str("topic", t.Name).Int32("partition", k.Index).Int("chunks", n).Msg("shared retention moved the start offset")
		}
	}
}

// RunProducerExpiry applies producer expiry (producer.id.expiration.ms) to
// every hosted partition each interval until ctx ends: a periodic sweep, so
// the write path checks nothing per batch.
func (s *Server) RunProducerExpiry(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n := 0
			for _, r := range s.raft.Replicas() {
				n += r.ExpireProducers(now)
			}
			if n > 0 {
				s.log.Debug().Int("entries", n).Msg("expired idle producers")
			}
		}
	}
}

// Cleaner is the log cleaner, which compacts the hosted partitions whose
// topic has cleanup.policy=compact (the log package's Cleaner, given the
// raft host's and the offsets logs' clean targets).
type Cleaner interface {
	Start()
	Close()
	Totals() partition.CleanerTotals
}

// RunCleaner runs the log cleaner until ctx ends, and stops it before
// returning; its counters are exported as metrics meanwhile.
func (s *Server) RunCleaner(ctx context.Context, c Cleaner) {
	s.cleaner.Store(&c)
	c.Start()
	<-ctx.Done()
	c.Close()
}

// RunLeaderBalance hands each partition this broker leads back to its
// preferred leader (the first voter of its assignment, spread over the
// write brokers at creation) when that broker is registered again, so
// leadership does not pile up on the survivors of a failure. Raft's
// leadership transfer waits until the target has caught up.
func (s *Server) RunLeaderBalance(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		alive := make(map[int32]bool)
		for _, b := range s.catalog.Brokers() {
			alive[b.ID] = !b.ShuttingDown
		}
		for _, r := range s.raft.Replicas() {
			if !r.IsLeader() {
				continue
			}
			k := r.Key()
			tp, ok := s.catalog.TopicByID(k.TopicID)
			// A partition being reassigned is left to the
			// reassignment (server/reassign.go), which may be moving
			// leadership off the preferred leader on purpose.
			if !ok || int(k.Index) >= len(tp.Partitions) || len(tp.Partitions[k.Index].Voters) == 0 || tp.Partitions[k.Index].Target != nil {
				continue
			}
			preferred := tp.Partitions[k.Index].Voters[0]
			// As Kafka's auto.leader.rebalance.enable: only to a
			// preferred leader that is in the ISR.
			if preferred == s.cfg.NodeID || !alive[preferred] || !slices.Contains(r.InSyncReplicas(), partition.NodeID(preferred)) {
				continue
			}
			if err := r.TransferLeadership(partition.NodeID(preferred)); err != nil {
				s.log.Debug().Err(err).Str("topic", tp.Name).Int32("partition", k.Index).Msg("leader rebalance")
			} else {
				s.log.Info().Str("topic", tp.Name).Int32("partition", k.Index).Int32("to", preferred).Msg("handing leadership back to the preferred leader")
			}
		}
	}
}

// HandOffLeadership is the leadership part of a controlled shutdown
// (Kafka's controlled.shutdown.*): every partition this broker leads is
// handed to another voter, so that its producers wait for a transfer (a
// round trip or two) instead of an election timeout once the broker is
// gone. Each of retries rounds asks the leaders still here to transfer and
// waits up to backoff for them to go; it returns how many partitions this
// broker still leads. Call it after marking the broker as shutting down in
// the metastore, so that no preferred-leader rebalance hands leadership
// back meanwhile.
func (s *Server) HandOffLeadership(ctx context.Context, retries int, backoff time.Duration) int {
	self := partition.NodeID(s.cfg.NodeID)
	led := func() []partition.Replica {
		var out []partition.Replica
		for _, r := range s.raft.Replicas() {
			// A group whose only voter is this broker (every group
			// of a single node) has no one to hand off to.
			if r.IsLeader() && len(r.Members().Voters) > 1 {
				out = append(out, r)
			}
		}
		return out
	}
	for attempt := 0; attempt < retries; attempt++ {
		leaders := led()
		if len(leaders) == 0 {
			return 0
		}
		for _, r := range leaders {
			// Any other voter that this leader has heard from lately;
			// TransferLeadership refuses the others at once.
			for _, v := range r.Members().Voters {
				if v != self && r.TransferLeadership(v) == nil {
					break
				}
			}
		}
		deadline := time.Now().Add(backoff)
		for time.Now().Before(deadline) && ctx.Err() == nil && len(led()) > 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	n := len(led())
	if n > 0 {
		s.log.Warn().Int("partitions", n).Msg("controlled shutdown: still leading partitions no other voter took")
	}
	return n
}
