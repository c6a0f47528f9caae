package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/metastore"
)

// Fetch (key 1). Supported: v4-18.
//
// Semantics: returns committed whole batches (up to the high watermark,
// which is also the last stable offset until transactions exist). The
// first partition with data always gets at least one whole batch, however
// large; after that MaxBytes and each PartitionMaxBytes are respected.
// While fewer than MinBytes are available the request long-polls up to
// MaxWaitMillis, woken by the partitions' high watermark moves. An offset
// past the high watermark but not past the log end waits; one below the
// log start or past the log end is OFFSET_OUT_OF_RANGE.
// Raft's own entries (control batches in replicated partitions) are never
// returned, and the high watermark reported stops before those at its end
// (fillFetch).
//
// Fetch sessions (KIP-227, v7+) follow Kafka's rules (fetch_session.go):
// epoch 0 is a full fetch that may create a session, -1 a full fetch
// without one; either closes the session it names. Incremental fetches
// read every partition of the session and answer only those that changed;
// an unknown session is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
// INVALID_FETCH_SESSION_EPOCH, a version on the other side of v13 from
// the session's FETCH_SESSION_TOPIC_ID_ERROR.
// Version notes: v4 isolation level, v5 log start offset, v7 sessions,
// v9 current leader epoch (FENCED/UNKNOWN_LEADER_EPOCH), v11 rack and
// preferred read replica, v12+ flexible, v13 topic ids, v15 replica state.
// Roles: leaders and read replicas.
func init() { register(1, handleFetch) }

// fetchItem is one partition a Fetch reads: named by the request, or,
// for an incremental fetch, kept by the session.
type fetchItem struct {
	key     sessionKey
	topic   string // as the request named it; resolved by id from v13
	topicID [16]byte
	req     kmsg.FetchRequestTopicPartition
}

type fetchPart struct {
	topic string // for the fetched-bytes metric
	p     hostedPartition
	req   *kmsg.FetchRequestTopicPartition
	resp  *kmsg.FetchResponseTopicPartition
	// rng holds the partition's records: resp.RecordBatches stays empty
	// and the writer sends the range in its place (fetchWire). more holds
	// the ranges that follow it past raft entries (rare: nil otherwise).
	rng  log.FileRange
	more []log.FileRange
}

// recordsLen is the size of the partition's records: rng and more.
func (fp *fetchPart) recordsLen() int64 {
	n := fp.rng.Len
	for i := range fp.more {
		n += fp.more[i].Len
	}
	return n
}

// releaseRecords lets go of every range.
func (fp *fetchPart) releaseRecords() {
	fp.rng.Release()
	for i := range fp.more {
		fp.more[i].Release()
	}
	fp.more = fp.more[:0]
}

func handleFetch(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	items, forget := fetchRequestItems(req)
	sc, items, code := s.fetchSessions.newFetchContext(req, items, forget, !fetchFromConsumer(req))
	if code != 0 {
		resp.ErrorCode = code // no partitions: which ones were meant is unknown
		return resp, nil
	}

	var view *brokerView
	if req.Version >= 11 && rc.view() == "mixed" && fetchFromConsumer(req) && !s.cfg.HasRole("read") {
		v := s.viewOf(rc)
		view = &v
	}
	redirected := false
	var racks map[int32]string

	// One response topic per run of items of the same topic, in item
	// order; sps[i] answers items[i], read through parts[partOf[i]]. An
	// incremental fetch takes these arrays from its session, which keeps
	// them from one fetch of all its partitions to the next.
	sps, partOf, parts, resps := sc.scratch.take(len(items))
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].key.topic == items[i].key.topic && items[j].key.topicID == items[i].key.topicID {
			j++
		}
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = items[i].topic, items[i].topicID
		var t metastore.Topic
		var ok bool
		topicCode := int16(0)
		// The catalog's shared copy where it has one: Fetch only reads
		// the topic, and a deep copy of a topic of 1,000 partitions on
		// every fetch was most of what W4's broker allocated.
		if req.Version >= 13 {
			if t, ok = s.produceTopicByID(metastore.TopicID(items[i].topicID)); !ok {
				topicCode = kerr.UnknownTopicID.Code
			}
		} else if t, ok = s.produceTopicByName(items[i].topic); !ok {
			topicCode = kerr.UnknownTopicOrPartition.Code
		}
		st.Partitions, resps = resps[:j-i:j-i], resps[j-i:]
		for k := i; k < j; k++ {
			rp := &items[k].req
			sp := &st.Partitions[k-i]
			sps[k], partOf[k] = sp, -1
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.PreferredReadReplica = -1
			sp.RecordBatches = []byte{}
			if topicCode != 0 {
				sp.ErrorCode = topicCode
				continue
			}
			epochFence := int32(-1)
			if req.Version >= 9 {
				epochFence = rp.CurrentLeaderEpoch
			}
			p, code := s.readablePartition(t, true, rp.Partition, epochFence)
			if code != 0 {
				sp.ErrorCode = code
				continue
			}
			if view != nil {
				if racks == nil {
					racks = s.brokerRacks() // once per request, not per partition
				}
				if id := view.preferredReadReplica(t.Name, t.Partitions[rp.Partition], req.Rack, racks); id >= 0 {
					// KIP-392: send the consumer to a read broker,
					// with no records and at once.
					sp.PreferredReadReplica = id
					vis := p.VisibleHighWatermark()
					sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = vis, min(vis, p.LastStableOffset()), p.LogStartOffset()
					redirected = true
					continue
				}
			}
			partOf[k] = len(parts)
			parts = append(parts, fetchPart{topic: t.Name, p: p, req: rp, resp: sp})
		}
		resp.Topics = append(resp.Topics, st)
		i = j
	}

	wire := &fetchWire{FetchResponse: resp, parts: parts}
	final := func() kmsg.Response {
		s.countFetched(parts)
		s.fetchSessions.finish(sc, wire, items, sps, partOf)
		return wire
	}
	// ready: enough bytes, or a partition stopped before one of raft's
	// entries with data after it (the client fetches again at once
	// rather than wait for bytes it could have had).
	ready := func() bool {
		n, more := s.fillFetch(req, parts)
		return n >= int(req.MinBytes) || more
	}
	if ready() || req.MaxWaitMillis <= 0 || len(parts) == 0 || fetchHasError(parts) || redirected {
		return final(), nil
	}
	rc.later(func() kmsg.Response {
		wake := make(chan struct{}, 1)
		for _, fp := range parts {
			stop := fp.p.Watch(wake)
			defer stop()
		}
		timer := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
		defer timer.Stop()
		for {
			select {
			case <-wake:
				if ready() || fetchHasError(parts) {
					return final()
				}
			case <-timer.C:
				s.fillFetch(req, parts)
				return final()
			case <-rc.ctx().Done():
				return final()
			}
		}
	})
	return nil, nil
}

// fetchRequestItems lists the partitions a request names and those it
// asks its session to forget (v7+), keyed by topic id from v13 on.
func fetchRequestItems(req *kmsg.FetchRequest) ([]fetchItem, []sessionKey) {
	ids := req.Version >= 13
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	items := make([]fetchItem, 0, n)
	for i := range req.Topics {
		rt := &req.Topics[i]
		key := sessionKey{topic: rt.Topic}
		if ids {
			key = sessionKey{topicID: rt.TopicID}
		}
		for j := range rt.Partitions {
			key.partition = rt.Partitions[j].Partition
			items = append(items, fetchItem{key: key, topic: rt.Topic, topicID: rt.TopicID, req: rt.Partitions[j]})
		}
	}
	var forget []sessionKey
	for _, ft := range req.ForgottenTopics {
		key := sessionKey{topic: ft.Topic}
		if ids {
			key = sessionKey{topicID: ft.TopicID}
		}
		for _, p := range ft.Partitions {
			key.partition = p
			forget = append(forget, key)
		}
	}
	return items, forget
}

// fetchFromConsumer tells a consumer's fetch from a replica's.
func fetchFromConsumer(req *kmsg.FetchRequest) bool {
	if req.Version >= 15 {
		return req.ReplicaState.ID < 0
	}
	return req.ReplicaID < 0
}

// brokerRacks maps registered brokers to their racks.
func (s *Server) brokerRacks() map[int32]string {
	racks := make(map[int32]string)
	for _, b := range s.catalog.Brokers() {
		racks[b.ID] = b.Rack
	}
	return racks
}

// checkLeaderEpoch compares a client's leader epoch with ours (KIP-320):
// an older one is fenced, a newer one means our metadata is behind.
func checkLeaderEpoch(client, ours int32) int16 {
	switch {
	case client < ours:
		return kerr.FencedLeaderEpoch.Code
	case client > ours:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

func fetchHasError(parts []fetchPart) bool {
	for _, fp := range parts {
		if fp.resp.ErrorCode != 0 {
			return true
		}
	}
	return false
}

// fillFetch reads every partition afresh and returns the bytes gathered,
// and whether a partition's records stopped before one of raft's entries
// with more data after it (its limit reached). The records are file
// ranges (fetchPart.rng and more),
// released and read again on every call; the writer releases the last
// ones once they are sent.
//
// Raft's own entries (control batches, one offset each, in replicated
// partitions) are never sent: some clients hand them to the application
// (kafka-go) and an empty batch in their place breaks others. They do not
// count toward MinBytes. The high watermark reported is the visible one
// (replica.Replica.VisibleHighWatermark), raised to the fetch offset when
// only raft entries lie between them: a client is never told there is
// more to read when the records it gets are empty (kafka-go takes that as
// a broken connection and redials), and sees no lag at the end.
func (s *Server) fillFetch(req *kmsg.FetchRequest, parts []fetchPart) (int, bool) {
	budget := int(req.MaxBytes)
	if req.Version < 3 || budget <= 0 || budget > int(s.cfg.FetchMaxBytes) {
		budget = int(s.cfg.FetchMaxBytes)
	}
	total := 0
	more := false
	for i := range parts {
		fp := &parts[i]
		fp.releaseRecords()
		sp, rp, p := fp.resp, fp.req, fp.p
		sp.ErrorCode = 0
		// Empty, never null: librdkafka rejects a null record set.
		sp.RecordBatches = []byte{}
		// The visible watermark first: the real one is then at least the
		// one it was computed from.
		vis := p.VisibleHighWatermark()
		hw := p.HighWatermark()
		if rp.FetchOffset > vis && rp.FetchOffset <= hw {
			vis = rp.FetchOffset // at or among raft entries before hw
		}
		// The last stable offset: below the first open transaction
		// (KIP-98). read_committed reads only below it, and is told
		// the aborted transactions of what it may read.
		sp.HighWatermark, sp.LastStableOffset = vis, min(vis, p.LastStableOffset())
		sp.LogStartOffset = p.LogStartOffset()
		bound := sp.HighWatermark
		committed := req.Version >= 4 && req.IsolationLevel == 1
		if committed {
			bound = sp.LastStableOffset
			sp.AbortedTransactions = nil
		}
		if rp.FetchOffset < sp.LogStartOffset || (rp.FetchOffset > p.LogEndOffset() && p.IsLeader()) {
			sp.ErrorCode = kerr.OffsetOutOfRange.Code
			continue
		}
		// A follower or learner may not have yet what the leader already
		// committed (the client read it elsewhere): it waits for it like
		// for any uncommitted offset, never OFFSET_OUT_OF_RANGE for data
		// that exists (sarama stops, kafkajs resets on it).
		if rp.FetchOffset >= bound {
			continue // committed data not there yet: wait, never OOR
		}
		limit := int(rp.PartitionMaxBytes)
		if limit > budget-total {
			limit = budget - total
		}
		if total > 0 && limit <= 0 {
			continue
		}
		// Never past the high watermark (or, read_committed, the last
		// stable offset) reported with them.
		res, cut, err := p.ReadRange(rp.FetchOffset, limit, bound)
		if err != nil {
			sp.ErrorCode = errorCode(err)
			continue
		}
		// Only the first partition with data may exceed the limits
		// (KIP-74); later ones return nothing rather than overshoot.
		if total > 0 && res.Range.Len > int64(limit) {
			res.Range.Release()
			continue
		}
		fp.rng = res.Range
		got := res.Range.Len
		// Past a raft entry the data goes on in ranges of its own,
		// within the partition's limit (never over it after the first).
		for cut && got < int64(limit) {
			next, nextCut, err := p.ReadRange(res.NextOffset, limit-int(got), bound)
			if err != nil || next.Range.Len == 0 || next.Range.Len > int64(limit)-got {
				next.Range.Release()
				break
			}
			fp.more = append(fp.more, next.Range)
			got += next.Range.Len
			res, cut = next, nextCut
		}
		total += int(got)
		more = more || cut
		if committed && got > 0 {
			for _, a := range p.Log().AbortedTxns(rp.FetchOffset, res.NextOffset) {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				sp.AbortedTransactions = append(sp.AbortedTransactions, at)
			}
		}
	}
	return total, more
}

// countFetched records the bytes a finished fetch returns.
func (s *Server) countFetched(parts []fetchPart) {
	for _, fp := range parts {
		if n := fp.recordsLen(); n > 0 {
			s.metrics.fetched.WithLabelValues(fp.topic).Add(float64(n))
		}
	}
}
