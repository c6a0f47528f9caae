package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// TestKafkaGoMatrix runs the basic and admin scenarios of the matrix with
// segmentio/kafka-go (Writer, Reader, Client; in-process). kafka-go has no
// idempotent producer. group-rebalance runs with its ConsumerGroup;
// group-commit-resume is covered by groups_kafkago_test.go.
func TestKafkaGoMatrix(t *testing.T) { testKafkaGoMatrix(t, false) }

// TestSharedMatrixKafkaGo runs the basic scenarios of TestKafkaGoMatrix on shared-mode topics
// (shared_matrix_test.go).
func TestSharedMatrixKafkaGo(t *testing.T) { testKafkaGoMatrix(t, true) }

func testKafkaGoMatrix(t *testing.T, shared bool) {
	t.Parallel()
	const client = "kafka-go"
	b, p, sharedDir := matrixBroker(t, shared, "kg")
	addr := b.KafkaAddr
	kc := &kafkago.Client{Addr: kafkago.TCP(addr), Timeout: 15 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	write := func(topic string, acks kafkago.RequiredAcks, msgs ...kafkago.Message) error {
		w := &kafkago.Writer{Addr: kafkago.TCP(addr), Topic: topic, RequiredAcks: acks, BatchSize: len(msgs),
			BatchTimeout: 20 * time.Millisecond, Balancer: &kafkago.LeastBytes{}}
		defer w.Close()
		return w.WriteMessages(ctx, msgs...)
	}
	read := func(topic string, offset int64, at time.Time, n int) ([]kafkago.Message, error) {
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: 0,
			MaxWait: 200 * time.Millisecond, MaxBytes: 10 << 20})
		defer r.Close()
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var err error
		if at.IsZero() {
			err = r.SetOffset(offset)
		} else {
			err = r.SetOffsetAt(rctx, at)
		}
		if err != nil {
			return nil, err
		}
		var out []kafkago.Message
		for len(out) < n {
			m, err := r.ReadMessage(rctx)
			if err != nil {
				return out, fmt.Errorf("after %d of %d: %w", len(out), n, err)
			}
			out = append(out, m)
		}
		return out, nil
	}
	r := &toolRun{res: map[string]scenarioResult{}}
	r.do("bootstrap-metadata", func() error {
		md, err := kc.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{p + "-meta"}})
		if err != nil {
			return err
		}
		if len(md.Brokers) != 1 || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 3 {
			return fmt.Errorf("brokers %d, topics %+v", len(md.Brokers), md.Topics)
		}
		return nil
	})
	acks := func(topic string, acks kafkago.RequiredAcks) func() error {
		return func() error {
			var msgs []kafkago.Message
			for i := 0; i < 100; i++ {
				msgs = append(msgs, kafkago.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s-%d", topic, i))})
			}
			return write(topic, acks, msgs...)
		}
	}
	r.do("produce-acks0", acks(p+"-acks0", kafkago.RequireNone))
	r.do("produce-acks1", acks(p+"-acks1", kafkago.RequireOne))
	r.do("produce-acksall", acks(p+"-acksall", kafkago.RequireAll))
	r.res["produce-idempotent"] = scenarioResult{"na", "kafka-go has no idempotent producer (it never sends InitProducerId)"}
	r.do("keys-nulls-headers-timestamps", func() error {
		tp := p + "-fields"
		ts := time.UnixMilli(tsBase)
		if err := write(tp, kafkago.RequireAll,
			kafkago.Message{Key: []byte("k1"), Value: []byte("v1"), Time: ts, Headers: []kafkago.Header{{Key: "h1", Value: []byte("a")}, {Key: "h2", Value: []byte("b")}}},
			kafkago.Message{Key: []byte("k2"), Value: nil, Time: ts.Add(time.Millisecond)},
			kafkago.Message{Key: nil, Value: []byte("v3"), Time: ts.Add(2 * time.Millisecond), Headers: []kafkago.Header{{Key: "h3", Value: []byte{}}}},
		); err != nil {
			return err
		}
		got, err := read(tp, kafkago.FirstOffset, time.Time{}, 3)
		if err != nil {
			return err
		}
		want := []struct {
			k, v []byte
			h    string
		}{{[]byte("k1"), []byte("v1"), "h1=a,h2=b"}, {[]byte("k2"), nil, ""}, {nil, []byte("v3"), "h3="}}
		for i, m := range got {
			var hs []string
			for _, h := range m.Headers {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
			w := want[i]
			if string(m.Key) != string(w.k) || (m.Key == nil) != (w.k == nil) || string(m.Value) != string(w.v) || (m.Value == nil) != (w.v == nil) ||
				strings.Join(hs, ",") != w.h || m.Time.UnixMilli() != tsBase+int64(i) {
				return fmt.Errorf("record %d: key %q value %q headers %v ts %d", i, m.Key, m.Value, hs, m.Time.UnixMilli())
			}
		}
		return nil
	})
	r.do("near-max-message-bytes", func() error {
		v := strings.Repeat("n", 99_000)
		if err := write(p+"-big", kafkago.RequireAll, kafkago.Message{Key: []byte("near"), Value: []byte(v)}); err != nil {
			return err
		}
		got, err := read(p+"-big", kafkago.FirstOffset, time.Time{}, 1)
		if err != nil || string(got[0].Value) != v {
			return fmt.Errorf("read back: %v", err)
		}
		return nil
	})
	r.do("error-record-too-large", func() error {
		err := write(p+"-big", kafkago.RequireAll, kafkago.Message{Key: []byte("over"), Value: []byte(strings.Repeat("o", 101_000))})
		var wes kafkago.WriteErrors
		if errors.As(err, &wes) && len(wes) == 1 {
			err = wes[0]
		}
		if !errors.Is(err, kafkago.MessageSizeTooLarge) {
			return fmt.Errorf("101,000 bytes over max.message.bytes=100000: %v, want MESSAGE_TOO_LARGE", err)
		}
		return nil
	})
	cons := p + "-cons"
	r.do("consume-earliest", func() error {
		got, err := read(cons, kafkago.FirstOffset, time.Time{}, 10)
		if err != nil {
			return err
		}
		for i, m := range got {
			if string(m.Value) != fmt.Sprintf("c-%d", i) {
				return fmt.Errorf("offset %d: %q", m.Offset, m.Value)
			}
		}
		return nil
	})
	r.do("consume-latest", func() error {
		// A Reader resolves LastOffset when it starts fetching: write a
		// record a second until it reads one; the first it reads must be one
		// of those (offset 10 or later).
		rd := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{addr}, Topic: cons, Partition: 0, MaxWait: 200 * time.Millisecond})
		defer rd.Close()
		if err := rd.SetOffset(kafkago.LastOffset); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got := make(chan kafkago.Message, 1)
		errc := make(chan error, 1)
		go func() {
			m, err := rd.ReadMessage(rctx)
			if err != nil {
				errc <- err
				return
			}
			got <- m
		}()
		for i := 0; ; i++ {
			select {
			case m := <-got:
				if !strings.HasPrefix(string(m.Value), "after-latest-") || m.Offset < 10 {
					return fmt.Errorf("read offset %d %q", m.Offset, m.Value)
				}
				return nil
			case err := <-errc:
				return err
			case <-time.After(time.Second):
			}
			if err := write(cons, kafkago.RequireAll, kafkago.Message{Value: []byte(fmt.Sprintf("after-latest-%d", i))}); err != nil {
				return err
			}
		}
	})
	r.do("consume-timestamp", func() error {
		got, err := read(cons, 0, time.UnixMilli(tsBase+4500), 3)
		if err != nil {
			return err
		}
		if got[0].Offset != 5 || string(got[0].Value) != "c-5" || string(got[2].Value) != "c-7" {
			return fmt.Errorf("read offsets %d.. %q", got[0].Offset, got[0].Value)
		}
		return nil
	})
	r.do("error-unknown-topic", func() error {
		md, err := kc.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{p + "-no-such-topic"}})
		if err != nil {
			return err
		}
		if len(md.Topics) != 1 || !errors.Is(md.Topics[0].Error, kafkago.UnknownTopicOrPartition) {
			return fmt.Errorf("metadata for a missing topic: %+v, want UNKNOWN_TOPIC_OR_PARTITION", md.Topics)
		}
		return nil
	})
	if shared {
		recordSharedResults(t, client, r.res, checkShared(t, addr, p, sharedDir))
		return
	}
	recordResults(t, client, basicScenarios, r.res, checkBasic(t, addr, p))

	r = &toolRun{res: map[string]scenarioResult{}}
	tp := p + "-adm"
	partitions := func(want int) error {
		deadline := time.Now().Add(10 * time.Second)
		for {
			md, err := kc.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{tp}})
			if err == nil && len(md.Topics) == 1 && md.Topics[0].Error == nil && len(md.Topics[0].Partitions) == want {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s never had %d partitions (%v)", tp, want, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	create := func(name string, parts int, cfg ...kafkago.ConfigEntry) error {
		resp, err := kc.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{Topic: name,
			NumPartitions: parts, ReplicationFactor: 1, ConfigEntries: cfg}}})
		if err != nil {
			return err
		}
		return resp.Errors[name]
	}
	describe := func() (map[string]string, error) {
		resp, err := kc.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{
			{ResourceType: kafkago.ResourceTypeTopic, ResourceName: tp}}})
		if err != nil {
			return nil, err
		}
		if resp.Resources[0].Error != nil {
			return nil, resp.Resources[0].Error
		}
		out := map[string]string{}
		for _, e := range resp.Resources[0].ConfigEntries {
			out[e.ConfigName] = e.ConfigValue
		}
		return out, nil
	}
	r.do("admin-create", func() error {
		if err := create(tp, 2, kafkago.ConfigEntry{ConfigName: "retention.ms", ConfigValue: "3600000"}); err != nil {
			return err
		}
		if err := partitions(2); err != nil {
			return err
		}
		if err := create(tp, 2); !errors.Is(err, kafkago.TopicAlreadyExists) {
			return fmt.Errorf("create again: %v, want TOPIC_ALREADY_EXISTS", err)
		}
		return nil
	})
	r.do("admin-describe-configs", func() error {
		cfg, err := describe()
		if err != nil {
			return err
		}
		if cfg["retention.ms"] != "3600000" {
			return fmt.Errorf("retention.ms=%q", cfg["retention.ms"])
		}
		if _, ok := cfg["cleanup.policy"]; !ok {
			return fmt.Errorf("no cleanup.policy in %d entries", len(cfg))
		}
		return nil
	})
	r.do("admin-alter-configs", func() error {
		resp, err := kc.IncrementalAlterConfigs(ctx, &kafkago.IncrementalAlterConfigsRequest{Resources: []kafkago.IncrementalAlterConfigsRequestResource{
			{ResourceType: kafkago.ResourceTypeTopic, ResourceName: tp, Configs: []kafkago.IncrementalAlterConfigsRequestConfig{
				{Name: "retention.ms", Value: "7200000", ConfigOperation: kafkago.ConfigOperationSet}}}}})
		if err != nil {
			return err
		}
		if resp.Resources[0].Error != nil {
			return resp.Resources[0].Error
		}
		cfg, err := describe()
		if err != nil || cfg["retention.ms"] != "7200000" {
			return fmt.Errorf("after alter retention.ms=%q (%v)", cfg["retention.ms"], err)
		}
		return nil
	})
	r.do("admin-create-partitions", func() error {
		resp, err := kc.CreatePartitions(ctx, &kafkago.CreatePartitionsRequest{Topics: []kafkago.TopicPartitionsConfig{{Name: tp, Count: 4}}})
		if err != nil {
			return err
		}
		if err := resp.Errors[tp]; err != nil {
			return err
		}
		return partitions(4)
	})
	r.do("admin-delete", func() error {
		resp, err := kc.DeleteTopics(ctx, &kafkago.DeleteTopicsRequest{Topics: []string{tp}})
		if err != nil {
			return err
		}
		if err := resp.Errors[tp]; err != nil {
			return err
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			md, err := kc.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{tp}})
			if err == nil && len(md.Topics) == 1 && errors.Is(md.Topics[0].Error, kafkago.UnknownTopicOrPartition) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("still there after delete (%v)", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	r.do("error-bad-config", func() error {
		err := create(p+"-bad", 1, kafkago.ConfigEntry{ConfigName: "retention.ms", ConfigValue: "soon"})
		if !errors.Is(err, kafkago.InvalidConfiguration) {
			return fmt.Errorf("create with retention.ms=soon: %v, want INVALID_CONFIG", err)
		}
		return nil
	})
	recordResults(t, client, adminScenarios, r.res, nil)

	prepareGroup(t, addr, p)
	r = &toolRun{res: map[string]scenarioResult{}}
	r.do("group-rebalance", func() error {
		return groupRebalance(p+"-rebalance", t.Logf, func(g, name string) (rebalanceMember, error) {
			return newKafkaGoMember(addr, g, p+"-grp")
		})
	})
	recordResults(t, client, []string{"group-rebalance"}, r.res, nil)
}

// kafkaGoMember is a kafka-go ConsumerGroup member (JoinGroup v1/v2 with
// its default Range balancer) that records the generation and partitions
// of every generation Next hands it. kafka-go heartbeats within the
// generation by itself and ends it when a heartbeat reports a rebalance.
type kafkaGoMember struct {
	cg     *kafkago.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	gen    int32
	parts  []int32
}

func newKafkaGoMember(addr, group, topic string) (*kafkaGoMember, error) {
	cg, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{ID: group, Brokers: []string{addr}, Topics: []string{topic},
		HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 10 * time.Second, JoinGroupBackoff: 500 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &kafkaGoMember{cg: cg, cancel: cancel, done: make(chan struct{}), gen: -1}
	go func() {
		defer close(m.done)
		for {
			gen, err := cg.Next(ctx)
			if ctx.Err() != nil || errors.Is(err, kafkago.ErrGroupClosed) {
				return
			}
			if err != nil {
				continue // the group's own loop joins again (after JoinGroupBackoff)
			}
			var ps []int32
			for _, a := range gen.Assignments[topic] {
				ps = append(ps, int32(a.ID))
			}
			slices.Sort(ps)
			m.mu.Lock()
			m.gen, m.parts = gen.ID, ps
			m.mu.Unlock()
		}
	}()
	return m, nil
}

func (m *kafkaGoMember) assignment() (int32, []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen, m.parts
}

// leave closes the group, which sends LeaveGroup.
func (m *kafkaGoMember) leave() error {
	var err error
	m.once.Do(func() {
		err = m.cg.Close()
		m.cancel()
		<-m.done
	})
	return err
}
