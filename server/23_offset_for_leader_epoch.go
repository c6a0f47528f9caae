package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// OffsetForLeaderEpoch (key 23). Supported: v0-4.
//
// Semantics: for each partition, the end offset of the requested leader
// epoch (the start of the next epoch, or the log end for the current one)
// and the largest epoch not above it, which is how consumers detect a
// truncated log (KIP-320). An epoch the log has never seen gets -1/-1.
// CurrentLeaderEpoch (v2+) is fenced like Fetch's.
// Version notes: v1 leader epoch in the response; v2 current leader epoch;
// v3 replica id; v4+ flexible.
// Roles: leaders and read replicas.
func init() { register(23, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// Authorization, as Kafka's KafkaApis: CLUSTER_ACTION on the cluster
	// (the API began as inter-broker) or else DESCRIBE on each topic
	// (consumers since KIP-320), whatever replica id the request gives;
	// refused partitions get TOPIC_AUTHORIZATION_FAILED.
	clusterAction := s.authorizeCluster(rc, acl.OpClusterAction)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t, ok := s.topicByName(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			epochFence := int32(-1)
			if req.Version >= 2 {
				epochFence = rp.CurrentLeaderEpoch
			}
			p, code := s.readablePartition(t, ok, rp.Partition, epochFence)
			if !clusterAction && !s.authorizeTopic(rc, acl.OpDescribe, rt.Topic) {
				code = kerr.TopicAuthorizationFailed.Code
			}
			if code != 0 {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			sp.EndOffset, sp.LeaderEpoch = p.OffsetForLeaderEpoch(rp.LeaderEpoch)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
