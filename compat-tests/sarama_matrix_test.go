package compat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestSaramaMatrix runs the basic, transaction and admin scenarios of the
// matrix with IBM/sarama (protocol version 2.8, in-process), and
// group-rebalance with its ConsumerGroup; group-commit-resume is covered
// by groups_sarama_test.go.
func TestSaramaMatrix(t *testing.T) { testSaramaMatrix(t, false) }

// TestSharedMatrixSarama runs the basic scenarios of TestSaramaMatrix on shared-mode topics
// (shared_matrix_test.go).
func TestSharedMatrixSarama(t *testing.T) { testSaramaMatrix(t, true) }

func testSaramaMatrix(t *testing.T, shared bool) {
	t.Parallel()
	const client = "sarama"
	b, p, sharedDir := matrixBroker(t, shared, "sa")
	addr := b.KafkaAddr
	if !shared {
		prepareTxn(t, addr, p)
	}
	config := func() *sarama.Config {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.ClientID = "sluice-compat-sarama"
		cfg.Producer.Return.Successes = true
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		cfg.Producer.Retry.Max = 3
		cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
		return cfg
	}
	cl, err := sarama.NewClient([]string{addr}, config())
	if err != nil {
		t.Fatalf("sarama.NewClient: %v", err)
	}
	defer cl.Close()
	adm, err := sarama.NewClusterAdminFromClient(cl)
	if err != nil {
		t.Fatalf("sarama.NewClusterAdminFromClient: %v", err)
	}
	produce := func(cfg *sarama.Config, msgs ...*sarama.ProducerMessage) error {
		pr, err := sarama.NewSyncProducer([]string{addr}, cfg)
		if err != nil {
			return err
		}
		defer pr.Close()
		return pr.SendMessages(msgs)
	}
	consumeWith := func(cfg *sarama.Config, topic string, offset int64, n int) ([]*sarama.ConsumerMessage, error) {
		c, err := sarama.NewConsumer([]string{addr}, cfg)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		pc, err := c.ConsumePartition(topic, 0, offset)
		if err != nil {
			return nil, err
		}
		defer pc.Close()
		var out []*sarama.ConsumerMessage
		timeout := time.After(20 * time.Second)
		for len(out) < n {
			select {
			case m := <-pc.Messages():
				out = append(out, m)
			case e := <-pc.Errors():
				return out, e
			case <-timeout:
				return out, fmt.Errorf("read %d of %d in 20 s", len(out), n)
			}
		}
		return out, nil
	}
	consume := func(topic string, offset int64, n int) ([]*sarama.ConsumerMessage, error) {
		return consumeWith(config(), topic, offset, n)
	}
	r := &toolRun{res: map[string]scenarioResult{}}
	r.do("bootstrap-metadata", func() error {
		if n := len(cl.Brokers()); n != 1 {
			return fmt.Errorf("%d brokers", n)
		}
		ps, err := cl.Partitions(p + "-meta")
		if err != nil || len(ps) != 3 {
			return fmt.Errorf("partitions of %s-meta: %v %v", p, ps, err)
		}
		return nil
	})
	acks := func(topic string, acks sarama.RequiredAcks, idem bool) func() error {
		return func() error {
			cfg := config()
			cfg.Producer.RequiredAcks = acks
			if idem {
				cfg.Producer.Idempotent = true
				cfg.Net.MaxOpenRequests = 1
			}
			var msgs []*sarama.ProducerMessage
			for i := 0; i < 100; i++ {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: 0,
					Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("%s-%d", topic, i))})
			}
			return produce(cfg, msgs...)
		}
	}
	r.do("produce-acks0", acks(p+"-acks0", sarama.NoResponse, false))
	r.do("produce-acks1", acks(p+"-acks1", sarama.WaitForLocal, false))
	r.do("produce-acksall", acks(p+"-acksall", sarama.WaitForAll, false))
	r.do("produce-idempotent", acks(p+"-idem", sarama.WaitForAll, true))
	r.do("keys-nulls-headers-timestamps", func() error {
		tp := p + "-fields"
		ts := time.UnixMilli(tsBase)
		msgs := []*sarama.ProducerMessage{
			{Topic: tp, Key: sarama.StringEncoder("k1"), Value: sarama.StringEncoder("v1"), Timestamp: ts,
				Headers: []sarama.RecordHeader{{Key: []byte("h1"), Value: []byte("a")}, {Key: []byte("h2"), Value: []byte("b")}}},
			{Topic: tp, Key: sarama.StringEncoder("k2"), Value: nil, Timestamp: ts.Add(time.Millisecond)},
			{Topic: tp, Key: nil, Value: sarama.StringEncoder("v3"), Timestamp: ts.Add(2 * time.Millisecond),
				Headers: []sarama.RecordHeader{{Key: []byte("h3"), Value: []byte{}}}},
		}
		cfg := config()
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		if err := produce(cfg, msgs...); err != nil {
			return err
		}
		got, err := consume(tp, sarama.OffsetOldest, 3)
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
				hs = append(hs, string(h.Key)+"="+string(h.Value))
			}
			w := want[i]
			if !bytes.Equal(m.Key, w.k) || (m.Key == nil) != (w.k == nil) || !bytes.Equal(m.Value, w.v) || (m.Value == nil) != (w.v == nil) ||
				strings.Join(hs, ",") != w.h || m.Timestamp.UnixMilli() != tsBase+int64(i) {
				return fmt.Errorf("record %d: key %q value %q headers %v ts %d", i, m.Key, m.Value, hs, m.Timestamp.UnixMilli())
			}
		}
		return nil
	})
	r.do("near-max-message-bytes", func() error {
		v := strings.Repeat("n", 99_000)
		if err := produce(config(), &sarama.ProducerMessage{Topic: p + "-big", Key: sarama.StringEncoder("near"), Value: sarama.StringEncoder(v)}); err != nil {
			return err
		}
		got, err := consume(p+"-big", sarama.OffsetOldest, 1)
		if err != nil || string(got[0].Value) != v {
			return fmt.Errorf("read back: %v", err)
		}
		return nil
	})
	r.do("error-record-too-large", func() error {
		err := produce(config(), &sarama.ProducerMessage{Topic: p + "-big", Key: sarama.StringEncoder("over"), Value: sarama.StringEncoder(strings.Repeat("o", 101_000))})
		var pes sarama.ProducerErrors
		if errors.As(err, &pes) && len(pes) == 1 {
			err = pes[0].Err
		}
		if !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
			return fmt.Errorf("101,000 bytes over max.message.bytes=100000: %v, want MESSAGE_TOO_LARGE", err)
		}
		return nil
	})
	cons := p + "-cons"
	r.do("consume-earliest", func() error {
		got, err := consume(cons, sarama.OffsetOldest, 10)
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
		c, err := sarama.NewConsumer([]string{addr}, config())
		if err != nil {
			return err
		}
		defer c.Close()
		pc, err := c.ConsumePartition(cons, 0, sarama.OffsetNewest) // resolves "latest" now
		if err != nil {
			return err
		}
		defer pc.Close()
		if err := produce(config(), &sarama.ProducerMessage{Topic: cons, Value: sarama.StringEncoder("after-latest")}); err != nil {
			return err
		}
		select {
		case m := <-pc.Messages():
			if string(m.Value) != "after-latest" || m.Offset != 10 {
				return fmt.Errorf("read offset %d %q", m.Offset, m.Value)
			}
			return nil
		case e := <-pc.Errors():
			return e
		case <-time.After(20 * time.Second):
			return fmt.Errorf("nothing in 20 s")
		}
	})
	r.do("consume-timestamp", func() error {
		off, err := cl.GetOffset(cons, 0, tsBase+4500)
		if err != nil || off != 5 {
			return fmt.Errorf("offset for timestamp base+4500: %d %v, want 5", off, err)
		}
		got, err := consume(cons, off, 3)
		if err != nil || string(got[0].Value) != "c-5" || string(got[2].Value) != "c-7" {
			return fmt.Errorf("read from 5: %v", err)
		}
		return nil
	})
	r.do("error-unknown-topic", func() error {
		md, err := adm.DescribeTopics([]string{p + "-no-such-topic"})
		if err != nil {
			return err
		}
		if len(md) != 1 || !errors.Is(md[0].Err, sarama.ErrUnknownTopicOrPartition) {
			return fmt.Errorf("metadata for a missing topic: %+v, want UNKNOWN_TOPIC_OR_PARTITION", md)
		}
		return nil
	})
	if shared {
		recordSharedResults(t, client, r.res, checkShared(t, addr, p, sharedDir))
		return
	}
	recordResults(t, client, basicScenarios, r.res, checkBasic(t, addr, p))

	// txn-commit-abort: sarama's transactional producer (txnConfig), a
	// transaction of c-0..c-4 committed, one of a-0..a-4 aborted, one of
	// c-5..c-9 committed; its consumer with ReadCommitted reads exactly
	// c-0..c-9.
	// txnConfig is the configuration of sarama's transactional producer (1.37+:
	// Producer.Transaction.ID, idempotent, one request in flight) of id.
	txnConfig := func(id string) *sarama.Config {
		cfg := config()
		cfg.Producer.Idempotent = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Net.MaxOpenRequests = 1
		cfg.Producer.Transaction.ID = id
		return cfg
	}
	// endTxn commits (commit) or aborts transaction i of pr.
	endTxn := func(pr sarama.SyncProducer, i int, commit bool) error {
		var err error
		if commit {
			err = pr.CommitTxn()
		} else {
			err = pr.AbortTxn()
		}
		if err != nil {
			return fmt.Errorf("ending transaction %d (commit %v): %w", i, commit, err)
		}
		return nil
	}
	// readCommitted reads n values of partition 0 of topic from the
	// start with ReadCommitted.
	readCommitted := func(topic string, n int) ([]string, error) {
		rc := config()
		rc.Consumer.IsolationLevel = sarama.ReadCommitted
		got, err := consumeWith(rc, topic, sarama.OffsetOldest, n)
		var vals []string
		for _, m := range got {
			vals = append(vals, string(m.Value))
		}
		return vals, err
	}
	r = &toolRun{res: map[string]scenarioResult{}}
	r.do("txn-commit-abort", func() error {
		topic := p + "-txn"
		pr, err := sarama.NewSyncProducer([]string{addr}, txnConfig(topic+"-tid"))
		if err != nil {
			return err
		}
		defer pr.Close()
		steps, want := txnScenario()
		for i, st := range steps {
			commit := st.commit
			if err := pr.BeginTxn(); err != nil {
				return fmt.Errorf("BeginTxn: %w", err)
			}
			var msgs []*sarama.ProducerMessage
			for _, v := range st.values {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(v)})
			}
			if err := pr.SendMessages(msgs); err != nil {
				return fmt.Errorf("transaction %d: %w", i, err)
			}
			if err := endTxn(pr, i, commit); err != nil {
				return err
			}
		}
		vals, err := readCommitted(topic, len(want))
		if err != nil || !slices.Equal(vals, want) {
			return fmt.Errorf("read_committed read %q (%v), want c-0..c-9", vals, err)
		}
		return nil
	})
	// txn-offsets (prepareTxn): sarama's consumer reads i-0..i-9 of
	// p-txo-in (ConsumePartition, no group membership); the
	// transactional producer writes o-0..o-4, adds the offset after i-4
	// for group p-txo-g with AddMessageToTxn (AddOffsetsToTxn and
	// TxnOffsetCommit) and commits, then o-5..o-9 with the offset after
	// i-9 and aborts (sarama sends a transaction's offsets only when it
	// commits, so offset 10 never reaches the broker). The group's
	// committed offset (OffsetFetch through ClusterAdmin) is 5, and a
	// ReadCommitted consumer of p-txo-out reads o-0..o-4.
	r.do("txn-offsets", func() error {
		in, out, group := p+"-txo-in", p+"-txo-out", p+txoGroupSuffix
		input, err := consume(in, sarama.OffsetOldest, txoInputRecords)
		if err != nil {
			return fmt.Errorf("reading %s: %w", in, err)
		}
		pr, err := sarama.NewSyncProducer([]string{addr}, txnConfig(p+"-txo-tid"))
		if err != nil {
			return err
		}
		defer pr.Close()
		for i, commit := range []bool{true, false} {
			if err := pr.BeginTxn(); err != nil {
				return fmt.Errorf("BeginTxn: %w", err)
			}
			batch := input[txoCommitted*i : txoCommitted*(i+1)]
			var msgs []*sarama.ProducerMessage
			for _, m := range batch {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: out, Partition: 0,
					Value: sarama.StringEncoder("o-" + strings.TrimPrefix(string(m.Value), "i-"))})
			}
			if err := pr.SendMessages(msgs); err != nil {
				return fmt.Errorf("transaction %d: %w", i, err)
			}
			if err := pr.AddMessageToTxn(batch[len(batch)-1], group, nil); err != nil {
				return fmt.Errorf("transaction %d: AddMessageToTxn: %w", i, err)
			}
			if err := endTxn(pr, i, commit); err != nil {
				return err
			}
		}
		offs, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{in: {0}})
		if err != nil {
			return fmt.Errorf("ListConsumerGroupOffsets: %w", err)
		}
		if b := offs.GetBlock(in, 0); b == nil || b.Err != sarama.ErrNoError || b.Offset != txoCommitted {
			return fmt.Errorf("committed offset of %s/0: %+v, want %d", in, b, txoCommitted)
		}
		vals, err := readCommitted(out, txoCommitted)
		if want := []string{"o-0", "o-1", "o-2", "o-3", "o-4"}; err != nil || !slices.Equal(vals, want) {
			return fmt.Errorf("read_committed read %q (%v), want %q", vals, err, want)
		}
		return nil
	})
	// txn-fencing (prepareTxn): sarama's transactional producer sends
	// InitProducerId when it is created, so creating B fences A, whose
	// CommitTxn (EndTxn v3 with Version 2.8) then fails with
	// PRODUCER_FENCED.
	r.do("txn-fencing", func() error {
		topic := p + "-txf"
		cfg := txnConfig(p + "-txf-tid")
		cfg.Producer.Transaction.Retry.Max = 5
		a, err := sarama.NewSyncProducer([]string{addr}, cfg)
		if err != nil {
			return err
		}
		defer a.Close()
		if err := a.BeginTxn(); err != nil {
			return fmt.Errorf("A BeginTxn: %w", err)
		}
		if err := a.SendMessages([]*sarama.ProducerMessage{{Topic: topic, Partition: 0, Value: sarama.StringEncoder("f-a-0")}}); err != nil {
			return fmt.Errorf("A send: %w", err)
		}
		bp, err := sarama.NewSyncProducer([]string{addr}, cfg)
		if err != nil {
			return fmt.Errorf("creating B: %w", err)
		}
		defer bp.Close()
		if err := a.CommitTxn(); !errors.Is(err, sarama.ErrProducerFenced) {
			return fmt.Errorf("A's commit after B initialized: %v, want PRODUCER_FENCED", err)
		}
		if err := bp.BeginTxn(); err != nil {
			return fmt.Errorf("B BeginTxn: %w", err)
		}
		if err := bp.SendMessages([]*sarama.ProducerMessage{{Topic: topic, Partition: 0, Value: sarama.StringEncoder("f-b-0")}}); err != nil {
			return fmt.Errorf("B send: %w", err)
		}
		if err := bp.CommitTxn(); err != nil {
			return fmt.Errorf("B commit: %w", err)
		}
		if got, err := readCommitted(topic, 1); err != nil || !slices.Equal(got, []string{"f-b-0"}) {
			return fmt.Errorf("read_committed read %q (%v), want f-b-0", got, err)
		}
		return nil
	})
	recordResults(t, client, txnScenarios, r.res, checkTxn(t, addr, p))

	r = &toolRun{res: map[string]scenarioResult{}}
	tp := p + "-adm"
	partitions := func(want int) error {
		deadline := time.Now().Add(10 * time.Second)
		for {
			md, err := adm.DescribeTopics([]string{tp})
			if err == nil && len(md) == 1 && len(md[0].Partitions) == want {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %v partitions wanted %d (%v)", tp, md, want, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	describe := func() (map[string]string, error) {
		es, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: tp})
		out := map[string]string{}
		for _, e := range es {
			out[e.Name] = e.Value
		}
		return out, err
	}
	r.do("admin-create", func() error {
		ret := "3600000"
		if err := adm.CreateTopic(tp, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1,
			ConfigEntries: map[string]*string{"retention.ms": &ret}}, false); err != nil {
			return err
		}
		if err := partitions(2); err != nil {
			return err
		}
		if err := adm.CreateTopic(tp, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
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
		v := "7200000"
		if err := adm.IncrementalAlterConfig(sarama.TopicResource, tp, map[string]sarama.IncrementalAlterConfigsEntry{
			"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}}, false); err != nil {
			return err
		}
		cfg, err := describe()
		if err != nil || cfg["retention.ms"] != v {
			return fmt.Errorf("after alter retention.ms=%q (%v)", cfg["retention.ms"], err)
		}
		return nil
	})
	r.do("admin-create-partitions", func() error {
		if err := adm.CreatePartitions(tp, 4, nil, false); err != nil {
			return err
		}
		return partitions(4)
	})
	r.do("admin-delete", func() error {
		if err := adm.DeleteTopic(tp); err != nil {
			return err
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			ts, err := adm.ListTopics()
			if err == nil {
				if _, ok := ts[tp]; !ok {
					return nil
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("still listed after delete (%v)", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	r.do("error-bad-config", func() error {
		bad := "soon"
		err := adm.CreateTopic(p+"-bad", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
			ConfigEntries: map[string]*string{"retention.ms": &bad}}, false)
		if !errors.Is(err, sarama.ErrInvalidConfig) {
			return fmt.Errorf("create with retention.ms=soon: %v, want INVALID_CONFIG", err)
		}
		return nil
	})
	recordResults(t, client, adminScenarios, r.res, nil)

	prepareGroup(t, addr, p)
	r = &toolRun{res: map[string]scenarioResult{}}
	r.do("group-rebalance", func() error {
		return groupRebalance(p+"-rebalance", t.Logf, func(g, name string) (rebalanceMember, error) {
			return newSaramaMember(addr, g, p+"-grp", name)
		})
	})
	recordResults(t, client, []string{"group-rebalance"}, r.res, nil)
}

// saramaMember is a sarama ConsumerGroup member that records the
// generation and partitions of each session it gets (Setup) and drains its
// claims; Consume is called again after every rebalance, as sarama requires.
type saramaMember struct {
	topic  string
	cg     sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	gen    int32
	parts  []int32
}

func newSaramaMember(addr, group, topic, name string) (*saramaMember, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "sluice-compat-sarama-" + name
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{topic: topic, cg: cg, cancel: cancel, done: make(chan struct{}), gen: -1}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, m); errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			} else if err != nil {
				time.Sleep(100 * time.Millisecond) // e.g. a rebalance in progress: join again
			}
		}
	}()
	go func() {
		for range cg.Errors() {
		}
	}()
	return m, nil
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	ps := slices.Clone(s.Claims()[m.topic])
	slices.Sort(ps)
	m.mu.Lock()
	m.gen, m.parts = s.GenerationID(), ps
	m.mu.Unlock()
	return nil
}

func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim drains the claim until sarama closes it at the end of the
// session.
func (m *saramaMember) ConsumeClaim(_ sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for range c.Messages() {
	}
	return nil
}

func (m *saramaMember) assignment() (int32, []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen, m.parts
}

// leave ends the session and closes the group, which sends LeaveGroup.
func (m *saramaMember) leave() error {
	var err error
	m.once.Do(func() {
		m.cancel()
		err = m.cg.Close()
		<-m.done
	})
	return err
}
