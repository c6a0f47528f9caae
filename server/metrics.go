package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the broker's Prometheus metrics. Requests are counted by API
// and by listener view, so routing is visible per broker.
type Metrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	connections *prometheus.GaugeVec
	badRequests prometheus.Counter
	produced    *prometheus.CounterVec
	fetched     *prometheus.CounterVec
	forwarded   prometheus.Counter

	acceptErrors  *prometheus.CounterVec
	acceptBlocked *prometheus.CounterVec
	connsRefused  *prometheus.CounterVec
	connsDropped  *prometheus.CounterVec
}

// NewMetrics registers the server's metrics with reg (a private registry
// when nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_requests_total", Help: "Kafka requests received, by API and listener view.",
		}, []string{"api", "view"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_request_seconds", Help: "Time from a request's arrival to its response being ready.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"api"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_connections", Help: "Open Kafka connections, by listener view.",
		}, []string{"view"}),
		badRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_bad_requests_total", Help: "Requests that closed their connection: malformed, unknown key or version.",
		}),
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_produced_bytes_total", Help: "Record batch bytes appended, by topic.",
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
			Name: "sluice_connections_refused_total", Help: "Connections closed at once because their IP address had max.connections.per.ip (or its override) open, by listener.",
		}, []string{"listener"}),
		connsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_connections_dropped_total", Help: "Connections the broker closed for a timeout, by reason: idle (connections.max.idle.ms) or request_timeout (socket.request.timeout.ms).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.requests, m.latency, m.connections, m.badRequests, m.produced, m.fetched, m.forwarded,
		m.acceptErrors, m.acceptBlocked, m.connsRefused, m.connsDropped)
	return m
}
