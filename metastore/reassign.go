package metastore

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Partition placement after creation: reassignments of voters and learners
// that follow the read brokers.
//
// The metastore records only the desired placement; the partition's raft
// leader (server/reassign.go) is the one that can change the raft
// configuration, and it records a reassignment complete once its group
// applied it (finish_reassignment). Learner placement is decided here, in
// apply and on the metastore leader, rather than by each partition's raft
// leader watching the broker list: apply sees every partition and every
// broker in one transaction and is deterministic, so every placement
// decision is made exactly once and every broker's cache shows the same
// desired state, whereas thousands of partition leaders deciding by
// themselves from caches at different revisions could disagree.
//
//   - A read broker that registers becomes a learner of the partitions
//     that have fewer learners than their topic's read.replicas (every
//     partition it is not a member of when that is -1, the default);
//     placement.go picks which when several brokers could fill a slot.
//   - A read broker that is no longer registered (unregistered at
//     shutdown, or its lease lapsed) keeps its learner slots for
//     LearnerGrace, so a restart does not throw its data away and copy
//     the whole history again; after that the metastore leader proposes
//     remove_learner, which apply performs only if the broker is still
//     not registered, and which hands the freed slots to registered read
//     brokers that do not hold the partition yet. A broker that registers
//     again later is added back where slots are free and copies the log
//     again.
//   - A change of read.replicas (the topic's, or the cluster-wide default
//     for topics without their own) grows or shrinks the learners of
//     every partition of the topics it applies to.

const (
	opAlterReassignment  op = "alter_reassignment"
	opFinishReassignment op = "finish_reassignment"
	opRemoveLearner      op = "remove_learner"
)

// alterReassignment sets (c.Target non-nil) or cancels (c.Cancel) the
// reassignment of one partition. Voters must be distinct registered write
// brokers. A target equal to the voters as a set, with nothing in
// progress, only reorders them (the preferred leader) and completes at once,
// as Kafka completes a reassignment that moves nothing.
func (a *applier) alterReassignment(c *command) error {
	t, ok := a.topicByName(c.Name)
	if !ok || (c.TopicID != nil && *c.TopicID != t.ID) {
		return ErrUnknownTopic
	}
	if c.Partition < 0 || int(c.Partition) >= len(t.Partitions) {
		return ErrUnknownTopic
	}
	p := &t.Partitions[c.Partition]
	keepInitial(p)
	shared := isSharedTopic(t)
	if c.Cancel {
		if !p.Reassigning() {
			return ErrNoReassignment
		}
		if shared {
			// A shared partition has no raft group part way anywhere
			// (a target left by an earlier version that never
			// finished it): cancelling just drops it.
			p.Target = nil
			a.putTopic(t)
			return nil
		}
		// The raft group may already be part way (or all the way) to
		// the target: it is moved back to the original voters, and the
		// target stays set until that is done, so no broker deletes a
		// replica the group still counts on.
		p.Target = slices.Clone(p.Voters)
		a.putTopic(t)
		return nil
	}
	if err := a.checkVoters(c.Target); err != nil {
		return err
	}
	if c.FixedRF && len(c.Target) != len(p.Voters) {
		return fmt.Errorf("%w: the replication factor would change from %d to %d but AllowReplicationFactorChange is false",
			ErrInvalidReplicationFactor, len(p.Voters), len(c.Target))
	}
	if shared {
		// A shared partition's data is in shared storage, not on its
		// replicas: its voters only say which write brokers may claim
		// it (claimSharedLeader), so the move completes here, at once.
		// A leader that is no longer a voter is deposed: the first new
		// voter is named leader in the next epoch, so the old leader's
		// commits are fenced from now on and it steps down when it sees
		// the epoch, and the new one claims the partition (the claim
		// moves the epoch once more).
		p.Voters, p.Target = slices.Clone(c.Target), nil
		if !slices.Contains(p.Voters, p.Leader) {
			p.Leader, p.LeaderEpoch, p.ISR = p.Voters[0], p.LeaderEpoch+1, nil
		}
	} else if p.Target == nil && sameSet(c.Target, p.Voters) {
		p.Voters = slices.Clone(c.Target)
	} else {
		p.Target = slices.Clone(c.Target)
	}
	a.putTopic(t)
	return nil
}

// checkVoters validates an operator's replica list as Kafka's
// validateManualPartitionAssignment does, plus Sluice's rule that voters
// are write brokers.
func (a *applier) checkVoters(ids []int32) error {
	if len(ids) == 0 {
		return fmt.Errorf("%w: the replica list is empty", ErrInvalidReplicaAssignment)
	}
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return fmt.Errorf("%w: broker %d is listed more than once", ErrInvalidReplicaAssignment, id)
		}
		b, ok := a.broker(id)
		if !ok {
			return fmt.Errorf("%w: broker %d is not registered", ErrInvalidReplicaAssignment, id)
		}
		if slices.Contains(a.decommissioned(), id) {
			return fmt.Errorf("%w: broker %d is decommissioned (sluice broker recommission undoes that)", ErrInvalidReplicaAssignment, id)
		}
		if b.Role == RoleRead {
			return fmt.Errorf("%w: broker %d is a read broker; replicas are write brokers (read brokers follow as learners)", ErrInvalidReplicaAssignment, id)
		}
	}
	return nil
}

// finishReassignment records that the partition's raft group applied the
// voter set c.Target. It succeeds only while that is still the target (an
// operator may have changed or cancelled it meanwhile).
func (a *applier) finishReassignment(c *command) error {
	t, ok := a.topicByName(c.Name)
	if !ok || c.TopicID == nil || *c.TopicID != t.ID || c.Partition < 0 || int(c.Partition) >= len(t.Partitions) {
		return ErrUnknownTopic
	}
	p := &t.Partitions[c.Partition]
	if p.Target == nil || !sameSet(p.Target, c.Target) {
		return fmt.Errorf("%w: the partition's target is no longer %v", ErrInvalidRequest, c.Target)
	}
	keepInitial(p)
	p.Voters, p.Target = p.Target, nil
	// A broker that became a voter is no longer a learner of it, and a
	// read-and-write broker that stopped being a voter goes on reading.
	p.Learners = slices.DeleteFunc(p.Learners, func(id int32) bool { return slices.Contains(p.Voters, id) })
	if p.AsyncMaster != nil && !slices.Contains(p.Voters, *p.AsyncMaster) {
		// The async master moved off the partition: the record no longer
		// names a replica (the leader among the new voters records itself
		// once it is their sole voter), and claims to its place are moot.
		// The takeover point stays: a replica that still holds an older
		// master's log follows the next recorded master from it.
		p.AsyncMaster, p.AsyncClaims, p.AsyncHandover = nil, nil, nil
	}
	// A learner that became a voter (a combined broker) frees its slot.
	a.fillTopic(t, readBrokers(a.placeable()))
	a.putTopic(t)
	return nil
}

// addLearner fills the learner slots a newly registered read broker can
// take: every partition with fewer learners than its read.replicas gets
// registered read brokers (usually the newcomer, the only one not yet
// placed) until it has enough.
func (a *applier) addLearner(b Broker) {
	if b.Role != RoleRead && b.Role != RoleCombined {
		return
	}
	readers := readBrokers(a.placeable())
	for _, t := range a.topics() {
		if a.fillTopic(t, readers) {
			a.putTopic(t)
		}
	}
}

// removeLearner takes an unregistered broker out of every partition's
// learners and gives each freed slot to a registered read broker that
// does not hold the partition. It refuses if the broker registered again
// meanwhile.
func (a *applier) removeLearner(id int32) error {
	if _, ok := a.broker(id); ok {
		return fmt.Errorf("%w: broker %d is registered", ErrInvalidRequest, id)
	}
	readers := readBrokers(a.placeable())
	for _, t := range a.topics() {
		changed := false
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if slices.Contains(p.Learners, id) {
				keepInitial(p)
				p.Learners = slices.DeleteFunc(p.Learners, func(x int32) bool { return x == id })
				changed = true
			}
		}
		if changed {
			a.fillTopic(t, readers)
			a.putTopic(t)
		}
	}
	return nil
}

// keepInitial records a partition's initial raft configuration before its
// placement first changes. A partition stored before InitVoters existed
// had never changed, so its current placement is its initial one.
func keepInitial(p *Partition) {
	if p.InitVoters == nil {
		p.InitVoters = slices.Clone(p.Voters)
		p.InitLearners = slices.Clone(p.Learners)
	}
}

// markDeparted records in p.Departed the brokers of p's initial
// configuration that are neither voters nor learners of it now: whatever
// removed them (a completed reassignment, a retired or surplus learner, a
// decommission), their replicas are deleted, so they can never again open
// the partition as founders (Partition.Founder). A broker only in Target
// counts as departed too: it is being added back. putTopic calls it for
// every partition it stores, so no placement change can miss it.
func markDeparted(p *Partition) {
	if p.InitVoters == nil {
		return // never changed
	}
	for _, ids := range [][]int32{p.InitVoters, p.InitLearners} {
		for _, id := range ids {
			if !slices.Contains(p.Voters, id) && !slices.Contains(p.Learners, id) && !slices.Contains(p.Departed, id) {
				p.Departed = append(p.Departed, id)
			}
		}
	}
}

func (a *applier) topics() []*Topic {
	var out []*Topic
	_ = a.tx.Bucket(bucketTopics).ForEach(func(_, v []byte) error {
		var t Topic
		mustUnmarshal(v, &t)
		out = append(out, &t)
		return nil
	})
	return out
}

// retireLearners runs on the metastore leader with the lease loop: it
// proposes remove_learner for learners whose broker has been unregistered
// for longer than LearnerGrace, measured on this node's monotonic clock
// from when it first saw the absence (a new leader starts the grace over,
// which only delays removal).
func (n *Node) retireLearners(now time.Time, leading bool) {
	n.leases.mu.Lock()
	defer n.leases.mu.Unlock()
	if !leading {
		n.leases.absent = nil
		return
	}
	if n.leases.absent == nil {
		n.leases.absent = map[int32]time.Time{}
	}
	registered := map[int32]bool{}
	for _, b := range n.view.Brokers() {
		registered[b.ID] = true
	}
	gone := map[int32]bool{}
	for _, t := range n.view.Topics() {
		for _, p := range t.Partitions {
			for _, l := range p.Learners {
				if !registered[l] {
					gone[l] = true
				}
			}
		}
	}
	for id := range n.leases.absent {
		if !gone[id] {
			delete(n.leases.absent, id)
		}
	}
	for id := range gone {
		since, ok := n.leases.absent[id]
		if !ok {
			n.leases.absent[id] = now
			continue
		}
		if now.Sub(since) < n.cfg.LearnerGrace {
			continue
		}
		n.leases.absent[id] = now // propose again after another grace if it is lost
		n.lg.Info().Int32("broker", id).Dur("grace", n.cfg.LearnerGrace).Msg("read broker gone for good: removing its learner replicas")
		go func(id int32) {
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
			defer cancel()
			_, _ = n.propose(ctx, command{Op: opRemoveLearner, BrokerID: id})
		}(id)
	}
}

// ---- client ----

// AlterReassignment starts (target non-nil) or cancels (target nil) the
// reassignment of one partition to the voter set target.
// ErrInvalidReplicaAssignment for a bad list, ErrNoReassignment when
// cancelling a partition that is not being reassigned, ErrUnknownTopic for
// an unknown topic or partition. fixedRF refuses a target of another size
// (ErrInvalidReplicationFactor), Kafka's AllowReplicationFactorChange=false.
func (c *Client) AlterReassignment(ctx context.Context, topic string, partition int32, target []int32, fixedRF bool) error {
	cmd := command{Op: opAlterReassignment, Name: topic, Partition: partition, Target: target, Cancel: target == nil, FixedRF: fixedRF}
	_, err := c.write(ctx, cmd)
	return err
}

// FinishReassignment records that the partition's raft group applied the
// voter set target (called by the partition's raft leader).
func (c *Client) FinishReassignment(ctx context.Context, topic TopicID, name string, partition int32, target []int32) error {
	_, err := c.write(ctx, command{Op: opFinishReassignment, TopicID: &topic, Name: name, Partition: partition, Target: target})
	return err
}
