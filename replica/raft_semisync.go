package replica

import (
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// DefaultSemiSyncTimeout is semi.sync.timeout.ms's default, MySQL's
// rpl_semi_sync_source_timeout (10 s): well inside a Kafka producer's
// request.timeout.ms (30 s), so a producer whose replicas are gone gets
// its answer from the fallback rather than a timeout and a retry.
const DefaultSemiSyncTimeout = 10 * time.Second

// semiSyncState is a leader's semi-sync state for its term (raftMu).
type semiSyncState struct {
	// fallback: a write waited SemiSyncTimeout for the replicas; acks=all
	// is answered on the leader's durable write until they catch up.
	fallback bool
	// since: when the fallback began.
	since time.Time
	// on: the last round ran in ModeSemiSync.
	on bool
	// mark is the index durable on the leader at markAt, during a
	// fallback: voters that hold it a tick later trail by less than a tick.
	mark   uint64
	markAt time.Time
}

// SemiSyncFallbacks counts the fallbacks from semi-sync to asynchronous
// answers of every partition this host led (sluice_semi_sync_fallbacks_total).
func (h *Host) SemiSyncFallbacks() int64 { return h.semiFallbacks.Load() }

// SemiSyncFallback reports whether this replica leads a semi-sync
// partition that has fallen back to asynchronous answers.
func (r *Replica) SemiSyncFallback() bool { return r.fellBack.Load() }

func semiSyncWait(o *ReplicaOptions) int {
	if o.SemiSyncWaitReplicas <= 0 {
		return 1
	}
	return o.SemiSyncWaitReplicas
}

func semiSyncTimeout(o *ReplicaOptions) time.Duration {
	if o.SemiSyncTimeout <= 0 {
		return DefaultSemiSyncTimeout
	}
	return o.SemiSyncTimeout
}

// semiSyncLocked answers, on the leader of a ModeSemiSync partition, the
// acks=all writes its replicas now hold, with MySQL's semi-synchronous
// replication rules:
//
//   - a write durable here is answered once SemiSyncWaitReplicas other
//     voters acknowledged it (raft progress Match: a follower acknowledges
//     an append only once it is durable there). Only voters count: only a
//     write broker can become leader, so only its copy keeps the write
//     through a failover; a read broker's copy (a learner's) would be
//     truncated by a new leader that lacks it. The count is capped at the
//     other voters there are: a one-voter partition answers on the
//     leader's durable write.
//   - a write that waited SemiSyncTimeout since the leader's durable write
//     turns the partition to the fallback: it and every write after it
//     are answered on the leader's durable write (ModeAsync), the
//     fallback is counted (Host.SemiSyncFallbacks) and logged with the
//     partition and the offsets.
//   - the partition returns to semi-sync once SemiSyncWaitReplicas voters
//     caught up, which is logged too: they hold every entry durable on the
//     leader, or, under a steady stream of writes that a follower always
//     trails by the entries in flight, every entry that was durable on the
//     leader a tick (TickInterval) or more before.
//
// It runs at the end of every round of the group, which every tick
// (TickInterval) brings, so a timeout is noticed within a tick. A new
// term starts semi-synchronous.
func (r *Replica) semiSyncLocked(now time.Time) {
	opts := r.opts.Load()
	if opts.Mode != ModeSemiSync {
		if r.semi.on || r.semi.fallback {
			r.leaveSemiSyncLocked(opts.Mode)
		}
		return
	}
	r.semi.on = true
	if len(r.inflight) == 0 && !r.semi.fallback {
		return
	}
	self := raftID(r.host.cfg.Node)
	var matches []uint64
	r.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if id != self && typ != raft.ProgressTypeLearner {
			matches = append(matches, pr.Match)
		}
	})
	need := min(semiSyncWait(opts), len(matches))
	// held: the last index need voters all hold.
	held := ^uint64(0)
	if need > 0 {
		slices.Sort(matches)
		held = matches[len(matches)-need]
	}
	if r.semi.fallback {
		r.st.mu.Lock()
		durable := r.st.durIdx
		r.st.mu.Unlock()
		tick := r.host.cfg.TickInterval
		caughtUp := held >= durable || (!r.semi.markAt.IsZero() && now.Sub(r.semi.markAt) >= tick && held >= r.semi.mark)
		if !caughtUp && (r.semi.markAt.IsZero() || now.Sub(r.semi.markAt) >= tick) {
			r.semi.mark, r.semi.markAt = durable, now
		}
		if caughtUp {
			r.lg.Info().Dur("fallen_back_for", now.Sub(r.semi.since)).Int("replicas", need).
				Msg("semi-sync resumed: replicas caught up with the leader")
			r.semi = semiSyncState{on: true}
			r.fellBack.Store(false)
		}
	}
	timeout := semiSyncTimeout(opts)
	keep := r.inflight[:0]
	for _, p := range r.inflight {
		if p.acks != AcksAll || p.commit || !p.persisted {
			keep = append(keep, p)
			continue
		}
		if p.index <= held || r.semi.fallback {
			p.complete(p.res, nil)
			continue
		}
		if waited := now.Sub(p.persistedAt); waited >= timeout {
			r.semi = semiSyncState{on: true, fallback: true, since: now}
			r.fellBack.Store(true)
			r.host.semiFallbacks.Add(1)
			r.lg.Warn().Int64("base_offset", p.res.BaseOffset).Int64("last_offset", p.res.LastOffset).
				Int("wait_replicas", need).Dur("waited", waited).Dur("timeout", timeout).
				Msg("semi-sync fell back to async: replicas did not acknowledge within semi.sync.timeout.ms; acks=all is answered on the leader's write until they catch up")
			p.complete(p.res, nil)
			continue
		}
		keep = append(keep, p)
	}
	clear(r.inflight[len(keep):])
	r.inflight = keep
}

// leaveSemiSyncLocked answers, after the topic left ModeSemiSync, the
// acks=all writes semi-sync held that the new mode would have answered:
// committed ones (completeCommittedLocked left them to semi-sync and
// answers only entries committed later) and, for ModeAsync on its group's
// sole voter, every write durable here.
func (r *Replica) leaveSemiSyncLocked(mode Mode) {
	if mode == ModeAsync && !r.asyncAnswersOnWriteLocked() {
		mode = ModeRaft // answered at commit (persistedLocked)
	}
	if r.semi.fallback {
		r.lg.Info().Stringer("mode", mode).Msg("semi-sync fallback ended: replication.mode changed")
	}
	r.semi = semiSyncState{}
	r.fellBack.Store(false)
	keep := r.inflight[:0]
	for _, p := range r.inflight {
		if p.acks == AcksAll && !p.commit && p.persisted && (p.index <= r.applied || mode == ModeAsync) {
			p.complete(p.res, nil)
			continue
		}
		keep = append(keep, p)
	}
	clear(r.inflight[len(keep):])
	r.inflight = keep
}
