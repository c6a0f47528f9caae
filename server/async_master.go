package server

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// Async master/replica (docs/replication-modes.md). A partition in
// replication.mode=async runs with its raft leader, the master, as its
// group's sole voter and every other replica a learner; the reassignment
// loop (reassign.go) moves the configuration there and back, and records
// the master in the metastore. This file does the rest on every broker:
//
//   - A write learner whose master's registration is gone (its lease
//     lapsed) records its claim (replica.Replica.Claim); once every live
//     write replica has claimed, or asyncClaimWait after its own claim,
//     the one holding the best claim records its promotion (a
//     compare-and-set on the master it replaces) and promotes its replica
//     (replica.Host.Promote).
//   - A replica whose configuration names a sole voter other than the
//     recorded master follows it (replica.Host.Follow), cutting what the
//     new master never received; a broker opening such a partition
//     follows instead of opening (openReplica), so a returning old master
//     never campaigns.
//   - A master in its controlled shutdown hands its place over
//     (HandOffAsyncMasters): it stops acknowledging, waits until a write
//     replica holds its whole log, closes its replica and records the
//     handover; that replica claims and is promoted at once, without
//     waiting for the lease, and nothing is cut.

// masterFenced says whether a write to partition of t must be refused,
// or its acknowledgement withheld, because this broker may have been
// replaced as master: t is async and this broker's lease is not certainly
// valid (a pause or a partition from the metastore past the lease, after
// which a write learner may have been promoted and the write would be
// lost), or the metastore view here does not yet hold this broker's
// current registration (after a lapse: a promotion recorded before it
// registered again would not be seen), or the view records another master.
// It is checked before the write and again, on a fresh view, before the
// acknowledgement: a write made durable while the lease held but answered
// after it lapsed would otherwise be acknowledged by a master that may be
// replaced by then. The producer retries at the leader Metadata names.
func (s *Server) masterFenced(t metastore.Topic, index int32) bool {
	if s.leaseValid == nil || !s.asyncMode(t) {
		return false
	}
	if _, ok := s.handingOver.Load(partition.Key{TopicID: t.ID, Index: index}); ok {
		return true
	}
	if !s.leaseValid() {
		return true
	}
	if s.leaseIncarnation != nil {
		inc, seen := s.leaseIncarnation(), false
		for _, b := range s.catalog.Brokers() {
			if b.ID == s.cfg.NodeID {
				seen = b.Incarnation == inc
				break
			}
		}
		if !seen {
			return true
		}
	}
	if index >= 0 && int(index) < len(t.Partitions) {
		if m := t.Partitions[index].AsyncMaster; m != nil && *m != s.cfg.NodeID {
			return true
		}
	}
	return false
}

// masterFencedNow is masterFenced on the topic as the view holds it now.
func (s *Server) masterFencedNow(t metastore.Topic, partition int32) bool {
	if s.leaseValid == nil || !s.asyncMode(t) {
		return false
	}
	cur, ok := s.catalog.TopicByID(t.ID)
	if !ok {
		return true
	}
	return s.masterFenced(cur, partition)
}

// asyncRecorder is what the async loop needs from the catalog beyond
// Catalog.
type asyncRecorder interface {
	SetAsyncMaster(ctx context.Context, topic string, partition, master int32) error
	ClaimAsyncMaster(ctx context.Context, topic string, partition, master, broker int32, claim metastore.AsyncClaim) error
	PromoteAsyncMaster(ctx context.Context, topic string, partition, master, broker int32) error
	HandOverAsyncMaster(ctx context.Context, topic string, partition, master int32, inc uint64, to int32) error
}

// asyncClaimWait is how long a claimant waits for the other live write
// replicas' claims before the best recorded one is promoted.
const asyncClaimWait = 2 * time.Second

// masterSilence is how long a write learner must have heard nothing from
// its master, over and above the master's registration lapsing, before it
// claims the master's place: one broker session (the lease).
func (s *Server) masterSilence() time.Duration {
	return time.Duration(s.cfg.BrokerSessionTimeoutMs) * time.Millisecond
}

// asyncMode reports whether t's partitions run as async master/replica.
func (s *Server) asyncMode(t metastore.Topic) bool {
	return s.replicaOptions(t).Mode == partition.ModeAsync
}

// takeoverOf converts the metastore's record of a promotion.
func takeoverOf(c metastore.AsyncClaim) partition.Takeover {
	return partition.Takeover{Term: c.Term, Index: c.Index, Offset: c.Offset}
}

// promotedElsewhere says whether p's record names another broker as its
// master after a promotion (a takeover point is recorded), so that a
// replica here whose configuration names another sole voter must follow it
// from that point. The takeover point stays recorded after the master
// changes by other means (a reassignment: the new voters elect a leader in
// raft's configuration, which records itself once their sole voter), so
// the record is acted on only while it names a write replica of the
// partition and no reassignment is in progress: in a move, and between its
// end and the new leader's record, the replicas' configuration comes from
// the log, and forcing it back to a master that left (or is leaving) from
// a stale takeover point demoted the new leader and left the partition
// without one.
func (s *Server) promotedElsewhere(p metastore.Partition) bool {
	return p.AsyncMaster != nil && p.AsyncTakeover != nil && *p.AsyncMaster != s.cfg.NodeID &&
		p.Target == nil && slices.Contains(p.Voters, *p.AsyncMaster)
}

// asyncFollowTarget returns the master p's replica here must follow from
// the recorded takeover, if its configuration names another sole voter.
func (s *Server) asyncFollowTarget(p metastore.Partition, m partition.Members) (int32, bool) {
	if !s.promotedElsewhere(p) {
		return 0, false
	}
	if len(m.Voters) != 1 || int32(m.Voters[0]) == *p.AsyncMaster {
		return 0, false
	}
	return *p.AsyncMaster, true
}

// RunAsyncFailover runs the duties above until ctx ends: at every catalog
// change and each interval.
func (s *Server) RunAsyncFailover(ctx context.Context, every time.Duration) {
	rec, ok := s.catalog.(asyncRecorder)
	if s.cfg.ReplicaListen == "" || !ok {
		return // a single node: no other replica to promote
	}
	w, _ := s.catalog.(interface{ Changed() <-chan struct{} })
	t := time.NewTicker(every)
	defer t.Stop()
	var mu sync.Mutex
	claimedAt := map[partition.Key]time.Time{}
	for {
		var changed <-chan struct{}
		if w != nil {
			changed = w.Changed()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
		}
		alive := map[int32]bool{}
		for _, b := range s.catalog.Brokers() {
			alive[b.ID] = true
		}
		for _, tp := range s.catalog.Topics() {
			if !s.asyncMode(tp) && !hasAsyncRecord(tp) {
				continue
			}
			for i, p := range tp.Partitions {
				k := partition.Key{TopicID: tp.ID, Index: int32(i)}
				r, ok := s.raft.Get(k)
				if !ok || r.Failed() != nil {
					continue
				}
				mu.Lock()
				at := claimedAt[k]
				mu.Unlock()
				if now := s.asyncStep(ctx, rec, tp, p, r, alive, at); !now.IsZero() {
					mu.Lock()
					claimedAt[k] = now
					mu.Unlock()
				}
			}
		}
	}
}

func hasAsyncRecord(t metastore.Topic) bool {
	for _, p := range t.Partitions {
		if p.AsyncMaster != nil {
			return true
		}
	}
	return false
}

// asyncStep does one step of the duties for partition p, whose replica
// here is r. claimedAt is when this broker claimed p's master's place (zero
// if it has not); it returns the time of a claim it records now.
func (s *Server) asyncStep(ctx context.Context, rec asyncRecorder, tp metastore.Topic, p metastore.Partition, r partition.Replica, alive map[int32]bool, claimedAt time.Time) time.Time {
	self := s.cfg.NodeID
	k := r.Key()
	lg := s.log.With().Str("topic", tp.Name).Int32("partition", p.ID).Logger()
	m := r.Members()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if p.AsyncMaster != nil && *p.AsyncMaster == self && p.AsyncTakeover != nil && p.Target == nil &&
		len(m.Voters) == 1 && int32(m.Voters[0]) != self && r.Term() <= p.AsyncTakeover.Term {
		// Promoted in the metastore, not here yet (a crash between): the
		// replica is still a learner of the master it replaces, in a term
		// no later than the takeover's. A master recorded otherwise keeps
		// the last promotion's takeover point in the record, which must
		// not be taken for its own: promoted from it again, a master that
		// went on writing (in later terms, as promoted masters do) or one
		// in a reassignment's configuration cut its log back to it.
		if err := s.raft.Promote(k, takeoverOf(*p.AsyncTakeover)); err != nil {
			lg.Warn().Err(err).Msg("async failover: promoting this replica")
		}
		return time.Time{}
	}
	if master, ok := s.asyncFollowTarget(p, m); ok {
		iv, il := p.Initial()
		if _, cut, err := s.raft.Follow(tp.Name, k, members(metastore.Partition{Voters: iv, Learners: il}), s.replicaOptions(tp), partition.NodeID(master), takeoverOf(*p.AsyncTakeover)); err != nil {
			lg.Warn().Err(err).Int32("master", master).Msg("async failover: following the new master")
		} else {
			lg.Info().Int32("master", master).Int64("records_cut", cut).Msg("async failover: following the new master")
		}
		return time.Time{}
	}
	if !s.asyncMode(tp) || r.IsLeader() || !slices.Contains(p.Voters, self) || len(m.Voters) != 1 {
		return time.Time{}
	}
	master := int32(m.Voters[0])
	if p.AsyncHandover != nil && *p.AsyncHandover == self && p.AsyncMaster != nil && *p.AsyncMaster == master {
		// The master handed its place to this replica, which holds its
		// whole log: claim and take it now, without waiting for a lease.
		c := r.Claim(uint64(max(p.LeaderEpoch, 0)))
		claim := metastore.AsyncClaim{Term: c.Term, Index: c.Index, Offset: c.Offset}
		if err := rec.ClaimAsyncMaster(ctx, tp.Name, p.ID, master, self, claim); err != nil {
			lg.Warn().Err(err).Int32("master", master).Msg("async handover: claiming the master's place")
			return time.Time{}
		}
		if err := rec.PromoteAsyncMaster(ctx, tp.Name, p.ID, master, self); err != nil {
			lg.Warn().Err(err).Int32("master", master).Msg("async handover: recording the promotion")
			return time.Time{}
		}
		if err := s.raft.Promote(k, takeoverOf(claim)); err != nil {
			lg.Warn().Err(err).Msg("async handover: promoting this replica")
			return time.Time{}
		}
		lg.Info().Int32("old_master", master).Uint64("index", claim.Index).Int64("offset", claim.Offset).
			Msg("async handover: promoted to master; the old master handed its whole log over")
		return time.Time{}
	}
	if master == self || p.AsyncMaster == nil || *p.AsyncMaster != master || alive[master] {
		return time.Time{}
	}
	if quiet := time.Since(r.HeardFrom(partition.NodeID(master))); quiet < s.masterSilence() {
		// Its registration lapsed, but its raft messages still come: it
		// is alive (slow, or cut off from the metastore only), and its
		// log holds what it acknowledged before its lease lapsed, which
		// this replica may not hold yet. A master that is merely slow is
		// never replaced: neither claim nor promote while it is heard.
		return time.Time{}
	}
	claim, claimed := p.AsyncClaims[self]
	if !claimed && !slices.Contains(p.InSync(), self) {
		// Out of the ISR the master last reported (down or behind then):
		// only a replica in it may take over (the metastore refuses the
		// claim too). The partition waits for its master, or for a
		// replica in sync, as Kafka's clean election does.
		return time.Time{}
	}
	if !claimed {
		c := r.Claim(uint64(max(p.LeaderEpoch, 0)))
		claim = metastore.AsyncClaim{Term: c.Term, Index: c.Index, Offset: c.Offset}
		if err := rec.ClaimAsyncMaster(ctx, tp.Name, p.ID, master, self, claim); err != nil {
			lg.Warn().Err(err).Int32("master", master).Msg("async failover: claiming the lapsed master's place")
			return time.Time{}
		}
		lg.Info().Int32("master", master).Uint64("index", claim.Index).Int64("offset", claim.Offset).Msg("async failover: the master's lease lapsed; claimed its place")
		return time.Now()
	}
	all := true
	for _, v := range p.Voters {
		if v != master && alive[v] {
			if _, ok := p.AsyncClaims[v]; !ok {
				all = false
			}
		}
	}
	if !all && (claimedAt.IsZero() || time.Since(claimedAt) < asyncClaimWait) {
		return time.Time{}
	}
	if p.BestAsyncClaim() != self {
		return time.Time{}
	}
	if err := rec.PromoteAsyncMaster(ctx, tp.Name, p.ID, master, self); err != nil {
		lg.Warn().Err(err).Int32("master", master).Msg("async failover: recording the promotion")
		return time.Time{}
	}
	if err := s.raft.Promote(k, takeoverOf(claim)); err != nil {
		lg.Warn().Err(err).Msg("async failover: promoting this replica")
		return time.Time{}
	}
	lg.Warn().Int32("old_master", master).Uint64("index", claim.Index).Int64("offset", claim.Offset).
		Msg("async failover: promoted to master; what the old master wrote after this offset is lost")
	return time.Time{}
}

// HandOffAsyncMasters is the async part of a controlled shutdown: for every
// partition this broker is the async master of, it stops acknowledging
// writes (producers get NOT_LEADER_OR_FOLLOWER and retry at the leader
// Metadata names), waits, up to wait, until a live write replica holds its
// whole log, closes its own replica (so it can never campaign again as the
// group's sole voter) and records the handover; the replica promotes
// itself (asyncStep). A partition it cannot hand over in time stays
// fenced, and fails over as for a crash once the lease is released. It
// returns how many it handed over and how many it could not. Call it after
// marking the broker as shutting down.
func (s *Server) HandOffAsyncMasters(ctx context.Context, wait time.Duration) (handed, failed int) {
	rec, ok := s.catalog.(asyncRecorder)
	if s.cfg.ReplicaListen == "" || !ok || s.leaseIncarnation == nil {
		return 0, 0
	}
	self := s.cfg.NodeID
	type job struct {
		tp metastore.Topic
		p  metastore.Partition
		r  partition.Replica
	}
	var jobs []job
	for _, tp := range s.catalog.Topics() {
		if !s.asyncMode(tp) {
			continue
		}
		for _, p := range tp.Partitions {
			if p.AsyncMaster == nil || *p.AsyncMaster != self {
				continue
			}
			k := partition.Key{TopicID: tp.ID, Index: p.ID}
			r, ok := s.raft.Get(k)
			if !ok || r.Failed() != nil || !r.IsLeader() {
				continue
			}
			if m := r.Members(); len(m.Voters) != 1 || int32(m.Voters[0]) != self {
				continue
			}
			s.handingOver.Store(k, struct{}{})
			jobs = append(jobs, job{tp, p, r})
		}
	}
	deadline := time.Now().Add(wait)
	for _, j := range jobs {
		lg := s.log.With().Str("topic", j.tp.Name).Int32("partition", j.p.ID).Logger()
		to := s.handoverTarget(ctx, j.p, j.r, deadline)
		if to < 0 {
			lg.Warn().Msg("async handover: no write replica caught up in time; the partition fails over when the lease is released")
			failed++
			continue
		}
		k := j.r.Key()
		if err := s.raft.Remove(k, false); err != nil {
			lg.Warn().Err(err).Msg("async handover: closing this replica")
			failed++
			continue
		}
		if err := rec.HandOverAsyncMaster(ctx, j.tp.Name, j.p.ID, self, s.leaseIncarnation(), to); err != nil {
			lg.Warn().Err(err).Int32("to", to).Msg("async handover: recording it")
			failed++
			continue
		}
		lg.Info().Int32("to", to).Msg("async handover: handed the master's place over")
		handed++
	}
	return handed, failed
}

// handoverTarget waits until a live, not shutting down write replica of p
// holds r's whole log and returns it; -1 at the deadline.
func (s *Server) handoverTarget(ctx context.Context, p metastore.Partition, r partition.Replica, deadline time.Time) int32 {
	for {
		live := map[int32]bool{}
		for _, b := range s.catalog.Brokers() {
			live[b.ID] = !b.ShuttingDown
		}
		lags := r.MemberLags()
		for _, v := range p.Voters {
			if v == s.cfg.NodeID || !live[v] {
				continue
			}
			if l, ok := lags[partition.NodeID(v)]; ok && l.Entries == 0 {
				return v
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return -1
		}
		time.Sleep(20 * time.Millisecond)
	}
}
