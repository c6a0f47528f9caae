package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/metastore"
)

// latencyBuckets: 100µs to ~13 s, for flushes and metastore writes.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2, 18)

// registerProcessMetrics registers the series fed by package-wide hooks:
// log syncs and metastore client writes.
func registerProcessMetrics(reg prometheus.Registerer) {
	flush := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sluice_log_flush_seconds", Help: "Duration of each fdatasync of a segment, index or WAL file (Kafka's LogFlushRateAndTimeMs).",
		Buckets: latencyBuckets,
	})
	writes := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sluice_metastore_write_seconds", Help: "Duration of each successful metastore write made by this process, from the call to its effect in the local cache (commit latency as a broker sees it).",
		Buckets: latencyBuckets,
	})
	reg.MustRegister(flush, writes)
	log.SetSyncObserver(func(d time.Duration) { flush.Observe(d.Seconds()) })
	metastore.SetWriteObserver(func(d time.Duration) { writes.Observe(d.Seconds()) })
}

// registerMetaMetrics registers a metadata quorum member's raft series.
func registerMetaMetrics(reg prometheus.Registerer, meta *metastore.Node) {
	g := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
	}
	c := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn)
	}
	reg.MustRegister(
		g("sluice_metastore_term", "Raft term of the metadata quorum as this member knows it: each increase is an election.",
			func() float64 { return float64(meta.Status().Term) }),
		g("sluice_metastore_leader", "1 if this member leads the metadata quorum.",
			func() float64 {
				if meta.Leader() == meta.ID() {
					return 1
				}
				return 0
			}),
		g("sluice_metastore_has_leader", "1 if this member knows a leader of the metadata quorum.",
			func() float64 {
				if meta.Leader() != 0 {
					return 1
				}
				return 0
			}),
		g("sluice_metastore_apply_lag_entries", "Committed metastore entries not yet applied by this member.",
			func() float64 {
				st := meta.Status()
				if st.Commit > st.Applied {
					return float64(st.Commit - st.Applied)
				}
				return 0
			}),
		c("sluice_metastore_entries_applied_total", "Raft entries this member applied.",
			func() float64 { return float64(meta.Stats().EntriesApplied) }),
		c("sluice_metastore_ready_seconds_total", "Time this member spent handling raft Ready batches (log writes, sends, applies).",
			func() float64 { return meta.Stats().ReadyTime.Seconds() }),
		c("sluice_metastore_lease_expiries_total", "Broker leases this member expired as the quorum's leader (the broker missed renewing for the lease duration).",
			func() float64 { return float64(meta.Stats().LeasesExpired) }),
		c("sluice_metastore_tx_seconds_total", "Time this member spent in bbolt transactions applying entries.",
			func() float64 { return meta.Stats().TxTime.Seconds() }),
	)
	for _, reason := range metastore.RefusalReasons {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "sluice_metastore_refused_total",
			Help:        "Connections, frames and raft messages the metastore port refused, by reason: tls (failed mutual TLS handshake), identity (raft messages from another member than the certificate names or the connection spoke for), unknown_node (without TLS: raft messages from a sender that is not a member), address (without TLS: from a member registered at another IP), busy (connection or handshake bound reached), frame (a frame over its limit, of no known kind, or undecodable), handshake (no first frame in time), frame_timeout (a frame counted against the port's frame budget not read within 30 s); raft messages: type, to, from, term, commit_past_log, entries, snapshot, ack_past_log, not_leader.",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(meta.Refused()[reason]) }))
	}
}
