package server

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/coordinator"
)

// ShareAcknowledge (key 79). Supported: v1-2 (see shareServed).
//
// Semantics: KIP-932 acknowledgements outside a fetch, in the member's
// share session (its next epoch; -1 acknowledges and closes the session,
// releasing what the member still holds; 0 is
// INVALID_SHARE_SESSION_EPOCH). Each partition's batches are applied in
// order and saved in the metastore before the answer: accept (1),
// release (2: available again, or archived at the delivery limit), reject
// (3) and gap (0) archive; a record not acquired by the member is
// INVALID_RECORD_STATE for its partition.
// Version notes: flexible; v0 (early access) not served; v2 IsRenewAck
// and the Renew type (4, extends the member's locks),
// AcquisitionLockTimeoutMs.
// A partition this broker does not lead for share groups is
// NOT_LEADER_OR_FOLLOWER with CurrentLeader and NodeEndpoints (KIP-951),
// as in ShareFetch.
// Roles: the broker that served the member's ShareFetch: the partition's
// leader in the `read` view (a read broker), or a single node.
func init() { register(79, handleShareAcknowledge) }

func handleShareAcknowledge(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp, nil
	}
	group, member, code, msg := s.shareMember(rc, req.GroupID, req.MemberID)
	if code != 0 {
		return fail(code, msg)
	}
	renew := req.Version >= 2 && req.IsRenewAck
	if req.Version >= 2 {
		resp.AcquisitionLockTimeoutMillis = int32(s.groups.ShareLockDuration(group).Milliseconds())
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		if _, code := s.groups.ShareSession(ctx, group, member, req.ShareSessionEpoch, false, nil, nil, true, rc.conn.id); code != 0 {
			resp.ErrorCode = code
			return resp
		}
		endpoints := map[int32]kmsg.ShareFetchResponseNodeEndpoint{}
		defer func() {
			for _, id := range slices.Sorted(maps.Keys(endpoints)) {
				e := endpoints[id]
				ne := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
				ne.NodeID, ne.Host, ne.Port, ne.Rack = e.NodeID, e.Host, e.Port, e.Rack
				resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
			}
		}()
		for _, t := range req.Topics {
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = t.TopicID
			mt, tcode := s.shareTopic(rc, t.TopicID)
			for _, p := range t.Partitions {
				rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				rp.Partition = p.Partition
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = s.cfg.NodeID, -1
				k := coordinator.ShareKey{Topic: t.TopicID, Partition: p.Partition}
				if tcode != 0 {
					rp.ErrorCode = tcode
				} else if code, leader, epoch := s.shareHeldHere(rc, mt, k, endpoints); code != 0 {
					rp.ErrorCode = code
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = leader, epoch
				} else {
					batches := make([]coordinator.AckBatch, 0, len(p.AcknowledgementBatches))
					for _, b := range p.AcknowledgementBatches {
						batches = append(batches, coordinator.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes})
					}
					rp.ErrorCode = s.shareAcks(ctx, group, member, k, batches, renew)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if req.ShareSessionEpoch == -1 {
			if code := s.groups.ShareCloseSession(ctx, group, member); code != 0 {
				resp.ErrorCode = code
			}
		}
		return resp
	})
	return nil, nil
}
