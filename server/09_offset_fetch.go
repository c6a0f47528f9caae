package server

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// OffsetFetch (key 9). Supported: v0-10.
//
// Semantics: committed offsets read linearizably from the metastore; a
// partition with no commit answers -1. require_stable (v7) never waits:
// without transactions no offset is pending.
// Version notes: v0 reads the same offsets as v1 (there is no ZooKeeper
// store); v2 null topics = all, top-level error; v3 throttle; v5 leader
// epoch; v6+ flexible; v7 require_stable; v8 several groups; v9 member id
// and epoch (KIP-848 groups: STALE_MEMBER_EPOCH); v10 topics by id.
// Roles: the group's coordinator (read brokers).
func init() { register(9, handleOffsetFetch) }

func handleOffsetFetch(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	// Authorization, as Kafka: DESCRIBE on each group
	// (GROUP_AUTHORIZATION_FAILED for it), DESCRIBE on each topic: a topic
	// asked for without it answers TOPIC_AUTHORIZATION_FAILED, and a
	// request for every committed topic leaves it out.
	if req.Version < 8 {
		if !s.authorizeGroup(rc, acl.OpDescribe, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			for _, t := range req.Topics { // v0-1 have no group-level error
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode = p, -1, kerr.GroupAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
		if s.groups != nil {
			groupCall(rc, func(ctx context.Context) kmsg.Response {
				resp := s.groups.OffsetFetch(ctx, req)
				kept := resp.Topics[:0]
				for _, t := range resp.Topics {
					if !s.authorizeTopic(rc, acl.OpDescribe, t.Topic) {
						if req.Topics == nil {
							continue
						}
						for i := range t.Partitions {
							p := &t.Partitions[i]
							p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, kmsg.StringPtr(""), kerr.TopicAuthorizationFailed.Code
						}
					}
					kept = append(kept, t)
				}
				resp.Topics = kept
				return resp
			})
			return nil, nil
		}
	}
	var refused []string
	if req.Version >= 8 {
		allowed := req.Groups[:0:0]
		for _, g := range req.Groups {
			if s.authorizeGroup(rc, acl.OpDescribe, g.Group) {
				allowed = append(allowed, g)
			} else {
				refused = append(refused, g.Group)
			}
		}
		if len(refused) > 0 {
			cp := *req
			cp.Groups = allowed
			req = &cp
		}
	}
	answerRefused := func(resp *kmsg.OffsetFetchResponse) *kmsg.OffsetFetchResponse {
		for _, g := range refused {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
	if s.groups == nil {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return answerRefused(resp), nil
	}
	if len(req.Groups) == 0 {
		return answerRefused(req.ResponseKind().(*kmsg.OffsetFetchResponse)), nil
	}
	asked := map[string]bool{} // groups that named their topics
	for _, g := range req.Groups {
		asked[g.Group] = g.Topics != nil
	}
	groupCall(rc, func(ctx context.Context) kmsg.Response {
		resp := s.groups.OffsetFetch(ctx, req)
		for gi := range resp.Groups {
			g := &resp.Groups[gi]
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				name, known := s.topicNameOf(t.Topic, t.TopicID, req.Version >= 10)
				if known && !s.authorizeTopic(rc, acl.OpDescribe, name) {
					if !asked[g.Group] {
						continue
					}
					for i := range t.Partitions {
						p := &t.Partitions[i]
						p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, kmsg.StringPtr(""), kerr.TopicAuthorizationFailed.Code
					}
				}
				kept = append(kept, t)
			}
			g.Topics = kept
		}
		return answerRefused(resp)
	})
	return nil, nil
}
