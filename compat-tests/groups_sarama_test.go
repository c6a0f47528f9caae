package compat

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaHandler processes records up to a limit, marking each after
// processing and committing synchronously after each run of buffered
// messages.
type saramaHandler struct {
	mu    sync.Mutex
	limit int
	got   []tpo
	done  chan struct{}
	once  sync.Once
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.mu.Lock()
		if len(h.got) >= h.limit {
			h.mu.Unlock()
			sess.Commit() // what this claim marked before the limit
			return nil
		}
		h.got = append(h.got, tpo{msg.Partition, msg.Offset})
		sess.MarkMessage(msg, "")
		full := len(h.got) >= h.limit
		// Commit what was processed once the buffered messages are
		// done: sarama shares one connection per broker between
		// fetches and commits, so a commit per message would queue
		// behind each fetch's long-poll.
		if full || len(claim.Messages()) == 0 {
			sess.Commit()
		}
		h.mu.Unlock()
		if full {
			h.once.Do(func() { close(h.done) })
			return nil
		}
	}
	return nil
}

func saramaConsume(version sarama.KafkaVersion) groupConsumeFunc {
	return func(ctx context.Context, t *testing.T, addr, group, topic string, n int) []tpo {
		t.Helper()
		cfg := sarama.NewConfig()
		cfg.Version = version
		cfg.ClientID = "sluice-compat-sarama"
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Offsets.AutoCommit.Enable = false
		cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
		cfg.Consumer.Group.Session.Timeout = 10 * time.Second
		cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
		if err != nil {
			t.Fatalf("sarama.NewConsumerGroup: %v", err)
		}
		h := &saramaHandler{limit: n, done: make(chan struct{})}
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			for cctx.Err() == nil {
				if err := cg.Consume(cctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
					t.Logf("sarama Consume: %v", err)
				}
			}
			errc <- nil
		}()
		go func() {
			for err := range cg.Errors() {
				t.Logf("sarama group error: %v", err)
			}
		}()
		start := time.Now()
		defer func() { t.Logf("sarama: consumed %d in %v", n, time.Since(start).Round(time.Millisecond)) }()
		select {
		case <-h.done:
		case <-ctx.Done():
			t.Fatalf("sarama consumed %d of %d records before the deadline", len(h.got), n)
		}
		cancel()
		<-errc
		if err := cg.Close(); err != nil {
			t.Errorf("sarama ConsumerGroup.Close: %v", err)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return append([]tpo(nil), h.got...)
	}
}

// TestGroupSarama runs IBM/sarama's ConsumerGroup (v1.61.1) with its
// default protocol version (2.8) and with 4.0.
func TestGroupSarama(t *testing.T) {
	t.Parallel()
	t.Run("v2_8", func(t *testing.T) { testGroupResume(t, "sarama28", saramaConsume(sarama.V2_8_0_0)) })
	t.Run("v4_0", func(t *testing.T) { testGroupResume(t, "sarama40", saramaConsume(sarama.V4_0_0_0)) })
}
