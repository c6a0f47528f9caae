package coordinator

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metastore"
)

// The share-group offsets admin (KIP-932: DescribeShareGroupOffsets,
// AlterShareGroupOffsets, DeleteShareGroupOffsets). A share group's
// "offset" on a partition is its share-partition start offset; altering
// it starts the partition afresh there (nothing in flight, no delivery
// counts), deleting it leaves the partition uninitialized, so the next
// fetch starts it at share.auto.offset.reset. Both need a group without
// members, as Kafka.

// ShareOffset is one share-partition's start offset and how many records
// past it are already done (acknowledged or archived), which the share
// lag leaves out.
type ShareOffset struct {
	Start int64
	Done  int64
}

// shareAdminGroup returns the locked share group name; the caller unlocks
// g.mu. mode lookupCreate makes an empty group of another type a share
// group (AlterShareGroupOffsets creates the group, as Kafka).
func (c *Coordinator) shareAdminGroup(ctx context.Context, name string, mode int) (*group, int16) {
	g, code := c.getGroup(ctx, name, mode)
	if code != 0 {
		return nil, code
	}
	g.mu.Lock()
	switch {
	case g.dead:
		code = kerr.NotCoordinator.Code
	case g.typ != typeShare && (mode != lookupCreate || !g.isEmptyLocked()):
		code = kerr.GroupIDNotFound.Code
	default:
		if g.typ != typeShare {
			g.becomeShareLocked()
			g.persistLocked()
		}
		if code = g.sg.loadLocked(ctx); code == 0 {
			return g, 0
		}
	}
	g.mu.Unlock()
	return nil, code
}

// ShareGroupOffsets returns the start offset of every partition the share
// group has state for. The code is the group's: GROUP_ID_NOT_FOUND for a
// group that does not exist or is not a share group, NOT_COORDINATOR
// when another broker holds it.
func (c *Coordinator) ShareGroupOffsets(ctx context.Context, group string) (map[ShareKey]ShareOffset, int16) {
	g, code := c.shareAdminGroup(ctx, group, lookupExisting)
	if code != 0 {
		return nil, code
	}
	defer g.mu.Unlock()
	out := map[ShareKey]ShareOffset{}
	for k, sp := range g.sg.parts {
		if !sp.initialized() {
			continue
		}
		so := ShareOffset{Start: sp.start}
		for i := range sp.recs {
			if st := sp.recs[i].state; st == recAcknowledged || st == recArchived {
				so.Done++
			}
		}
		out[ShareKey{k.id, k.p}] = so
	}
	return out, 0
}

// ShareAlterOffsets sets the start offset of each partition in offsets
// (offsets >= 0, partitions the caller checked exist) and drops its
// in-flight state. The group is created if it does not exist; one of
// another type is GROUP_ID_NOT_FOUND, one with members NON_EMPTY_GROUP.
func (c *Coordinator) ShareAlterOffsets(ctx context.Context, group string, offsets map[ShareKey]int64) int16 {
	g, code := c.shareAdminGroup(ctx, group, lookupCreate)
	if code != 0 {
		return code
	}
	defer g.mu.Unlock()
	if len(g.sg.members) > 0 {
		return kerr.NonEmptyGroup.Code
	}
	for k, off := range offsets {
		sp := newSharePartition()
		sp.initialize(off)
		g.sg.parts[tp{k.Topic, k.Partition}] = sp
	}
	return g.sg.saveLocked(ctx)
}

// ShareDeleteOffsets drops the share group's state of every partition of
// topics, and reports the topics that had any (the others are
// UNKNOWN_TOPIC_OR_PARTITION to Kafka: no offset information to delete).
// The group code: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR.
func (c *Coordinator) ShareDeleteOffsets(ctx context.Context, group string, topics []metastore.TopicID) (map[metastore.TopicID]bool, int16) {
	g, code := c.shareAdminGroup(ctx, group, lookupExisting)
	if code != 0 {
		return nil, code
	}
	defer g.mu.Unlock()
	if len(g.sg.members) > 0 {
		return nil, kerr.NonEmptyGroup.Code
	}
	want := map[metastore.TopicID]bool{}
	for _, id := range topics {
		want[id] = true
	}
	had := map[metastore.TopicID]bool{}
	for k, sp := range g.sg.parts {
		if !want[k.id] || !sp.initialized() {
			continue
		}
		// Stored uninitialized (start -1) rather than removed: the
		// next fetch initializes it as a partition never read.
		sp.initialize(-1)
		had[k.id] = true
	}
	if code := g.sg.saveLocked(ctx); code != 0 {
		return nil, code
	}
	return had, 0
}
