package metastore

import (
	"context"
	"fmt"
	"slices"
	"sort"
)

// Decommissioning: an operator takes a broker out of service without
// losing a replica's worth of redundancy on the way.
//
// decommission_broker marks the broker (meta/"decommissioned", a sorted
// JSON list of ids, which survives the broker's unregistration and
// registration) and, in the same apply, moves its replicas:
//
//   - every partition whose voters (or a reassignment's target) include it
//     gets a target without it and with the write broker, not
//     decommissioned and not already a member, that holds the fewest
//     voter replicas (ties by id), so the replicas spread over the others.
//     The partitions' raft leaders then carry the moves out as they carry
//     out AlterPartitionReassignments (server/reassign.go): the newcomer
//     copies the log as a learner, the voters change, and a leader that
//     is leaving hands over first. No acknowledged record is lost, since
//     the group keeps a quorum of the old voters until the change.
//   - every partition it is a learner of drops it, and the freed slot goes
//     to a read broker that is not decommissioned (placement.go's
//     fillLearners), as when a read broker is gone for good.
//
// Placement leaves decommissioned brokers out from then on: new topics
// and partitions, learner slots (a decommissioned read broker that
// registers again gets none), and voters an operator names
// (AlterPartitionReassignments refuses them). The command fails, changing
// nothing, when a voter replica has nowhere to go (fewer other write
// brokers than the replication factor) and for the last write or read
// broker in service. Progress is what the view shows:
// the partitions that still name the broker (DecommissionProgress); once
// none does, the broker can be stopped.
//
// recommission_broker removes the mark: a read broker takes free learner
// slots at once (every partition, with read.replicas -1); voters do not
// move back by themselves, as Kafka moves no replica back to a broker
// that returns: new topics use the broker, and reassignments can.

const (
	opDecommissionBroker op = "decommission_broker"
	opRecommissionBroker op = "recommission_broker"
)

var keyDecommissioned = []byte("decommissioned")

// decommissioned reads the set of decommissioned broker ids.
func (a *applier) decommissioned() []int32 {
	var ids []int32
	if v := a.tx.Bucket(bucketMeta).Get(keyDecommissioned); v != nil {
		mustUnmarshal(v, &ids)
	}
	return ids
}

func (a *applier) putDecommissioned(ids []int32) {
	slices.Sort(ids)
	m := a.tx.Bucket(bucketMeta)
	if len(ids) == 0 {
		a.del(m, keyDecommissioned)
	} else {
		a.put(m, keyDecommissioned, mustJSON(ids))
	}
	a.events = append(a.events, event{Rev: a.index, Kind: "decom", Decommissioned: slices.Clone(ids)})
}

// placeable returns the registered brokers placement may pick: those not
// decommissioned.
func (a *applier) placeable() []Broker {
	out := a.brokers()
	if d := a.decommissioned(); len(d) > 0 {
		out = slices.DeleteFunc(out, func(b Broker) bool { return slices.Contains(d, b.ID) })
	}
	return out
}

func (a *applier) decommission(id int32) error {
	if id < 0 {
		return fmt.Errorf("%w: broker id %d", ErrInvalidRequest, id)
	}
	known := false
	if _, ok := a.broker(id); ok {
		known = true
	}
	dec := a.decommissioned()
	if !slices.Contains(dec, id) {
		dec = append(dec, id)
	}
	var writers []int32
	for _, b := range a.brokers() {
		if (b.Role == RoleWrite || b.Role == RoleCombined || b.Role == "") && !slices.Contains(dec, b.ID) {
			writers = append(writers, b.ID)
		}
	}
	sort.Slice(writers, func(i, j int) bool { return writers[i] < writers[j] })
	topics := a.topics()
	// load counts each write broker's voter replicas (a target's when a
	// move is in progress: where the replicas will be).
	load := map[int32]int{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			set := p.Voters
			if p.Target != nil {
				set = p.Target
			}
			for _, v := range set {
				load[v]++
			}
			if slices.Contains(p.Voters, id) || slices.Contains(p.Target, id) || slices.Contains(p.Learners, id) {
				known = true
			}
		}
	}
	if !known {
		return fmt.Errorf("%w: broker %d is neither registered nor assigned any replica", ErrUnknownBroker, id)
	}
	readers := readBrokers(a.placeable())
	readers = slices.DeleteFunc(readers, func(b Broker) bool { return b.ID == id })
	// The last broker of a kind stays: without a write broker new
	// partitions get no replica, without a read broker the read view has
	// no replica and no group coordinator. (A message: see below.)
	if b, ok := a.broker(id); ok {
		if (b.Role == RoleWrite || b.Role == RoleCombined || b.Role == "") && len(writers) == 0 {
			return fmt.Errorf("broker %d is the last write broker in service: new partitions would have no replica", id)
		}
		if (b.Role == RoleRead || b.Role == RoleCombined) && len(readers) == 0 {
			return fmt.Errorf("broker %d is the last read broker in service: the read view would have no replica and no group coordinator", id)
		}
	}
	// Compute every change first: a command that fails must leave no
	// trace, and bbolt has no savepoints.
	var changed []*Topic
	for _, t := range topics {
		want := a.readReplicas(t.Configs)
		tChanged := false
		for i := range t.Partitions {
			p := &t.Partitions[i]
			base := p.Voters
			if p.Target != nil {
				base = p.Target
			}
			moveVoter := slices.Contains(base, id)
			dropLearner := slices.Contains(p.Learners, id)
			if !moveVoter && !dropLearner {
				continue
			}
			keepInitial(p)
			if moveVoter {
				to := int32(-1)
				for _, w := range writers {
					if slices.Contains(base, w) || slices.Contains(p.Voters, w) {
						continue
					}
					if to < 0 || load[w] < load[to] {
						to = w
					}
				}
				if to < 0 {
					// A message rather than a sentinel: the code of
					// a sentinel travels without the details.
					return fmt.Errorf("no write broker can take broker %d's replica of %s-%d (replicas %v; write brokers not decommissioned: %v)",
						id, t.Name, p.ID, base, writers)
				}
				load[to]++
				target := slices.DeleteFunc(slices.Clone(base), func(x int32) bool { return x == id })
				p.Target = append(target, to)
			}
			if dropLearner {
				p.Learners = slices.DeleteFunc(p.Learners, func(x int32) bool { return x == id })
				fillLearners(t.ID, p, readers, want)
			}
			tChanged = true
		}
		if tChanged {
			changed = append(changed, t)
		}
	}
	for _, t := range changed {
		a.putTopic(t)
	}
	a.putDecommissioned(dec)
	return nil
}

func (a *applier) recommission(id int32) error {
	dec := a.decommissioned()
	if !slices.Contains(dec, id) {
		return fmt.Errorf("%w: broker %d is not decommissioned", ErrInvalidRequest, id)
	}
	a.putDecommissioned(slices.DeleteFunc(dec, func(x int32) bool { return x == id }))
	if b, ok := a.broker(id); ok {
		a.addLearner(b)
	}
	return nil
}

// ---- client ----

// DecommissionBroker marks broker id decommissioned and starts moving its
// replicas to the other brokers (see above). Calling it again for a
// decommissioned broker moves what still names it. An error that names
// the partition when a voter replica has nowhere to go, or that says the
// broker is the last write (or read) broker in service; ErrUnknownBroker
// for an id that is neither registered nor assigned anything.
func (c *Client) DecommissionBroker(ctx context.Context, id int32) error {
	_, err := c.write(ctx, command{Op: opDecommissionBroker, BrokerID: id})
	return err
}

// RecommissionBroker removes the mark of DecommissionBroker.
func (c *Client) RecommissionBroker(ctx context.Context, id int32) error {
	_, err := c.write(ctx, command{Op: opRecommissionBroker, BrokerID: id})
	return err
}

// Decommissioned returns the decommissioned broker ids, sorted, as the
// cache knows them.
func (c *Client) Decommissioned() []int32 { return c.v.Decommissioned() }

// Remaining is one partition that still names a broker being
// decommissioned: as a voter, as a reassignment's target, or as a learner.
type Remaining struct {
	Topic     string
	Partition int32
	Voter     bool // a voter, or in the target of a move in progress
	Learner   bool
}

// DecommissionProgress returns the partitions that still name broker id,
// by topic and partition, from the cache: empty once its replicas have
// all moved.
func (c *Client) DecommissionProgress(id int32) []Remaining {
	var out []Remaining
	for _, t := range c.v.Topics() {
		for _, p := range t.Partitions {
			v := slices.Contains(p.Voters, id) || slices.Contains(p.Target, id)
			l := slices.Contains(p.Learners, id)
			if v || l {
				out = append(out, Remaining{Topic: t.Name, Partition: p.ID, Voter: v, Learner: l})
			}
		}
	}
	return out
}
