package compat

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTailingConsumerLatency starts a consumer at the end of an empty topic,
// then produces in small bursts. A Fetch long-poll must be answered as soon
// as data arrives (the high watermark moves), not when MaxWait (5s here)
// runs out, so the consumer sees every record with low latency.
func TestTailingConsumerLatency(t *testing.T) {
	const (
		topic  = "tail"
		bursts = 40
		per    = 50
	)
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, topic, 2, nil)

	consumer := newClient(t, b.KafkaAddr,
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(5*time.Second))
	var (
		mu        sync.Mutex
		latencies []time.Duration
		seen      = map[string]bool{}
		dups      int
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(seen) < bursts*per && ctx.Err() == nil {
			fs := consumer.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				sent, _ := strconv.ParseInt(string(r.Headers[0].Value), 10, 64)
				mu.Lock()
				if seen[string(r.Value)] {
					dups++
				}
				seen[string(r.Value)] = true
				latencies = append(latencies, now.Sub(time.Unix(0, sent)))
				mu.Unlock()
			})
		}
	}()
	// Let the consumer reach the (empty) end and park its long-polls.
	time.Sleep(time.Second)

	producer := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic))
	for i := 0; i < bursts; i++ {
		var rs []*kgo.Record
		for j := 0; j < per; j++ {
			rs = append(rs, &kgo.Record{
				Key:     fmt.Appendf(nil, "%d", j),
				Value:   fmt.Appendf(nil, "burst-%d-%d", i, j),
				Headers: []kgo.RecordHeader{{Key: "sent", Value: strconv.AppendInt(nil, time.Now().UnixNano(), 10)}},
			})
		}
		if err := producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce burst %d: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cancel()
		<-done
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != bursts*per || dups > 0 {
		t.Fatalf("tailing consumer saw %d distinct records (%d duplicates), want %d", len(seen), dups, bursts*per)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	p50, p99, worst := latencies[len(latencies)/2], latencies[len(latencies)*99/100], latencies[len(latencies)-1]
	t.Logf("produce-to-consume latency: p50 %v p99 %v max %v", p50, p99, worst)
	// A broker that only answers when MaxWait (5s) expires shows ~5s here.
	if p99 > 2*time.Second {
		t.Errorf("p99 produce-to-consume latency %v: Fetch long-polls are not woken when data arrives (MaxWait is 5s)", p99)
	}
}
