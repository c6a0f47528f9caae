package server

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/partition"
)

// OffsetForLeaderEpoch (key 23). Supported: v0-4.
//
// Semantics: for each partition, the end offset of the requested leader
// epoch (the start of the next epoch, or the log end for the current one)
// and the largest epoch not above it, which is how consumers detect a
// truncated log (KIP-320). An epoch the log has never seen gets -1/-1.
// CurrentLeaderEpoch (v2+) is fenced like Fetch's.
//
// Only the leader's log knows where the latest epoch ends (Kafka answers
// consumers on the leader only: ReplicaManager.lastOffsetForLeaderEpoch
// with fetchOnlyFromLeader). A replica that is not the raft leader (a read
// broker, which the read view names as leader, or a lagging voter) answers
// from its own log only when that log is known complete for the epoch: a
// later epoch starts in it with a committed batch. Otherwise its log end may be below what a
// consumer already read through a replica further ahead, and a client
// would take it for a truncated log and send its position back; so it
// asks the partition's raft leader, through the same inter-broker client
// that forwards Produce, and answers with the leader's answer. When no
// leader answers (every write broker down or unreachable) such a partition
// gets NOT_LEADER_OR_FOLLOWER, which the Java client and franz-go retry
// without moving the position; epochs the local log holds complete are
// still answered. A request from a replica (ReplicaID >= 0, v3+: the
// forwarded one) is answered by the raft leader only, never forwarded
// again: NOT_LEADER_OR_FOLLOWER elsewhere.
// Version notes: v1 leader epoch in the response; v2 current leader epoch;
// v3 replica id; v4+ flexible.
// Roles: leaders and read replicas (which ask the leader, above).
func init() { register(23, handleOffsetForLeaderEpoch) }

// epochAsk is one partition whose answer the raft leader gives.
type epochAsk struct {
	sp      *kmsg.OffsetForLeaderEpochResponseTopicPartition
	topic   string
	epoch   int32 // the leader epoch asked about
	current int32 // the current leader epoch to fence with at the leader
	fenced  bool  // the client sent a current leader epoch (v2+)
}

// epochForwardTimeout bounds the wait for the leader's answer, well
// inside the client's request timeout so that it can retry.
const epochForwardTimeout = 5 * time.Second

func handleOffsetForLeaderEpoch(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// Authorization, as Kafka's KafkaApis: CLUSTER_ACTION on the cluster
	// (the API began as inter-broker) or else DESCRIBE on each topic
	// (consumers since KIP-320), whatever replica id the request gives;
	// refused partitions get TOPIC_AUTHORIZATION_FAILED.
	clusterAction := s.authorizeCluster(rc, acl.OpClusterAction)
	fromReplica := req.Version >= 3 && req.ReplicaID >= 0
	asks := map[int32][]epochAsk{} // by raft leader
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t, ok := s.topicByName(rt.Topic)
		st.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
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
				continue
			}
			r, raft := p.(partition.Replica)
			if !raft || r.IsLeader() {
				sp.EndOffset, sp.LeaderEpoch = p.OffsetForLeaderEpoch(rp.LeaderEpoch)
				continue
			}
			if fromReplica {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				continue
			}
			// Read the high watermark first: an answer below it ends
			// where a later epoch of this log starts with a committed
			// batch, which no leader takes back, so the log holds the
			// whole epoch. Any other answer is this log's latest epoch
			// (or one that a batch not yet committed ends), which may
			// go on at the leader past this replica's end.
			hw := r.HighWatermark()
			end, ep := r.OffsetForLeaderEpoch(rp.LeaderEpoch)
			if rp.LeaderEpoch < 0 || (end >= 0 && end < hw) {
				sp.EndOffset, sp.LeaderEpoch = end, ep
				continue
			}
			leader := int32(r.Leader())
			if leader <= 0 {
				leader = t.Partitions[rp.Partition].Leader
			}
			if leader < 0 || leader == s.cfg.NodeID {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				continue
			}
			current := epochFence
			if current < 0 {
				current = r.LeaderEpoch()
			}
			asks[leader] = append(asks[leader], epochAsk{sp: sp, topic: rt.Topic, epoch: rp.LeaderEpoch, current: current, fenced: epochFence >= 0})
		}
	}
	if len(asks) == 0 {
		return resp, nil
	}
	rc.later(func() kmsg.Response {
		ctx, cancel := context.WithTimeout(rc.ctx(), epochForwardTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for leader, a := range asks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.askLeaderEpochEnds(ctx, leader, a)
			}()
		}
		wg.Wait()
		return resp
	})
	return nil, nil
}

// askLeaderEpochEnds sends the partitions of asks to their raft leader
// in one OffsetForLeaderEpoch, as a replica (ReplicaID: this broker, so
// the leader answers from its own log or refuses), and copies each
// partition's answer into its response. A partition the leader does not
// answer gets NOT_LEADER_OR_FOLLOWER.
func (s *Server) askLeaderEpochEnds(ctx context.Context, leader int32, asks []epochAsk) {
	for _, a := range asks {
		a.sp.ErrorCode = kerr.NotLeaderForPartition.Code
	}
	cl, err := s.forwardClient()
	if err != nil {
		return
	}
	fr := kmsg.NewPtrOffsetForLeaderEpochRequest()
	fr.ReplicaID = s.cfg.NodeID
	byTopic := map[string]int{}
	for _, a := range asks {
		i, ok := byTopic[a.topic]
		if !ok {
			i = len(fr.Topics)
			byTopic[a.topic] = i
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = a.topic
			fr.Topics = append(fr.Topics, rt)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = a.sp.Partition, a.current, a.epoch
		fr.Topics[i].Partitions = append(fr.Topics[i].Partitions, rp)
	}
	kresp, err := cl.Broker(int(leader)).Request(ctx, fr)
	if err != nil {
		s.log.Debug().Err(err).Int32("leader", leader).Msg("asking the leader for epoch end offsets")
		return
	}
	got := map[string]map[int32]kmsg.OffsetForLeaderEpochResponseTopicPartition{}
	for _, t := range kresp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
		m := got[t.Topic]
		if m == nil {
			m = map[int32]kmsg.OffsetForLeaderEpochResponseTopicPartition{}
			got[t.Topic] = m
		}
		for _, p := range t.Partitions {
			m[p.Partition] = p
		}
	}
	for _, a := range asks {
		p, ok := got[a.topic][a.sp.Partition]
		if !ok {
			continue
		}
		a.sp.ErrorCode, a.sp.EndOffset, a.sp.LeaderEpoch = p.ErrorCode, p.EndOffset, p.LeaderEpoch
		if !a.fenced && (p.ErrorCode == kerr.FencedLeaderEpoch.Code || p.ErrorCode == kerr.UnknownLeaderEpoch.Code) {
			// Fenced with this replica's epoch, not the client's: it
			// or the leader is behind the other; retry later.
			a.sp.ErrorCode, a.sp.EndOffset, a.sp.LeaderEpoch = kerr.NotLeaderForPartition.Code, -1, -1
		}
	}
}
