package coordinator

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// KIP-848: the broker computes the assignment. Each member heartbeats
// (ConsumerGroupHeartbeat) with its member epoch; the group epoch moves on
// every change of membership, subscriptions or subscribed topics' partition
// counts, and the target assignment is recomputed for that epoch by the
// server-side assignor (uniform or range). Each member then reconciles
// towards its target on its own heartbeats, as in Kafka's
// CurrentAssignmentBuilder:
//
//   - partitions it holds that are no longer in its target are revoked
//     first: its answer drops them and its epoch stays until a heartbeat
//     reports (Topics) that it no longer owns them (UNREVOKED_PARTITIONS);
//     a member that does not revoke within its rebalance timeout is fenced;
//   - then its epoch advances to the target epoch and it gets the target
//     partitions that no other member still holds; the rest follow on a
//     later heartbeat once released (UNRELEASED_PARTITIONS).
//
// So a partition is never owned by two members at once.

type tp struct {
	id metastore.TopicID
	p  int32
}

type tpSet map[tp]struct{}

func (s tpSet) clone() tpSet {
	out := make(tpSet, len(s))
	for k := range s {
		out[k] = struct{}{}
	}
	return out
}

func (s tpSet) equal(o tpSet) bool {
	if len(s) != len(o) {
		return false
	}
	for k := range s {
		if _, ok := o[k]; !ok {
			return false
		}
	}
	return true
}

func (s tpSet) sorted() []tp {
	out := make([]tp, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b tp) int {
		if c := strings.Compare(string(a.id[:]), string(b.id[:])); c != 0 {
			return c
		}
		return int(a.p - b.p)
	})
	return out
}

type memberState int8

const (
	msStable memberState = iota
	msUnrevoked
	msUnreleased
)

type consumerMember struct {
	id         string
	instanceID *string
	rackID     *string
	clientID   string
	clientHost string
	// principal is who the member's last heartbeat came from: the topics
	// its regex reaches are those this principal may DESCRIBE.
	principal string

	epoch, prevEpoch int32
	state            memberState
	rebalanceTimeout time.Duration
	assignor         string
	topics           []string // subscribed names
	regex            string   // subscribed regex (RE2/J syntax)
	re               *regexp.Regexp

	assigned tpSet // what the member was told it owns
	revoking tpSet // told to give up, not yet confirmed
	// assignEpoch is the member epoch at which each owned partition was
	// given to it (KIP-1251 commit checks).
	assignEpoch map[tp]int32
	target      tpSet // the assignor's target for the member
	lastSent    tpSet // the assignment last put in an answer (nil: none yet)

	tSession Timer
	tRevoke  Timer
}

type consumerGroup struct {
	g               *group
	epoch           int32 // group epoch
	assignmentEpoch int32 // epoch of the current target assignment
	assignor        string
	metaSig         string // subscribed topics and partition counts at the last epoch bump
	members         map[string]*consumerMember
	owners          map[tp]string // member holding each partition (assigned or revoking)
}

func newConsumerGroup(g *group) *consumerGroup {
	return &consumerGroup{g: g, members: map[string]*consumerMember{}, owners: map[tp]string{}, assignor: "uniform"}
}

func (cg *consumerGroup) stopTimers() {
	for _, m := range cg.members {
		stop(m.tSession)
		stop(m.tRevoke)
	}
}

// becomeClassicLocked turns an empty KIP-848 group into a classic one.
func (g *group) becomeClassicLocked() {
	if g.cg != nil {
		g.cg.stopTimers()
	}
	g.typ, g.cg = typeClassic, nil
	g.state = stateEmpty
}

// becomeConsumerLocked turns an empty classic group into a KIP-848 one.
func (g *group) becomeConsumerLocked() {
	stop(g.tRebalance)
	stop(g.tPendingSync)
	for id, t := range g.pending {
		stop(t)
		delete(g.pending, id)
	}
	g.typ = typeConsumer
	g.cg = newConsumerGroup(g)
	g.cg.epoch = g.generation
	g.cg.assignmentEpoch = g.generation
	g.protocol, g.leader = "", ""
}

func (cg *consumerGroup) stateLocked() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.assignmentEpoch < cg.epoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.state != msStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// ConsumerGroupHeartbeat (key 68).
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, cl Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	switch {
	case req.MemberEpoch == 0:
		if req.RebalanceTimeoutMillis < 0 {
			return fail(kerr.InvalidRequest.Code, "RebalanceTimeoutMs must be provided when joining")
		}
		if req.SubscribedTopicNames == nil && (req.SubscribedTopicRegex == nil || *req.SubscribedTopicRegex == "") {
			return fail(kerr.InvalidRequest.Code, "SubscribedTopicNames or SubscribedTopicRegex must be set when joining")
		}
		if req.Version >= 1 && req.MemberID == "" {
			return fail(kerr.InvalidRequest.Code, "MemberId can't be empty")
		}
	case req.MemberID == "":
		return fail(kerr.InvalidRequest.Code, "MemberId can't be empty")
	case req.MemberEpoch < -2:
		return fail(kerr.InvalidRequest.Code, "MemberEpoch is invalid")
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != "uniform" && *req.ServerAssignor != "range" {
		return fail(kerr.UnsupportedAssignor.Code, "ServerAssignor "+*req.ServerAssignor+" is not supported; supported: uniform, range")
	}
	var re *regexp.Regexp
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + *req.SubscribedTopicRegex + ")$"); err != nil {
			return fail(kerr.InvalidRegularExpression.Code, err.Error())
		}
	}
	mode := lookupExisting
	if req.MemberEpoch == 0 {
		mode = lookupCreate
	}
	g, code := c.getGroup(ctx, req.Group, mode)
	if code == kerr.GroupIDNotFound.Code {
		code = kerr.UnknownMemberID.Code
	}
	if code != 0 {
		return fail(code, "")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead {
		return fail(kerr.NotCoordinator.Code, "")
	}
	if g.typ == typeShare {
		return fail(kerr.GroupIDNotFound.Code, "Group "+g.name+" is not a consumer group.")
	}
	if g.typ == typeClassic {
		if !g.isEmptyLocked() {
			return fail(kerr.GroupIDNotFound.Code, "Group "+g.name+" is not a consumer group.")
		}
		g.becomeConsumerLocked()
	}
	g.cg.heartbeatLocked(cl, req, resp, re)
	return resp
}

func (cg *consumerGroup) heartbeatLocked(cl Client, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse, re *regexp.Regexp) {
	c := cg.g.c
	resp.HeartbeatIntervalMillis = int32(c.cfg.ConsumerHeartbeatInterval.Milliseconds())
	changed := false // group epoch must move

	if req.MemberEpoch < 0 { // -1 leave, -2 static member leaving temporarily
		id := req.MemberID
		if req.InstanceID != nil {
			for _, m := range cg.members {
				if m.instanceID != nil && *m.instanceID == *req.InstanceID {
					if id != m.id {
						resp.ErrorCode = kerr.FencedInstanceID.Code
						return
					}
				}
			}
		}
		m, ok := cg.members[id]
		if !ok {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return
		}
		cg.removeMemberLocked(m)
		resp.MemberID = kmsg.StringPtr(id)
		resp.MemberEpoch = req.MemberEpoch
		cg.g.persistLocked()
		return
	}

	m, known := cg.members[req.MemberID]
	switch {
	case req.MemberEpoch == 0:
		if req.InstanceID != nil {
			for _, o := range cg.members {
				if o.instanceID != nil && *o.instanceID == *req.InstanceID && o.id != req.MemberID {
					// The previous holder of this instance id is
					// replaced: a restarted static member.
					cg.removeMemberLocked(o)
					changed = true
				}
			}
		}
		if known {
			// A fenced member rejoining with its id: start over.
			cg.releaseLocked(m)
		} else {
			if len(cg.members) >= c.cfg.ConsumerMaxGroupSize {
				resp.ErrorCode = kerr.GroupMaxSizeReached.Code
				resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", c.cfg.ConsumerMaxGroupSize))
				return
			}
			id := req.MemberID
			if id == "" {
				id = newMemberID("")[1:]
			}
			m = &consumerMember{id: id, assignor: "", assigned: tpSet{}, target: tpSet{}}
			cg.members[id] = m
		}
		m.epoch, m.prevEpoch, m.state = 0, 0, msStable
		m.assigned, m.revoking, m.lastSent = tpSet{}, nil, nil
		m.assignEpoch = map[tp]int32{}
		m.clientID, m.clientHost = cl.ID, cl.Host
		changed = true
	case !known:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return
	case req.MemberEpoch != m.epoch:
		// A member that missed our last answer may still send its
		// previous epoch, as long as it owns nothing it should not.
		if !(req.MemberEpoch == m.prevEpoch && req.Topics != nil && subsetOf(req.Topics, m.assigned)) {
			resp.ErrorCode = kerr.FencedMemberEpoch.Code
			resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("member epoch %d, expected %d", req.MemberEpoch, m.epoch))
			return
		}
		m.lastSent = nil // make sure it gets the assignment again
	}
	if req.InstanceID != nil {
		m.instanceID = req.InstanceID
	}
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	m.principal = cl.Principal
	if req.RebalanceTimeoutMillis >= 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor = *req.ServerAssignor
		changed = true
	}
	if req.SubscribedTopicNames != nil && !slices.Equal(req.SubscribedTopicNames, m.topics) {
		m.topics = slices.Clone(req.SubscribedTopicNames)
		changed = true
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex, m.re = *req.SubscribedTopicRegex, re
		changed = true
	}
	cg.touchLocked(m)

	if sig := cg.metadataSigLocked(); sig != cg.metaSig {
		cg.metaSig = sig
		changed = true
	}
	if changed {
		cg.epoch++
		cg.g.generation = cg.epoch
		cg.g.c.rebalances.Add(1)
	}
	if cg.assignmentEpoch < cg.epoch {
		cg.computeTargetLocked()
	}
	var owned tpSet
	if req.Topics != nil {
		owned = tpSet{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				owned[tp{metastore.TopicID(t.TopicID), p}] = struct{}{}
			}
		}
	}
	before := m.epoch
	cg.reconcileLocked(m, owned)
	// Members waiting for partitions this heartbeat may have released pick
	// them up on their own next heartbeat.
	if changed || m.epoch != before {
		cg.g.persistLocked()
	}

	resp.MemberID = kmsg.StringPtr(m.id)
	resp.MemberEpoch = m.epoch
	if m.lastSent == nil || !m.lastSent.equal(m.assigned) || req.MemberEpoch == 0 {
		resp.Assignment = makeHeartbeatAssignment(m.assigned)
		m.lastSent = m.assigned.clone()
	}
}

func subsetOf(topics []kmsg.ConsumerGroupHeartbeatRequestTopic, s tpSet) bool {
	for _, t := range topics {
		for _, p := range t.Partitions {
			if _, ok := s[tp{metastore.TopicID(t.TopicID), p}]; !ok {
				return false
			}
		}
	}
	return true
}

func makeHeartbeatAssignment(s tpSet) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, k := range s.sorted() {
		n := len(a.Topics)
		if n == 0 || a.Topics[n-1].TopicID != k.id {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID = k.id
			t.Partitions = []int32{}
			a.Topics = append(a.Topics, t)
			n++
		}
		a.Topics[n-1].Partitions = append(a.Topics[n-1].Partitions, k.p)
	}
	return &a
}

// reconcileLocked moves m towards its target (see the top of the file).
// owned is what the member reported owning in this heartbeat, nil if it did
// not say.
func (cg *consumerGroup) reconcileLocked(m *consumerMember, owned tpSet) {
	if m.state == msUnrevoked {
		// The target may have moved again meanwhile.
		for k := range m.assigned {
			if _, ok := m.target[k]; !ok {
				delete(m.assigned, k)
				m.revoking[k] = struct{}{}
			}
		}
		if owned == nil {
			return
		}
		for k := range m.revoking {
			if _, still := owned[k]; still {
				return
			}
		}
		for k := range m.revoking {
			if cg.owners[k] == m.id {
				delete(cg.owners, k)
			}
			delete(m.assignEpoch, k)
		}
		m.revoking = nil
		stop(m.tRevoke)
		m.state = msStable
	}
	if m.epoch == cg.assignmentEpoch && m.state == msStable {
		return
	}
	revoke := tpSet{}
	for k := range m.assigned {
		if _, ok := m.target[k]; !ok {
			revoke[k] = struct{}{}
		}
	}
	if len(revoke) > 0 {
		for k := range revoke {
			delete(m.assigned, k)
		}
		m.revoking = revoke
		m.state = msUnrevoked
		stop(m.tRevoke)
		epoch := m.epoch
		m.tRevoke = cg.g.afterLocked(max(m.rebalanceTimeout, time.Second), func() {
			if cg.g.cg != cg || cg.members[m.id] != m || m.state != msUnrevoked || m.epoch != epoch {
				return
			}
			cg.g.c.log.Info().Str("group", cg.g.name).Str("member", m.id).Msg("member did not revoke in time; fenced")
			cg.removeMemberLocked(m)
			cg.g.persistLocked()
		})
		return
	}
	if m.epoch != cg.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, cg.assignmentEpoch
	}
	m.state = msStable
	for k := range m.target {
		if _, ok := m.assigned[k]; ok {
			continue
		}
		if o, held := cg.owners[k]; held && o != m.id {
			m.state = msUnreleased
			continue
		}
		cg.owners[k] = m.id
		m.assigned[k] = struct{}{}
		m.assignEpoch[k] = m.epoch
	}
}

// releaseLocked drops everything m holds.
func (cg *consumerGroup) releaseLocked(m *consumerMember) {
	for k, o := range cg.owners {
		if o == m.id {
			delete(cg.owners, k)
		}
	}
	stop(m.tRevoke)
}

func (cg *consumerGroup) removeMemberLocked(m *consumerMember) {
	cg.releaseLocked(m)
	stop(m.tSession)
	delete(cg.members, m.id)
	cg.epoch++
	cg.g.generation = cg.epoch
	cg.g.c.rebalances.Add(1)
	if len(cg.members) == 0 {
		cg.assignmentEpoch = cg.epoch
	}
}

func (cg *consumerGroup) touchLocked(m *consumerMember) {
	stop(m.tSession)
	m.tSession = cg.g.afterLocked(cg.g.c.cfg.ConsumerSessionTimeout, func() {
		if cg.g.cg != cg || cg.members[m.id] != m {
			return
		}
		cg.g.c.log.Info().Str("group", cg.g.name).Str("member", m.id).Msg("consumer session expired")
		cg.removeMemberLocked(m)
		cg.g.persistLocked()
	})
}

// subscribedNamesLocked resolves m's subscription against today's topics.
// A regex reaches, as in Kafka, only topics that are not internal and that
// the member's principal may DESCRIBE; it is resolved again on every
// heartbeat, so topics created or deleted since are picked up (or dropped)
// by the next heartbeat of any member, which moves the group epoch.
func (cg *consumerGroup) subscribedNamesLocked(m *consumerMember) []string {
	if m.re == nil {
		return m.topics
	}
	var out []string
	for _, t := range cg.g.c.store.Topics() {
		if m.re.MatchString(t.Name) && !IsInternalTopic(t.Name) && cg.g.c.mayDescribe(m.principal, m.clientHost, t.Name) {
			out = append(out, t.Name)
		}
	}
	out = append(out, m.topics...)
	return out
}

// metadataSigLocked summarises the subscribed topics' ids and partition
// counts; a change moves the group epoch (new partitions get assigned).
func (cg *consumerGroup) metadataSigLocked() string {
	names := map[string]bool{}
	for _, m := range cg.members {
		for _, n := range cg.subscribedNamesLocked(m) {
			names[n] = true
		}
	}
	var b strings.Builder
	for _, n := range sortedKeys(names) {
		if t, ok := cg.g.c.store.TopicByName(n); ok {
			fmt.Fprintf(&b, "%s:%x:%d;", n, t.ID, len(t.Partitions))
		}
	}
	return b.String()
}

// computeTargetLocked runs the group's assignor for the current epoch. The
// assignor is the one most members ask for (uniform by default).
func (cg *consumerGroup) computeTargetLocked() {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	cg.assignor = "uniform"
	best := 0
	for _, name := range sortedKeys(votes) {
		if votes[name] > best {
			cg.assignor, best = name, votes[name]
		}
	}
	in := assignInput{subs: map[string]map[string]bool{}, topics: map[string]metastore.Topic{}, current: map[string]tpSet{}}
	for _, m := range cg.members {
		subs := map[string]bool{}
		for _, n := range cg.subscribedNamesLocked(m) {
			t, ok := cg.g.c.store.TopicByName(n)
			if !ok {
				continue
			}
			subs[n] = true
			in.topics[n] = t
		}
		in.subs[m.id] = subs
		in.current[m.id] = m.target
	}
	var out map[string]tpSet
	if cg.assignor == "range" {
		out = assignRange(in)
	} else {
		out = assignUniform(in)
	}
	for id, m := range cg.members {
		m.target = out[id]
		if m.target == nil {
			m.target = tpSet{}
		}
	}
	cg.assignmentEpoch = cg.epoch
}

// validateCommitLocked: an offset commit on a KIP-848 group. The
// generation is the member epoch.
func (cg *consumerGroup) validateCommitLocked(simple bool, epoch int32, memberID string, version int16) int16 {
	if simple {
		if len(cg.members) == 0 {
			return 0
		}
		return kerr.UnknownMemberID.Code
	}
	m, ok := cg.members[memberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if version < 9 {
		return kerr.UnsupportedVersion.Code
	}
	if epoch > m.epoch {
		return kerr.StaleMemberEpoch.Code
	}
	cg.touchLocked(m)
	return 0
}

// partitionCommitLocked is KIP-1251's per-partition check: a member may
// commit a partition with any epoch from the one at which it was given the
// partition on, so a commit racing the heartbeat that moved its epoch is not
// refused. Epochs of partitions assigned before a coordinator restart are
// not kept; such partitions are checked against the member epoch only.
func (cg *consumerGroup) partitionCommitLocked(memberID string, epoch int32, k tp) int16 {
	m, ok := cg.members[memberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if at, ok := m.assignEpoch[k]; ok && epoch < at {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// validateFetchLocked: an OffsetFetch v9+ naming a member.
func (cg *consumerGroup) validateFetchLocked(memberID *string, epoch int32) int16 {
	if memberID == nil {
		return kerr.UnknownMemberID.Code
	}
	m, ok := cg.members[*memberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if epoch != m.epoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// ConsumerGroupDescribe (key 69).
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = name
		dg.AuthorizedOperations = authorizedOperationsUnset
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOps
		}
		dg.ErrorCode, dg.ErrorMessage = c.describeGroup(ctx, name, typeConsumer, func(g *group) { g.cg.describeLocked(&dg, req.Version) })
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (cg *consumerGroup) describeLocked(dg *kmsg.ConsumerGroupDescribeResponseGroup, version int16) {
	dg.State = cg.stateLocked()
	dg.Epoch = cg.epoch
	dg.AssignmentEpoch = cg.assignmentEpoch
	dg.AssignorName = cg.assignor
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID = m.id, m.instanceID, m.rackID
		dm.MemberEpoch = m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopics = slices.Clone(m.topics)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			dm.SubscribedTopicRegex = kmsg.StringPtr(m.regex)
		}
		dm.Assignment = cg.describeAssignment(m.assigned)
		dm.TargetAssignment = cg.describeAssignment(m.target)
		dm.MemberType = 1 // a consumer-protocol member
		dg.Members = append(dg.Members, dm)
	}
}

func (cg *consumerGroup) describeAssignment(s tpSet) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, k := range s.sorted() {
		n := len(a.TopicPartitions)
		if n == 0 || a.TopicPartitions[n-1].TopicID != k.id {
			at := kmsg.NewAssignmentTopicPartition()
			at.TopicID = k.id
			if t, ok := cg.g.c.store.TopicByID(k.id); ok {
				at.Topic = t.Name
			}
			at.Partitions = []int32{}
			a.TopicPartitions = append(a.TopicPartitions, at)
			n++
		}
		a.TopicPartitions[n-1].Partitions = append(a.TopicPartitions[n-1].Partitions, k.p)
	}
	return a
}

// ---- persistence ----

type storedConsumer struct {
	Epoch           int32                  `json:"epoch"`
	AssignmentEpoch int32                  `json:"assignment_epoch"`
	Assignor        string                 `json:"assignor"`
	MetaSig         string                 `json:"meta_sig"`
	Members         []storedConsumerMember `json:"members"`
}

type storedConsumerMember struct {
	ID                 string          `json:"id"`
	InstanceID         *string         `json:"instance_id,omitempty"`
	RackID             *string         `json:"rack_id,omitempty"`
	ClientID           string          `json:"client_id"`
	ClientHost         string          `json:"client_host"`
	Principal          string          `json:"principal,omitempty"`
	Epoch              int32           `json:"epoch"`
	PrevEpoch          int32           `json:"prev_epoch"`
	State              memberState     `json:"state"`
	RebalanceTimeoutMs int64           `json:"rebalance_timeout_ms"`
	Assignor           string          `json:"assignor,omitempty"`
	Topics             []string        `json:"topics,omitempty"`
	Regex              string          `json:"regex,omitempty"`
	Assigned           []storedTopicPs `json:"assigned,omitempty"`
	Revoking           []storedTopicPs `json:"revoking,omitempty"`
	Target             []storedTopicPs `json:"target,omitempty"`
}

type storedTopicPs struct {
	ID         metastore.TopicID `json:"id"`
	Partitions []int32           `json:"partitions"`
}

func encodeSet(s tpSet) []storedTopicPs {
	var out []storedTopicPs
	for _, k := range s.sorted() {
		if n := len(out); n == 0 || out[n-1].ID != k.id {
			out = append(out, storedTopicPs{ID: k.id})
		}
		out[len(out)-1].Partitions = append(out[len(out)-1].Partitions, k.p)
	}
	return out
}

func decodeSet(in []storedTopicPs) tpSet {
	s := tpSet{}
	for _, t := range in {
		for _, p := range t.Partitions {
			s[tp{t.ID, p}] = struct{}{}
		}
	}
	return s
}

func (cg *consumerGroup) encode() *storedConsumer {
	sc := &storedConsumer{Epoch: cg.epoch, AssignmentEpoch: cg.assignmentEpoch, Assignor: cg.assignor, MetaSig: cg.metaSig}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		sc.Members = append(sc.Members, storedConsumerMember{ID: m.id, InstanceID: m.instanceID, RackID: m.rackID,
			ClientID: m.clientID, ClientHost: m.clientHost, Principal: m.principal, Epoch: m.epoch, PrevEpoch: m.prevEpoch, State: m.state,
			RebalanceTimeoutMs: m.rebalanceTimeout.Milliseconds(), Assignor: m.assignor, Topics: m.topics, Regex: m.regex,
			Assigned: encodeSet(m.assigned), Revoking: encodeSet(m.revoking), Target: encodeSet(m.target)})
	}
	return sc
}

// restore rebuilds the group under g.mu (persist.go's restore holds it).
func (cg *consumerGroup) restore(sc *storedConsumer) {
	if sc == nil {
		return
	}
	cg.epoch, cg.assignmentEpoch, cg.assignor, cg.metaSig = sc.Epoch, sc.AssignmentEpoch, sc.Assignor, sc.MetaSig
	for _, sm := range sc.Members {
		m := &consumerMember{id: sm.ID, instanceID: sm.InstanceID, rackID: sm.RackID, clientID: sm.ClientID,
			clientHost: sm.ClientHost, principal: sm.Principal, epoch: sm.Epoch, prevEpoch: sm.PrevEpoch, state: sm.State,
			rebalanceTimeout: time.Duration(sm.RebalanceTimeoutMs) * time.Millisecond, assignor: sm.Assignor,
			topics: sm.Topics, regex: sm.Regex,
			assigned: decodeSet(sm.Assigned), target: decodeSet(sm.Target), assignEpoch: map[tp]int32{}}
		if len(sm.Revoking) > 0 {
			m.revoking = decodeSet(sm.Revoking)
		}
		if m.regex != "" {
			m.re, _ = regexp.Compile("^(?:" + m.regex + ")$")
		}
		for k := range m.assigned {
			cg.owners[k] = m.id
		}
		for k := range m.revoking {
			cg.owners[k] = m.id
		}
		cg.members[m.id] = m
		cg.touchLocked(m)
	}
}
