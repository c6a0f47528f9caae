package server

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Incremental fetch sessions (KIP-227), with the rules of Kafka's
// FetchManager, FetchSession and FetchSessionCacheShard: a full fetch
// (epoch 0) may create a session, whose id and epoch the client then sends
// with only the partitions that changed and those to forget; the broker
// fetches every partition of the session and answers only those with
// records, a new high watermark or log start offset, an error or a
// preferred read replica.

const (
	sessionInitialEpoch = 0  // a full fetch that asks for a session
	sessionFinalEpoch   = -1 // a full fetch without a session, or closing one
)

// nextSessionEpoch is FetchMetadata.nextEpoch: 1, 2, ... MaxInt32, then 1.
func nextSessionEpoch(e int32) int32 {
	switch {
	case e < 0:
		return sessionFinalEpoch
	case e == math.MaxInt32:
		return 1
	}
	return e + 1
}

// sessionKey names a partition in a session: by topic id when the session
// uses ids (Fetch v13+), by name otherwise.
type sessionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// cachedPartition is a session's partition: the request parameters the
// client last sent and the response state it last saw.
type cachedPartition struct {
	key     sessionKey
	topic   string // "" for an id this broker does not know
	topicID [16]byte
	req     kmsg.FetchRequestTopicPartition
	// What the client was last told; -1 forces the next answer.
	highWatermark  int64
	logStartOffset int64
}

// mustRespond is CachedPartition.maybeUpdateResponseData: whether an
// incremental response includes the partition; with update, it also
// records what the client is now told.
func (cp *cachedPartition) mustRespond(sp *kmsg.FetchResponseTopicPartition, records int64, update bool) bool {
	must := records > 0
	if cp.highWatermark != sp.HighWatermark {
		must = true
		if update {
			cp.highWatermark = sp.HighWatermark
		}
	}
	if cp.logStartOffset != sp.LogStartOffset {
		must = true
		if update {
			cp.logStartOffset = sp.LogStartOffset
		}
	}
	if sp.PreferredReadReplica >= 0 {
		must = true
	}
	if sp.ErrorCode != 0 {
		// Errors are always sent; forgetting the watermark makes the
		// partition sent again once the error goes away.
		if update {
			cp.highWatermark = -1
		}
		must = true
	}
	if sp.DivergingEpoch.Epoch >= 0 || sp.DivergingEpoch.EndOffset >= 0 {
		must = true
	}
	return must
}

type fetchSession struct {
	mu         sync.Mutex // guards everything below but the cache's fields
	id         int32
	privileged bool // created by a follower
	usesIDs    bool
	createdMs  int64
	epoch      int32
	parts      map[sessionKey]*cachedPartition
	order      []*cachedPartition // fetch order; partitions that return records move last
	// scratch holds the arrays a fetch of every partition needs, kept
	// for the next one (a consumer of 1,000 partitions fetches them all
	// hundreds of times a second); busy while a fetch has it.
	scratch fetchScratch
	busy    bool

	// Guarded by the cache's mu.
	lastUsedMs int64
	cachedSize int
}

// update is FetchSession.update: new partitions join, known ones take the
// request's parameters, forgotten ones leave.
func (fs *fetchSession) update(items []fetchItem, forget []sessionKey) {
	for i := range items {
		it := &items[i]
		if cp, ok := fs.parts[it.key]; ok {
			cp.req = it.req
			continue
		}
		cp := &cachedPartition{key: it.key, topic: it.topic, topicID: it.topicID, req: it.req, highWatermark: -1, logStartOffset: -1}
		fs.parts[it.key] = cp
		fs.order = append(fs.order, cp)
	}
	if len(forget) == 0 {
		return
	}
	for _, k := range forget {
		delete(fs.parts, k)
	}
	kept := fs.order[:0]
	for _, cp := range fs.order {
		if _, ok := fs.parts[cp.key]; ok {
			kept = append(kept, cp)
		}
	}
	clear(fs.order[len(kept):])
	fs.order = kept
}

// fetchSessionCache is FetchSessionCacheShard (one shard): at most
// maxEntries sessions; a new one evicts a stale one, or else the least
// valuable evictable one if it is worth more (privileged, then larger).
type fetchSessionCache struct {
	mu         sync.Mutex
	maxEntries int
	evictionMs int64
	sessions   map[int32]*fetchSession
	now        func() int64 // ms; tests replace it
}

func newFetchSessionCache(maxEntries int, evictionMs int64) *fetchSessionCache {
	return &fetchSessionCache{
		maxEntries: maxEntries,
		evictionMs: evictionMs,
		sessions:   make(map[int32]*fetchSession),
		now:        func() int64 { return time.Now().UnixMilli() },
	}
}

func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sessions, id)
}

// touch records a use of fs and its current size (the size orders
// eviction).
func (c *fetchSessionCache) touch(fs *fetchSession, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fs.lastUsedMs = c.now()
	fs.cachedSize = size
}

// evictableLess orders Kafka's EvictableKey: (privileged, size, id).
func evictableLess(aPriv bool, aSize int, aID int32, bPriv bool, bSize int, bID int32) bool {
	if aPriv != bPriv {
		return !aPriv
	}
	if aSize != bSize {
		return aSize < bSize
	}
	return aID < bID
}

// create is maybeCreateSession: the new session's id, or 0 when the cache
// is full and nothing may be evicted for it.
func (c *fetchSessionCache) create(privileged, usesIDs bool, parts []*cachedPartition) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.sessions) >= c.maxEntries && !c.tryEvictLocked(privileged, len(parts), now) {
		return 0
	}
	var id int32
	for id == 0 || c.sessions[id] != nil {
		id = rand.Int32N(math.MaxInt32) + 1 // positive, never 0
	}
	fs := &fetchSession{
		id: id, privileged: privileged, usesIDs: usesIDs, createdMs: now,
		epoch: nextSessionEpoch(sessionInitialEpoch),
		parts: make(map[sessionKey]*cachedPartition, len(parts)),
		order: parts[:0], lastUsedMs: now,
	}
	for _, cp := range parts {
		if fs.parts[cp.key] == nil { // a partition named twice is one
			fs.parts[cp.key] = cp
			fs.order = append(fs.order, cp)
		}
	}
	fs.cachedSize = len(fs.order)
	c.sessions[id] = fs
	return id
}

// tryEvictLocked removes the least recently used session if it is stale;
// otherwise the least valuable session the new one may evict (any
// non-privileged one or one older than evictionMs for a privileged
// newcomer; one older than evictionMs for others), if the newcomer's key
// (privileged, size, id 0) is not below it.
func (c *fetchSessionCache) tryEvictLocked(privileged bool, size int, now int64) bool {
	if c.maxEntries == 0 {
		return false
	}
	var lru, victim *fetchSession
	for _, fs := range c.sessions {
		if lru == nil || fs.lastUsedMs < lru.lastUsedMs || (fs.lastUsedMs == lru.lastUsedMs && fs.id < lru.id) {
			lru = fs
		}
		old := now-fs.createdMs > c.evictionMs
		if !(old || (privileged && !fs.privileged)) {
			continue
		}
		if victim == nil || evictableLess(fs.privileged, fs.cachedSize, fs.id, victim.privileged, victim.cachedSize, victim.id) {
			victim = fs
		}
	}
	if lru == nil {
		return false
	}
	if now-lru.lastUsedMs > c.evictionMs {
		delete(c.sessions, lru.id)
		return true
	}
	if victim == nil || evictableLess(privileged, size, 0, victim.privileged, victim.cachedSize, victim.id) {
		return false
	}
	delete(c.sessions, victim.id)
	return true
}

// fetchSessionKind is what a request makes of sessions.
type fetchSessionKind int

const (
	sessionless fetchSessionKind = iota // v<7, epoch -1, or an emptied session
	sessionFull                         // epoch 0: full, may create a session
	sessionIncremental
)

// fetchScratch is the per-partition working memory of one fetch.
type fetchScratch struct {
	items  []fetchItem
	sps    []*kmsg.FetchResponseTopicPartition
	partOf []int
	parts  []fetchPart
	resps  []kmsg.FetchResponseTopicPartition
}

// take returns the arrays for n partitions: reused from x when it is
// there and large enough, fresh otherwise (x nil: a request without an
// incremental session, or a session's concurrent duplicate).
func (x *fetchScratch) take(n int) ([]*kmsg.FetchResponseTopicPartition, []int, []fetchPart, []kmsg.FetchResponseTopicPartition) {
	if x == nil {
		return make([]*kmsg.FetchResponseTopicPartition, n), make([]int, n), make([]fetchPart, 0, n), make([]kmsg.FetchResponseTopicPartition, n)
	}
	if cap(x.sps) < n {
		x.sps, x.partOf = make([]*kmsg.FetchResponseTopicPartition, n), make([]int, n)
		x.parts, x.resps = make([]fetchPart, 0, n), make([]kmsg.FetchResponseTopicPartition, n)
	}
	return x.sps[:n], x.partOf[:n], x.parts[:0], x.resps[:n]
}

// fetchSessionCtx carries a request's session decision to its response.
type fetchSessionCtx struct {
	kind       fetchSessionKind
	session    *fetchSession // incremental
	scratch    *fetchScratch // the session's, while this fetch holds it
	reqEpoch   int32
	privileged bool
	usesIDs    bool
}

// newFetchContext is FetchManager.newContext. items are the request's
// partitions; for an incremental fetch it returns the session's instead.
// A non-zero code is a session error for the whole response.
func (c *fetchSessionCache) newFetchContext(req *kmsg.FetchRequest, items []fetchItem, forget []sessionKey, privileged bool) (fetchSessionCtx, []fetchItem, int16) {
	sc := fetchSessionCtx{reqEpoch: req.SessionEpoch, privileged: privileged, usesIDs: req.Version >= 13}
	if req.Version < 7 {
		return sc, items, 0
	}
	if req.SessionEpoch == sessionInitialEpoch || req.SessionEpoch == sessionFinalEpoch {
		if req.SessionID != 0 {
			c.remove(req.SessionID) // a full fetch closes the session it names
		}
		if req.SessionEpoch == sessionInitialEpoch {
			sc.kind = sessionFull
		}
		return sc, items, 0
	}
	fs := c.get(req.SessionID)
	if fs == nil {
		return sc, nil, kerr.FetchSessionIDNotFound.Code
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch {
	case fs.epoch != req.SessionEpoch:
		return sc, nil, kerr.InvalidFetchSessionEpoch.Code
	case fs.usesIDs != sc.usesIDs:
		return sc, nil, kerr.FetchSessionTopicIDError.Code
	}
	fs.update(items, forget)
	if len(fs.parts) == 0 {
		c.remove(fs.id)
		return sc, items, 0
	}
	c.touch(fs, len(fs.parts))
	fs.epoch = nextSessionEpoch(fs.epoch)
	sc.kind, sc.session = sessionIncremental, fs
	var out []fetchItem
	if !fs.busy {
		fs.busy = true
		sc.scratch = &fs.scratch
		if cap(fs.scratch.items) < len(fs.order) {
			fs.scratch.items = make([]fetchItem, len(fs.order))
		}
		out = fs.scratch.items[:len(fs.order)]
	} else {
		out = make([]fetchItem, len(fs.order))
	}
	for i, cp := range fs.order {
		out[i] = fetchItem{key: cp.key, topic: cp.topic, topicID: cp.topicID, req: cp.req}
	}
	return sc, out, 0
}

// finish applies the session rules to a response once it is final: a full
// fetch creates its session from what it answered; an incremental one
// leaves out partitions with nothing new and moves those that returned
// records to the end of the session's order, so that fetch.max.bytes
// serves every partition in turn. sps[i] answers items[i], and
// partOf[i] is its index in w.parts or -1.
func (c *fetchSessionCache) finish(sc fetchSessionCtx, w *fetchWire, items []fetchItem, sps []*kmsg.FetchResponseTopicPartition, partOf []int) {
	switch sc.kind {
	case sessionless:
		w.SessionID = 0
	case sessionFull:
		cps := make([]*cachedPartition, len(items))
		for i := range items {
			it := &items[i]
			cps[i] = &cachedPartition{key: it.key, topic: it.topic, topicID: it.topicID, req: it.req,
				highWatermark: sps[i].HighWatermark, logStartOffset: sps[i].LogStartOffset}
		}
		w.SessionID = c.create(sc.privileged, sc.usesIDs, cps)
	case sessionIncremental:
		c.finishIncremental(sc, w, items, sps, partOf)
	}
}

func (c *fetchSessionCache) finishIncremental(sc fetchSessionCtx, w *fetchWire, items []fetchItem, sps []*kmsg.FetchResponseTopicPartition, partOf []int) {
	fs := sc.session
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if sc.scratch != nil {
		// Nothing of the response refers to the scratch arrays once
		// this returns: the kept partitions are copied out of them.
		defer func() {
			clear(sc.scratch.parts[:cap(sc.scratch.parts)]) // drop range and partition references
			fs.busy = false
		}()
	}
	w.SessionID = fs.id
	if fs.epoch != nextSessionEpoch(sc.reqEpoch) {
		// Another request moved the session on meanwhile (a duplicate).
		w.release()
		w.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
		w.Topics, w.parts = nil, nil
		return
	}
	type kept struct{ topic, part, item int }
	var keep []kept
	var topics []kmsg.FetchResponseTopic
	moved := make(map[*cachedPartition]bool)
	var movedOrder []*cachedPartition
	for i := range items {
		var records int64
		if partOf[i] >= 0 {
			records = w.parts[partOf[i]].recordsLen()
		}
		cp := fs.parts[items[i].key]
		if cp == nil || !cp.mustRespond(sps[i], records, true) {
			if partOf[i] >= 0 {
				w.parts[partOf[i]].releaseRecords()
			}
			continue
		}
		if records > 0 && !moved[cp] {
			moved[cp] = true
			movedOrder = append(movedOrder, cp)
		}
		if n := len(topics); n == 0 || items[keep[len(keep)-1].item].key.topic != items[i].key.topic ||
			items[keep[len(keep)-1].item].key.topicID != items[i].key.topicID {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = items[i].topic, items[i].topicID
			topics = append(topics, st)
		}
		t := &topics[len(topics)-1]
		t.Partitions = append(t.Partitions, *sps[i])
		keep = append(keep, kept{topic: len(topics) - 1, part: len(t.Partitions) - 1, item: i})
	}
	// Re-point the parts at the copies now that no slice grows any more.
	var parts []fetchPart
	for _, k := range keep {
		if j := partOf[k.item]; j >= 0 {
			fp := w.parts[j]
			fp.resp = &topics[k.topic].Partitions[k.part]
			fp.req = nil // it points into the scratch items
			parts = append(parts, fp)
		}
	}
	w.Topics, w.parts = topics, parts
	if len(movedOrder) > 0 {
		order := fs.order[:0:0]
		for _, cp := range fs.order {
			if !moved[cp] {
				order = append(order, cp)
			}
		}
		fs.order = append(order, movedOrder...)
	}
}
