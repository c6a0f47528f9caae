package coordinator

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupState is a classic group's state (Kafka's ClassicGroupState). A
// KIP-848 group reports its own states (consumer.go).
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	}
	return "Dead"
}

// groupType is the protocol a group runs: classic (JoinGroup/SyncGroup) or
// consumer (KIP-848). An empty group takes the type of its first member.
type groupType int8

const (
	typeClassic groupType = iota
	typeConsumer
	typeShare // KIP-932 (share.go)
)

func (t groupType) String() string {
	switch t {
	case typeConsumer:
		return "consumer"
	case typeShare:
		return "share"
	}
	return "classic"
}

// group is one consumer group. Every field below mu is guarded by it.
type group struct {
	c    *Coordinator
	name string

	mu  sync.Mutex
	typ groupType
	// commitSem (one slot) orders the group's offset writes (OffsetCommit,
	// OffsetDelete, DeleteGroups, expiry): taken before mu, and held
	// across the metastore write after mu is released, so a slow write
	// never holds mu, which heartbeats and the session timers need.
	commitSem chan struct{}
	// dead: the group was deleted or unloaded; a request holding this
	// pointer must not touch it (it re-fetches from the coordinator).
	dead bool

	// Classic protocol.
	state        groupState
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	pending      map[string]Timer  // v4+ joiners that must rejoin with their id
	static       map[string]string // instance id -> member id
	nJoining     int               // members waiting in JoinGroup
	pendingSync  map[string]bool   // members that were answered Join but not yet synced
	tRebalance   Timer
	// initialDelay: the first rebalance of the group, from Empty, is
	// waiting out group.initial.rebalance.delay.ms; newMemberAdded: a
	// member joined during that wait (Kafka's names).
	initialDelay, newMemberAdded bool
	tPendingSync                 Timer
	// emptySince: when the group last became Empty (Kafka's
	// currentStateTimestamp), zero if unknown; offset expiry counts from
	// it (expire.go).
	emptySince time.Time

	// KIP-848 protocol.
	cg *consumerGroup
	// KIP-932 share group.
	sg *shareGroup
}

// member is a classic member.
type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol
	assignment       []byte

	joinVersion int16
	// joinWait / syncWait are set while the member's JoinGroup or
	// SyncGroup waits for the rebalance; each has room for the one
	// answer, so replying never blocks under the group lock.
	joinWait chan *kmsg.JoinGroupResponse
	syncWait chan *kmsg.SyncGroupResponse
	tSession Timer
}

func newGroup(c *Coordinator, name string) *group {
	return &group{
		c:       c,
		name:    name,
		members: make(map[string]*member),
		pending: make(map[string]Timer),
		static:  make(map[string]string),

		commitSem: make(chan struct{}, 1),
	}
}

// lockCommits takes the group's turn to write offsets (commitSem), waiting
// at most until ctx ends; false then.
func (g *group) lockCommits(ctx context.Context) bool {
	select {
	case g.commitSem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (g *group) unlockCommits() { <-g.commitSem }

// afterLocked runs fn under the group lock after d, unless the group died
// first. fn must itself check that what it expires still applies: a timer
// that already fired cannot be retracted by Stop.
func (g *group) afterLocked(d time.Duration, fn func()) Timer {
	return g.c.clock.AfterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.dead {
			return
		}
		fn()
	})
}

// unloadLocked stops the group's timers and answers waiting requests with
// code; the group object is then dead.
func (g *group) unloadLocked(code int16) {
	g.dead = true
	stop(g.tRebalance)
	stop(g.tPendingSync)
	for _, t := range g.pending {
		stop(t)
	}
	for _, m := range g.members {
		stop(m.tSession)
		if m.joinWait != nil {
			r := kmsg.NewPtrJoinGroupResponse()
			r.ErrorCode = code
			m.joinWait <- r
			m.joinWait = nil
		}
		if m.syncWait != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.ErrorCode = code
			m.syncWait <- r
			m.syncWait = nil
		}
	}
	if g.cg != nil {
		g.cg.stopTimers()
	}
	if g.sg != nil {
		g.sg.stopTimers()
	}
}

func stop(t Timer) {
	if t != nil {
		t.Stop()
	}
}

// isEmptyLocked reports whether the group has no members of either kind.
func (g *group) isEmptyLocked() bool {
	if g.typ == typeConsumer {
		return g.cg == nil || len(g.cg.members) == 0
	}
	if g.typ == typeShare {
		return g.sg == nil || len(g.sg.members) == 0
	}
	return len(g.members) == 0 && len(g.pending) == 0
}

// ---- JoinGroup ----

// JoinGroup (key 11). It blocks until the rebalance the join takes part in
// completes, the member must rejoin with its new id (v4+), or ctx ends.
func (c *Coordinator) JoinGroup(ctx context.Context, cl Client, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	fail := func(code int16) *kmsg.JoinGroupResponse {
		resp.ErrorCode = code
		return resp
	}
	sessionTimeout := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if sessionTimeout < c.cfg.MinSessionTimeout || sessionTimeout > c.cfg.MaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	g, code := c.getGroup(ctx, req.Group, lookupCreate)
	if code != 0 {
		return fail(code)
	}
	g.mu.Lock()
	if g.dead {
		g.mu.Unlock()
		return fail(kerr.NotCoordinator.Code)
	}
	wait := g.joinLocked(cl, req, resp)
	g.mu.Unlock()
	if wait == nil {
		return resp
	}
	select {
	case r := <-wait:
		r.Version = req.Version // answers made elsewhere encode at this request's version
		return r
	case <-ctx.Done():
		return fail(kerr.NotCoordinator.Code)
	}
}

func (g *group) joinLocked(cl Client, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) <-chan *kmsg.JoinGroupResponse {
	if g.typ == typeShare {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return nil
	}
	if g.typ == typeConsumer {
		if !g.isEmptyLocked() {
			// Classic members joining a KIP-848 group (the online
			// upgrade path) are not supported.
			resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
			return nil
		}
		g.becomeClassicLocked()
	}
	if !g.protocolsMatchLocked(req.ProtocolType, req.Protocols) {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return nil
	}
	if req.MemberID == "" {
		if req.InstanceID != nil {
			if old, ok := g.static[*req.InstanceID]; ok {
				return g.replaceStaticLocked(old, cl, req, resp)
			}
		}
		if len(g.members)+len(g.pending) >= g.c.cfg.MaxGroupSize {
			resp.ErrorCode = kerr.GroupMaxSizeReached.Code
			return nil
		}
		prefix := cl.ID
		if req.InstanceID != nil {
			prefix = *req.InstanceID
		}
		m := g.newMember(newMemberID(prefix), cl, req)
		// KIP-394: only a dynamic member joining with v4+ must come
		// back with its id; older versions join at once (kafka-go's
		// v1/v2 loop forever otherwise).
		if req.Version >= 4 && req.InstanceID == nil {
			resp.MemberID = m.id
			resp.ErrorCode = kerr.MemberIDRequired.Code
			id := m.id
			g.pending[id] = g.afterLocked(m.sessionTimeout, func() { delete(g.pending, id) })
			return nil
		}
		if req.InstanceID != nil {
			g.static[*req.InstanceID] = m.id
		}
		return g.addMemberAndRebalanceLocked(m, req)
	}

	if req.InstanceID != nil {
		if code := g.checkInstanceLocked(req.InstanceID, req.MemberID); code != 0 {
			resp.ErrorCode = code
			return nil
		}
	}
	if t, ok := g.pending[req.MemberID]; ok {
		stop(t)
		delete(g.pending, req.MemberID)
		m := g.newMember(req.MemberID, cl, req)
		return g.addMemberAndRebalanceLocked(m, req)
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return nil
	}
	switch g.state {
	case statePreparingRebalance:
		return g.updateMemberAndRebalanceLocked(m, cl, req)
	case stateCompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			// The member lost the join answer: give it again.
			g.fillJoinLocked(m.id, resp)
			g.touchLocked(m)
			return nil
		}
		return g.updateMemberAndRebalanceLocked(m, cl, req)
	case stateStable:
		if g.leader != m.id && m.sameProtocols(req.Protocols) {
			g.fillJoinLocked(m.id, resp)
			g.touchLocked(m)
			return nil
		}
		return g.updateMemberAndRebalanceLocked(m, cl, req)
	}
	resp.ErrorCode = kerr.UnknownMemberID.Code
	return nil
}

func (g *group) newMember(id string, cl Client, req *kmsg.JoinGroupRequest) *member {
	m := &member{
		id:             id,
		instanceID:     req.InstanceID,
		clientID:       cl.ID,
		clientHost:     cl.Host,
		sessionTimeout: time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		protocolType:   req.ProtocolType,
		protocols:      ownProtocols(req.Protocols),
		joinVersion:    req.Version,
	}
	m.rebalanceTimeout = m.sessionTimeout
	if req.Version >= 1 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	return m
}

// replaceStaticLocked handles a known instance id joining with no member id
// (KIP-345): the new member takes the old one's place, and the old one, if
// it is still around, is fenced (FENCED_INSTANCE_ID).
func (g *group) replaceStaticLocked(oldID string, cl Client, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) <-chan *kmsg.JoinGroupResponse {
	old, ok := g.members[oldID]
	m := g.newMember(newMemberID(*req.InstanceID), cl, req)
	if !ok {
		delete(g.static, *req.InstanceID)
		g.static[*req.InstanceID] = m.id
		return g.addMemberAndRebalanceLocked(m, req)
	}
	m.assignment = old.assignment
	if old.joinWait != nil {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version = old.joinVersion
		r.Generation = -1
		r.ErrorCode = kerr.FencedInstanceID.Code
		old.joinWait <- r
		old.joinWait = nil
		g.nJoining--
	}
	if old.syncWait != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.ErrorCode = kerr.FencedInstanceID.Code
		old.syncWait <- r
		old.syncWait = nil
	}
	stop(old.tSession)
	delete(g.members, oldID)
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[m.id] = true
	}
	g.members[m.id] = m
	g.static[*req.InstanceID] = m.id
	if g.leader == oldID {
		g.leader = m.id
	}
	if g.state == stateStable && old.sameProtocols(req.Protocols) {
		// Same subscription: no rebalance; the leader is told to keep
		// the current assignment (KIP-814 SkipAssignment).
		g.fillJoinLocked(m.id, resp)
		if g.leader == m.id && req.Version >= 9 {
			resp.SkipAssignment = true
		}
		g.touchLocked(m)
		g.persistLocked()
		return nil
	}
	wait := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWait = wait
	g.nJoining++
	g.rebalanceLocked()
	return wait
}

func (g *group) addMemberAndRebalanceLocked(m *member, req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	g.members[m.id] = m
	wait := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWait = wait
	g.nJoining++
	stop(m.tSession) // a member waiting in join does not expire
	g.rebalanceLocked()
	return wait // rebalanceLocked may already have answered into it
}

func (g *group) updateMemberAndRebalanceLocked(m *member, cl Client, req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	m.protocols = ownProtocols(req.Protocols)
	m.protocolType = req.ProtocolType
	m.joinVersion = req.Version
	m.clientID, m.clientHost = cl.ID, cl.Host
	m.sessionTimeout = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	m.rebalanceTimeout = m.sessionTimeout
	if req.Version >= 1 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if m.joinWait != nil {
		// A second join from the same member (a retry on a new
		// connection) replaces the first, which is answered now.
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version = m.joinVersion
		r.Generation = -1
		r.ErrorCode = kerr.RebalanceInProgress.Code
		m.joinWait <- r
	} else {
		g.nJoining++
	}
	wait := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWait = wait
	stop(m.tSession)
	g.rebalanceLocked()
	return wait
}

// removeMemberLocked drops a member without starting a rebalance.
func (g *group) removeMemberLocked(m *member, code int16) {
	delete(g.members, m.id)
	delete(g.pendingSync, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	stop(m.tSession)
	if m.joinWait != nil {
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version = m.joinVersion
		r.Generation = -1
		r.ErrorCode = code
		m.joinWait <- r
		m.joinWait = nil
		g.nJoining--
	}
	if m.syncWait != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.ErrorCode = code
		m.syncWait <- r
		m.syncWait = nil
	}
}

// rebalanceLocked moves the group to PreparingRebalance: members that are
// waiting in SyncGroup are told to rejoin, and the rebalance completes
// when every member has joined or the rebalance timeout passes.
func (g *group) rebalanceLocked() {
	if g.state == stateCompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
			if m.syncWait != nil {
				r := kmsg.NewPtrSyncGroupResponse()
				r.ErrorCode = kerr.RebalanceInProgress.Code
				m.syncWait <- r
				m.syncWait = nil
				g.touchLocked(m)
			}
		}
	}
	wasEmpty := g.state == stateEmpty
	g.state = statePreparingRebalance
	g.clearPendingSyncLocked()
	if g.initialDelay {
		// Waiting out group.initial.rebalance.delay.ms: a member that
		// joins meanwhile extends it (initialJoinLocked), and nothing
		// completes the join before it ends, as in Kafka.
		g.newMemberAdded = true
		return
	}
	if d := g.c.cfg.InitialRebalanceDelay; wasEmpty && d > 0 {
		g.initialDelay, g.newMemberAdded = true, false
		g.initialJoinLocked(d, max(g.maxRebalanceTimeoutLocked()-d, 0))
		return
	}
	if g.nJoining >= len(g.members) {
		g.completeRebalanceLocked()
		return
	}
	stop(g.tRebalance)
	gen := g.generation
	g.tRebalance = g.afterLocked(g.maxRebalanceTimeoutLocked(), func() {
		if g.generation == gen && g.state == statePreparingRebalance {
			g.completeRebalanceLocked()
		}
	})
}

// initialJoinLocked waits delay; then, if members joined meanwhile and
// the rebalance timeout leaves some of remaining, it waits again (at most
// group.initial.rebalance.delay.ms), else the join completes: Kafka's
// InitialDelayedJoin.
func (g *group) initialJoinLocked(delay, remaining time.Duration) {
	stop(g.tRebalance)
	gen := g.generation
	g.tRebalance = g.afterLocked(delay, func() {
		if g.generation != gen || g.state != statePreparingRebalance || !g.initialDelay {
			return
		}
		if g.newMemberAdded && remaining > 0 {
			g.newMemberAdded = false
			g.initialJoinLocked(min(g.c.cfg.InitialRebalanceDelay, remaining), max(remaining-delay, 0))
			return
		}
		g.initialDelay = false
		g.completeRebalanceLocked()
	})
}

func (g *group) maxRebalanceTimeoutLocked() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// completeRebalanceLocked ends PreparingRebalance: members that did not
// rejoin are removed, the generation advances, a protocol is chosen, and
// every joined member gets its JoinGroup answer (the leader with the
// members' metadata).
func (g *group) completeRebalanceLocked() {
	stop(g.tRebalance)
	g.tRebalance = nil
	g.initialDelay = false
	for _, m := range g.members {
		if m.joinWait == nil {
			g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
		}
	}
	g.nJoining = 0
	g.generation++
	g.c.rebalances.Add(1)
	if len(g.members) == 0 {
		g.state = stateEmpty
		g.emptySince = g.c.clock.Now()
		g.protocol = ""
		g.leader = ""
		g.persistLocked()
		return
	}
	g.state = stateCompletingRebalance
	g.protocol = g.chooseProtocolLocked()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = ""
		for _, id := range sortedKeys(g.members) {
			g.leader = id
			break
		}
	}
	g.pendingSync = make(map[string]bool, len(g.members))
	for _, m := range g.members {
		g.pendingSync[m.id] = true
		r := kmsg.NewPtrJoinGroupResponse()
		r.Version = m.joinVersion
		g.fillJoinLocked(m.id, r)
		m.joinWait <- r
		m.joinWait = nil
		g.touchLocked(m)
	}
	gen := g.generation
	g.tPendingSync = g.afterLocked(g.maxRebalanceTimeoutLocked(), func() {
		if g.generation != gen || g.state != stateCompletingRebalance || len(g.pendingSync) == 0 {
			return
		}
		for id := range g.pendingSync {
			if m := g.members[id]; m != nil {
				g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
			}
		}
		g.rebalanceLocked()
	})
}

func (g *group) clearPendingSyncLocked() {
	g.pendingSync = nil
	stop(g.tPendingSync)
	g.tPendingSync = nil
}

// chooseProtocolLocked picks the protocol every member supports that most
// members list first among those (Kafka's ClassicGroup.selectProtocol).
func (g *group) chooseProtocolLocked() string {
	support := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			support[p.Name]++
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if support[p.Name] == len(g.members) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, name := range sortedKeys(votes) {
		if votes[name] > bestVotes {
			best, bestVotes = name, votes[name]
		}
	}
	return best
}

// protocolsMatchLocked: the first member fixes the protocol type; later
// members must share it and one protocol all current members support.
func (g *group) protocolsMatchLocked(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		g.protocolType = protocolType
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	support := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			support[p.Name]++
		}
	}
	for _, p := range protocols {
		if support[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

func (m *member) sameProtocols(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(m.protocols) != len(ps) {
		return false
	}
	for i := range ps {
		if m.protocols[i].Name != ps[i].Name || !bytes.Equal(m.protocols[i].Metadata, ps[i].Metadata) {
			return false
		}
	}
	return true
}

func (g *group) fillJoinLocked(memberID string, r *kmsg.JoinGroupResponse) {
	r.Generation = g.generation
	r.ProtocolType = kmsg.StringPtr(g.protocolType)
	r.Protocol = kmsg.StringPtr(g.protocol)
	r.LeaderID = g.leader
	r.MemberID = memberID
	r.Members = nil
	if g.leader != memberID {
		return
	}
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = m.instanceID
		for _, p := range m.protocols {
			if p.Name == g.protocol {
				jm.ProtocolMetadata = p.Metadata
				break
			}
		}
		r.Members = append(r.Members, jm)
	}
}

// touchLocked restarts a member's session timer (a heartbeat, or any
// answer that shows the member is alive).
func (g *group) touchLocked(m *member) {
	stop(m.tSession)
	m.tSession = g.afterLocked(m.sessionTimeout, func() {
		if g.members[m.id] != m || m.joinWait != nil || m.syncWait != nil {
			return
		}
		g.c.log.Info().Str("group", g.name).Str("member", m.id).Msg("session expired")
		g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
		if g.state != stateEmpty && g.state != stateDead {
			g.rebalanceLocked()
		}
		if len(g.members) == 0 {
			g.persistLocked()
		}
	})
}

// checkInstanceLocked validates a static member's instance id against the
// member id it claims (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID).
func (g *group) checkInstanceLocked(instanceID *string, memberID string) int16 {
	if instanceID == nil {
		return 0
	}
	known, ok := g.static[*instanceID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if known != memberID {
		return kerr.FencedInstanceID.Code
	}
	return 0
}

// ---- SyncGroup ----

// SyncGroup (key 14). A follower that syncs before the leader waits for
// the leader's assignment.
func (c *Coordinator) SyncGroup(ctx context.Context, cl Client, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		// From v5 both are mandatory (Kafka's KafkaApis check).
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return resp
	}
	g, code := c.getGroup(ctx, req.Group, lookupExisting)
	if code == kerr.GroupIDNotFound.Code {
		code = kerr.UnknownMemberID.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	g.mu.Lock()
	wait := g.syncLocked(req, resp)
	g.mu.Unlock()
	if wait == nil {
		return resp
	}
	select {
	case r := <-wait:
		r.Version = req.Version
		return r
	case <-ctx.Done():
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
}

func (g *group) syncLocked(req *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) <-chan *kmsg.SyncGroupResponse {
	fail := func(code int16) <-chan *kmsg.SyncGroupResponse {
		resp.ErrorCode = code
		return nil
	}
	if g.dead {
		return fail(kerr.NotCoordinator.Code)
	}
	if g.typ != typeClassic {
		return fail(kerr.UnknownMemberID.Code)
	}
	if code := g.checkInstanceLocked(req.InstanceID, req.MemberID); code != 0 {
		return fail(code)
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		return fail(kerr.UnknownMemberID.Code)
	}
	if req.Generation != g.generation {
		return fail(kerr.IllegalGeneration.Code)
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol) {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	switch g.state {
	case statePreparingRebalance:
		return fail(kerr.RebalanceInProgress.Code)
	case stateCompletingRebalance:
		delete(g.pendingSync, m.id)
		if m.syncWait != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.ErrorCode = kerr.RebalanceInProgress.Code
			m.syncWait <- r
		}
		wait := make(chan *kmsg.SyncGroupResponse, 1)
		m.syncWait = wait
		stop(m.tSession)
		if m.id == g.leader {
			g.completeSyncLocked(req.GroupAssignment)
		}
		return wait
	case stateStable:
		g.touchLocked(m)
		resp.ProtocolType = kmsg.StringPtr(g.protocolType)
		resp.Protocol = kmsg.StringPtr(g.protocol)
		resp.MemberAssignment = g.assignmentOrEmpty(m.assignment)
		return nil
	}
	return fail(kerr.UnknownMemberID.Code)
}

// completeSyncLocked stores the leader's assignment, persists the group and
// answers every member waiting in SyncGroup: the group is Stable.
// ownProtocols copies a JoinGroup's protocols for the member to keep: the
// request's byte fields are slices of its whole frame buffer, which a
// member that stays for hours would otherwise keep alive.
func ownProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := slices.Clone(ps)
	for i := range out {
		out[i].Metadata = bytes.Clone(out[i].Metadata)
	}
	return out
}

func (g *group) completeSyncLocked(assignments []kmsg.SyncGroupRequestGroupAssignment) {
	for _, m := range g.members {
		m.assignment = nil
	}
	for _, a := range assignments {
		if m, ok := g.members[a.MemberID]; ok {
			m.assignment = bytes.Clone(a.MemberAssignment)
		}
	}
	g.state = stateStable
	g.clearPendingSyncLocked()
	g.persistLocked()
	for _, m := range g.members {
		if m.syncWait == nil {
			continue
		}
		r := kmsg.NewPtrSyncGroupResponse()
		r.ProtocolType = kmsg.StringPtr(g.protocolType)
		r.Protocol = kmsg.StringPtr(g.protocol)
		r.MemberAssignment = g.assignmentOrEmpty(m.assignment)
		m.syncWait <- r
		m.syncWait = nil
		g.touchLocked(m)
	}
}

// emptyConsumerAssignment is a ConsumerMemberAssignment v0 with no topics:
// what a "consumer" member with nothing assigned must still be able to
// decode (an empty byte slice makes some clients fail).
var emptyConsumerAssignment = func() []byte {
	a := kmsg.NewConsumerMemberAssignment()
	return a.AppendTo(nil)
}()

func (g *group) assignmentOrEmpty(a []byte) []byte {
	if len(a) == 0 && g.protocolType == "consumer" {
		return emptyConsumerAssignment
	}
	if a == nil {
		return []byte{}
	}
	return a
}

// ---- Heartbeat ----

// Heartbeat (key 12).
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	g, code := c.getGroup(ctx, req.Group, lookupExisting)
	if code == kerr.GroupIDNotFound.Code {
		code = kerr.UnknownMemberID.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	resp.ErrorCode = g.heartbeatLocked(req)
	return resp
}

func (g *group) heartbeatLocked(req *kmsg.HeartbeatRequest) int16 {
	if g.dead {
		return kerr.NotCoordinator.Code
	}
	if g.typ != typeClassic {
		return kerr.UnknownMemberID.Code
	}
	if code := g.checkInstanceLocked(req.InstanceID, req.MemberID); code != 0 {
		return code
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	switch g.state {
	case statePreparingRebalance:
		g.touchLocked(m)
		return kerr.RebalanceInProgress.Code
	case stateCompletingRebalance, stateStable:
		g.touchLocked(m)
		return 0
	}
	return kerr.UnknownMemberID.Code
}

// ---- LeaveGroup ----

// LeaveGroup (key 13). Before v3 one member leaves by member id; from v3 a
// batch, each by member id or instance id.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	g, code := c.getGroup(ctx, req.Group, lookupExisting)
	if code == kerr.GroupIDNotFound.Code {
		code = kerr.UnknownMemberID.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	if g.typ != typeClassic {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	if req.Version < 3 {
		resp.ErrorCode = g.leaveOneLocked(req.MemberID, nil)
		return resp
	}
	for _, rm := range req.Members {
		r := kmsg.NewLeaveGroupResponseMember()
		r.MemberID = rm.MemberID
		r.InstanceID = rm.InstanceID
		r.ErrorCode = g.leaveOneLocked(rm.MemberID, rm.InstanceID)
		resp.Members = append(resp.Members, r)
	}
	return resp
}

func (g *group) leaveOneLocked(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		known, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if memberID != "" && memberID != known {
			return kerr.FencedInstanceID.Code
		}
		memberID = known
	}
	if t, ok := g.pending[memberID]; ok {
		stop(t)
		delete(g.pending, memberID)
		return 0
	}
	m, ok := g.members[memberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
	g.rebalanceLocked()
	return 0
}
