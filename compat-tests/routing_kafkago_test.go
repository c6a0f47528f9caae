package compat

import (
	"context"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

// kafkaGoRouting is segmentio/kafka-go (v0.4.51). It has no follower
// fetching: its Reader dials each partition's leader and negotiates Fetch
// v2/v5/v10 only (conn.go), so it never sees a preferred read replica, and
// in the mixed view the write brokers serve its Fetch.
func kafkaGoRouting() routingClient {
	return routingClient{name: "kafka-go", produce: kafkaGoRoutingProduce, consume: kafkaGoRoutingConsume}
}

func kafkaGoRoutingProduce(ctx context.Context, t *testing.T, addrs []string, topic string, keys, values []string) {
	t.Helper()
	// The transport refreshes metadata in the background until its
	// connections are closed: Writer.Close alone would leave it sending
	// Metadata requests into the next phase.
	tr := &kafka.Transport{ClientID: "sluice-routing-kafka-go"}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr:         kafka.TCP(addrs...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond,
		Transport:    tr,
	}
	msgs := make([]kafka.Message, len(keys))
	for i := range keys {
		msgs[i] = kafka.Message{Key: []byte(keys[i]), Value: []byte(values[i])}
	}
	err := w.WriteMessages(ctx, msgs...)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("kafka-go WriteMessages: %v", err)
	}
}

// kafkaGoRoutingConsume reads with a Reader in a group, committing each
// message synchronously after processing it. rack is ignored: kafka-go
// has no client rack for fetching.
func kafkaGoRoutingConsume(ctx context.Context, t *testing.T, addrs []string, topic, group, _ string, n int, hooks *routingHooks) []string {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           addrs,
		GroupID:           group,
		Topic:             topic,
		StartOffset:       kafka.FirstOffset,
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    10 * time.Second,
		MaxWait:           300 * time.Millisecond,
		Dialer:            &kafka.Dialer{ClientID: "sluice-routing-kafka-go", Timeout: 10 * time.Second},
	})
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("kafka-go Reader.Close: %v", err)
		}
	}()
	var values []string
	parts := map[int]bool{}
	for len(values) < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go FetchMessage after %d of %d: %v", len(values), n, err)
		}
		// kafka-go never checks a batch's control attribute
		// (segmentio/kafka-go#261, #1446), so it would hand the
		// application any control batch it is sent. Sluice once stored
		// raft's own entries as control batches; they are no longer in
		// the log at all (replica/doc.go, "Offsets"), and none may ever
		// reach a client.
		if isRaftControlRecord(m) {
			t.Fatalf("kafka-go returned one of Sluice's raft control records as a message: partition %d offset %d key %x",
				m.Partition, m.Offset, m.Key)
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("kafka-go CommitMessages: %v", err)
		}
		values = append(values, string(m.Value))
		if hooks != nil && !parts[m.Partition] {
			if parts[m.Partition] = true; len(parts) == routingPartitions {
				hooks.warm()
			}
		}
	}
	if hooks != nil {
		hooks.done()
	}
	return values
}

// isRaftControlRecord recognises the one record of a control batch Sluice
// once wrote for raft's own entries: key version 0 and type 200 (empty
// entry), 201 or 202 (configuration changes), timestamps -1 (which
// kafka-go turns into a zero time).
func isRaftControlRecord(m kafka.Message) bool {
	k := m.Key
	return len(k) == 4 && k[0] == 0 && k[1] == 0 && k[2] == 0 && k[3] >= 200 && k[3] <= 202 && m.Time.IsZero()
}
