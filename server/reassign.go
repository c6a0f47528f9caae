package server

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// Placement changes after creation. The metastore records the desired
// placement of each partition (voters, a reassignment's Target, learners
// that follow the read brokers: metastore/reassign.go); only a partition's
// raft leader can change its raft configuration, so each broker runs this
// loop over the partitions it leads and moves their configuration towards
// the desired one, in steps that keep the partition writable:
//
//  1. Voters to be added join as learners first (with any learner change),
//     so copying the log to them never holds up commits.
//  2. Once each has every committed entry, the voters change in one raft
//     configuration change (joint consensus when more than one voter
//     changes; raft leaves the joint configuration by itself).
//  3. A leader that is not in the target first hands leadership to a
//     caught-up voter that stays; if none stays (every voter is
//     replaced), it makes the change itself and raft makes it step down
//     once it is out (StepDownOnRemoval), and the new voters elect a leader.
//
// Whichever broker leads once the applied, settled configuration equals
// the target records the reassignment complete (FinishReassignment), after
// which the brokers no longer assigned close and delete their replicas
// (refreshPartitions). A broker deletes a replica only while no
// reassignment of it is in progress, so a cancelled or replaced target can
// never make a broker drop a replica the raft group still counts on.

// reassigner is what the loop needs from the catalog beyond Catalog.
type reassigner interface {
	FinishReassignment(ctx context.Context, topic metastore.TopicID, name string, partition int32, target []int32) error
	AlterReassignment(ctx context.Context, topic string, partition int32, target []int32, fixedRF bool) error
}

// RunReassignments moves the raft configuration of the partitions this
// broker leads to their desired placement until ctx ends: at every catalog
// change, and each interval to take the next step of a move in progress.
func (s *Server) RunReassignments(ctx context.Context, every time.Duration) {
	ra, ok := s.catalog.(reassigner)
	if !ok {
		return
	}
	w, _ := s.catalog.(interface{ Changed() <-chan struct{} })
	var mu sync.Mutex
	busy := map[partition.Key]bool{}
	// Steps still running when ctx ends (they end with it) are waited
	// for, so none outlives the server.
	var steps sync.WaitGroup
	defer steps.Wait()
	t := time.NewTicker(every)
	defer t.Stop()
	// A scan costs a copy of the catalog and a look at every partition
	// led here, so ticks scan only while some partition had work left
	// (and every few seconds regardless); catalog changes (which include
	// leadership changes, published to the metastore) always scan.
	const rescan = 5 * time.Second
	pending, last := true, time.Time{}
	for {
		var changed <-chan struct{}
		if w != nil {
			changed = w.Changed()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !pending && time.Since(last) < rescan {
				continue
			}
		case <-changed:
		}
		last, pending = time.Now(), false
		topics := map[metastore.TopicID]metastore.Topic{}
		for _, tp := range s.catalog.Topics() {
			topics[tp.ID] = tp
		}
		for _, r := range s.raft.Replicas() {
			if !r.IsLeader() {
				continue
			}
			k := r.Key()
			tp, ok := topics[k.TopicID]
			if !ok || int(k.Index) >= len(tp.Partitions) {
				continue
			}
			// The common case, nothing to do, costs no goroutine and
			// no raft lock.
			if p := tp.Partitions[k.Index]; p.Target == nil && sameMembers(r.Members(), s.desiredFor(tp, p)) && !s.asyncRecordDue(tp, p, r.Term()) {
				continue
			}
			pending = true
			mu.Lock()
			if busy[k] {
				mu.Unlock()
				continue
			}
			busy[k] = true
			mu.Unlock()
			// A step may wait for a raft configuration change to
			// apply; partitions move independently of each other.
			p := tp.Partitions[k.Index]
			steps.Go(func() {
				defer func() {
					mu.Lock()
					delete(busy, k)
					mu.Unlock()
				}()
				s.reconcileMembers(ctx, ra, r, tp, p)
			})
		}
	}
}

// desiredFor is the raft configuration this leader moves p to:
// desiredMembers, except that a partition in async mode with no
// reassignment in progress has this leader (its master) as sole voter and
// every other replica as a learner (async_master.go).
func (s *Server) desiredFor(tp metastore.Topic, p metastore.Partition) partition.Members {
	want := desiredMembers(p)
	self := partition.NodeID(s.cfg.NodeID)
	if p.Target != nil || !s.asyncMode(tp) || !slices.Contains(want.Voters, self) {
		return want
	}
	m := partition.Members{Voters: []partition.NodeID{self}}
	for _, n := range append(want.Voters, want.Learners...) {
		if n != self {
			m.Learners = append(m.Learners, n)
		}
	}
	return m
}

// asyncRecordDue says whether this leader, in raft term term, must record
// in the metastore that it is p's async master (async mode) or that p has
// none (raft and semi-sync), once its configuration is the desired one.
// A leader in a term no later than the recorded promotion's takeover,
// while the record names another master, is from before that promotion
// (an old master that missed it: paused past its lease, say): it follows
// the new master (async_master.go) and must not record itself over it. A
// promoted master leads in a later term, and so does a leader elected in
// raft's configuration since (a reassignment).
func (s *Server) asyncRecordDue(tp metastore.Topic, p metastore.Partition, term uint64) bool {
	if p.Target != nil {
		return false
	}
	if s.asyncMode(tp) {
		if p.AsyncMaster != nil && *p.AsyncMaster != s.cfg.NodeID && p.AsyncTakeover != nil && term <= p.AsyncTakeover.Term {
			return false
		}
		return p.AsyncMaster == nil || *p.AsyncMaster != s.cfg.NodeID
	}
	return p.AsyncMaster != nil
}

// desiredMembers is the raft configuration the metastore asks for.
func desiredMembers(p metastore.Partition) partition.Members {
	voters := p.Voters
	if p.Target != nil {
		voters = p.Target
	}
	var m partition.Members
	for _, v := range voters {
		m.Voters = append(m.Voters, partition.NodeID(v))
	}
	for _, l := range p.Learners {
		if !slices.Contains(voters, l) {
			m.Learners = append(m.Learners, partition.NodeID(l))
		}
	}
	return m
}

func sameNodes(a, b []partition.NodeID) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func sameMembers(a, b partition.Members) bool {
	return sameNodes(a.Voters, b.Voters) && sameNodes(a.Learners, b.Learners)
}

// reconcileMembers takes one step towards p's desired configuration on r,
// which this broker leads.
func (s *Server) reconcileMembers(ctx context.Context, ra reassigner, r partition.Replica, tp metastore.Topic, p metastore.Partition) {
	cur, settled := r.MembershipSettled()
	if !settled {
		return
	}
	want := s.desiredFor(tp, p)
	lg := s.log.With().Str("topic", tp.Name).Int32("partition", p.ID).Logger()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	self := partition.NodeID(s.cfg.NodeID)
	if sameMembers(cur, want) {
		if rec, ok := s.catalog.(asyncRecorder); ok && s.asyncRecordDue(tp, p, r.Term()) {
			master := int32(-1)
			if s.asyncMode(tp) {
				master = s.cfg.NodeID
			}
			if err := rec.SetAsyncMaster(ctx, tp.Name, p.ID, master); err != nil {
				lg.Warn().Err(err).Msg("recording the async master")
			} else {
				lg.Info().Int32("master", master).Msg("async master recorded (-1: none)")
			}
		}
		if p.Target != nil {
			if err := ra.FinishReassignment(ctx, tp.ID, tp.Name, p.ID, p.Target); err != nil {
				lg.Warn().Err(err).Msg("recording a completed reassignment")
			} else {
				lg.Info().Ints32("voters", p.Target).Msg("reassignment complete")
			}
		}
		return
	}
	if p.Target == nil && !s.asyncMode(tp) && len(cur.Voters) == 1 && cur.Voters[0] == self && len(want.Voters) > 1 {
		// Leaving async: the write replicas become voters again once a
		// majority of them has the master's log.
		if err := r.LeaveAsync(ctx, want.Voters); err != nil {
			lg.Debug().Err(err).Msg("leaving the async configuration")
			return
		}
		lg.Info().Interface("members", want).Msg("raft configuration changed: async master/replica left")
		return
	}
	var newcomers []partition.NodeID
	for _, v := range want.Voters {
		if !slices.Contains(cur.Voters, v) {
			newcomers = append(newcomers, v)
		}
	}
	// Step 1: newcomers and the learner changes, voters unchanged.
	stage := partition.Members{Voters: cur.Voters}
	for _, l := range append(append([]partition.NodeID(nil), want.Learners...), newcomers...) {
		if !slices.Contains(cur.Voters, l) && !slices.Contains(stage.Learners, l) {
			stage.Learners = append(stage.Learners, l)
		}
	}
	if !sameMembers(cur, stage) {
		if err := r.ChangeMembership(ctx, stage); err != nil {
			lg.Debug().Err(err).Msg("adding learners")
			return
		}
		lg.Info().Interface("members", stage).Msg("raft configuration changed")
		return
	}
	// Step 2: wait for the newcomers to catch up.
	for _, n := range newcomers {
		if !r.CaughtUp(n) {
			return
		}
	}
	// Step 3: a leader that leaves hands over to a voter that stays.
	if !slices.Contains(want.Voters, self) {
		stays := false
		for _, v := range want.Voters {
			if !slices.Contains(cur.Voters, v) {
				continue
			}
			stays = true
			if r.CaughtUp(v) {
				if err := r.TransferLeadership(v); err != nil {
					lg.Debug().Err(err).Msg("handing leadership to a voter that stays")
				} else {
					lg.Info().Int32("to", int32(v)).Msg("leader leaves the partition: handing leadership over")
				}
				return
			}
		}
		if stays {
			return // wait until one of them has caught up
		}
	}
	if err := r.ChangeMembership(ctx, want); err != nil {
		lg.Debug().Err(err).Msg("changing voters")
		return
	}
	lg.Info().Interface("members", want).Msg("raft configuration changed")
}
