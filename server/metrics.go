package server

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics are the broker's Prometheus metrics. Requests are counted by API
// and by listener view, so routing is visible per broker.
type Metrics struct {
	reg         prometheus.Registerer
	views       sync.Map // listener view -> *viewMetrics
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	connections *prometheus.GaugeVec
	badRequests prometheus.Counter
	// panics counts handlers that panicked, by API (dispatch.go).
	panics    *prometheus.CounterVec
	produced  *prometheus.CounterVec
	records   *prometheus.CounterVec
	fetched   *prometheus.CounterVec
	forwarded prometheus.Counter

	acceptErrors  *prometheus.CounterVec
	acceptBlocked *prometheus.CounterVec
	connsRefused  *prometheus.CounterVec
	connsDropped  *prometheus.CounterVec
	throttled     *prometheus.CounterVec
	// responseWaits counts the times a connection's next request was
	// not read because its unread responses held past
	// queued.max.response.bytes (conn.waitUnsent).
	responseWaits prometheus.Counter

	// authentications: SASL exchanges and TLS handshakes (security.go).
	authentications *prometheus.CounterVec
}

// NewMetrics registers the server's metrics with reg (a private registry
// when nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_requests_total", Help: "Kafka requests received, by API and listener view.",
		}, []string{"api", "view"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_request_seconds", Help: "Time from a request's arrival to its response written to the socket (Kafka's TotalTimeMs), by API and listener view; an acks=0 produce ends when it is handled.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"api", "view"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_connections", Help: "Open Kafka connections, by listener and its view.",
		}, []string{"listener", "view"}),
		badRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_bad_requests_total", Help: "Requests that closed their connection: malformed, unknown key or version.",
		}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_request_panics_total", Help: "Requests whose handler panicked, by API: the connection that sent it is closed, the broker goes on.",
		}, []string{"api"}),
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_produced_bytes_total", Help: "Record batch bytes appended, by topic.",
		}, []string{"topic"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_produced_records_total", Help: "Records appended, by topic (Kafka's MessagesInPerSec).",
		}, []string{"topic"}),
		fetched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_fetched_bytes_total", Help: "Record batch bytes returned to fetchers, by topic.",
		}, []string{"topic"}),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_forwarded_produce_total", Help: "Partition batches a read broker received and forwarded to their leader.",
		}),
		acceptErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_accept_errors_total", Help: "Failed accepts on a Kafka listener (out of file descriptors and the like), by listener; the listener retries after a pause.",
		}, []string{"listener"}),
		acceptBlocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_accept_blocked_seconds_total", Help: "Time a Kafka listener did not accept because of max.connections or max.connection.creation.rate, by listener.",
		}, []string{"listener"}),
		connsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_connections_refused_total", Help: "Connections closed at once because their IP address had max.connections.per.ip (or its override) open or was past its connection_creation_rate quota, by listener.",
		}, []string{"listener"}),
		connsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_connections_dropped_total", Help: "Connections the broker closed, by reason: idle (connections.max.idle.ms), request_timeout (socket.request.timeout.ms), stalled_frame (queued.max.request.stall.ms), slow_frame (queued.min.request.bytes.per.second) or silent (no byte sent since it was accepted, closed when an accept failed for want of file descriptors).",
		}, []string{"reason"}),
		responseWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_connection_response_waits_total", Help: "Times a connection's next request was not read because the responses it had not read held more than queued.max.response.bytes.",
		}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_quota_throttled_total", Help: "Requests throttled for a client quota, by quota: producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate.",
		}, []string{"quota"}),
	}
	reg.MustRegister(m.requests, m.latency, m.connections, m.badRequests, m.panics, m.produced, m.records, m.fetched, m.forwarded,
		m.acceptErrors, m.acceptBlocked, m.connsRefused, m.connsDropped, m.responseWaits, m.throttled)
	m.authentications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_authentications_total", Help: "SASL authentications (and re-authentications) and TLS handshakes on Kafka listeners, by listener, mechanism (SCRAM-SHA-256, PLAIN, ..., or TLS) and result (success, failure); Kafka's successful-/failed-authentication-total.",
	}, []string{"listener", "mechanism", "result"})
	reg.MustRegister(m.authentications)
	return m
}

// viewMetrics are a listener view's per-API series, resolved on first use
// so that a request costs an array load and no label lookup.
type viewMetrics struct {
	m    *Metrics
	view string
	apis [kmsg.MaxKey + 1]atomic.Pointer[apiMetrics]
}

// apiMetrics are one API's series on one listener view.
type apiMetrics struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// view returns the series of listener view v.
func (m *Metrics) view(v string) *viewMetrics {
	if vm, ok := m.views.Load(v); ok {
		return vm.(*viewMetrics)
	}
	vm, _ := m.views.LoadOrStore(v, &viewMetrics{m: m, view: v})
	return vm.(*viewMetrics)
}

// api returns the series of API key (a key the server parsed, so within
// kmsg's range).
func (vm *viewMetrics) api(key int16) *apiMetrics {
	p := &vm.apis[key]
	if am := p.Load(); am != nil {
		return am
	}
	name := apiName(key)
	am := &apiMetrics{
		requests: vm.m.requests.WithLabelValues(name, vm.view),
		latency:  vm.m.latency.WithLabelValues(name, vm.view),
	}
	p.CompareAndSwap(nil, am)
	return p.Load()
}

// forgetTopics deletes the per-topic counters of topics that were in
// before and are not in now: a deleted topic's series disappear, as
// Kafka removes a deleted topic's BrokerTopicMetrics.
func (m *Metrics) forgetTopics(before, now map[string]bool) {
	for name := range before {
		if now[name] {
			continue
		}
		l := prometheus.Labels{"topic": name}
		m.produced.Delete(l)
		m.records.Delete(l)
		m.fetched.Delete(l)
	}
}
