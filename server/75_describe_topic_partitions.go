package server

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
)

// DescribeTopicPartitions (key 75). Supported: v0.
//
// Semantics, as Kafka 3.8+'s DescribeTopicPartitionsRequestHandler and
// KRaftMetadataCache.describeTopicResponse (KIP-966): the requested topics,
// or every topic when the list is empty, in name order, starting at the
// cursor (its topic, from its partition); at most ResponsePartitionLimit
// partitions (capped at maxDescribePartitions, at least 1) are answered, and
// NextCursor names where the next page starts. A cursor whose topic is not
// in a non-empty topic list, or with a negative partition, gets
// INVALID_REQUEST for every requested topic, as Kafka's error response does.
// Each partition is reported as Metadata reports it in this listener's view
// (leader, epoch, replicas, ISR and offline replicas: see
// brokerView.partitionRoute); eligible leader replicas are empty (Sluice
// elects leaders by raft among the voters, so there is no ELR, as in Kafka
// with eligible.leader.replicas.enable off). Unknown topics get
// UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an invalid name)
// when named, and are skipped when listing every topic. Each topic needs
// DESCRIBE on it (a topic named without it gets TOPIC_AUTHORIZATION_FAILED
// after the page's topics, existing or not; listing every topic skips it);
// the authorized operations are the authorizer's, as Kafka reports them.
// Version notes: v0 only, flexible.
// Roles: every broker; the brokers named depend on the listener's view.
func init() { register(75, handleDescribeTopicPartitions) }

// maxDescribePartitions is Kafka's max.request.partition.size.limit
// default: the most partitions one DescribeTopicPartitions answer holds.
const maxDescribePartitions = 2000

func handleDescribeTopicPartitions(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	all := len(req.Topics) == 0
	cursorTopic := ""
	if req.Cursor != nil {
		cursorTopic = req.Cursor.Topic
	}
	var names []string
	if all {
		for _, t := range s.catalog.Topics() {
			if t.Name >= cursorTopic {
				names = append(names, t.Name)
			}
		}
	} else {
		for _, rt := range req.Topics {
			if rt.Topic >= cursorTopic {
				names = append(names, rt.Topic)
			}
		}
	}
	invalid := (req.Cursor != nil && !all && !slices.Contains(names, cursorTopic)) ||
		(req.Cursor != nil && req.Cursor.Partition < 0)
	if invalid {
		for _, rt := range req.Topics {
			mt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			mt.Topic = &rt.Topic
			mt.ErrorCode = kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, mt)
		}
		return resp, nil
	}
	sort.Strings(names)
	names = slices.Compact(names)

	view := s.viewOf(rc)
	remaining := int(max(min(req.ResponsePartitionLimit, maxDescribePartitions), 1))
	// Topics named without DESCRIBE on them, answered after the page
	// whether or not they exist, as Kafka does.
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	full := false // the page is complete: only denied topics are still collected
	for _, name := range names {
		if !s.authorizeTopic(rc, acl.OpDescribe, name) {
			if !all {
				mt := kmsg.NewDescribeTopicPartitionsResponseTopic()
				mt.Topic = kmsg.StringPtr(name)
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				mt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
				denied = append(denied, mt)
			}
			continue
		}
		if full {
			continue
		}
		if remaining == 0 {
			// The next page starts at this topic; it need not exist.
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: 0}
			full = true
			continue
		}
		t, ok := s.catalog.TopicByName(name)
		if !ok {
			if all {
				continue
			}
			mt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			mt.Topic = kmsg.StringPtr(name)
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if validTopicName(name) != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			mt.AuthorizedOperations = s.authorizedOps(rc, acl.ResourceTopic, name, acl.TopicOps)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		start := 0
		if name == cursorTopic {
			start = int(req.Cursor.Partition)
		}
		mt, next := s.describeTopicPartitions(view, t, start, remaining)
		mt.AuthorizedOperations = s.authorizedOps(rc, acl.ResourceTopic, name, acl.TopicOps)
		resp.Topics = append(resp.Topics, mt)
		if next >= 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: int32(next)}
			full = true
			continue
		}
		remaining -= len(mt.Partitions)
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}

// describeTopicPartitions answers partitions [start, start+limit) of t and
// the partition the next page starts at, -1 when t has no more.
func (s *Server) describeTopicPartitions(view brokerView, t metastore.Topic, start, limit int) (kmsg.DescribeTopicPartitionsResponseTopic, int) {
	mt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	n := len(t.Partitions)
	upper := min(n, start+limit)
	next := -1
	if upper < n {
		next = upper
	}
	// One route per partition, exactly as Metadata computes it.
	md := s.metadataTopic(view, t, authorizedOperationsUnset)
	for i := start; i < upper; i++ {
		mp := md.Partitions[i]
		dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		dp.ErrorCode, dp.Partition = mp.ErrorCode, mp.Partition
		dp.LeaderID, dp.LeaderEpoch = mp.Leader, mp.LeaderEpoch
		dp.Replicas, dp.ISR, dp.OfflineReplicas = mp.Replicas, mp.ISR, mp.OfflineReplicas
		dp.EligibleLeaderReplicas, dp.LastKnownELR = []int32{}, []int32{}
		mt.Partitions = append(mt.Partitions, dp)
	}
	return mt, next
}
