package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// DeleteRecords (key 21). Supported: v0-2.
//
// Semantics, as Kafka's ReplicaManager.deleteRecords: each partition's log
// start moves forward to the requested offset on every replica; offset -1
// means the high watermark (the one clients see, as ListOffsets latest
// answers it). An offset past the high watermark, or negative
// other than -1, gets OFFSET_OUT_OF_RANGE; an offset at or below the log
// start changes nothing. The answer's low watermark is the log start after
// the call. In a cluster the move is one raft entry that each voter and
// learner applies when it commits it (replica.Replica.DeleteRecords), so
// the partition is answered once the entry is committed and applied on the
// leader, or REQUEST_TIMED_OUT after TimeoutMillis. Unknown topics or
// partitions get UNKNOWN_TOPIC_OR_PARTITION. Each topic needs DELETE on
// it (TOPIC_AUTHORIZATION_FAILED for its partitions otherwise).
// A panic in one partition's work answers that partition
// UNKNOWN_SERVER_ERROR, as Kafka's ReplicaManager answers an unexpected
// exception (reqCtx.containPanic); the others are answered as usual.
// Version notes: v2+ flexible.
// Roles: the partition's leader. A read broker (which the read view names
// as leader) forwards the partition to the raft leader, as it does
// Produce; a write broker that is not the leader answers
// NOT_LEADER_OR_FOLLOWER.
func init() { register(21, handleDeleteRecords) }

// deleteTarget is one partition's request, resolved in stage 1.
type deleteTarget struct {
	sp      *kmsg.DeleteRecordsResponseTopicPartition
	p       hostedPartition
	forward *metastore.Topic // set instead of p: the leader is elsewhere
	offset  int64
	topic   string
}

func handleDeleteRecords(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	var work []deleteTarget
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		// DELETE on the topic, checked before it is looked up, as Kafka's
		// KafkaApis.handleDeleteRecordsRequest does (and before a read
		// broker forwards, as for Produce).
		allowed := s.authorizeTopic(rc, acl.OpDelete, rt.Topic)
		t, known := s.catalog.TopicByName(rt.Topic)
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			p, err := s.partition(t, rp.Partition)
			if err == nil && !p.IsLeader() {
				err = fmt.Errorf("%w: not the leader", errNotHosted)
			}
			if err != nil && s.shouldForward(err) {
				tt := t
				work = append(work, deleteTarget{sp: sp, forward: &tt, offset: rp.Offset, topic: t.Name})
				continue
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				continue
			}
			work = append(work, deleteTarget{sp: sp, p: p, offset: rp.Offset, topic: t.Name})
		}
	}
	if len(work) == 0 {
		return resp, nil
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	rc.later(func() kmsg.Response {
		ctx, cancel := context.WithTimeout(rc.ctx(), timeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, w := range work {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer rc.containPanic("delete records panicked on one partition: answered UNKNOWN_SERVER_ERROR", func(any) {
					w.sp.ErrorCode, w.sp.LowWatermark = kerr.UnknownServerError.Code, -1
				})
				faultAt(21, "stage2", w.topic, w.sp.Partition)
				if w.forward != nil {
					s.forwardDeleteRecords(ctx, req, *w.forward, w.sp.Partition, w.offset, w.sp)
					return
				}
				low, err := deleteRecords(ctx, w.p, w.offset)
				if err != nil {
					w.sp.ErrorCode = errorCode(err)
					return
				}
				w.sp.LowWatermark = low
			}()
		}
		wg.Wait()
		return resp
	})
	return nil, nil
}

// deleteRecords applies one partition's request: -1 is the high watermark
// (DeleteRecordsRequest.HIGH_WATERMARK); any other negative offset, or one
// past the high watermark, is out of range, as Kafka's
// Partition.deleteRecordsOnLeader says. Offsets are dense, so the high
// watermark is the one clients see (ListOffsets latest, Fetch).
func deleteRecords(ctx context.Context, p hostedPartition, offset int64) (int64, error) {
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, fmt.Errorf("%w: offset %d, high watermark %d", partition.ErrOffsetOutOfRange, offset, hw)
	}
	low, err := p.DeleteRecords(ctx, offset)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = context.DeadlineExceeded // the request's timeout or the connection closing
	}
	return low, err
}

// forwardDeleteRecords sends one partition's request to its raft leader
// through the leader's write listener and copies the answer into sp.
func (s *Server) forwardDeleteRecords(ctx context.Context, req *kmsg.DeleteRecordsRequest, t metastore.Topic, partition int32, offset int64, sp *kmsg.DeleteRecordsResponseTopicPartition) {
	leader := t.Partitions[partition].Leader
	cl, err := s.forwardClient()
	if err != nil || leader < 0 {
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	fr := kmsg.NewPtrDeleteRecordsRequest()
	fr.TimeoutMillis = req.TimeoutMillis
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = t.Name
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	fr.Topics = append(fr.Topics, rt)
	kresp, err := cl.Broker(int(leader)).Request(ctx, fr)
	if err != nil {
		s.log.Warn().Err(err).Str("topic", t.Name).Int32("partition", partition).Int32("leader", leader).Msg("forwarding delete records")
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		if ctx.Err() != nil {
			sp.ErrorCode = kerr.RequestTimedOut.Code
		}
		return
	}
	resp := kresp.(*kmsg.DeleteRecordsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		sp.ErrorCode = kerr.UnknownServerError.Code
		return
	}
	got := resp.Topics[0].Partitions[0]
	sp.ErrorCode, sp.LowWatermark = got.ErrorCode, got.LowWatermark
}
