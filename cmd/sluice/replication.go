package main

import (
	"context"
	"net"
	"strconv"
	"time"

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
