package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// ListOffsets (key 2). Supported: v1-11.
//
// Semantics: -2 earliest (log start offset), -1 latest (the high
// watermark, as Fetch reports it; with isolation level read_committed the
// last stable offset when that is lower, as Kafka answers), -3 the
// record with the largest timestamp (v7+), -4 earliest local (v8+; all
// data is local, so the log start), -5 latest tiered and -6 earliest
// pending upload (v9+, v11+; no tiered storage, so offset -1 as Kafka
// answers without remote storage); any other value is a timestamp: the
// first committed offset whose timestamp is at least it, or -1.
// Version notes: v2 isolation level, v4 current leader epoch fencing,
// v6+ flexible, v7 max timestamp, v10 timeout.
// Roles: leaders and read replicas.
func init() { register(2, handleListOffsets) }

func handleListOffsets(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t, ok := s.topicByName(rt.Topic)
		// DESCRIBE on the topic, as Kafka; refused partitions get
		// TOPIC_AUTHORIZATION_FAILED whether or not the topic exists.
		allowed := s.authorizeTopic(rc, acl.OpDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
			epochFence := int32(-1)
			if req.Version >= 4 {
				epochFence = rp.CurrentLeaderEpoch
			}
			p, code := s.readablePartition(t, ok, rp.Partition, epochFence)
			if !allowed {
				code = kerr.TopicAuthorizationFailed.Code
			}
			if code != 0 {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			epoch := p.LeaderEpoch()
			hw := p.HighWatermark()
			switch ts := rp.Timestamp; {
			case ts == -2 || ts == -4:
				sp.Offset, sp.LeaderEpoch = p.LogStartOffset(), epoch
			case ts == -1:
				// The visible high watermark, as Fetch reports it: raft's
				// own entries at the end are nothing to consume, so lag
				// tools show none.
				sp.Offset, sp.LeaderEpoch = p.HighWatermark(), epoch
				if req.Version >= 2 && req.IsolationLevel == 1 {
					sp.Offset = min(sp.Offset, p.LastStableOffset())
				}
			case ts == -3:
				off, mts, err := p.Storage().MaxTimestamp()
				if err != nil {
					sp.ErrorCode = errorCode(err)
				} else if off >= 0 && off < hw {
					sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, mts, epoch
				}
			case ts < 0:
				// -5, -6: nothing is tiered; Kafka answers -1 too.
			default:
				off, fts, found, err := p.Storage().OffsetForTimestamp(ts)
				if err != nil {
					sp.ErrorCode = errorCode(err)
				} else if found && off < hw {
					sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, fts, epoch
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
