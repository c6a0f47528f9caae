package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
)

// DeleteTopics (key 20). Supported: v0-6.
//
// Semantics: deletes each named topic from the metastore, then its local
// partitions and their data. Names and ids are looked up after a barrier
// that makes this broker's cache current (catalogSync; REQUEST_TIMED_OUT
// when the metastore cannot be reached for it). Unknown names get
// UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID; an entry with both a name and an id is
// INVALID_REQUEST.
// Version notes: v1 throttle; v4+ flexible; v5 error message; v6 topics by
// name or id.
// Roles: every broker (forwarded to the metastore).
func init() { register(20, handleDeleteTopics) }

func handleDeleteTopics(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	entries := req.Topics
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			entries = append(entries, rt)
		}
	}
	deleted := false
	synced := s.catalogSync(rc, req.TimeoutMillis)
	// controller_mutation_rate: strict (THROTTLING_QUOTA_EXCEEDED) from v5.
	mq := s.quotas.mutations(rc, req.Version >= 5)
	for _, rt := range entries {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			if req.Version >= 5 {
				st.ErrorMessage = kmsg.StringPtr(msg)
			}
		}
		var t metastore.Topic
		var ok bool
		switch {
		case rt.Topic != nil && rt.TopicID != [16]byte{}:
			fail(kerr.InvalidRequest.Code, "a topic may be named by name or by id, not both")
			resp.Topics = append(resp.Topics, st)
			continue
		case rt.Topic != nil && !s.authorizeTopic(rc, acl.OpDelete, *rt.Topic):
			// Kafka: refused before existence, so nothing tells an
			// unauthorized client whether the topic exists.
			fail(kerr.TopicAuthorizationFailed.Code, "DELETE on the topic is required")
		case (rt.Topic != nil && *rt.Topic == coordinator.OffsetsTopic || rt.Topic == nil && rt.TopicID == offsetsTopicID) && s.offsets != nil:
			fail(kerr.TopicDeletionDisabled.Code, coordinator.OffsetsTopic+" is a read-only view of the committed offsets and cannot be deleted (DeleteGroups and OffsetDelete remove offsets)")
		case synced() != nil:
			fail(kerr.RequestTimedOut.Code, catalogSyncMessage)
		case rt.Topic != nil:
			if t, ok = s.catalog.TopicByName(*rt.Topic); !ok {
				fail(kerr.UnknownTopicOrPartition.Code, "this server does not host this topic")
			}
		default:
			if t, ok = s.catalog.TopicByID(metastore.TopicID(rt.TopicID)); !ok {
				fail(kerr.UnknownTopicID.Code, "this server does not host this topic id")
			} else if !s.authorizeTopic(rc, acl.OpDelete, t.Name) {
				// Kafka names the topic only to a client that may
				// DESCRIBE it.
				if s.authorizeTopic(rc, acl.OpDescribe, t.Name) {
					st.Topic = kmsg.StringPtr(t.Name)
				}
				fail(kerr.TopicAuthorizationFailed.Code, "DELETE on the topic is required")
				ok = false
			}
		}
		if ok {
			st.Topic, st.TopicID = kmsg.StringPtr(t.Name), t.ID
		}
		if ok && !mq.spend(len(t.Partitions)) {
			fail(kerr.ThrottlingQuotaExceeded.Code, throttlingMessage)
		} else if ok {
			if err := s.catalog.DeleteTopic(rc.ctx(), t.ID); err != nil {
				fail(errorCode(err), err.Error())
			} else {
				deleted = true
				s.log.Info().Str("topic", t.Name).Msg("deleted topic")
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	if deleted {
		s.refreshPartitions()
	}
	return resp, nil
}
