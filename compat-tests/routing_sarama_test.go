package compat

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaRouting is IBM/sarama (v1.61.1) with its default protocol version
// (2.8): Fetch v12, so KIP-392 preferred read replicas are followed
// (consumer.go keeps one until Metadata.RefreshFrequency), and the client
// rack goes out as Config.RackID.
func saramaRouting() routingClient {
	return routingClient{name: "sarama", rack: routingRack, produce: saramaRoutingProduce, consume: saramaRoutingConsume}
}

func saramaRoutingProduce(ctx context.Context, t *testing.T, addrs []string, topic string, keys, values []string) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = "sluice-routing-sarama"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	msgs := make([]*sarama.ProducerMessage, len(keys))
	for i := range keys {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(keys[i]), Value: sarama.StringEncoder(values[i])}
	}
	err = p.SendMessages(msgs)
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	var perrs sarama.ProducerErrors
	if errors.As(err, &perrs) && len(perrs) > 0 {
		t.Fatalf("sarama SendMessages: %v (first: partition %d: %v)", err, perrs[0].Msg.Partition, perrs[0].Err)
	}
	if err != nil {
		t.Fatalf("sarama SendMessages: %v", err)
	}
}

// saramaRoutingHandler records values, marks each processed message and
// commits synchronously when its claim's buffer is drained (a commit per
// message would queue behind each fetch's long-poll on sarama's shared
// broker connection), at the limit, and at warm-up.
type saramaRoutingHandler struct {
	mu     sync.Mutex
	limit  int
	values []string
	parts  map[int32]bool
	hooks  *routingHooks
	warmed bool
	done   chan struct{}
	once   sync.Once
}

func (h *saramaRoutingHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaRoutingHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaRoutingHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.mu.Lock()
		if len(h.values) >= h.limit {
			h.mu.Unlock()
			return nil
		}
		h.values = append(h.values, string(msg.Value))
		sess.MarkMessage(msg, "")
		h.parts[msg.Partition] = true
		full := len(h.values) >= h.limit
		warmNow := h.hooks != nil && !h.warmed && len(h.parts) == routingPartitions
		if warmNow {
			h.warmed = true
		}
		if full || warmNow || len(claim.Messages()) == 0 {
			sess.Commit()
		}
		h.mu.Unlock()
		if warmNow {
			h.hooks.warm()
		}
		if full {
			h.once.Do(func() { close(h.done) })
			return nil
		}
	}
	return nil
}

func saramaRoutingConsume(ctx context.Context, t *testing.T, addrs []string, topic, group, rack string, n int, hooks *routingHooks) []string {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = "sluice-routing-sarama"
	cfg.RackID = rack
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cg, err := sarama.NewConsumerGroup(addrs, group, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumerGroup: %v", err)
	}
	h := &saramaRoutingHandler{limit: n, parts: map[int32]bool{}, hooks: hooks, done: make(chan struct{})}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				t.Logf("sarama Consume: %v", err)
			}
		}
	}()
	go func() {
		for err := range cg.Errors() {
			t.Logf("sarama group error: %v", err)
		}
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
		h.mu.Lock()
		got := len(h.values)
		h.mu.Unlock()
		t.Fatalf("sarama consumed %d of %d records before the deadline", got, n)
	}
	if hooks != nil {
		hooks.done()
	}
	cancel()
	<-stopped
	if err := cg.Close(); err != nil {
		t.Errorf("sarama ConsumerGroup.Close: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.values...)
}
