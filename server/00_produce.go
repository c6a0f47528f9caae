package server

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
	"github.com/sluice-broker/sluice/quota"
)

// Produce (key 0). Advertised v0-13; v0-v2 close the connection (see
// conn.handle), as Kafka 4 refuses them.
//
// Semantics: acks=0 gets no response; acks=1 is answered once the batch is
// written; acks=-1 once it is committed (durable under the flush policy),
// or REQUEST_TIMED_OUT after TimeoutMillis. Each partition's records must
// be exactly one v2 batch (CORRUPT_MESSAGE for a bad length or CRC,
// INVALID_RECORD for several batches). A batch over max.message.bytes gets
// MESSAGE_TOO_LARGE, and so does a compressed one whose records inflate
// past it (found before they inflate further; the inflation buffer counts
// against queued.max.request.bytes, see inflate.go). Kafka checks only the
// compressed size unless it rebuilds the batch; the Java producer answers
// MESSAGE_TOO_LARGE by splitting the batch. CreateTime timestamps outside
// the topic's message.timestamp.before/after.max.ms get INVALID_TIMESTAMP (checked on
// the batch's base and max timestamps, without decompressing).
// LogAppendTime topics stamp the batch. Idempotent batches are checked by
// the log: a retry of one of the last five returns its original offsets.
// A topic whose compression.type names a codec stores every batch with it:
// a batch of another codec is recompressed (inflate.go: recompress), and
// MESSAGE_TOO_LARGE if the result is over max.message.bytes.
// A producer's first transactional batch in a partition is taken only if
// the partition is in its ongoing transaction (KIP-890 part 1,
// verifyTxnBatch): otherwise INVALID_TXN_STATE up to v10 and
// TRANSACTION_ABORTABLE from v11 (KIP-1050, Kafka's codes by version:
// verifyError). From v12 (KIP-890 part
// 2, transaction version 2) the leader adds the partition to the
// transaction itself instead: the client sends no AddPartitionsToTxn.
// Version notes: v3 transactional id, v5 log start offset, v7 zstd,
// v8 record errors and error message, v9+ flexible, v12 implicit
// partition add, v13 topic ids.
// Roles: the partition's leader (every partition, in `sluice dev`).
func init() { register(0, handleProduce) }

func handleProduce(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	return s.produce(rc, req, decodedProduce{req})
}

// produceSource gives Produce's first stage a request's topics and
// partitions in order: from a decoded request, or read from the socket
// as stage 1 goes (produce_stream.go), so that a large request's batches
// are written one by one as they arrive.
type produceSource interface {
	// topic returns the request's i-th topic, its partitions allocated
	// but not read yet, or nil after the last one.
	topic(i int) (*kmsg.ProduceRequestTopic, error)
	// partition reads the topic's i-th partition.
	partition(rt *kmsg.ProduceRequestTopic, i int) error
	// written: nothing reads the partition's records any more (its
	// batch is in the log), so their memory may go now.
	written(rt *kmsg.ProduceRequestTopic, i int)
	// done: the last partition was handled; the rest of the request is
	// read.
	done() error
}

// decodedProduce is a request decoded whole: its frame goes at once
// (releaseFrame).
type decodedProduce struct{ req *kmsg.ProduceRequest }

func (d decodedProduce) topic(i int) (*kmsg.ProduceRequestTopic, error) {
	if i < len(d.req.Topics) {
		return &d.req.Topics[i], nil
	}
	return nil, nil
}
func (decodedProduce) partition(*kmsg.ProduceRequestTopic, int) error { return nil }
func (decodedProduce) written(*kmsg.ProduceRequestTopic, int)         {}
func (decodedProduce) done() error                                    { return nil }

func (s *Server) produce(rc *reqCtx, req *kmsg.ProduceRequest, src produceSource) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if !rc.quotaExempt(0) {
		// producer_byte_rate counts the request's size, as in Kafka;
		// the response carries the throttle and the connection is
		// muted for it (acks=0: muted only).
		s.quotas.record(rc, s.quotas.produce, quota.ProducerByteRate, float64(rc.size), s.quotas.throttledProduce)
	}

	var waits []producePending
	// keepFrame: something still needs the records after stage 1 (a
	// forward to the leader, or a raft proposal until raft has copied
	// its batch), so the frame they alias must not be reused yet.
	// forwarded: a forward needs them until it is sent, in stage 2.
	keepFrame, forwarded, panicked := false, false, false

	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidRequiredAcks.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}

	// Authorization, as Kafka's handleProduceRequest: WRITE on the
	// transactional id when there is one (every partition refused with
	// TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise), then WRITE on each
	// topic (TOPIC_AUTHORIZATION_FAILED, whether or not it exists).
	if req.TransactionID != nil && !s.authorize(rc, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID) {
		if req.Acks == 0 {
			// No answer to carry the error: close, as Kafka does.
			return nil, errors.New("acks=0 produce refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED: closing the connection")
		}
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}

	// Transaction version 2: the partitions that get the producer's first
	// transactional batch here join its transaction in one metastore
	// write for the whole request (implicitAdds), as Kafka's leader asks
	// the coordinator once per request.
	var added map[metastore.TopicPartition]error
	if req.Version >= 12 && req.TransactionID != nil && *req.TransactionID != "" {
		added = s.implicitAdds(rc, req)
	}

	// Stage 1, in request order: validate and propose every partition's
	// batch, so one producer's in-flight requests reach the log in order.
	now := time.Now().UnixMilli()
	for ti := 0; ; ti++ {
		rt, err := src.topic(ti)
		if err != nil {
			return nil, err
		}
		if rt == nil {
			break
		}
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t metastore.Topic
		var ok bool
		topicCode := int16(0)
		if req.Version >= 13 {
			t, ok = s.produceTopicByID(metastore.TopicID(rt.TopicID))
			if !ok {
				topicCode = kerr.UnknownTopicID.Code
			}
		} else {
			t, ok = s.produceTopicByName(rt.Topic)
			if !ok {
				topicCode = kerr.UnknownTopicOrPartition.Code
			}
		}
		if name := rt.Topic; ok || req.Version < 13 {
			if ok {
				name = t.Name
			}
			if !s.authorizeTopic(rc, acl.OpWrite, name) {
				topicCode = kerr.TopicAuthorizationFailed.Code
			} else if coordinator.IsInternalTopic(name) {
				// Kafka's ReplicaManager: "Cannot append to internal
				// topic", whether or not it exists yet.
				topicCode = kerr.InvalidTopicException.Code
			}
		}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i := range rt.Partitions {
			if err := src.partition(rt, i); err != nil {
				return nil, err
			}
			rp := &rt.Partitions[i]
			sp := &st.Partitions[i]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			fail := func(err error) {
				sp.ErrorCode = errorCode(err)
				if req.Version >= 8 {
					sp.ErrorMessage = errorMessage(err)
				}
			}
			if topicCode != 0 {
				sp.ErrorCode = topicCode
				if topicCode == kerr.InvalidTopicException.Code && req.Version >= 8 {
					sp.ErrorMessage = kmsg.StringPtr("Cannot append to internal topic " + rt.Topic)
				}
				continue
			}
			if rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			p, err := s.partition(t, rp.Partition)
			if err != nil && s.shouldForward(err) {
				tt := t
				waits = append(waits, producePending{sp: sp, forward: &tt, records: rp.Records})
				keepFrame, forwarded = true, true
				continue
			}
			if err != nil {
				if !errors.Is(err, errNotHosted) {
					s.log.Error().Err(err).Str("topic", t.Name).Int32("partition", rp.Partition).Msg("opening partition")
				}
				fail(err)
				continue
			}
			keepFrame = true // until raft has its copy (BatchReleased)
			if s.masterFenced(t, rp.Partition) {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				continue
			}
			prop, err := func() (prop partition.Proposal, err error) {
				// A panic in one partition's validation or proposal
				// answers that partition UNKNOWN_SERVER_ERROR; the
				// frame is then kept until the request ends (raft may
				// hold part of it).
				defer rc.containPanic("produce panicked on one partition: answered UNKNOWN_SERVER_ERROR", func(any) {
					prop, err, panicked = nil, errPartitionPanic, true
				})
				faultAt(0, "stage1", t.Name, rp.Partition)
				return s.proposeBatch(rc.ctx(), t, p, rp.Records, req.Acks, now, sp, req.TransactionID, req.Version, added)
			}()
			if err != nil && s.shouldForward(err) {
				tt := t
				waits = append(waits, producePending{sp: sp, forward: &tt, records: rp.Records})
				keepFrame, forwarded = true, true
				continue
			}
			if err != nil {
				fail(err)
				continue
			}
			s.metrics.produced.WithLabelValues(t.Name).Add(float64(len(rp.Records)))
			// One validated batch: its header's record count.
			s.metrics.records.WithLabelValues(t.Name).Add(float64(binary.BigEndian.Uint32(rp.Records[protocol.BatchRecordCountAt:])))
			waits = append(waits, producePending{prop: prop, sp: sp, p: p, t: t})
			select {
			case <-prop.BatchReleased():
				src.written(rt, i)
			default:
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	if err := src.done(); err != nil {
		return nil, err
	}
	// releaseFrame gives the frame back once no batch is read from it
	// any more, before waiting for the flush or the commit, so the bytes
	// held per request in flight are the response's, not the records'.
	// Records are cleared so that nothing can read the reused buffer by
	// mistake.
	releaseFrame := func() {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				req.Topics[i].Partitions[j].Records = nil
			}
		}
		rc.releaseFrame()
	}
	if keepFrame && !forwarded && !panicked {
		// A one-voter group writes the batch before Propose returns
		// when it can: the frame goes now if every proposal let go of
		// its batch already.
		released := true
		for _, w := range waits {
			if w.prop == nil {
				released = false
				break
			}
			select {
			case <-w.prop.BatchReleased():
			default:
				released = false
			}
		}
		keepFrame = !released
	}
	if !keepFrame {
		// No batch is read from the frame any more: each was refused,
		// or written by its one-voter group before Propose returned.
		releaseFrame()
	}

	// Forwards keep the connection's request order (forwardTurn).
	var fwdPrev <-chan struct{}
	var fwdDone chan struct{}
	for _, w := range waits {
		if w.forward != nil {
			fwdPrev, fwdDone = rc.conn.forwardTurn()
			break
		}
	}
	if req.Acks == 0 {
		rc.noResponse()
		if fwdDone != nil {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				// Nothing is answered at acks=0: a panic closes the
				// connection, as Kafka closes one whose acks=0
				// produce failed.
				defer rc.containPanic("forwarding an acks=0 produce panicked: closing its connection", func(any) { rc.conn.nc.Close() })
				defer close(fwdDone)
				if !awaitTurn(s.ctx, fwdPrev) {
					return
				}
				for _, w := range waits {
					if w.forward != nil {
						faultAt(0, "forward", w.forward.Name, w.sp.Partition)
						s.forwardProduce(s.ctx, req, *w.forward, w.sp.Partition, w.records, w.sp)
					}
				}
			}()
		}
		return nil, nil
	}
	if len(waits) == 0 {
		return resp, nil
	}
	// Stage 2: wait for each proposal as acks asks (the write for acks=1,
	// the commit for acks=all), then answer.
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	holdFrame := panicked // a copy: the closure would move panicked to the heap
	rc.later(func() kmsg.Response {
		ctx, cancel := context.WithTimeout(rc.ctx(), timeout)
		defer cancel()
		if fwdDone != nil {
			defer close(fwdDone)
		}
		if keepFrame && !forwarded && !holdFrame {
			// Raft proposals only: raft keeps a copy of each batch
			// once proposed, so the frame can go before the commit.
			released := true
			for _, w := range waits {
				select {
				case <-w.prop.BatchReleased():
				case <-ctx.Done():
					released = false
				}
			}
			if released {
				releaseFrame()
			}
		}
		turn := fwdDone == nil || awaitTurn(ctx, fwdPrev)
		for _, w := range waits {
			s.produceWait(ctx, rc, req, w, turn)
		}
		return resp
	})
	return nil, nil
}

// produceWait is stage 2 for one partition: its forward, or the wait for
// its proposal; a panic in it answers that partition
// UNKNOWN_SERVER_ERROR and the others are still answered.
func (s *Server) produceWait(ctx context.Context, rc *reqCtx, req *kmsg.ProduceRequest, w producePending, turn bool) {
	defer rc.containPanic("produce panicked on one partition: answered UNKNOWN_SERVER_ERROR", func(any) {
		w.sp.ErrorCode = kerr.UnknownServerError.Code
		w.sp.BaseOffset = -1
		if req.Version >= 8 {
			w.sp.ErrorMessage = errorMessage(errPartitionPanic)
		}
	})
	faultAt(0, "stage2", w.topic(), w.sp.Partition)
	if w.forward != nil {
		if !turn {
			w.sp.ErrorCode = kerr.RequestTimedOut.Code
			return
		}
		s.forwardProduce(ctx, req, *w.forward, w.sp.Partition, w.records, w.sp)
		return
	}
	res, err := w.prop.Wait(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		w.sp.ErrorCode = kerr.RequestTimedOut.Code
	case errors.Is(err, context.Canceled):
		// The broker is closing (or the connection): the answer still
		// goes out, and the producer must retry at the leader it finds
		// next, not give up as on UNKNOWN_SERVER_ERROR.
		w.sp.ErrorCode = kerr.NotLeaderForPartition.Code
	case err != nil:
		w.sp.ErrorCode = errorCode(err)
		if req.Version >= 8 {
			w.sp.ErrorMessage = errorMessage(err)
		}
	case s.masterFencedNow(w.t, w.sp.Partition):
		// Written while the lease held, answered after it may have
		// lapsed: not acknowledged (masterFenced). The producer's retry
		// finds the batch (idempotence) if this broker is still the
		// master.
		w.sp.ErrorCode = kerr.NotLeaderForPartition.Code
	default:
		w.sp.BaseOffset = res.BaseOffset
		w.sp.LogStartOffset = w.p.LogStartOffset()
	}
}

// producePending is one partition's work left for Produce's stage 2.
type producePending struct {
	prop partition.Proposal
	sp   *kmsg.ProduceResponseTopicPartition
	p    hostedPartition
	t    metastore.Topic // with prop: checked again before the answer (masterFencedNow)
	// Set instead of prop when the batch goes to the leader.
	forward *metastore.Topic
	records []byte
}

func (w producePending) topic() string {
	if w.forward != nil {
		return w.forward.Name
	}
	return w.t.Name
}

// sharedTopics is implemented by catalogs that can hand out a cached topic
// without copying it (metastore.Client); see produceTopicByName.
type sharedTopics interface {
	SharedTopicByName(name string) (*metastore.Topic, bool)
	SharedTopicByID(id metastore.TopicID) (*metastore.Topic, bool)
}

// produceTopicByName looks a topic up for Produce without the catalog's
// deep copy when the catalog can share it: the result is a shallow copy
// whose slices and maps belong to the cache, so Produce only reads it
// (partition lookup, configs), and the copy kept for forwarding is never
// modified either.
func (s *Server) produceTopicByName(name string) (metastore.Topic, bool) {
	if name == coordinator.OffsetsTopic {
		return s.offsetsTopic()
	}
	if sc, ok := s.catalog.(sharedTopics); ok {
		t, ok := sc.SharedTopicByName(name)
		if !ok {
			return metastore.Topic{}, false
		}
		return *t, true
	}
	return s.catalog.TopicByName(name)
}

// produceTopicByID is produceTopicByName by topic id.
func (s *Server) produceTopicByID(id metastore.TopicID) (metastore.Topic, bool) {
	if id == offsetsTopicID {
		return s.offsetsTopic()
	}
	if sc, ok := s.catalog.(sharedTopics); ok {
		t, ok := sc.SharedTopicByID(id)
		if !ok {
			return metastore.Topic{}, false
		}
		return *t, true
	}
	return s.catalog.TopicByID(id)
}

// proposeBatch validates one partition's records and proposes them.
// ctx bounds a wait for room to inflate compressed records. txnID is the
// request's transactional id, for the verification of a transactional
// batch (verifyTxnBatch), which depends on the request's version; added
// holds the implicit adds already made for the request (implicitAdds).
func (s *Server) proposeBatch(ctx context.Context, t metastore.Topic, p hostedPartition, records []byte, acks int16, now int64, sp *kmsg.ProduceResponseTopicPartition, txnID *string, version int16, added map[metastore.TopicPartition]error) (partition.Proposal, error) {
	maxBytes := s.topicInt(t, "max.message.bytes")
	if int64(len(records)) > maxBytes {
		return nil, errMessageTooLarge
	}
	b, err := protocol.ParseBatch(records)
	if err != nil {
		return nil, err
	}
	if b.IsControl() {
		return nil, protocol.ErrInvalidRecord
	}
	_, compacted := s.topicCleanupPolicy(t)
	if err := s.validateRecords(ctx, b, maxBytes, compacted); err != nil {
		return nil, err
	}
	if b.IsTransactional() {
		if err := s.verifyTxnBatch(ctx, txnID, t.Name, sp.Partition, p, b, version, added); err != nil {
			return nil, err
		}
	}
	if b, err = s.recompress(ctx, t, b, maxBytes); err != nil {
		return nil, err
	}
	records = b
	tsType, _ := s.topicConfig(t, "message.timestamp.type")
	if tsType.value == "LogAppendTime" {
		b.SetLogAppendTime(now)
		sp.LogAppendTime = now
	} else {
		before := s.topicInt(t, "message.timestamp.before.max.ms")
		after := s.topicInt(t, "message.timestamp.after.max.ms")
		for _, ts := range []int64{b.BaseTimestamp(), b.MaxTimestamp()} {
			if ts >= 0 && (now-ts > before || ts-now > after) {
				return nil, errInvalidTimestamp
			}
		}
	}
	b.SetLeaderEpoch(p.LeaderEpoch())
	return p.Propose(records, partition.Acks(acks))
}
