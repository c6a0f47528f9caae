package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/quota"
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
// In replicated partitions raft's own entries take no offset and have no
// batch (replica/doc.go, "Offsets"), so there is nothing to hide.
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
	// and the writer sends the range in its place (fetchWire).
	rng partition.FileRange
}

// recordsLen is the size of the partition's records.
func (fp *fetchPart) recordsLen() int64 { return fp.rng.Len }

// releaseRecords lets go of the range.
func (fp *fetchPart) releaseRecords() { fp.rng.Release() }

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
	// Authorization, as Kafka's handleFetchRequest: a consumer needs
	// READ on each topic, a follower (a replica id) CLUSTER_ACTION on the
	// cluster; refused partitions get TOPIC_AUTHORIZATION_FAILED.
	follower := !fetchFromConsumer(req)
	followerAllowed := follower && s.authorizeCluster(rc, acl.OpClusterAction)

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
		if name := items[i].topic; ok || req.Version < 13 {
			if ok {
				name = t.Name
			}
			if follower && !followerAllowed || !follower && !s.authorizeTopic(rc, acl.OpRead, name) {
				topicCode = kerr.TopicAuthorizationFailed.Code
			}
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
				if id := view.preferredReadReplica(t.Name, t.Partitions[rp.Partition], isShared(t), req.Rack, racks); id >= 0 {
					// KIP-392: send the consumer to a read broker,
					// with no records and at once.
					sp.PreferredReadReplica = id
					hw := p.HighWatermark()
					sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, min(hw, p.LastStableOffset()), p.LogStartOffset()
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
	quotaMax := -1
	if fetchFromConsumer(req) {
		quotaMax = s.quotas.fetchMax(rc)
	}
	final := func() kmsg.Response {
		if quotaMax >= 0 {
			s.throttleFetch(rc, parts)
		}
		s.countFetched(parts)
		s.fetchSessions.finish(sc, wire, items, sps, partOf)
		return wire
	}
	ready := func() bool { return s.fillFetch(req, parts, quotaMax) >= int(req.MinBytes) }
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
				s.fillFetch(req, parts, quotaMax)
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

// fillFetch reads every partition afresh and returns the bytes gathered.
// The records are file ranges (fetchPart.rng), released and read again on
// every call; the writer releases the last ones once they are sent.
// quotaMax, unless -1, bounds the bytes further: what the client's
// consumer_byte_rate allows at once.
func (s *Server) fillFetch(req *kmsg.FetchRequest, parts []fetchPart, quotaMax int) int {
	budget := int(req.MaxBytes)
	if req.Version < 3 || budget <= 0 || budget > int(s.cfg.FetchMaxBytes) {
		budget = int(s.cfg.FetchMaxBytes)
	}
	if quotaMax >= 0 {
		budget = min(budget, max(quotaMax, 1))
	}
	total := 0
	for i := range parts {
		fp := &parts[i]
		fp.releaseRecords()
		sp, rp, p := fp.resp, fp.req, fp.p
		sp.ErrorCode = 0
		// Empty, never null: librdkafka rejects a null record set.
		sp.RecordBatches = []byte{}
		// The last stable offset: below the first open transaction
		// (KIP-98). read_committed reads only below it, and is told
		// the aborted transactions of what it may read.
		hw := p.HighWatermark()
		sp.HighWatermark, sp.LastStableOffset = hw, min(hw, p.LastStableOffset())
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
		res, err := p.ReadRange(rp.FetchOffset, limit, bound)
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
		if committed && res.Range.Len > 0 {
			aborted, err := p.Storage().AbortedTxns(rp.FetchOffset, res.NextOffset)
			if err != nil {
				// Records without the aborted transactions among them
				// would hand aborted records to a read_committed
				// consumer: none this time; it fetches again.
				res.Range.Release()
				s.log.Warn().Err(err).Msg("fetch: reading aborted transactions")
				continue
			}
			for _, a := range aborted {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				sp.AbortedTransactions = append(sp.AbortedTransactions, at)
			}
		}
		fp.rng = res.Range
		total += int(res.Range.Len)
	}
	return total
}

// throttleFetch charges a consumer fetch's records to consumer_byte_rate.
// Over the quota, the fetch answers no records (they are charged back)
// and the throttle time, as Kafka's throttled fetch response does; the
// client fetches the same offsets again after it.
func (s *Server) throttleFetch(rc *reqCtx, parts []fetchPart) {
	var n int64
	for i := range parts {
		n += parts[i].recordsLen()
	}
	if s.quotas.record(rc, s.quotas.fetch, quota.ConsumerByteRate, float64(n), s.quotas.throttledFetch) == 0 {
		return
	}
	s.quotas.unrecord(rc, s.quotas.fetch, quota.ConsumerByteRate, float64(n))
	for i := range parts {
		parts[i].releaseRecords()
		parts[i].rng = partition.FileRange{}
		parts[i].resp.RecordBatches = []byte{}
	}
}

// countFetched records the bytes a finished fetch returns.
func (s *Server) countFetched(parts []fetchPart) {
	for _, fp := range parts {
		if n := fp.recordsLen(); n > 0 {
			s.metrics.fetched.WithLabelValues(fp.topic).Add(float64(n))
		}
	}
}
