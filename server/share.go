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

// Shared by ShareFetch and ShareAcknowledge (KIP-932). The share-partition
// state lives with the group at its coordinator (coordinator/share.go);
// records are read from this broker's partitions. Both meet only on a
// single node (`sluice dev`, one-voter raft groups): in a cluster a
// partition's leader in the client's view need not coordinate the group, so
// the share APIs are advertised only by a broker without a replication
// listener (replica.listen), which leads every partition it hosts.

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

// shareServed says whether this broker serves the share group APIs.
func (s *Server) shareServed() bool { return s.cfg.ReplicaListen == "" && s.groups != nil }

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
	if !s.shareServed() {
		return "", "", kerr.UnsupportedVersion.Code, "share groups are served by a single node only"
	}
	if !s.authorizeGroup(rc, acl.OpRead, group) {
		return "", "", kerr.GroupAuthorizationFailed.Code, ""
	}
	return group, member, 0, ""
}
