package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metastore"
)

// Offset expiry (offsets.retention.minutes), as Kafka's group coordinator
// does it (ClassicGroup.offsetExpirationCondition and
// OffsetMetadataManager.cleanupExpiredOffsets): an offset expires once
// retention has passed since its base time, unless the group subscribes to
// its topic:
//
//   - a classic group with a protocol type that is Empty: base is when it
//     became Empty (or, if that is unknown, the offset's commit time);
//   - a classic "consumer" group that is Stable: base is the commit time,
//     for topics no member subscribes to;
//   - a classic group without a protocol type (offsets committed by a
//     standalone consumer or the admin client): base is the commit time;
//   - a KIP-848 group: base is the commit time, for topics no member
//     subscribes to (all of them once it has no member).
//
// An Empty classic group left without offsets is deleted. Expired offsets
// leave the metastore, so OffsetFetch answers -1 for them.

// ExpireOffsets runs one expiry pass over the groups this broker
// coordinates, or would (rendezvous placement), loading those not in
// memory. It returns how many offsets expired.
func (c *Coordinator) ExpireOffsets(ctx context.Context) (int, error) {
	if c.cfg.NoGroups || c.cfg.OffsetsRetention <= 0 || !c.leaseValid() {
		return 0, nil
	}
	names, err := c.store.ListGroups(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, name := range names {
		c.mu.Lock()
		g, loaded := c.mu.groups[name], c.mu.owned[name]
		c.mu.Unlock()
		if g == nil || !loaded {
			if owner, err := c.placement(name); err != nil || owner != c.cfg.BrokerID {
				continue
			}
			var code int16
			if g, code = c.getGroup(ctx, name, lookupExisting); code != 0 {
				continue
			}
		}
		n, err := c.expireGroup(ctx, g)
		if err != nil {
			if ctx.Err() != nil {
				return total, ctx.Err()
			}
			c.log.Warn().Err(err).Str("group", name).Msg("expiring offsets")
			continue
		}
		total += n
	}
	return total, nil
}

// RunOffsetExpiry runs ExpireOffsets every interval
// (offsets.retention.check.interval.ms) until ctx ends.
func (c *Coordinator) RunOffsetExpiry(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := c.ExpireOffsets(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Warn().Err(err).Msg("offset expiry pass")
		}
		if n > 0 {
			c.log.Info().Int("offsets", n).Msg("expired committed offsets (offsets.retention.minutes)")
		}
	}
}

// expireGroup expires g's offsets that are due. The group lock is held
// across the metastore calls (a background pass, rare), and commitSem
// around them so no offset write checked before lands after; Coordinator.mu
// too only when the group is to be deleted (as DeleteGroups holds it).
func (c *Coordinator) expireGroup(ctx context.Context, g *group) (int, error) {
	if !g.lockCommits(ctx) {
		return 0, ctx.Err()
	}
	defer g.unlockCommits()
	g.mu.Lock()
	n, whole, err := c.expireLocked(ctx, g, false)
	g.mu.Unlock()
	if err != nil || !whole {
		return n, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	n, _, err = c.expireLocked(ctx, g, true)
	return n, err
}

// expireLocked expires g's due offsets (g.mu held). When that would leave
// an Empty classic group without offsets it deletes the group if
// mayDelete (Coordinator.mu held too), and otherwise does nothing and
// reports whole.
func (c *Coordinator) expireLocked(ctx context.Context, g *group, mayDelete bool) (n int, whole bool, err error) {
	if g.dead {
		return 0, false, nil
	}
	// base returns the time retention counts from for an offset, false
	// when the group keeps its offsets whatever their age.
	var base func(o metastore.OffsetCommit) time.Time
	switch {
	case g.typ == typeConsumer:
		base = func(o metastore.OffsetCommit) time.Time { return o.CommitTime }
	case g.protocolType == "":
		base = func(o metastore.OffsetCommit) time.Time { return o.CommitTime }
	case g.state == stateEmpty:
		since := g.emptySince
		base = func(o metastore.OffsetCommit) time.Time {
			if since.IsZero() {
				return o.CommitTime
			}
			return since
		}
	case g.state == stateStable && g.protocolType == "consumer":
		base = func(o metastore.OffsetCommit) time.Time { return o.CommitTime }
	default:
		return 0, false, nil
	}
	subscribed, opaque := g.subscribedTopicsLocked()
	if opaque {
		return 0, false, nil
	}
	offs, err := c.store.FetchOffsets(ctx, g.name, nil)
	if err != nil {
		return 0, false, err
	}
	now := c.clock.Now()
	var expired []metastore.TopicPartition
	for _, o := range offs {
		if subscribed[o.Topic] {
			continue
		}
		if now.Sub(base(o)) >= c.cfg.OffsetsRetention {
			expired = append(expired, o.TopicPartition)
		}
	}
	if len(expired) == 0 {
		return 0, false, nil
	}
	emptyAfter := len(expired) == len(offs) && g.typ == typeClassic && g.state == stateEmpty && g.isEmptyLocked()
	if emptyAfter && !mayDelete {
		return 0, true, nil
	}
	if emptyAfter {
		// Kafka turns an Empty group without offsets Dead and removes it.
		err = c.store.DeleteGroup(ctx, c.fence(), g.name)
	} else {
		err = c.store.DeleteOffsets(ctx, c.fence(), g.name, expired)
	}
	if err != nil {
		if errors.Is(err, metastore.ErrFenced) {
			c.fenced(g)
		}
		return 0, false, err
	}
	if emptyAfter {
		g.unloadLocked(kerr.GroupIDNotFound.Code)
		c.forget(g)
	}
	return len(expired), false, nil
}
