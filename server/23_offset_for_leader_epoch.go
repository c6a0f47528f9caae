package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t, ok := s.catalog.TopicByName(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			if !ok || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			p, err := s.partition(t, rp.Partition)
			if err != nil {
				sp.ErrorCode = errorCode(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if req.Version >= 2 && rp.CurrentLeaderEpoch >= 0 {
				if code := checkLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch()); code != 0 {
					sp.ErrorCode = code
					st.Partitions = append(st.Partitions, sp)
					continue
				}
			}
			sp.EndOffset, sp.LeaderEpoch = p.OffsetForLeaderEpoch(rp.LeaderEpoch)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
