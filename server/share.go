package server

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
)

// Shared by ShareFetch and ShareAcknowledge (KIP-932). As in Kafka, a
// share group's partition is served by the partition's leader in the
// client's view, which holds the share-partition state
// (coordinator/share_holder.go): on a single node (`sluice dev`, no
// replica.listen) the node, in a cluster the read broker the `read` view
// names as the partition's leader (views.go). That broker claims the
// (group, partition) in the metastore on its first ShareFetch; one that is
// not the view's leader answers NOT_LEADER_OR_FOLLOWER for the partition
// with CurrentLeader and its endpoint, and lets go of the pairs whose
// leader moved (shareReleaseLoop). Membership (ShareGroupHeartbeat) stays
// at the group's coordinator, a read broker too.

// connSeq numbers client connections (conn.id), from 1.
var connSeq atomic.Uint64

// shareSessions are the share sessions (group, member) opened on one
// connection. As Kafka, a share session belongs to the connection that
// opened it: when that connection closes, the member's acquired records
// are released at once rather than when their locks expire.
type shareSessions struct {
	mu  sync.Mutex
	set map[[2]string]struct{}
}

func (ss *shareSessions) add(group, member string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.set == nil {
		ss.set = map[[2]string]struct{}{}
	}
	ss.set[[2]string{group, member}] = struct{}{}
}

func (ss *shareSessions) take() [][2]string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([][2]string, 0, len(ss.set))
	for k := range ss.set {
		out = append(out, k)
	}
	ss.set = nil
	return out
}

// shareConnClosedTimeout bounds the metastore writes that release a
// closed connection's records.
const shareConnClosedTimeout = 10 * time.Second

// shareConnClosed ends the share sessions opened on c, which closed, and
// releases the records their members held (after every request of c has
// answered, so nothing acquired for it is left locked). Not while the
// server shuts down: locks are not stored, so the broker that serves the
// group next delivers those records again anyway, and shutdown does not
// wait on metastore writes.
func (s *Server) shareConnClosed(c *conn) {
	sessions := c.shares.take()
	if len(sessions) == 0 || s.groups == nil || s.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, shareConnClosedTimeout)
	defer cancel()
	for _, gm := range sessions {
		if code := s.groups.ShareConnClosed(ctx, gm[0], gm[1], c.id); code != 0 {
			c.log.Debug().Str("group", gm[0]).Str("member", gm[1]).Int16("code", code).Msg("share session of a closed connection not released")
		}
	}
}

// shareAPI reports whether key is one of the share group APIs: 76-79 and
// the share-group offsets admin, 90-92.
func shareAPI(key int16) bool { return key >= 76 && key <= 79 || key >= 90 && key <= 92 }

// shareServed says whether this broker serves the share group APIs on
// listener l: a single node on every listener; in a cluster a read broker
// on its listeners of the `read` view, whose partition leaders are read
// brokers. The `write` view's leaders are write brokers, which hold no
// group state, and the `mixed` view's are the raft leaders, write brokers
// too, so neither advertises them.
func (s *Server) shareServed(l *listener) bool {
	if s.groups == nil {
		return false
	}
	if s.cfg.ReplicaListen == "" {
		return true
	}
	return s.cfg.HasRole("read") && l != nil && l.cfg.View == "read"
}

// shareLeader is the broker that holds partition idx of t for share
// groups, and the partition's leader epoch: this node on a single node,
// in a cluster the `read` view's leader (-1: none listed).
func (s *Server) shareLeader(t metastore.Topic, idx int32) (int32, int32) {
	if idx < 0 || int(idx) >= len(t.Partitions) {
		return -1, -1
	}
	p := t.Partitions[idx]
	if s.cfg.ReplicaListen == "" {
		return s.cfg.NodeID, p.LeaderEpoch
	}
	v := brokerView{name: "read", listed: map[int32]bool{}, writers: map[int32]bool{}, readers: map[int32]bool{}}
	for _, b := range s.catalog.Brokers() {
		switch b.Role {
		case metastore.RoleWrite:
			v.writers[b.ID] = true
		case metastore.RoleRead:
			v.readers[b.ID] = true
		default:
			v.writers[b.ID], v.readers[b.ID] = true, true
		}
		for _, ep := range b.Endpoints {
			if ep.View == "read" {
				v.listed[b.ID] = true
			}
		}
	}
	leader, epoch, _, _, _ := v.partitionRoute(t.Name, p, isShared(t))
	return leader, epoch
}

// shareNotLeader fills a partition answer for a share request at a
// broker that does not hold it: NOT_LEADER_OR_FOLLOWER with the view's
// leader (KIP-951), whose endpoint on this listener goes in endpoints.
func (s *Server) shareNotLeader(rc *reqCtx, leader, epoch int32, endpoints map[int32]kmsg.ShareFetchResponseNodeEndpoint) (code int16, id, ep int32) {
	if leader >= 0 {
		for _, b := range s.catalog.Brokers() {
			if b.ID != leader {
				continue
			}
			for _, e := range b.Endpoints {
				if e.Name == rc.conn.listener.cfg.Name {
					ne := kmsg.NewShareFetchResponseNodeEndpoint()
					ne.NodeID, ne.Host, ne.Port = leader, e.Host, e.Port
					if b.Rack != "" {
						ne.Rack = kmsg.StringPtr(b.Rack)
					}
					endpoints[leader] = ne
				}
			}
		}
	}
	if _, ok := endpoints[leader]; !ok {
		leader, epoch = -1, -1
	}
	return kerr.NotLeaderForPartition.Code, leader, epoch
}

// shareHeldHere checks that this broker is the share leader of partition
// k.Partition of t; otherwise the code is NOT_LEADER_OR_FOLLOWER and
// leader, epoch name the view's leader (-1 if it has no endpoint here).
func (s *Server) shareHeldHere(rc *reqCtx, t metastore.Topic, k coordinator.ShareKey, endpoints map[int32]kmsg.ShareFetchResponseNodeEndpoint) (code int16, leader, epoch int32) {
	if k.Partition < 0 || int(k.Partition) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition.Code, -1, -1
	}
	leader, epoch = s.shareLeader(t, k.Partition)
	if leader == s.cfg.NodeID {
		return 0, leader, epoch
	}
	return s.shareNotLeader(rc, leader, epoch, endpoints)
}

// shareReleaseEvery is how often a read broker looks for share-partitions
// it holds whose `read` view leader is now another broker.
const shareReleaseEvery = time.Second

// shareReleaseLoop lets go of the share-partitions whose `read` view
// leader moved to another broker (a read broker joined or came back), so
// that broker can claim them (a broker that died lets go by its lease),
// and drops the tables whose claim the metastore ended (ShareVerify: the
// share-group offsets admin at the group's coordinator rewrote the state).
func (s *Server) shareReleaseLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(shareReleaseEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		for _, h := range s.groups.ShareHeld() {
			t, ok := s.produceTopicByID(h.Key.Topic)
			leader := int32(-1)
			if ok {
				leader, _ = s.shareLeader(t, h.Key.Partition)
			}
			if leader == s.cfg.NodeID {
				continue
			}
			ctx, cancel := context.WithTimeout(s.ctx, shareConnClosedTimeout)
			s.groups.ShareDrop(ctx, h.Group, h.Key)
			cancel()
		}
		ctx, cancel := context.WithTimeout(s.ctx, shareConnClosedTimeout)
		s.groups.ShareVerify(ctx)
		cancel()
	}
}

// shareTopic resolves a share request's topic id and checks READ on it;
// the code is the partitions' error.
func (s *Server) shareTopic(rc *reqCtx, id [16]byte) (metastore.Topic, int16) {
	t, ok := s.produceTopicByID(metastore.TopicID(id))
	if !ok {
		return t, kerr.UnknownTopicID.Code
	}
	if !s.authorizeTopic(rc, acl.OpRead, t.Name) {
		return t, kerr.TopicAuthorizationFailed.Code
	}
	return t, 0
}

// shareAcks applies one partition's acknowledgement batches.
func (s *Server) shareAcks(ctx context.Context, group, member string, k coordinator.ShareKey, batches []coordinator.AckBatch, renew bool) int16 {
	if len(batches) == 0 {
		return 0
	}
	return s.groups.ShareAcknowledge(ctx, group, member, k, batches, renew)
}

// sharePartFetch is one partition a ShareFetch reads.
type sharePartFetch struct {
	key  coordinator.ShareKey
	t    metastore.Topic
	p    hostedPartition
	resp *kmsg.ShareFetchResponseTopicPartition
}

// shareFill reads every partition once: for each, from the first record
// the group can hand out, whole batches up to the budget, then acquires
// the records they hold for member. It returns the records acquired and
// the earliest lock deadline of partitions with nothing to hand out.
func (s *Server) shareFill(ctx context.Context, req *kmsg.ShareFetchRequest, group, member string, parts []sharePartFetch) (int, time.Time) {
	budget := int(req.MaxBytes)
	if budget <= 0 || budget > int(s.cfg.FetchMaxBytes) {
		budget = int(s.cfg.FetchMaxBytes)
	}
	maxRecords := 0
	if req.Version >= 1 && req.MaxRecords > 0 {
		maxRecords = int(req.MaxRecords)
	}
	total, acquired := 0, 0
	var wake time.Time
	for i := range parts {
		fp := &parts[i]
		if fp.resp.ErrorCode != 0 {
			continue
		}
		if total > 0 && total >= budget || maxRecords > 0 && acquired >= maxRecords {
			break
		}
		// A waiting fetch looks again: the view may have moved the
		// partition since (the holder then let go of it, and must not
		// claim it back).
		if leader, epoch := s.shareLeader(fp.t, fp.key.Partition); leader != s.cfg.NodeID {
			fp.resp.ErrorCode = kerr.NotLeaderForPartition.Code
			fp.resp.CurrentLeader.LeaderID, fp.resp.CurrentLeader.LeaderEpoch = leader, epoch
			continue
		}
		hw := fp.p.HighWatermark()
		off, ok, w, code := s.groups.ShareFetchOffset(ctx, group, member, fp.key, fp.p.LogStartOffset(), hw)
		if code != 0 {
			fp.resp.ErrorCode = code
			continue
		}
		if !ok {
			if !w.IsZero() && (wake.IsZero() || w.Before(wake)) {
				wake = w
			}
			continue
		}
		res, err := fp.p.Read(off, max(budget-total, 1))
		if err != nil {
			fp.resp.ErrorCode = errorCode(err)
			continue
		}
		if len(res.Data) == 0 {
			continue
		}
		to := min(res.NextOffset, hw)
		left := 0
		if maxRecords > 0 {
			left = maxRecords - acquired
		}
		got := s.groups.ShareAcquire(ctx, group, member, fp.key, off, to, left)
		if len(got) == 0 {
			continue
		}
		fp.resp.Records = append(fp.resp.Records, res.Data...)
		for _, a := range got {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
			fp.resp.AcquiredRecords = append(fp.resp.AcquiredRecords, ar)
			acquired += int(a.Last - a.First + 1)
		}
		total += len(res.Data)
	}
	return acquired, wake
}

// sharePollStep bounds one wait of a ShareFetch that found nothing: it
// looks again when a high watermark moves, a lock it knows of expires,
// or after this long (records another member released or whose lock
// expired on another partition).
const sharePollStep = 200 * time.Millisecond

// sortShareKeys orders keys by topic id and partition, so a response names
// each topic once.
func sortShareKeys(keys []coordinator.ShareKey) {
	slices.SortFunc(keys, func(a, b coordinator.ShareKey) int {
		if c := bytes.Compare(a.Topic[:], b.Topic[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
}

// shareMember checks what ShareFetch and ShareAcknowledge both require
// before anything else: a group and member id, a broker that serves share
// groups, and READ on the group. It returns the ids, or the error code
// and message to answer with.
func (s *Server) shareMember(rc *reqCtx, groupID, memberID *string) (group, member string, code int16, msg string) {
	if groupID == nil || *groupID == "" || memberID == nil || *memberID == "" {
		return "", "", kerr.InvalidRequest.Code, "group id and member id are required"
	}
	group, member = *groupID, *memberID
	if !s.shareServed(rc.conn.listener) {
		return "", "", kerr.UnsupportedVersion.Code, "share groups are served by read brokers on listeners of the read view"
	}
	if !s.authorizeGroup(rc, acl.OpRead, group) {
		return "", "", kerr.GroupAuthorizationFailed.Code, ""
	}
	return group, member, 0, ""
}
