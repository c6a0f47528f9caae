package server

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// markerTimeout bounds the wait for one marker to commit.
const markerTimeout = 30 * time.Second

// WriteTxnMarkers (key 27). Supported: v0-2.
//
// Semantics: the broker-to-broker request by which a transaction
// coordinator has the leaders of a transaction's partitions write its
// COMMIT or ABORT marker (a control batch of the producer's id and epoch
// that takes an offset, see protocol.TxnMarkerBatch). Each partition is
// answered once its marker is committed: UNKNOWN_TOPIC_OR_PARTITION for a
// partition that does not exist, NOT_LEADER_OR_FOLLOWER where this broker
// does not lead it, REQUEST_TIMED_OUT past 30 s. A marker older than the
// producer epoch the partition has seen is refused with
// INVALID_PRODUCER_EPOCH and not written (Kafka's checkProducerEpoch; a
// coordinator takes the answer as the end of that marker: a newer epoch's
// marker already ended the transaction there).
// The marker's value carries the request's coordinator epoch (Sluice's
// coordinators send the metastore index of the decision, see
// txn.Marker). A marker whose coordinator epoch is below that of the
// producer's last marker in the partition is refused with
// TRANSACTION_COORDINATOR_FENCED and not written (Kafka's
// appendEndTxnMarker: a zombie coordinator's late marker must not end the
// producer's next transaction); the partition keeps the last coordinator
// epoch with its producer state (log.CheckMarker).
// Version notes: v1 flexible; v2 the transaction's version (KIP-1228),
// 2 when the marker's epoch is the one a version 2 EndTxn bumped to: then
// the marker's epoch must be above the producer's in the partition, with
// 0 or 1 at least equal; a version 2 marker at the producer's epoch is
// taken (written again) only as the retry of the marker that bumped it
// (no batch of the producer stored at that epoch since, or the epoch is
// 32767), otherwise INVALID_PRODUCER_EPOCH, as Kafka 4.4 answers.
// Roles: partition leaders (write brokers).
func init() { register(27, handleWriteTxnMarkers) }

func handleWriteTxnMarkers(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	// Authorization, as Kafka: CLUSTER_ACTION on the cluster (the
	// coordinators' principal; over PLAINTEXT the forwarding client is
	// ANONYMOUS, as for forwarded produce).
	if !s.authorizeCluster(rc, acl.OpClusterAction) {
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, mt := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = mt.Topic
				for _, p := range mt.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp, nil
	}
	rc.later(func() kmsg.Response {
		ctx, cancel := context.WithTimeout(rc.ctx(), markerTimeout)
		defer cancel()
		// Every marker is proposed first, then each commit awaited, so
		// the partitions' commit waits overlap.
		var waits []func()
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, mt := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = mt.Topic
				t, ok := s.catalog.TopicByName(mt.Topic)
				rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(mt.Partitions))
				for i, p := range mt.Partitions {
					rp := &rt.Partitions[i]
					*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition = p
					switch {
					case m.ProducerID < 0:
						rp.ErrorCode = kerr.InvalidProducerIDMapping.Code
					case !ok || p < 0 || int(p) >= len(t.Partitions):
						rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					default:
						wait, err := s.proposeMarker(t, p, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion)
						if err != nil {
							rp.ErrorCode = errorCode(err)
							continue
						}
						waits = append(waits, func() { rp.ErrorCode = markerCode(wait(ctx)) })
					}
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		for _, w := range waits {
			w()
		}
		return resp
	})
	return nil, nil
}

func markerCode(err error) int16 {
	if errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut.Code
	}
	return errorCode(err)
}
