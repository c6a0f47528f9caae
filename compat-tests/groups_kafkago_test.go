package compat

import (
	"context"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

// kafkaGoConsume reads with a segmentio/kafka-go Reader in a group (JoinGroup
// v1/v2, OffsetCommit v2), committing each message synchronously after it
// is processed.
func kafkaGoConsume(ctx context.Context, t *testing.T, addr, group, topic string, n int) []tpo {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{addr},
		GroupID:           group,
		Topic:             topic,
		StartOffset:       kafka.FirstOffset,
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    10 * time.Second,
		MaxWait:           300 * time.Millisecond,
	})
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("kafka-go Reader.Close: %v", err)
		}
	}()
	var got []tpo
	for len(got) < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go FetchMessage after %d of %d: %v", len(got), n, err)
		}
		got = append(got, tpo{int32(m.Partition), m.Offset})
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("kafka-go CommitMessages: %v", err)
		}
	}
	return got
}

// TestGroupKafkaGo runs segmentio/kafka-go's Reader with a GroupID (v0.4.51).
func TestGroupKafkaGo(t *testing.T) {
	t.Parallel()
	testGroupResume(t, "kafkago", kafkaGoConsume)
}
