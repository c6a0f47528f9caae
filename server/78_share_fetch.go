package server

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/coordinator"
)

// ShareFetch (key 78). Supported: v1-2 (see shareServed).
//
// Semantics: KIP-932. The request's share session (epoch 0 opens it on
// this connection, whose close ends it and releases the member's records;
// -1 closes it; otherwise the session's next epoch: SHARE_SESSION_NOT_FOUND,
// INVALID_SHARE_SESSION_EPOCH) names the partitions fetched: those listed
// are added, ForgottenTopicsData removed. Acknowledgements in the request
// are applied and saved in the metastore first (AcknowledgeErrorCode per
// partition; INVALID_RECORD_STATE for a record not acquired by this
// member; acknowledgements on an opening request are INVALID_REQUEST).
// Then each partition of the session is read from its first record the
// group can hand out, whole batches up to MaxBytes, and the records they
// hold that no one has are acquired for the member (AcquiredRecords, with
// their delivery count) for the lock duration; at most MaxRecords in
// all, in both acquire modes. With nothing to acquire the request waits up
// to MaxWaitMs for new records or expiring locks. Reads are
// read_uncommitted (up to the high watermark).
// Version notes: flexible; v0 (early access) not served; v1 MaxRecords,
// BatchSize, AcquisitionLockTimeoutMs; v2 ShareAcquireMode (0 batch
// optimized, 1 record limit; others INVALID_REQUEST) and IsRenewAck: the
// Renew acknowledge type (4) extends the member's locks, and a request
// carrying it fetches nothing.
// A partition this broker does not lead for share groups (see
// shareServed, shareLeader) is NOT_LEADER_OR_FOLLOWER, for its records
// and its acknowledgements, with CurrentLeader and NodeEndpoints naming
// the leader (KIP-951); the leader claims the (group, partition) on its
// first request and loads the stored state.
// Roles: the partition's leader in the `read` view (a read broker), or a
// single node.
func init() { register(78, handleShareFetch) }

func handleShareFetch(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp, nil
	}
	if req.Version >= 2 && req.ShareAcquireMode != 0 && req.ShareAcquireMode != 1 {
		return fail(kerr.InvalidRequest.Code, "unknown ShareAcquireMode")
	}
	group, member, code, msg := s.shareMember(rc, req.GroupID, req.MemberID)
	if code != 0 {
		return fail(code, msg)
	}
	renew := req.Version >= 2 && req.IsRenewAck

	var add, forget []coordinator.ShareKey
	hasAcks := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			add = append(add, coordinator.ShareKey{Topic: t.TopicID, Partition: p.Partition})
			hasAcks = hasAcks || len(p.AcknowledgementBatches) > 0
		}
	}
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, coordinator.ShareKey{Topic: t.TopicID, Partition: p})
		}
	}
	if req.Version >= 1 {
		resp.AcquisitionLockTimeoutMillis = int32(s.groups.ShareLockDuration(group).Milliseconds())
	}

	groupCall(rc, func(ctx context.Context) kmsg.Response {
		keys, code := s.groups.ShareSession(ctx, group, member, req.ShareSessionEpoch, true, add, forget, hasAcks, rc.conn.id)
		if code != 0 {
			resp.ErrorCode = code
			return resp
		}
		if req.ShareSessionEpoch == 0 {
			rc.conn.shares.add(group, member)
		}
		// One response partition per partition named or fetched.
		var order []coordinator.ShareKey
		seen := map[coordinator.ShareKey]bool{}
		for _, k := range append(add, keys...) {
			if !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
		}
		sortShareKeys(order)
		for _, k := range order {
			ti := len(resp.Topics) - 1
			if ti < 0 || resp.Topics[ti].TopicID != k.Topic {
				rt := kmsg.NewShareFetchResponseTopic()
				rt.TopicID = k.Topic
				resp.Topics = append(resp.Topics, rt)
				ti++
			}
			rp := kmsg.NewShareFetchResponseTopicPartition()
			rp.Partition = k.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			// Records is not nullable in ShareFetch: a partition with
			// nothing to hand out carries an empty set, never null (the
			// Java client fails the whole fetch on a null).
			rp.Records = []byte{}
			resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
		}
		index := map[coordinator.ShareKey]*kmsg.ShareFetchResponseTopicPartition{}
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				rp := &resp.Topics[ti].Partitions[pi]
				index[coordinator.ShareKey{Topic: resp.Topics[ti].TopicID, Partition: rp.Partition}] = rp
			}
		}

		endpoints := map[int32]kmsg.ShareFetchResponseNodeEndpoint{}
		defer func() {
			for _, id := range slices.Sorted(maps.Keys(endpoints)) {
				resp.NodeEndpoints = append(resp.NodeEndpoints, endpoints[id])
			}
		}()
		for _, t := range req.Topics {
			mt, tcode := s.shareTopic(rc, t.TopicID)
			for _, p := range t.Partitions {
				if len(p.AcknowledgementBatches) == 0 {
					continue
				}
				k := coordinator.ShareKey{Topic: t.TopicID, Partition: p.Partition}
				rp := index[k]
				if tcode != 0 {
					rp.AcknowledgeErrorCode = tcode
					continue
				}
				if code, _, _ := s.shareHeldHere(rc, mt, k, endpoints); code != 0 {
					rp.AcknowledgeErrorCode = code
					continue
				}
				batches := make([]coordinator.AckBatch, 0, len(p.AcknowledgementBatches))
				for _, b := range p.AcknowledgementBatches {
					batches = append(batches, coordinator.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes})
				}
				rp.AcknowledgeErrorCode = s.shareAcks(ctx, group, member, k, batches, renew)
			}
		}
		if req.ShareSessionEpoch == -1 {
			if code := s.groups.ShareCloseSession(ctx, group, member); code != 0 && resp.ErrorCode == 0 {
				resp.ErrorCode = code
			}
			return resp
		}
		if renew {
			return resp
		}

		var parts []sharePartFetch
		for _, k := range keys {
			rp := index[k]
			t, tcode := s.shareTopic(rc, k.Topic)
			if tcode != 0 {
				rp.ErrorCode = tcode
				continue
			}
			if code, leader, epoch := s.shareHeldHere(rc, t, k, endpoints); code != 0 {
				rp.ErrorCode = code
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leader, epoch
				continue
			}
			p, code := s.readablePartition(t, true, k.Partition, -1)
			if code != 0 {
				rp.ErrorCode = code
				continue
			}
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = s.cfg.NodeID, p.LeaderEpoch()
			parts = append(parts, sharePartFetch{key: k, t: t, p: p, resp: rp})
		}
		got, lockWake := s.shareFill(ctx, req, group, member, parts)
		if got > 0 || req.MaxWaitMillis <= 0 || len(parts) == 0 {
			return resp
		}
		wake := make(chan struct{}, 1)
		for _, fp := range parts {
			stop := fp.p.Watch(wake)
			defer stop()
		}
		deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
		for {
			step := min(time.Until(deadline), sharePollStep)
			if !lockWake.IsZero() {
				step = min(step, max(time.Until(lockWake), time.Millisecond))
			}
			if step <= 0 {
				return resp
			}
			timer := time.NewTimer(step)
			select {
			case <-wake:
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return resp
			}
			timer.Stop()
			if got, lockWake = s.shareFill(ctx, req, group, member, parts); got > 0 || fetchShareErr(parts) {
				return resp
			}
		}
	})
	return nil, nil
}

func fetchShareErr(parts []sharePartFetch) bool {
	for _, fp := range parts {
		if fp.resp.ErrorCode != 0 {
			return true
		}
	}
	return false
}
