package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/partition"
)

// ElectLeaders (key 43). Supported: v0-2.
//
// Semantics: election type 0 (preferred, the only one of v0) makes the
// partition's preferred replica, the first of its replica list, its
// leader, by raft leadership transfer: the current raft leader hands over
// once the preferred voter has caught up, and the answer comes when it
// leads, as Kafka's answer comes once the election is recorded. This is
// what auto.leader.rebalance.enable does every
// leader.imbalance.check.interval.seconds, on demand. Per partition:
// ELECTION_NOT_NEEDED when the preferred replica leads already;
// PREFERRED_LEADER_NOT_AVAILABLE when it is not registered (not alive), is
// not in the ISR its raft leader last reported, is not yet a voter of the
// raft group (a reassignment adding it is still under way), or did not
// take over within the timeout (it is not caught up);
// UNKNOWN_TOPIC_OR_PARTITION for an unknown partition.
// Election type 1 (unclean): raft has no unclean election (electing a
// replica that may lack acknowledged records is exactly what it rules
// out), and raft elects a leader by itself whenever a majority of voters
// is up, so the honest answers are ELECTION_NOT_NEEDED when the partition
// has a live leader and ELIGIBLE_LEADERS_NOT_AVAILABLE when it has none.
// Null Topics means every partition, and then partitions answered
// ELECTION_NOT_NEEDED are left out, as Kafka's controller does.
// A broker that does not lead the partition forwards the election to the
// leader over the Kafka protocol (as a read broker forwards Produce); an
// election that was forwarded once is not forwarded again.
// Version notes: v1 ElectionType and the top-level ErrorCode; v2+ flexible.
// Roles: every broker.
func init() { register(43, handleElectLeaders) }

const forwardClientPrefix = "sluice-forward-"

type electTarget struct {
	topic     string
	partition int32
}

func handleElectLeaders(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	etype := int8(0)
	if req.Version >= 1 {
		etype = req.ElectionType
	}
	// Kafka: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at
	// the top and for every partition named.
	if !s.authorizeCluster(rc, acl.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, rt := range req.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				res := kmsg.NewElectLeadersResponseTopicPartition()
				res.Partition = p
				electFail(&res, kerr.ClusterAuthorizationFailed.Code, "ALTER on the cluster is required")
				st.Partitions = append(st.Partitions, res)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	all := req.Topics == nil
	var targets []electTarget
	if all {
		for _, t := range s.catalog.Topics() {
			for _, p := range t.Partitions {
				targets = append(targets, electTarget{t.Name, p.ID})
			}
		}
	} else {
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				if !slices.Contains(targets, electTarget{rt.Topic, p}) {
					targets = append(targets, electTarget{rt.Topic, p})
				}
			}
		}
	}
	forwarded := rc.hdr.ClientID != nil && strings.HasPrefix(*rc.hdr.ClientID, forwardClientPrefix)
	timeout := 10 * time.Second
	if req.TimeoutMillis > 0 {
		timeout = min(timeout, time.Duration(req.TimeoutMillis)*time.Millisecond)
	}
	rc.later(func() kmsg.Response {
		ctx, cancel := context.WithTimeout(rc.ctx(), timeout)
		defer cancel()
		results := make([]kmsg.ElectLeadersResponseTopicPartition, len(targets))
		// Elections led elsewhere, grouped by the leader they go to.
		remote := map[int32][]int{}
		// Every election runs at once (each may wait for a leadership
		// transfer), and the answer waits for all of them.
		var wg sync.WaitGroup
		for i, tg := range targets {
			res := &results[i]
			*res = kmsg.NewElectLeadersResponseTopicPartition()
			res.Partition = tg.partition
			if etype != 0 && etype != 1 {
				electFail(res, kerr.InvalidRequest.Code, fmt.Sprintf("unknown election type %d", etype))
				continue
			}
			leader, forward := s.electOne(etype, tg, res, forwarded)
			if forward == nil {
				continue
			}
			if leader >= 0 {
				remote[leader] = append(remote[leader], i)
				continue
			}
			wg.Go(func() { forward(ctx) })
		}
		for leader, idx := range remote {
			wg.Go(func() { s.forwardElections(ctx, leader, targets, idx, results) })
		}
		wg.Wait()
		if etype != 0 && etype != 1 {
			resp.ErrorCode = kerr.InvalidRequest.Code
		}
		byTopic := map[string]int{}
		for i, tg := range targets {
			if all && results[i].ErrorCode == kerr.ElectionNotNeeded.Code {
				continue
			}
			j, ok := byTopic[tg.topic]
			if !ok {
				st := kmsg.NewElectLeadersResponseTopic()
				st.Topic = tg.topic
				resp.Topics = append(resp.Topics, st)
				j = len(resp.Topics) - 1
				byTopic[tg.topic] = j
			}
			resp.Topics[j].Partitions = append(resp.Topics[j].Partitions, results[i])
		}
		return resp
	})
	return nil, nil
}

func electFail(res *kmsg.ElectLeadersResponseTopicPartition, code int16, msg string) {
	res.ErrorCode = code
	res.ErrorMessage = kmsg.StringPtr(msg)
}

// electOne answers what can be answered from the catalog. Otherwise it
// returns the leader broker to forward to (>= 0), or -1 and the election
// to run here.
func (s *Server) electOne(etype int8, tg electTarget, res *kmsg.ElectLeadersResponseTopicPartition, forwarded bool) (int32, func(context.Context)) {
	t, ok := s.catalog.TopicByName(tg.topic)
	if !ok || tg.partition < 0 || int(tg.partition) >= len(t.Partitions) {
		electFail(res, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("partition %s-%d does not exist", tg.topic, tg.partition))
		return -1, nil
	}
	p := t.Partitions[tg.partition]
	alive := map[int32]bool{}
	for _, b := range s.catalog.Brokers() {
		alive[b.ID] = true
	}
	var r partition.Replica
	leader := p.Leader
	if rr, ok := s.raft.Get(partition.Key{TopicID: t.ID, Index: tg.partition}); ok {
		r = rr
		if l := rr.Leader(); l > 0 {
			leader = int32(l) // fresher than the catalog's
		}
	}
	if etype == 1 {
		if leader >= 0 && alive[leader] {
			electFail(res, kerr.ElectionNotNeeded.Code, fmt.Sprintf("broker %d leads; raft elects leaders by itself and has no unclean election", leader))
		} else {
			electFail(res, kerr.EligibleLeadersNotAvailable.Code, "no live leader: raft elects one once a majority of the partition's voters is up, and never an unclean one")
		}
		return -1, nil
	}
	replicas := p.Replicas()
	if len(replicas) == 0 {
		electFail(res, kerr.PreferredLeaderNotAvailable.Code, "the partition has no replicas")
		return -1, nil
	}
	pref := replicas[0]
	switch {
	case leader == pref:
		electFail(res, kerr.ElectionNotNeeded.Code, fmt.Sprintf("the preferred replica %d leads already", pref))
		return -1, nil
	case !alive[pref]:
		electFail(res, kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("the preferred replica %d is not alive", pref))
		return -1, nil
	case !slices.Contains(p.InSync(), pref):
		// As Kafka: only an in-sync preferred replica is elected.
		electFail(res, kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("the preferred replica %d is not in the ISR", pref))
		return -1, nil
	}
	if r != nil && r.IsLeader() {
		return -1, func(ctx context.Context) { s.transferTo(ctx, r, pref, res) }
	}
	if forwarded || leader < 0 || !alive[leader] || leader == s.cfg.NodeID {
		electFail(res, kerr.PreferredLeaderNotAvailable.Code, "the partition's leadership is changing; retry")
		return -1, nil
	}
	return leader, func(context.Context) {}
}

// transferTo hands r's leadership to pref and waits until pref leads.
// Raft gives a transfer up after an election timeout if the target has not
// caught up, so it is asked again each second until ctx ends.
func (s *Server) transferTo(ctx context.Context, r partition.Replica, pref int32, res *kmsg.ElectLeadersResponseTopicPartition) {
	var last time.Time
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if int32(r.Leader()) == pref {
			s.log.Info().Str("topic", r.Topic()).Int32("partition", r.Key().Index).Int32("leader", pref).Msg("preferred leader elected")
			return
		}
		if r.IsLeader() && time.Since(last) > time.Second {
			if err := r.TransferLeadership(partition.NodeID(pref)); err != nil {
				electFail(res, kerr.PreferredLeaderNotAvailable.Code, err.Error())
				return
			}
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			electFail(res, kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("the preferred replica %d did not take over in time (not caught up?)", pref))
			return
		case <-tick.C:
		}
	}
}

// forwardElections sends the elections of targets[idx] to their leader.
func (s *Server) forwardElections(ctx context.Context, leader int32, targets []electTarget, idx []int, results []kmsg.ElectLeadersResponseTopicPartition) {
	failAll := func(msg string) {
		for _, i := range idx {
			electFail(&results[i], kerr.PreferredLeaderNotAvailable.Code, msg)
		}
	}
	cl, err := s.forwardClient()
	if err != nil {
		failAll(err.Error())
		return
	}
	fr := kmsg.NewPtrElectLeadersRequest()
	fr.ElectionType = 0
	if dl, ok := ctx.Deadline(); ok {
		fr.TimeoutMillis = int32(max(time.Until(dl).Milliseconds(), 1))
	}
	pos := map[electTarget]int{}
	for _, i := range idx {
		tg := targets[i]
		pos[tg] = i
		j := slices.IndexFunc(fr.Topics, func(t kmsg.ElectLeadersRequestTopic) bool { return t.Topic == tg.topic })
		if j < 0 {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic = tg.topic
			fr.Topics = append(fr.Topics, rt)
			j = len(fr.Topics) - 1
		}
		fr.Topics[j].Partitions = append(fr.Topics[j].Partitions, tg.partition)
	}
	kresp, err := cl.Broker(int(leader)).Request(ctx, fr)
	if err != nil {
		failAll(fmt.Sprintf("forwarding to leader %d: %v", leader, err))
		return
	}
	got, ok := kresp.(*kmsg.ElectLeadersResponse)
	if !ok {
		failAll("unexpected answer from the leader")
		return
	}
	seen := map[int]bool{}
	for _, t := range got.Topics {
		for _, p := range t.Partitions {
			if i, ok := pos[electTarget{t.Topic, p.Partition}]; ok {
				results[i].ErrorCode, results[i].ErrorMessage = p.ErrorCode, p.ErrorMessage
				seen[i] = true
			}
		}
	}
	for _, i := range idx {
		if !seen[i] {
			electFail(&results[i], kerr.UnknownServerError.Code, fmt.Sprintf("leader %d did not answer for this partition", leader))
		}
	}
}
