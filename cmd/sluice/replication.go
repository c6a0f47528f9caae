package main

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
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

// asyncMasterOf is replica.HostConfig.AsyncMaster from the metastore's
// view: the partition's recorded async master and the last promotion's
// takeover point, if one is recorded.
func asyncMasterOf(c *metastore.Client) func(replica.Key) (replica.NodeID, *replica.Takeover, bool) {
	return func(k replica.Key) (replica.NodeID, *replica.Takeover, bool) {
		t, ok := c.TopicByID(metastore.TopicID(k.TopicID))
		if !ok || k.Index < 0 || int(k.Index) >= len(t.Partitions) {
			return 0, nil, false
		}
		p := t.Partitions[k.Index]
		if p.AsyncMaster == nil {
			return 0, nil, false
		}
		var tk *replica.Takeover
		if c := p.AsyncTakeover; c != nil {
			tk = &replica.Takeover{Term: c.Term, Index: c.Index, Offset: c.Offset}
		}
		return replica.NodeID(*p.AsyncMaster), tk, true
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
	semiFB  *prometheus.Desc
	trunc   *prometheus.Desc
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
		semiFB: prometheus.NewDesc("sluice_semi_sync_fallbacks_total",
			"Times a semi-sync partition led by this broker fell back to async answers: acks=all waited semi.sync.timeout.ms for semi.sync.wait.replicas write brokers (each is logged with the partition and offsets).", nil, nil),
		trunc: prometheus.NewDesc("sluice_truncated_records_total",
			"Records this broker's replicas cut from their logs because a new leader's log replaced them: written by a leader that lost its term before a majority held them. raft mode never acknowledged them with acks=all; acks=1, async and a semi-sync fallback may have (each cut is logged with the partition and offsets).", nil, nil),
	}
}

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.offline
	ch <- c.refused
	ch <- c.cache
	ch <- c.semiFB
	ch <- c.trunc
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, float64(c.host.FailedReplicas()))
	ch <- prometheus.MustNewConstMetric(c.cache, prometheus.GaugeValue, float64(c.host.EntryCacheBytes()))
	ch <- prometheus.MustNewConstMetric(c.semiFB, prometheus.CounterValue, float64(c.host.SemiSyncFallbacks()))
	ch <- prometheus.MustNewConstMetric(c.trunc, prometheus.CounterValue, float64(c.host.TruncatedRecords()))
	counts := c.host.Refused()
	if c.tr != nil { // nil without a replication port
		for k, v := range c.tr.Refused() {
			counts[k] += v
		}
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(v), k)
	}
}

// leaderPublisher records in the metastore the partitions this broker now
// leads, so Metadata everywhere names the raft leader and its term as the
// leader epoch, and their ISR whenever it changes, as Kafka's leaders send
// AlterPartition. The raft worker must not block, so changes are queued
// and the newest per partition wins: a leader's ISR travels with its
// leader and epoch in one metastore write, and everything queued for one
// topic goes in one write (SetPartitionLeaders).
type leaderPublisher struct {
	catalog *metastore.Client
	self    int32
	lg      zerolog.Logger

	mu      sync.Mutex
	pending map[replica.Key]leaderChange
	wake    chan struct{}
}

// publishGather is how long the leader publisher waits after the first
// change of a round before it sends the round: small against an election
// (a second or more), long enough that a burst goes in a few writes.
const publishGather = 10 * time.Millisecond

type leaderChange struct {
	leader int32
	epoch  int32
	isr    []int32 // nil: not reported (yet) in this epoch
}

func newLeaderPublisher(ctx context.Context, c *metastore.Client, self int32, lg zerolog.Logger) *leaderPublisher {
	p := &leaderPublisher{catalog: c, self: self, lg: lg, pending: map[replica.Key]leaderChange{}, wake: make(chan struct{}, 1)}
	go p.run(ctx)
	return p
}

func (p *leaderPublisher) publish(key replica.Key, leader, epoch int32) {
	if leader != p.self {
		return // the new leader publishes itself
	}
	p.queue(key, leaderChange{leader: leader, epoch: epoch})
}

// publishISR queues the ISR this broker, the leader in epoch, counts.
func (p *leaderPublisher) publishISR(key replica.Key, epoch int32, isr []replica.NodeID) {
	ids := make([]int32, len(isr))
	for i, id := range isr {
		ids[i] = int32(id)
	}
	p.queue(key, leaderChange{leader: p.self, epoch: epoch, isr: ids})
}

func (p *leaderPublisher) queue(key replica.Key, ch leaderChange) {
	p.mu.Lock()
	if old, ok := p.pending[key]; ok && old.epoch == ch.epoch && old.leader == ch.leader && ch.isr == nil {
		ch.isr = old.isr
	}
	if old, ok := p.pending[key]; !ok || old.epoch <= ch.epoch {
		p.pending[key] = ch
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *leaderPublisher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		// Let the changes of one burst (every group electing itself at
		// startup, a broker's groups failing over) gather: a round is a
		// write per topic, each storing the whole topic.
		select {
		case <-ctx.Done():
			return
		case <-time.After(publishGather):
		}
		p.mu.Lock()
		batch := p.pending
		p.pending = map[replica.Key]leaderChange{}
		p.mu.Unlock()
		// One metastore write per topic for everything queued: at
		// startup every group of a 1,000-partition topic elects itself
		// at once, and a write per partition would store (and decode,
		// and keep in the watch history) the whole topic 1,000 times.
		byTopic := map[metastore.TopicID][]metastore.LeaderChange{}
		for key, ch := range batch {
			id := metastore.TopicID(key.TopicID)
			byTopic[id] = append(byTopic[id], metastore.LeaderChange{Partition: key.Index, Leader: ch.leader, Epoch: ch.epoch, ISR: ch.isr})
		}
		for id, changes := range byTopic {
			if ctx.Err() != nil {
				return
			}
			slices.SortFunc(changes, func(a, b metastore.LeaderChange) int { return int(a.Partition) - int(b.Partition) })
			p.send(ctx, id, changes)
		}
	}
}

func (p *leaderPublisher) send(ctx context.Context, id metastore.TopicID, changes []metastore.LeaderChange) {
	t, ok := p.catalog.TopicByID(id)
	if !ok {
		return // deleted meanwhile
	}
	for attempt := 0; attempt < 5; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := p.catalog.SetPartitionLeaders(cctx, t.Name, changes)
		cancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, metastore.ErrUnknownTopic) {
			return
		}
		// Drop what a newer leader published meanwhile.
		if cur, ok := p.catalog.SharedTopicByID(t.ID); ok {
			changes = slices.DeleteFunc(changes, func(c metastore.LeaderChange) bool {
				return int(c.Partition) < len(cur.Partitions) && cur.Partitions[c.Partition].LeaderEpoch > c.Epoch
			})
			if len(changes) == 0 {
				return
			}
		}
		p.lg.Warn().Err(err).Str("topic", t.Name).Int("partitions", len(changes)).Msg("publishing partition leaders and ISR")
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
