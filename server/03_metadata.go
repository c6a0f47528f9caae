package server

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// Metadata (key 3). Supported: v0-13.
//
// Semantics: a null topic list (v1+) or an empty one (v0) asks for every
// topic. Unknown topics are auto-created when the request allows it (v4+;
// always before v4) and auto.create.topics.enable is on. Topics may be
// named by id from v10 (UNKNOWN_TOPIC_ID when unknown).
// Authorization, as Kafka's handleTopicMetadataRequest: a request for
// every topic lists only the topics the client may DESCRIBE; a topic
// asked for by name without DESCRIBE gets TOPIC_AUTHORIZATION_FAILED
// whether or not it exists (so nothing tells an unauthorized client which
// topics exist), one by id TOPIC_AUTHORIZATION_FAILED without its name; an
// auto-creation needs CREATE on the cluster or on the topic
// (TOPIC_AUTHORIZATION_FAILED without). The authorized-operations fields
// come from the authorizer: the cluster's are 0 without DESCRIBE on it.
// Version notes: v1 controller id, rack, internal flag; v2 cluster id;
// v5 offline replicas; v7 leader epoch; v9+ flexible; v10 topic ids;
// v8-10 cluster authorized operations; v13 top-level error code.
// Roles: every broker; the brokers listed depend on the listener's view.
func init() { register(3, handleMetadata) }

const authorizedOperationsUnset = -2147483648

func handleMetadata(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	view := s.viewOf(rc)
	resp.Brokers = view.brokers
	clusterID := s.catalog.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = view.controller
	resp.AuthorizedOperations = authorizedOperationsUnset
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if s.authorizeCluster(rc, acl.OpDescribe) {
			resp.AuthorizedOperations = s.authorizedOps(rc, acl.ResourceCluster, acl.ClusterName, acl.ClusterOps)
		}
	}
	topicAuthOps := func(name string) int32 {
		if !req.IncludeTopicAuthorizedOperations {
			return authorizedOperationsUnset
		}
		return s.authorizedOps(rc, acl.ResourceTopic, name, acl.TopicOps)
	}
	refused := func(name *string, id [16]byte) {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = name, id
		mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		mt.AuthorizedOperations = authorizedOperationsUnset
		resp.Topics = append(resp.Topics, mt)
	}

	var topics []metastore.Topic
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		topics = s.catalog.Topics()
		if t, ok := s.offsetsTopic(); ok {
			topics = append(topics, t)
		}
		for _, t := range topics {
			if !s.authorizeTopic(rc, acl.OpDescribe, t.Name) {
				continue
			}
			resp.Topics = append(resp.Topics, s.metadataTopic(view, t, topicAuthOps(t.Name)))
		}
		return resp, nil
	}
	allowCreate := req.Version < 4 || req.AllowAutoTopicCreation
	for _, rt := range req.Topics {
		// By id: a null name, or, as the Java client sends for the
		// topics a KIP-848 regex subscription was assigned, an empty
		// name with an id (Kafka looks up the id whenever one is set).
		if rt.Topic == nil || *rt.Topic == "" && rt.TopicID != [16]byte{} {
			t, ok := s.catalog.TopicByID(metastore.TopicID(rt.TopicID))
			if !ok && rt.TopicID == offsetsTopicID {
				t, ok = s.offsetsTopic()
			}
			if !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				mt.AuthorizedOperations = authorizedOperationsUnset
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			if !s.authorizeTopic(rc, acl.OpDescribe, t.Name) {
				refused(nil, rt.TopicID)
				continue
			}
			resp.Topics = append(resp.Topics, s.metadataTopic(view, t, topicAuthOps(t.Name)))
			continue
		}
		name := *rt.Topic
		if !s.authorizeTopic(rc, acl.OpDescribe, name) {
			refused(kmsg.StringPtr(name), [16]byte{})
			continue
		}
		t, ok := s.catalog.TopicByName(name)
		code := int16(0)
		if name == coordinator.OffsetsTopic && s.offsets != nil {
			// Kafka creates its internal topic when Metadata names it.
			s.offsets.touch()
			t, ok = s.offsetsTopic()
		}
		// An internal topic is never auto-created as an ordinary one.
		create := allowCreate && !coordinator.IsInternalTopic(name)
		if !ok {
			if create && s.autoCreateEnabled() && !s.authorizeCreateTopic(rc, name) {
				refused(kmsg.StringPtr(name), [16]byte{})
				continue
			}
			if create {
				t, code = s.autoCreate(rc.ctx(), name)
			} else {
				code = kerr.UnknownTopicOrPartition.Code
			}
			if code == 0 {
				s.refreshPartitions()
			}
		}
		if code != 0 {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = kmsg.StringPtr(name)
			mt.ErrorCode = code
			mt.AuthorizedOperations = authorizedOperationsUnset
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, s.metadataTopic(view, t, topicAuthOps(t.Name)))
	}
	return resp, nil
}

func (s *Server) metadataTopic(view brokerView, t metastore.Topic, authOps int32) kmsg.MetadataResponseTopic {
	if t.ID == offsetsTopicID {
		return s.offsetsMetadataTopic(view, t, authOps)
	}
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.AuthorizedOperations = authOps
	for i, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader, mp.LeaderEpoch, mp.Replicas, mp.ISR, mp.OfflineReplicas = view.partitionRoute(t.Name, p, isShared(t))
		if mp.Leader == s.cfg.NodeID {
			// This broker's own raft replica knows its term before
			// the metastore does (the leader publishes it
			// asynchronously): a client given the older epoch would be
			// fenced by the replica's check and wait for new metadata.
			if r, ok := s.raft.Get(partition.Key{TopicID: t.ID, Index: int32(i)}); ok && r.IsLeader() && r.Failed() == nil {
				mp.LeaderEpoch = max(mp.LeaderEpoch, r.LeaderEpoch())
			}
		}
		if s.offlineHere(t, int32(i)) {
			// This broker's replica failed: it is offline, out of the
			// ISR, and no leader, whatever the metastore still records
			// (another voter's election replaces it there).
			self := s.cfg.NodeID
			if slices.Contains(mp.Replicas, self) && !slices.Contains(mp.OfflineReplicas, self) {
				mp.OfflineReplicas = append(mp.OfflineReplicas, self)
			}
			mp.ISR = slices.DeleteFunc(slices.Clone(mp.ISR), func(id int32) bool { return id == self })
			if mp.Leader == self {
				mp.Leader = -1
			}
		}
		if mp.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
