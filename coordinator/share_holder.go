package coordinator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metastore"
)

// Share-partition holding (KIP-932). As in Kafka, the state table of a
// share group's partition (share_partition.go) lives on the broker that
// leads the partition for share consumers: in a cluster the read broker
// the `read` view names as the partition's leader, on a single node the
// node. Membership stays with the group's coordinator (share.go); the
// holder keeps the tables and the share sessions of the members that fetch
// from it.
//
// A broker holds a (group, partition) once it claimed it in the metastore
// (ClaimSharePartition: owner and incarnation, fenced by its lease, as a
// group's claim) and loaded the stored table; every state write carries
// that claim (SaveClaimedShareState), so a broker that lost it (its lease
// lapsed and another broker claimed the pair, or the share-group offsets
// admin rewrote the state) has its write refused and drops its copy. The
// claim is taken on the first ShareFetch or ShareAcknowledge of the pair
// the server routes here, and released when the server sees the view name
// another leader (ShareDrop). Locks are not stored: records in flight when
// the pair moves are delivered again, with their delivery count.

type sharePair struct {
	group string
	key   tp
}

// heldShare is one claimed (group, partition): its table and the fence its
// writes carry. gone marks an entry dropped from the holder's map; a
// caller that finds it gone looks the pair up again.
type heldShare struct {
	mu    sync.Mutex
	sp    *sharePartition
	fence metastore.Fence
	gone  bool
}

// shareHolder is the coordinator's share-partition tables and share
// sessions. mu is a leaf lock: nothing else is locked while it is held.
type shareHolder struct {
	mu       sync.Mutex
	held     map[sharePair]*heldShare
	sessions map[[2]string]*shareSession
}

func (h *shareHolder) init() {
	h.held = map[sharePair]*heldShare{}
	h.sessions = map[[2]string]*shareSession{}
}

// ShareHeldKey names one (group, partition) this broker holds.
type ShareHeldKey struct {
	Group string
	Key   ShareKey
}

// ShareHeld lists the share-partitions this broker holds.
func (c *Coordinator) ShareHeld() []ShareHeldKey {
	c.share.mu.Lock()
	defer c.share.mu.Unlock()
	out := make([]ShareHeldKey, 0, len(c.share.held))
	for p := range c.share.held {
		out = append(out, ShareHeldKey{p.group, ShareKey{p.key.id, p.key.p}})
	}
	return out
}

// unhold removes h from the map if it is still the pair's entry and marks
// it gone; the caller holds h.mu.
func (c *Coordinator) unhold(p sharePair, h *heldShare) {
	h.gone, h.sp = true, nil
	c.share.mu.Lock()
	if c.share.held[p] == h {
		delete(c.share.held, p)
	}
	c.share.mu.Unlock()
}

// ShareDrop lets go of a (group, partition): the table is dropped and the
// claim released in the metastore, so the broker the view names now can
// claim it. Members' records in flight are delivered again there.
func (c *Coordinator) ShareDrop(ctx context.Context, group string, k ShareKey) {
	p := sharePair{group, tp{k.Topic, k.Partition}}
	c.share.mu.Lock()
	h := c.share.held[p]
	c.share.mu.Unlock()
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.gone {
		h.mu.Unlock()
		return
	}
	f, loaded := h.fence, h.sp != nil
	c.unhold(p, h)
	h.mu.Unlock()
	if !loaded {
		return
	}
	c.log.Info().Str("group", group).Int32("partition", k.Partition).Msg("share-partition released: the read view names another leader")
	if err := c.store.ReleaseSharePartition(ctx, group, k.Topic, k.Partition, f); err != nil {
		// The claim lapses with this broker's lease anyway, and a
		// claim by the new leader waits for that.
		c.log.Warn().Err(err).Str("group", group).Msg("releasing a share-partition claim")
	}
}

// ShareVerify reads the stored claim of every pair this broker holds and
// drops the tables whose claim is no longer this broker's: the share-group
// offsets admin rewrote the state, or the group was deleted, through
// another broker. A pair whose table changes finds out at its next write
// anyway; this catches one that is only read from. One metastore read
// per pair held.
func (c *Coordinator) ShareVerify(ctx context.Context) {
	c.share.mu.Lock()
	held := make([]pairHeld, 0, len(c.share.held))
	for p, h := range c.share.held {
		held = append(held, pairHeld{p, h})
	}
	c.share.mu.Unlock()
	for _, ph := range held {
		ph.h.mu.Lock()
		f, loaded := ph.h.fence, ph.h.sp != nil && !ph.h.gone
		ph.h.mu.Unlock()
		if !loaded {
			continue
		}
		cur, ok, err := c.store.SharePartitionHolder(ctx, ph.p.group, ph.p.key.id, ph.p.key.p)
		if err != nil || ok && cur == f {
			continue
		}
		ph.h.mu.Lock()
		if !ph.h.gone && ph.h.fence == f {
			c.log.Info().Str("group", ph.p.group).Int32("partition", ph.p.key.p).Msg("share-partition claim ended in the metastore; dropping the table")
			c.unhold(ph.p, ph.h)
		}
		ph.h.mu.Unlock()
	}
}

// shareDropGroup forgets every table of group without releasing claims:
// the metastore already ended them (DeleteGroup, or a state write by the
// group's coordinator).
func (c *Coordinator) shareDropGroup(group string) {
	for _, ph := range c.heldOf(group) {
		ph.h.mu.Lock()
		if !ph.h.gone {
			c.unhold(ph.p, ph.h)
		}
		ph.h.mu.Unlock()
	}
}

// shareDropAll forgets every table (this broker's lease lapsed: its
// claims with it).
func (c *Coordinator) shareDropAll() {
	c.share.mu.Lock()
	held := c.share.held
	c.share.held = map[sharePair]*heldShare{}
	c.share.mu.Unlock()
	for _, h := range held {
		h.mu.Lock()
		h.gone, h.sp = true, nil
		h.mu.Unlock()
	}
}

type pairHeld struct {
	p sharePair
	h *heldShare
}

func (c *Coordinator) heldOf(group string) []pairHeld {
	c.share.mu.Lock()
	defer c.share.mu.Unlock()
	var out []pairHeld
	for p, h := range c.share.held {
		if p.group == group {
			out = append(out, pairHeld{p, h})
		}
	}
	return out
}

// shareHold returns the locked table of (group, k), claiming the pair and
// loading its stored state on first use; the caller unlocks h.mu. A pair
// another live broker holds is NOT_LEADER_OR_FOLLOWER.
func (c *Coordinator) shareHold(ctx context.Context, group string, k ShareKey) (*heldShare, int16) {
	p := sharePair{group, tp{k.Topic, k.Partition}}
	for {
		if !c.leaseValid() {
			return nil, kerr.NotLeaderForPartition.Code
		}
		c.share.mu.Lock()
		h := c.share.held[p]
		if h == nil {
			h = &heldShare{}
			c.share.held[p] = h
		}
		c.share.mu.Unlock()
		h.mu.Lock()
		if h.gone {
			h.mu.Unlock()
			continue
		}
		if h.sp != nil {
			return h, 0
		}
		code := c.claimShare(ctx, p, h)
		if code != 0 {
			c.unhold(p, h)
			h.mu.Unlock()
			return nil, code
		}
		return h, 0
	}
}

// claimShare claims p and loads its table into h (h.mu held).
func (c *Coordinator) claimShare(ctx context.Context, p sharePair, h *heldShare) int16 {
	f := c.fence()
	owner, err := c.store.ClaimSharePartition(ctx, p.group, p.key.id, p.key.p, f)
	switch {
	case errors.Is(err, metastore.ErrFenced), errors.Is(err, metastore.ErrUnknownBroker):
		return kerr.NotLeaderForPartition.Code
	case err != nil:
		return shareStoreCode(err)
	case owner != c.cfg.BrokerID:
		return kerr.NotLeaderForPartition.Code
	}
	states, err := c.store.LoadShareStates(ctx, p.group)
	if err != nil {
		return shareStoreCode(err)
	}
	sp := newSharePartition()
	for _, st := range states {
		if st.Topic != p.key.id || st.Partition != p.key.p {
			continue
		}
		if sp, err = decodeSharePartition(st.State); err != nil {
			// A state that does not decode cannot be trusted to say
			// what was acknowledged; refuse rather than redeliver.
			c.log.Error().Err(err).Str("group", p.group).Msg("stored share-partition state does not decode")
			return kerr.UnknownServerError.Code
		}
	}
	h.sp, h.fence = sp, f
	c.log.Info().Str("group", p.group).Int32("partition", p.key.p).Int64("start", sp.start).Msg("share-partition claimed")
	return 0
}

// shareStoreCode is a partition-level code for a failed metastore call.
func shareStoreCode(err error) int16 {
	if code := storeCode(err); code != kerr.CoordinatorNotAvailable.Code && code != kerr.NotCoordinator.Code {
		return code
	}
	return kerr.NotLeaderForPartition.Code
}

// save stores h's table if it changed (h.mu held). A refused write (the
// claim is gone) drops the table: NOT_LEADER_OR_FOLLOWER, and the client
// looks the leader up again.
func (c *Coordinator) saveHeld(ctx context.Context, p sharePair, h *heldShare) int16 {
	if h.sp == nil || !h.sp.dirty {
		return 0
	}
	blob, err := h.sp.encode()
	if err != nil {
		return kerr.UnknownServerError.Code
	}
	if err := c.store.SaveClaimedShareState(ctx, h.fence, p.group, p.key.id, p.key.p, blob); err != nil {
		if errors.Is(err, metastore.ErrFenced) {
			c.log.Warn().Str("group", p.group).Int32("partition", p.key.p).Msg("share-partition write fenced: the claim moved; dropping the table")
			c.unhold(p, h)
			return kerr.NotLeaderForPartition.Code
		}
		c.log.Warn().Err(err).Str("group", p.group).Msg("saving share-partition state")
		return kerr.KafkaStorageError.Code
	}
	h.sp.dirty = false
	return 0
}

// shareReleaseMember releases the records member holds in every table of
// group this broker holds, and saves them.
func (c *Coordinator) shareReleaseMember(ctx context.Context, group, member string) int16 {
	lim := c.shareLimits(group)
	code := int16(0)
	for _, ph := range c.heldOf(group) {
		ph.h.mu.Lock()
		if ph.h.sp != nil {
			ph.h.sp.releaseMember(member, lim)
			if sc := c.saveHeld(ctx, ph.p, ph.h); sc != 0 && code == 0 {
				code = sc
			}
		}
		ph.h.mu.Unlock()
	}
	return code
}

func (c *Coordinator) shareSessionOf(group, member string) *shareSession {
	c.share.mu.Lock()
	defer c.share.mu.Unlock()
	return c.share.sessions[[2]string{group, member}]
}

// shareMemberCheck checks member against the group's membership where
// this broker holds it (ShareCheckMembers, a single node): UNKNOWN_MEMBER_ID
// for a member the group does not have and that has no share session
// here (one that left may still acknowledge on its open session),
// NOT_COORDINATOR and the like when the group is elsewhere. inGroup says
// whether the member is in the group (always, without the check: in a
// cluster the group's coordinator is another broker, and as Kafka's
// share-partition leader this one does not ask it).
func (c *Coordinator) shareMemberCheck(ctx context.Context, group, member string) (inGroup bool, code int16) {
	if group == "" || member == "" {
		return false, kerr.InvalidRequest.Code
	}
	if !c.cfg.ShareCheckMembers {
		return true, 0
	}
	g, code := c.getGroup(ctx, group, lookupExisting)
	if code == kerr.GroupIDNotFound.Code || code == kerr.InvalidGroupID.Code {
		return false, kerr.UnknownMemberID.Code
	}
	if code != 0 {
		return false, code
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.dead:
		return false, kerr.NotCoordinator.Code
	case g.typ != typeShare:
		return false, kerr.UnknownMemberID.Code
	}
	inGroup = g.sg.members[member] != nil
	if !inGroup && c.shareSessionOf(group, member) == nil {
		return false, kerr.UnknownMemberID.Code
	}
	return inGroup, 0
}

// ShareSession updates member's share session for a ShareFetch (fetch) or
// a ShareAcknowledge. epoch 0 opens a new session (ShareFetch only, and
// without acknowledgements), -1 names the session to close (the caller
// acknowledges, then calls ShareCloseSession), any other epoch must be
// the session's next. add and forget change a ShareFetch session's
// partitions; conn names the connection an opening request came on. It
// returns the partitions the session fetches and a top-level error code.
func (c *Coordinator) ShareSession(ctx context.Context, group, member string, epoch int32, fetch bool, add, forget []ShareKey, hasAcks bool, conn uint64) ([]ShareKey, int16) {
	inGroup, code := c.shareMemberCheck(ctx, group, member)
	if code != 0 {
		return nil, code
	}
	c.share.mu.Lock()
	defer c.share.mu.Unlock()
	id := [2]string{group, member}
	s := c.share.sessions[id]
	switch {
	case epoch == 0:
		if !fetch {
			return nil, kerr.InvalidShareSessionEpoch.Code
		}
		if !inGroup {
			return nil, kerr.UnknownMemberID.Code // left the group
		}
		if hasAcks {
			return nil, kerr.InvalidRequest.Code
		}
		s = &shareSession{epoch: 0, parts: tpSet{}, conn: conn}
		c.share.sessions[id] = s
	case s == nil:
		return nil, kerr.ShareSessionNotFound.Code
	case epoch == -1:
		return nil, 0
	case epoch != s.epoch:
		return nil, kerr.InvalidShareSessionEpoch.Code
	}
	s.epoch++
	if s.epoch < 0 {
		s.epoch = 1 // wraps as Kafka's nextEpoch
	}
	for _, k := range add {
		s.parts[tp{k.Topic, k.Partition}] = struct{}{}
	}
	for _, k := range forget {
		delete(s.parts, tp{k.Topic, k.Partition})
	}
	var out []ShareKey
	for _, k := range s.parts.sorted() {
		out = append(out, ShareKey{k.id, k.p})
	}
	return out, 0
}

// ShareCloseSession closes member's share session and releases the
// records it still holds.
func (c *Coordinator) ShareCloseSession(ctx context.Context, group, member string) int16 {
	if _, code := c.shareMemberCheck(ctx, group, member); code != 0 {
		return code
	}
	c.share.mu.Lock()
	delete(c.share.sessions, [2]string{group, member})
	c.share.mu.Unlock()
	return c.shareReleaseMember(ctx, group, member)
}

// ShareConnClosed is told that the client connection conn, on which
// member opened a share session, closed: as Kafka, the session ends and
// the records the member holds are released at once (available again,
// or archived at the delivery limit) instead of waiting for their locks
// to expire. The member stays in the group; a session the member opened
// since on another connection is left alone.
func (c *Coordinator) ShareConnClosed(ctx context.Context, group, member string, conn uint64) int16 {
	c.share.mu.Lock()
	id := [2]string{group, member}
	s := c.share.sessions[id]
	if s == nil || s.conn != conn {
		c.share.mu.Unlock()
		return 0
	}
	delete(c.share.sessions, id)
	c.share.mu.Unlock()
	return c.shareReleaseMember(ctx, group, member)
}

// shareMemberGone ends a member's share session here and releases its
// records (it left without a session, or its heartbeat session expired).
func (c *Coordinator) shareMemberGone(ctx context.Context, group, member string) {
	c.share.mu.Lock()
	delete(c.share.sessions, [2]string{group, member})
	c.share.mu.Unlock()
	c.shareReleaseMember(ctx, group, member)
}

// ShareAcknowledge applies member's acknowledgements of one partition and
// saves the partition's state before returning. Batches apply in order; the
// first that fails stops the rest and its code is the partition's.
func (c *Coordinator) ShareAcknowledge(ctx context.Context, group, member string, k ShareKey, batches []AckBatch, renew bool) int16 {
	if _, code := c.shareMemberCheck(ctx, group, member); code != 0 {
		return code
	}
	h, code := c.shareHold(ctx, group, k)
	if code != 0 {
		return code
	}
	defer h.mu.Unlock()
	sp := h.sp
	if !sp.initialized() {
		return kerr.InvalidRecordState.Code
	}
	lim := c.shareLimits(group)
	now := c.clock.Now()
	sp.expire(now, lim)
	for _, b := range batches {
		if code = sp.acknowledge(member, b, renew, now, lim); code != 0 {
			break
		}
	}
	if sc := c.saveHeld(ctx, sharePair{group, tp{k.Topic, k.Partition}}, h); sc != 0 && code == 0 {
		code = sc
	}
	return code
}

// ShareFetchOffset prepares a fetch of one partition: it initializes a
// partition the group never read (share.auto.offset.reset: latest, the
// default, starts at the high watermark hwm; earliest at the log start),
// moves the start past records the log no longer has, releases expired
// locks, and returns the offset to read from. ok is false when nothing
// below hwm can be acquired; wake is then the earliest lock deadline (zero
// if none), when records may come free.
func (c *Coordinator) ShareFetchOffset(ctx context.Context, group, member string, k ShareKey, logStart, hwm int64) (off int64, ok bool, wake time.Time, code int16) {
	if _, code := c.shareMemberCheck(ctx, group, member); code != 0 {
		return 0, false, time.Time{}, code
	}
	h, code := c.shareHold(ctx, group, k)
	if code != 0 {
		return 0, false, time.Time{}, code
	}
	defer h.mu.Unlock()
	sp := h.sp
	if !sp.initialized() {
		start := hwm
		if c.cfg.GroupConfig != nil {
			if v, ok := c.cfg.GroupConfig(group, "share.auto.offset.reset"); ok && v == "earliest" {
				start = logStart
			}
		}
		sp.initialize(start)
	}
	lim := c.shareLimits(group)
	sp.truncateTo(logStart)
	sp.expire(c.clock.Now(), lim)
	if code := c.saveHeld(ctx, sharePair{group, tp{k.Topic, k.Partition}}, h); code != 0 {
		return 0, false, time.Time{}, code
	}
	off, ok = sp.fetchOffset(lim)
	if off >= hwm {
		ok = false
	}
	return off, ok, sp.nextDeadline(), 0
}

// ShareAcquire locks to member the available records in [from, to), at
// most maxRecords (<= 0: no bound), and returns them. A member that left
// meanwhile acquires nothing.
func (c *Coordinator) ShareAcquire(ctx context.Context, group, member string, k ShareKey, from, to int64, maxRecords int) []AcquiredRange {
	inGroup, code := c.shareMemberCheck(ctx, group, member)
	if code != 0 || !inGroup || c.shareSessionOf(group, member) == nil {
		return nil
	}
	h, code := c.shareHold(ctx, group, k)
	if code != 0 {
		return nil
	}
	defer h.mu.Unlock()
	if !h.sp.initialized() {
		return nil
	}
	return h.sp.acquire(member, from, to, maxRecords, c.clock.Now(), c.shareLimits(group))
}
