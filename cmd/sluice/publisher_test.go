package main

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/replica"
)

// TestLeaderPublisherOneWritePerTopic: the leader publisher sends every
// change it has queued for a topic as one metastore write (as at startup,
// when each group of a many-partition topic elects itself at once), not
// one write per partition, and a later ISR report of the same epoch
// keeps its leader.
func TestLeaderPublisherOneWritePerTopic(t *testing.T) {
	cfg := metastore.Default()
	cfg.ID = 1
	cfg.DataDir = t.TempDir()
	cfg.TickInterval = 10 * time.Millisecond
	meta, err := metastore.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := meta.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c := meta.Client()
	const parts = 500
	assign := make([][]int32, parts)
	for i := range assign {
		assign[i] = []int32{1}
	}
	top, err := c.CreateTopic(ctx, metastore.TopicSpec{Name: "pub", ReplicationFactor: -1, Assignment: assign})
	if err != nil {
		t.Fatal(err)
	}
	p := &leaderPublisher{catalog: c, self: 1, lg: zerolog.Nop(), pending: map[replica.Key]leaderChange{}, wake: make(chan struct{}, 1)}
	for i := int32(0); i < parts; i++ {
		key := replica.Key{TopicID: top.ID, Index: i}
		p.publish(key, 1, 2)
		p.publish(key, 2, 3) // another broker's leadership: not ours to publish
	}
	p.publishISR(replica.Key{TopicID: top.ID, Index: 4}, 2, []replica.NodeID{1})
	before := c.Revision()
	go p.run(ctx)
	for {
		cur, _ := c.SharedTopicByID(top.ID)
		done := 0
		for _, pt := range cur.Partitions {
			if pt.LeaderEpoch == 2 {
				done++
			}
		}
		if done == parts {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d partitions published", done, parts)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if writes := c.Revision() - before; writes != 1 {
		t.Fatalf("%d leader changes took %d metastore writes, want 1", parts, writes)
	}
	cur, _ := c.TopicByID(top.ID)
	if isr := cur.Partitions[4].ISR; len(isr) != 1 || isr[0] != 1 || cur.Partitions[4].Leader != 1 {
		t.Fatalf("partition 4: %+v", cur.Partitions[4])
	}
}
