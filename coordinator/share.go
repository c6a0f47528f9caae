package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// Share groups (KIP-932). Members heartbeat with ShareGroupHeartbeat and
// are given every partition of the topics they subscribe to, so any number
// of members share one partition; records are shared out by acquisition,
// record by record, in each partition's state table (share_partition.go),
// which the partition's holder keeps (share_holder.go).
//
// ShareFetch and ShareAcknowledge come to the broker that holds the
// share-partition (share_holder.go): a member opens a share session there
// (epoch 0), each later request carries the next epoch, -1 closes it.
// Acknowledgements are applied and the changed partition states saved in
// the metastore (SaveClaimedShareState) before the request is answered, so
// an acknowledged record is never delivered again, by this broker after a
// restart or by another that takes the partition over. Locks are not
// saved: records in flight when the partition moves are delivered again.

// ShareKey names one partition of a share group.
type ShareKey struct {
	Topic     metastore.TopicID
	Partition int32
}

type shareMember struct {
	id         string
	clientID   string
	clientHost string
	rackID     *string
	topics     []string
	epoch      int32
	assigned   tpSet
	tSession   Timer
}

// shareSession is one member's share session: the next epoch it must send,
// the partitions it fetches and the client connection that opened it (the
// server's id for it; 0 for none), whose close releases what the member
// holds (ShareConnClosed).
type shareSession struct {
	epoch int32
	parts tpSet
	conn  uint64
}

type shareGroup struct {
	g       *group
	epoch   int32
	members map[string]*shareMember
	// parts are the partition state tables as stored, which the
	// share-group offsets admin reads and rewrites (loadLocked); the
	// tables records are shared out from are the holder's
	// (share_holder.go).
	parts map[tp]*sharePartition
}

func newShareGroup(g *group) *shareGroup {
	return &shareGroup{g: g, members: map[string]*shareMember{}, parts: map[tp]*sharePartition{}}
}

func (sg *shareGroup) stopTimers() {
	for _, m := range sg.members {
		stop(m.tSession)
	}
}

func (sg *shareGroup) stateLocked() string {
	if len(sg.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// limits are the broker's share limits with the group's own lock duration
// (share.record.lock.duration.ms) if set.
func (c *Coordinator) shareLimits(group string) ShareLimits {
	lim := c.cfg.Share
	if c.cfg.GroupConfig != nil {
		if v, ok := c.cfg.GroupConfig(group, "share.record.lock.duration.ms"); ok {
			if ms, err := strconv.ParseInt(v, 10, 32); err == nil && ms > 0 {
				lim.LockDuration = time.Duration(ms) * time.Millisecond
			}
		}
	}
	return lim
}

// ShareLockDuration is the acquisition lock duration of the group's records
// (ShareFetch's AcquisitionLockTimeoutMs).
func (c *Coordinator) ShareLockDuration(group string) time.Duration {
	return c.shareLimits(group).LockDuration
}

// ShareGroupHeartbeat (key 76).
func (c *Coordinator) ShareGroupHeartbeat(ctx context.Context, cl Client, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	// Kafka's throwIfShareGroupHeartbeatRequestIsInvalid.
	switch {
	case req.GroupID == "":
		return fail(kerr.InvalidRequest.Code, "GroupId can't be empty.")
	case req.MemberID == "":
		return fail(kerr.InvalidRequest.Code, "MemberId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return fail(kerr.InvalidRequest.Code, "RackId can't be empty.")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest.Code, "SubscribedTopicNames must be set in first request.")
	case req.MemberEpoch < -1:
		return fail(kerr.InvalidRequest.Code, "MemberEpoch is invalid.")
	}
	mode := lookupExisting
	if req.MemberEpoch == 0 {
		mode = lookupCreate
	}
	g, code := c.getGroup(ctx, req.GroupID, mode)
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
	if g.typ != typeShare {
		if !g.isEmptyLocked() || req.MemberEpoch != 0 {
			return fail(kerr.GroupIDNotFound.Code, "Group "+g.name+" is not a share group.")
		}
		g.becomeShareLocked()
	}
	g.sg.heartbeatLocked(ctx, cl, req, resp)
	return resp
}

// becomeShareLocked turns an empty group into a share group.
func (g *group) becomeShareLocked() {
	if g.cg != nil {
		g.cg.stopTimers()
	}
	stop(g.tRebalance)
	stop(g.tPendingSync)
	for id, t := range g.pending {
		stop(t)
		delete(g.pending, id)
	}
	g.typ, g.cg = typeShare, nil
	g.sg = newShareGroup(g)
	g.sg.epoch = g.generation
	g.protocol, g.leader, g.protocolType = "", "", ""
}

func (sg *shareGroup) heartbeatLocked(ctx context.Context, cl Client, req *kmsg.ShareGroupHeartbeatRequest, resp *kmsg.ShareGroupHeartbeatResponse) {
	c := sg.g.c
	resp.HeartbeatIntervalMillis = int32(c.cfg.ShareHeartbeatInterval.Milliseconds())
	m, known := sg.members[req.MemberID]
	if req.MemberEpoch == -1 {
		if !known {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return
		}
		sg.leaveLocked(ctx, m)
		resp.MemberID = kmsg.StringPtr(m.id)
		resp.MemberEpoch = -1
		sg.g.persistLocked()
		return
	}
	changed := false
	switch {
	case req.MemberEpoch == 0:
		if !known {
			if len(sg.members) >= c.cfg.ShareMaxGroupSize {
				resp.ErrorCode = kerr.GroupMaxSizeReached.Code
				resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("The share group has reached its maximum capacity of %d members.", c.cfg.ShareMaxGroupSize))
				return
			}
			m = &shareMember{id: req.MemberID}
			sg.members[m.id] = m
		}
		m.assigned = nil
		changed = true
	case !known:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return
	case req.MemberEpoch != m.epoch:
		resp.ErrorCode = kerr.FencedMemberEpoch.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("member epoch %d, expected %d", req.MemberEpoch, m.epoch))
		return
	}
	m.clientID, m.clientHost = cl.ID, cl.Host
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	if req.SubscribedTopicNames != nil && !slices.Equal(req.SubscribedTopicNames, m.topics) {
		m.topics = slices.Clone(req.SubscribedTopicNames)
		changed = true
	}
	// Every member gets every partition of the topics it subscribes to;
	// partitions added to a topic reach it on its next heartbeat.
	target := tpSet{}
	for _, name := range m.topics {
		if t, ok := c.store.TopicByName(name); ok {
			for _, p := range t.Partitions {
				target[tp{t.ID, p.ID}] = struct{}{}
			}
		}
	}
	if changed || m.assigned == nil || !target.equal(m.assigned) {
		sg.epoch++
		sg.g.generation = sg.epoch
		c.rebalances.Add(1)
		m.epoch = sg.epoch
		m.assigned = target
		a := &kmsg.ShareGroupHeartbeatResponseAssignment{}
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, k := range target.sorted() {
			n := len(a.TopicPartitions)
			if n == 0 || a.TopicPartitions[n-1].TopicID != k.id {
				a.TopicPartitions = append(a.TopicPartitions, kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{TopicID: k.id})
				n++
			}
			a.TopicPartitions[n-1].Partitions = append(a.TopicPartitions[n-1].Partitions, k.p)
		}
		resp.Assignment = a
		sg.g.persistLocked()
	}
	resp.MemberID = kmsg.StringPtr(m.id)
	resp.MemberEpoch = m.epoch
	sg.touchLocked(m)
}

func (sg *shareGroup) touchLocked(m *shareMember) {
	stop(m.tSession)
	m.tSession = sg.g.afterLocked(sg.g.c.cfg.ShareSessionTimeout, func() {
		if sg.g.sg != sg || sg.members[m.id] != m {
			return
		}
		sg.g.c.log.Info().Str("group", sg.g.name).Str("member", m.id).Msg("share group member session expired")
		ctx, cancel := sg.g.c.storeCtx()
		defer cancel()
		sg.removeMemberLocked(ctx, m)
		sg.g.persistLocked()
	})
}

// leaveLocked is a member leaving the group (heartbeat epoch -1). As in
// Kafka, leaving does not end its share session: a client may leave first
// and then close the session with its last acknowledgements (librdkafka's
// share consumer does), so while the session is open the member's records
// stay acquired until the session closes, its connection does, or their
// locks expire; the member can acknowledge but acquire nothing more.
// Without a session the member's records are released at once.
func (sg *shareGroup) leaveLocked(ctx context.Context, m *shareMember) {
	if sg.g.c.shareSessionOf(sg.g.name, m.id) == nil {
		sg.removeMemberLocked(ctx, m)
		return
	}
	stop(m.tSession)
	delete(sg.members, m.id)
	sg.epoch++
	sg.g.generation = sg.epoch
	sg.g.c.rebalances.Add(1)
}

// removeMemberLocked drops a member, its share session and its locks: the
// records it held become available to the others at once.
func (sg *shareGroup) removeMemberLocked(ctx context.Context, m *shareMember) {
	stop(m.tSession)
	delete(sg.members, m.id)
	sg.epoch++
	sg.g.generation = sg.epoch
	sg.g.c.rebalances.Add(1)
	sg.g.c.shareMemberGone(ctx, sg.g.name, m.id)
}

// ShareGroupDescribe (key 77).
func (c *Coordinator) ShareGroupDescribe(ctx context.Context, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, name := range req.GroupIDs {
		dg := kmsg.NewShareGroupDescribeResponseGroup()
		dg.GroupID = name
		dg.AuthorizedOperations = authorizedOperationsUnset
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOps
		}
		dg.ErrorCode, dg.ErrorMessage = c.describeGroup(ctx, name, typeShare, func(g *group) { g.sg.describeLocked(&dg) })
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (sg *shareGroup) describeLocked(dg *kmsg.ShareGroupDescribeResponseGroup) {
	dg.GroupState = sg.stateLocked()
	dg.GroupEpoch = sg.epoch
	dg.AssignmentEpoch = sg.epoch
	dg.Assignor = "simple"
	for _, id := range sortedKeys(sg.members) {
		m := sg.members[id]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.RackID, dm.MemberEpoch = m.id, m.rackID, m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopicNames = slices.Clone(m.topics)
		if dm.SubscribedTopicNames == nil {
			dm.SubscribedTopicNames = []string{}
		}
		dm.Assignment.TopicPartitions = []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
		for _, k := range m.assigned.sorted() {
			tps := &dm.Assignment.TopicPartitions
			n := len(*tps)
			if n == 0 || (*tps)[n-1].TopicID != k.id {
				at := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
				at.TopicID = k.id
				if t, ok := sg.g.c.store.TopicByID(k.id); ok {
					at.Topic = t.Name
				}
				at.Partitions = []int32{}
				*tps = append(*tps, at)
				n++
			}
			(*tps)[n-1].Partitions = append((*tps)[n-1].Partitions, k.p)
		}
		dg.Members = append(dg.Members, dm)
	}
}

// ---- the share-group offsets admin's copy of the tables ----

// loadLocked reads the group's partition states as stored (the holders
// save every change before they answer).
func (sg *shareGroup) loadLocked(ctx context.Context) int16 {
	sg.parts = map[tp]*sharePartition{}
	states, err := sg.g.c.store.LoadShareStates(ctx, sg.g.name)
	if err != nil {
		return storeCode(err)
	}
	for _, st := range states {
		sp, err := decodeSharePartition(st.State)
		if err != nil {
			// A state that does not decode cannot be trusted to say
			// what was acknowledged; refuse rather than redeliver.
			sg.g.c.log.Error().Err(err).Str("group", sg.g.name).Msg("stored share-partition state does not decode")
			return kerr.UnknownServerError.Code
		}
		sg.parts[tp{st.Topic, st.Partition}] = sp
	}
	return 0
}

// saveLocked stores every partition state the admin changed, under the
// group's fence. Such a write ends the partition's claim (metastore): the
// holder's copy is dropped here, or refused at its next write elsewhere,
// and the next fetch loads what the admin stored.
func (sg *shareGroup) saveLocked(ctx context.Context) int16 {
	c := sg.g.c
	defer c.shareDropGroup(sg.g.name)
	for k, sp := range sg.parts {
		if !sp.dirty {
			continue
		}
		blob, err := sp.encode()
		if err != nil {
			return kerr.UnknownServerError.Code
		}
		if err := c.store.SaveShareState(ctx, c.fence(), sg.g.name, k.id, k.p, blob); err != nil {
			if errors.Is(err, metastore.ErrFenced) {
				c.fenced(sg.g)
				return kerr.NotLeaderForPartition.Code
			}
			c.log.Warn().Err(err).Str("group", sg.g.name).Msg("saving share-partition state")
			return kerr.KafkaStorageError.Code
		}
		sp.dirty = false
	}
	return 0
}

// ---- persistence of membership ----

type storedShare struct {
	Epoch   int32               `json:"epoch"`
	Members []storedShareMember `json:"members"`
}

type storedShareMember struct {
	ID         string          `json:"id"`
	RackID     *string         `json:"rack_id,omitempty"`
	ClientID   string          `json:"client_id"`
	ClientHost string          `json:"client_host"`
	Epoch      int32           `json:"epoch"`
	Topics     []string        `json:"topics,omitempty"`
	Assigned   []storedTopicPs `json:"assigned,omitempty"`
}

func (sg *shareGroup) encode() *storedShare {
	ss := &storedShare{Epoch: sg.epoch}
	for _, id := range sortedKeys(sg.members) {
		m := sg.members[id]
		ss.Members = append(ss.Members, storedShareMember{ID: m.id, RackID: m.rackID, ClientID: m.clientID,
			ClientHost: m.clientHost, Epoch: m.epoch, Topics: m.topics, Assigned: encodeSet(m.assigned)})
	}
	return ss
}

// restore rebuilds the group under g.mu; members get fresh session timers.
func (sg *shareGroup) restore(ss *storedShare) {
	if ss == nil {
		return
	}
	sg.epoch = ss.Epoch
	for _, sm := range ss.Members {
		m := &shareMember{id: sm.ID, rackID: sm.RackID, clientID: sm.ClientID, clientHost: sm.ClientHost,
			epoch: sm.Epoch, topics: sm.Topics, assigned: decodeSet(sm.Assigned)}
		sg.members[m.id] = m
		sg.touchLocked(m)
	}
}
