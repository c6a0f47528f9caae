package server

import (
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/protocol"
	"github.com/sluice-broker/sluice/quota"
)

// clientQuotas enforces the client quotas of the catalog on this broker,
// each broker on its own traffic, as Kafka's brokers do: produce bytes,
// fetch bytes, the time requests take to handle, and partitions created
// or deleted. A request over a quota is answered (with throttle_time_ms
// set) and the connection is then not read for the throttle time
// (KIP-219); a client of an older version that does not throttle itself
// gets its response after the throttle time instead.
type clientQuotas struct {
	src                                 quotaSource
	produce, fetch, request, mutation   *quota.Manager
	conns                               *quota.Manager
	cur                                 atomic.Pointer[quotaLimits]
	throttledProduce, throttledFetch    throttleCounter
	throttledRequest, throttledMutation throttleCounter
}

type quotaSource interface {
	ClientQuotas() (uint64, []metastore.ClientQuota)
}

type quotaLimits struct {
	gen uint64
	lim *quota.Limits
}

type throttleCounter interface{ Add(float64) }

func newClientQuotas(s *Server) *clientQuotas {
	w := quota.Window{Samples: int(s.cfg.QuotaWindowNum), Size: time.Duration(s.cfg.QuotaWindowSizeSeconds) * time.Second}
	cw := quota.Window{Samples: int(s.cfg.ControllerQuotaWindowNum), Size: time.Duration(s.cfg.ControllerQuotaWindowSizeSeconds) * time.Second}
	m := s.metrics.throttled
	return &clientQuotas{
		src:     s.catalog,
		produce: quota.NewManager(w, 0),
		fetch:   quota.NewManager(w, 0),
		// Kafka bounds a request-time throttle to one window.
		request:           quota.NewManager(w, w.Size),
		mutation:          quota.NewManager(cw, 0),
		conns:             quota.NewManager(w, 0),
		throttledProduce:  m.WithLabelValues(quota.ProducerByteRate),
		throttledFetch:    m.WithLabelValues(quota.ConsumerByteRate),
		throttledRequest:  m.WithLabelValues(quota.RequestPercentage),
		throttledMutation: m.WithLabelValues(quota.ControllerMutationRate),
	}
}

// limits is the quotas now set, rebuilt only when they change.
func (q *clientQuotas) limits() *quota.Limits {
	gen, qs := q.src.ClientQuotas()
	if c := q.cur.Load(); c != nil && c.gen == gen {
		return c.lim
	}
	c := &quotaLimits{gen: gen, lim: quota.NewLimits(qs)}
	q.cur.Store(c)
	return c.lim
}

// admitConnection records a new connection from ip against its
// connection_creation_rate quota; false means it is past it and is to be
// closed (it is then not counted). Kafka holds such a socket for the
// throttle time before closing it; here it is closed at once, so that a
// flood of them holds no descriptors.
func (q *clientQuotas) admitConnection(ip netip.Addr) bool {
	bound, key, ok := q.limits().ResolveIP(ip.String())
	if !ok {
		return true
	}
	now := time.Now()
	if q.conns.Record(key, bound, 1, now) == 0 {
		return true
	}
	q.conns.Unrecord(key, 1, now)
	return false
}

// quotaUser is the user part of rc's quota entity: the principal's name
// (ANONYMOUS before authentication, as in Kafka).
func (rc *reqCtx) quotaUser() string {
	p := rc.conn.principal
	if i := strings.IndexByte(p, ':'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func (rc *reqCtx) quotaClientID() string {
	if rc.hdr.ClientID != nil {
		return *rc.hdr.ClientID
	}
	return ""
}

// quotaExempt says rc is not measured: requests other brokers forward
// (the broker that received them from the client measured them) and the
// requests a client needs before it can throttle itself.
func (rc *reqCtx) quotaExempt(key int16) bool {
	switch key {
	case protocol.ApiVersionsKey, 17, 36: // ApiVersions, SaslHandshake, SaslAuthenticate
		return true
	}
	return strings.HasPrefix(rc.quotaClientID(), forwardClientPrefix)
}

// resolve finds the quota of kind rc falls under.
func (q *clientQuotas) resolve(rc *reqCtx, kind string) (float64, quota.Key, bool) {
	lim := q.limits()
	if !lim.Any(kind) {
		return 0, quota.Key{}, false
	}
	return lim.Resolve(kind, rc.quotaUser(), rc.quotaClientID())
}

// record adds v to rc's usage of kind in m and throttles rc's response
// and connection if that takes it over its quota; it returns the
// throttle time.
func (q *clientQuotas) record(rc *reqCtx, m *quota.Manager, kind string, v float64, counter throttleCounter) time.Duration {
	bound, key, ok := q.resolve(rc, kind)
	if !ok {
		return 0
	}
	d := m.Record(key, bound, v, time.Now())
	if d > 0 {
		counter.Add(1)
		rc.throttle(d)
	}
	return d
}

// unrecord takes v back out of rc's usage of kind in m.
func (q *clientQuotas) unrecord(rc *reqCtx, m *quota.Manager, kind string, v float64) {
	if _, key, ok := q.resolve(rc, kind); ok {
		m.Unrecord(key, v, time.Now())
	}
}

// recordRequestTime charges the time rc's handler ran on the connection's
// goroutine to request_percentage (Kafka's request thread time: a
// percentage of one thread's second).
func (q *clientQuotas) recordRequestTime(rc *reqCtx, key int16, took time.Duration) {
	if rc.quotaExempt(key) {
		return
	}
	q.record(rc, q.request, quota.RequestPercentage, float64(took.Nanoseconds())*100/1e9, q.throttledRequest)
}

// fetchMax is the most a consumer fetch of rc may return so that it is
// not throttled for its size alone (Kafka's getMaxValueInQuotaWindow);
// -1 when no fetch quota applies.
func (q *clientQuotas) fetchMax(rc *reqCtx) int {
	if rc.quotaExempt(1) {
		return -1
	}
	bound, _, ok := q.resolve(rc, quota.ConsumerByteRate)
	if !ok {
		return -1
	}
	return int(min(q.fetch.MaxInWindow(bound), float64(1<<30)))
}

// Kafka's quota entity types.
const (
	quotaUser     = "user"
	quotaClientID = "client-id"
	quotaIP       = "ip"
)

var quotaEntityTypes = []string{quotaUser, quotaClientID, quotaIP}

// quotaParts lists an entity's parts by Kafka's type names.
func quotaParts(e metastore.QuotaEntity) map[string]metastore.QuotaName {
	m := map[string]metastore.QuotaName{}
	if e.User.Set {
		m[quotaUser] = e.User
	}
	if e.ClientID.Set {
		m[quotaClientID] = e.ClientID
	}
	if e.IP.Set {
		m[quotaIP] = e.IP
	}
	return m
}

// throttlingMessage is Kafka's message for THROTTLING_QUOTA_EXCEEDED.
const throttlingMessage = "The throttling quota has been exceeded."

// mutationQuota is the controller mutation quota of one request
// (CreateTopics, CreatePartitions, DeleteTopics): strict from the
// version that can carry THROTTLING_QUOTA_EXCEEDED, permissive before.
type mutationQuota struct {
	q        *clientQuotas
	rc       *reqCtx
	strict   bool
	exceeded bool
	throttle time.Duration
}

func (q *clientQuotas) mutations(rc *reqCtx, strict bool) *mutationQuota {
	return &mutationQuota{q: q, rc: rc, strict: strict}
}

// spend takes n partitions from the quota; false means the mutation is
// refused with THROTTLING_QUOTA_EXCEEDED (strict only). Once one is
// refused, the rest of the request is too, as in Kafka.
func (mq *mutationQuota) spend(n int) bool {
	if mq.exceeded {
		return false
	}
	if mq.rc.quotaExempt(19) {
		return true
	}
	bound, key, ok := mq.q.resolve(mq.rc, quota.ControllerMutationRate)
	if !ok {
		return true
	}
	d, ok := mq.q.mutation.Spend(key, bound, float64(n), mq.strict, time.Now())
	if d > 0 {
		mq.q.throttledMutation.Add(1)
		mq.throttle = max(mq.throttle, d)
		mq.rc.throttle(d)
	}
	if !ok {
		mq.exceeded = true
	}
	return ok
}

// throttle makes rc's response carry at least d as throttle_time_ms and
// mutes its connection for d once it is answered.
func (rc *reqCtx) throttle(d time.Duration) {
	for {
		cur := rc.throttleNs.Load()
		if int64(d) <= cur || rc.throttleNs.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}
