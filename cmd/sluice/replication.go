package main

import (
	"context"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/replica"
)

// replicationEndpoint names the internal endpoint a broker registers for
// raft traffic; its view "internal" keeps it out of every Kafka answer.
const replicationEndpoint = "REPLICATION"

// replicationAddr resolves a broker id to its registered raft address.
func replicationAddr(c *metastore.Client) func(replica.NodeID) string {
	return func(id replica.NodeID) string {
		for _, b := range c.Brokers() {
			if b.ID != int32(id) {
				continue
			}
			for _, ep := range b.Endpoints {
				if ep.Name == replicationEndpoint {
					return net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))
				}
			}
		}
		return ""
	}
}

// assignedTo tells the raft host whether the metastore assigns a broker
// to a partition: a voter, a learner, a reassignment's target or one of
// the group's founders. Asked only for a sender outside the replica's
// applied configuration.
func assignedTo(c *metastore.Client) func(replica.Key, replica.NodeID) bool {
	return func(k replica.Key, n replica.NodeID) bool {
		t, ok := c.TopicByID(metastore.TopicID(k.TopicID))
		if !ok || k.Index < 0 || int(k.Index) >= len(t.Partitions) {
			return false
		}
		p := t.Partitions[k.Index]
		iv, il := p.Initial()
		id := int32(n)
		return slices.Contains(p.Voters, id) || slices.Contains(p.Learners, id) || slices.Contains(p.Target, id) ||
			slices.Contains(iv, id) || slices.Contains(il, id)
	}
}

// raftCollector exports the raft host's health: replicas offline after a
// failure, and what peers sent that was refused.
type raftCollector struct {
	host    *replica.Host
	tr      *replica.TCPTransport
	offline *prometheus.Desc
	refused *prometheus.Desc
	cache   *prometheus.Desc
}

func newRaftCollector(h *replica.Host, tr *replica.TCPTransport) *raftCollector {
	return &raftCollector{
		host: h, tr: tr,
		offline: prometheus.NewDesc("sluice_offline_replicas",
			"Replicas on this broker stopped by a storage failure or a raft panic: their partitions are offline here until the broker restarts.", nil, nil),
		refused: prometheus.NewDesc("sluice_raft_refused_total",
			"Replication connections, frames and raft messages refused from peers, by reason.", []string{"reason"}, nil),
		cache: prometheus.NewDesc("sluice_raft_entry_cache_bytes",
			"Bytes of raft entries the partitions' entry caches hold together (bounded by raft.entry.cache.max.bytes).", nil, nil),
	}
}

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.offline
	ch <- c.refused
	ch <- c.cache
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, float64(c.host.FailedReplicas()))
	ch <- prometheus.MustNewConstMetric(c.cache, prometheus.GaugeValue, float64(c.host.EntryCacheBytes()))
	counts := c.host.Refused()
	for k, v := range c.tr.Refused() {
		counts[k] += v
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(v), k)
	}
}

// leaderPublisher records in the metastore the partitions this broker now
// leads, so Metadata everywhere names the raft leader and its term as the
// leader epoch. The raft worker must not block, so changes are queued and
// the newest per partition wins.
type leaderPublisher struct {
	catalog *metastore.Client
	self    int32
	lg      zerolog.Logger
	pending chan leaderChange
}

type leaderChange struct {
	key    replica.Key
	leader int32
	epoch  int32
}

func newLeaderPublisher(ctx context.Context, c *metastore.Client, self int32, lg zerolog.Logger) *leaderPublisher {
	p := &leaderPublisher{catalog: c, self: self, lg: lg, pending: make(chan leaderChange, 4096)}
	go p.run(ctx)
	return p
}

func (p *leaderPublisher) publish(key replica.Key, leader, epoch int32) {
	if leader != p.self {
		return // the new leader publishes itself
	}
	select {
	case p.pending <- leaderChange{key, leader, epoch}:
	default:
		p.lg.Warn().Int32("partition", key.Index).Msg("leader change queue full; metadata will catch up at the next change")
	}
}

func (p *leaderPublisher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ch := <-p.pending:
			var topic string
			for _, t := range p.catalog.Topics() {
				if t.ID == ch.key.TopicID {
					topic = t.Name
				}
			}
			if topic == "" {
				continue // deleted meanwhile
			}
			for attempt := 0; attempt < 5; attempt++ {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := p.catalog.SetPartitionLeader(cctx, topic, ch.key.Index, ch.leader, ch.epoch)
				cancel()
				if err == nil || ctx.Err() != nil {
					break
				}
				p.lg.Warn().Err(err).Str("topic", topic).Int32("partition", ch.key.Index).Msg("publishing partition leader")
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
}
