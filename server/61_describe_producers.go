package server

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// DescribeProducers (key 61). Supported: v0.
//
// Semantics, as Kafka's ReplicaManager.activeProducerState (KIP-664): for
// each requested partition this broker hosts, the idempotent producers its
// log holds state for (the producer table every replica rebuilds from the
// batches it stores, so a follower or read replica answers as the leader
// does, as Kafka lets any replica answer): producer id, epoch, the last
// sequence and the max timestamp of its last batch, the coordinator epoch
// of its last transaction marker there (-1 before one), and the first
// offset of its open transaction in the partition (-1 if none).
// A partition of a known topic this broker does not host gets
// NOT_LEADER_OR_FOLLOWER, a failed replica KAFKA_STORAGE_ERROR, an unknown
// topic or partition UNKNOWN_TOPIC_OR_PARTITION. Each topic needs READ on
// it, checked first, as in Kafka's KafkaApis (TOPIC_AUTHORIZATION_FAILED).
// Version notes: v0 only, flexible.
// Roles: every broker, for the partitions it hosts.
func init() { register(61, handleDescribeProducers) }

func handleDescribeProducers(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		allowed := s.authorizeTopic(rc, acl.OpRead, rt.Topic)
		t, known := s.catalog.TopicByName(rt.Topic)
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			sp.ActiveProducers = []kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if !known || idx < 0 || int(idx) >= len(t.Partitions) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p, err := s.partition(t, idx)
			if err != nil {
				if errors.Is(err, errNotHosted) {
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
				} else {
					sp.ErrorCode = errorCode(err)
				}
				sp.ErrorMessage = errorMessage(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			prods, err := p.Storage().ActiveProducers()
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage = errorCode(err), errorMessage(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, ap := range prods {
				a := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				a.ProducerID, a.ProducerEpoch = ap.ID, int32(ap.Epoch)
				a.LastSequence, a.LastTimestamp = ap.LastSequence, ap.LastTimestamp
				a.CoordinatorEpoch, a.CurrentTxnStartOffset = ap.CoordinatorEpoch, ap.CurrentTxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, a)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
