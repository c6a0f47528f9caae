package coordinator

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// maxMetadataBytes is offset.metadata.max.bytes (4096).
const maxMetadataBytes = 4096

// OffsetCommit (key 8). Offsets go to the metastore, never to a data log.
//
// Checks follow Kafka's OffsetMetadataManager.validateOffsetCommit: a
// commit with generation < 0, no member id and no instance id (v0, the
// admin client, a consumer without group management) is accepted while the
// classic group is Empty and creates a missing group; anything else must
// come from a current member at the current generation (UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID, ILLEGAL_GENERATION; REBALANCE_IN_PROGRESS while
// CompletingRebalance). A missing group with generation >= 0 is
// GROUP_ID_NOT_FOUND from v9 and ILLEGAL_GENERATION before. For a KIP-848
// group the generation is the member epoch, checked as KIP-1251 does: not
// newer than the member's epoch, and per partition not older than the
// epoch at which the member got that partition (STALE_MEMBER_EPOCH);
// versions before v9 cannot commit as members of such a group
// (UNSUPPORTED_VERSION).
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	generation, memberID, instanceID := req.Generation, req.MemberID, req.InstanceID
	if req.Version == 0 {
		generation, memberID, instanceID = -1, "", nil
	}
	// One response partition per request partition, in order; ok marks
	// those that pass the topic checks.
	type item struct {
		sp  *kmsg.OffsetCommitResponseTopicPartition
		oc  metastore.OffsetCommit
		id  metastore.TopicID
		bad bool
	}
	var items []item
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t metastore.Topic
		var ok bool
		topicCode := int16(0)
		if req.Version >= 10 {
			if t, ok = c.store.TopicByID(metastore.TopicID(rt.TopicID)); !ok {
				topicCode = kerr.UnknownTopicID.Code
			}
		} else if t, ok = c.store.TopicByName(rt.Topic); !ok {
			topicCode = kerr.UnknownTopicOrPartition.Code
		}
		st.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case topicCode != 0:
				sp.ErrorCode = topicCode
			case rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.Metadata != nil && len(*rp.Metadata) > maxMetadataBytes:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			}
			// The commit time is the coordinator's, as in Kafka: offset
			// expiry (expire.go) counts from it on the same clock.
			oc := metastore.OffsetCommit{TopicPartition: metastore.TopicPartition{Topic: t.Name, Partition: rp.Partition},
				Offset: rp.Offset, LeaderEpoch: -1, CommitTime: c.clock.Now()}
			if req.Version >= 6 {
				oc.LeaderEpoch = rp.LeaderEpoch
			}
			if rp.Metadata != nil {
				oc.Metadata = *rp.Metadata
			}
			items = append(items, item{sp: sp, oc: oc, id: t.ID, bad: sp.ErrorCode != 0})
		}
	}
	failAll := func(code int16) *kmsg.OffsetCommitResponse {
		for _, it := range items {
			if !it.bad {
				it.sp.ErrorCode = code
			}
		}
		return resp
	}
	simple := generation < 0 && memberID == "" && instanceID == nil
	mode := lookupExisting
	if generation < 0 {
		mode = lookupCreate
	}
	g, code := c.getGroup(ctx, req.Group, mode)
	if code == kerr.GroupIDNotFound.Code && req.Version < 9 {
		code = kerr.IllegalGeneration.Code
	}
	if code != 0 {
		return failAll(code)
	}
	// The write is bounded by offsets.commit.timeout.ms, as Kafka bounds
	// its append; when it runs out (a metastore that lost its leader) the
	// commit answers COORDINATOR_NOT_AVAILABLE, retriable, as Kafka maps
	// REQUEST_TIMED_OUT. The group lock is held only to check the commit:
	// the write runs under commitSem, which keeps the group's offset
	// writes in the order they were checked, while heartbeats and the
	// session timers go on.
	wctx, cancel := context.WithTimeout(ctx, c.cfg.CommitTimeout)
	defer cancel()
	if !g.lockCommits(wctx) {
		return failAll(kerr.CoordinatorNotAvailable.Code)
	}
	defer g.unlockCommits()
	var offs []metastore.OffsetCommit
	check := func() int16 {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.dead {
			return kerr.NotCoordinator.Code
		}
		if code := g.validateCommitLocked(simple, generation, memberID, instanceID, req.Version); code != 0 {
			return code
		}
		for _, it := range items {
			if it.bad {
				continue
			}
			if g.typ == typeConsumer && !simple {
				if code := g.cg.partitionCommitLocked(memberID, generation, tp{it.id, it.oc.Partition}); code != 0 {
					it.sp.ErrorCode = code
					continue
				}
			}
			offs = append(offs, it.oc)
		}
		return 0
	}
	if code := check(); code != 0 {
		return failAll(code)
	}
	if err := c.store.CommitOffsets(wctx, c.fence(), g.name, offs); err != nil {
		if errors.Is(err, metastore.ErrFenced) {
			c.fenced(g)
		}
		return failAll(storeCode(err))
	}
	return resp
}

func (g *group) validateCommitLocked(simple bool, generation int32, memberID string, instanceID *string, version int16) int16 {
	if g.typ == typeConsumer {
		return g.cg.validateCommitLocked(simple, generation, memberID, version)
	}
	if g.typ == typeShare {
		// A share group keeps no committed offsets (Kafka's
		// ShareGroup.validateOffsetCommit).
		return kerr.GroupIDNotFound.Code
	}
	if generation < 0 && g.state == stateEmpty {
		return 0
	}
	if !simple {
		if code := g.checkInstanceLocked(instanceID, memberID); code != 0 {
			return code
		}
		m, ok := g.members[memberID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
		if g.state == stateCompletingRebalance {
			// The member has the new generation from its JoinGroup
			// answer but no assignment yet.
			return kerr.RebalanceInProgress.Code
		}
		g.touchLocked(m)
		return 0
	}
	if g.state != stateEmpty {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// OffsetFetch (key 9). v0-7 ask for one group, v8+ for many; a null topic
// list (v2+) asks for every committed partition. A partition without a
// commit answers offset -1. With require_stable (v7+, KIP-447) a committed
// partition whose offset an open transaction changes answers
// UNSTABLE_OFFSET_COMMIT, and the client asks again.
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			resp.Groups = append(resp.Groups, c.fetchGroup(ctx, req.Version, rg, req.RequireStable))
		}
		return resp
	}
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = req.Group
	rg.MemberEpoch = -1
	if req.Topics != nil || req.Version < 2 {
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		for _, t := range req.Topics {
			rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	sg := c.fetchGroup(ctx, req.Version, rg, req.Version >= 7 && req.RequireStable)
	if req.Version >= 2 {
		resp.ErrorCode = sg.ErrorCode
	}
	for _, t := range sg.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			if req.Version < 2 && sg.ErrorCode != 0 {
				rp.ErrorCode = sg.ErrorCode // v0-1 have no group-level error
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (c *Coordinator) fetchGroup(ctx context.Context, version int16, rg kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	sg := kmsg.NewOffsetFetchResponseGroup()
	sg.Group = rg.Group
	// Requested partitions answer -1 with no error until proven otherwise.
	for _, t := range rg.Topics {
		st := kmsg.NewOffsetFetchResponseGroupTopic()
		st.Topic, st.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata = p, -1, -1, kmsg.StringPtr("")
			st.Partitions = append(st.Partitions, sp)
		}
		sg.Topics = append(sg.Topics, st)
	}
	g, code := c.getGroup(ctx, rg.Group, lookupExisting)
	if code == kerr.GroupIDNotFound.Code {
		if rg.Topics == nil {
			sg.Topics = []kmsg.OffsetFetchResponseGroupTopic{}
		}
		return sg // no group: nothing committed
	}
	if code != 0 {
		sg.ErrorCode = code
		return sg
	}
	if version >= 9 && (rg.MemberID != nil && *rg.MemberID != "" || rg.MemberEpoch >= 0) {
		g.mu.Lock()
		code := int16(0)
		if g.dead {
			code = kerr.NotCoordinator.Code
		} else if g.typ == typeConsumer {
			code = g.cg.validateFetchLocked(rg.MemberID, rg.MemberEpoch)
		}
		g.mu.Unlock()
		if code != 0 {
			sg.ErrorCode = code
			return sg
		}
	}
	// Resolve names (v10 names topics by id) for the store.
	var tps []metastore.TopicPartition
	if rg.Topics != nil {
		tps = []metastore.TopicPartition{}
		for i := range sg.Topics {
			st := &sg.Topics[i]
			name := st.Topic
			if version >= 10 {
				t, ok := c.store.TopicByID(metastore.TopicID(st.TopicID))
				if !ok {
					for j := range st.Partitions {
						st.Partitions[j].ErrorCode = kerr.UnknownTopicID.Code
					}
					continue
				}
				name = t.Name
			}
			for _, p := range st.Partitions {
				tps = append(tps, metastore.TopicPartition{Topic: name, Partition: p.Partition})
			}
		}
	}
	offs, err := c.store.FetchOffsets(ctx, rg.Group, tps)
	if err != nil {
		sg.ErrorCode = storeCode(err)
		return sg
	}
	got := make(map[metastore.TopicPartition]metastore.OffsetCommit, len(offs))
	for _, o := range offs {
		got[o.TopicPartition] = o
	}
	var unstable map[metastore.TopicPartition]bool
	if requireStable {
		if unstable, err = c.unstableOffsets(ctx, rg.Group); err != nil {
			sg.ErrorCode = storeCode(err)
			return sg
		}
	}
	fill := func(sp *kmsg.OffsetFetchResponseGroupTopicPartition, o metastore.OffsetCommit) {
		if unstable[o.TopicPartition] {
			// KIP-447: an offset a transaction is about to change.
			sp.ErrorCode = kerr.UnstableOffsetCommit.Code
			return
		}
		sp.Offset = o.Offset
		sp.LeaderEpoch = o.LeaderEpoch
		if version < 5 {
			sp.LeaderEpoch = -1
		}
		sp.Metadata = kmsg.StringPtr(o.Metadata)
	}
	if rg.Topics != nil {
		for i := range sg.Topics {
			st := &sg.Topics[i]
			name := st.Topic
			if version >= 10 {
				t, ok := c.store.TopicByID(metastore.TopicID(st.TopicID))
				if !ok {
					continue
				}
				name = t.Name
			}
			for j := range st.Partitions {
				tp := metastore.TopicPartition{Topic: name, Partition: st.Partitions[j].Partition}
				if o, ok := got[tp]; ok {
					fill(&st.Partitions[j], o)
				} else if unstable[tp] {
					st.Partitions[j].ErrorCode = kerr.UnstableOffsetCommit.Code
				}
			}
		}
		return sg
	}
	// All of the group's offsets, grouped by topic in the store's order.
	sg.Topics = []kmsg.OffsetFetchResponseGroupTopic{}
	index := map[string]int{}
	for _, o := range offs {
		i, ok := index[o.Topic]
		if !ok {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic = o.Topic
			if version >= 10 {
				t, ok := c.store.TopicByName(o.Topic)
				if !ok {
					continue // a deleted topic has no id to name it by
				}
				st.TopicID = t.ID
			}
			i = len(sg.Topics)
			index[o.Topic] = i
			sg.Topics = append(sg.Topics, st)
		}
		sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		sp.Partition = o.Partition
		fill(&sp, o)
		sg.Topics[i].Partitions = append(sg.Topics[i].Partitions, sp)
	}
	return sg
}

// OffsetDelete (key 47). A group's offsets for partitions of topics no
// member is subscribed to can be deleted; a subscribed topic's partitions
// answer GROUP_SUBSCRIBED_TO_TOPIC, and a non-empty group whose members'
// subscriptions are opaque (protocol type other than "consumer") refuses
// with NON_EMPTY_GROUP.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	g, code := c.getGroup(ctx, req.Group, lookupExisting)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	// As OffsetCommit: the group lock for the checks only, commitSem
	// across the write.
	if !g.lockCommits(ctx) {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	defer g.unlockCommits()
	g.mu.Lock()
	if g.dead {
		g.mu.Unlock()
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	subscribed, opaque := g.subscribedTopicsLocked()
	g.mu.Unlock()
	if opaque {
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return resp
	}
	var tps []metastore.TopicPartition
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		t, known := c.store.TopicByName(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case subscribed[rt.Topic]:
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				tps = append(tps, metastore.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(tps) > 0 {
		if err := c.store.DeleteOffsets(ctx, c.fence(), g.name, tps); err != nil {
			if errors.Is(err, metastore.ErrFenced) {
				c.fenced(g)
			}
			resp.ErrorCode = storeCode(err)
			resp.Topics = nil
		}
	}
	return resp
}

// subscribedTopicsLocked returns the topics the group's members subscribe
// to; opaque is true for a non-empty classic group whose protocol type is
// not "consumer", whose subscriptions the broker cannot read.
func (g *group) subscribedTopicsLocked() (map[string]bool, bool) {
	out := map[string]bool{}
	if g.typ == typeConsumer {
		for _, m := range g.cg.members {
			for _, t := range g.cg.subscribedNamesLocked(m) {
				out[t] = true
			}
		}
		return out, false
	}
	if len(g.members) == 0 {
		return out, false
	}
	if g.protocolType != "consumer" {
		return nil, true
	}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.protocol != "" && p.Name != g.protocol {
				continue
			}
			var md kmsg.ConsumerMemberMetadata
			if md.ReadFrom(p.Metadata) == nil {
				for _, t := range md.Topics {
					out[t] = true
				}
			}
			if g.protocol != "" {
				break
			}
		}
	}
	return out, false
}
