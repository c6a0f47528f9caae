package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// nemTopics records the nemesis's topic operations (CreateTopics,
// DeleteTopics, CreatePartitions on a few scratch topic names, sent to
// write brokers picked at random) with their call and return times, for a
// linearizability check of topic metadata once the run ends: each topic
// name is a register holding its partition count (0: no such topic). A
// create writes it if it is 0 and answers TOPIC_ALREADY_EXISTS otherwise,
// a delete zeroes it or answers UNKNOWN_TOPIC_OR_PARTITION, a grow to n
// raises it or answers UNKNOWN_TOPIC_OR_PARTITION (0) or
// INVALID_PARTITIONS (already n or more). The refusals are the reads: each
// says what the register held at some moment between call and return. An
// operation whose outcome is unknown (a timeout, a lost connection, an
// error that does not say the write was refused) returns at +infinity, as
// in nemLin: it took effect at some moment after its call, doing what it
// does to the register then, or never.
type nemTopics struct{ nemHistory }

type nemTopicOp int

const (
	nemTopicCreate nemTopicOp = iota
	nemTopicDelete
	nemTopicGrow
)

type nemTopicIn struct {
	op    nemTopicOp
	topic string
	n     int32 // create: the partitions; grow: the new total
}

// nemTopicOut is an operation's answer: a Kafka error code (0: done), or
// unknown.
type nemTopicOut struct {
	code    int16
	unknown bool
}

func newNemTopics() *nemTopics { return &nemTopics{nemHistory{start: time.Now()}} }

// nemTopicRefused: answers that refuse the request before any write and
// say nothing about the topic's state (dropped from the history).
func nemTopicRefused(code int16) bool {
	switch code {
	case kerr.InvalidReplicationFactor.Code, kerr.InvalidRequest.Code, kerr.PolicyViolation.Code,
		kerr.ThrottlingQuotaExceeded.Code, kerr.InvalidTopicException.Code, kerr.TopicAuthorizationFailed.Code,
		kerr.InvalidReplicaAssignment.Code, kerr.InvalidConfig.Code:
		return true
	}
	return false
}

// nemTopicRead: the refusals that are reads of the register.
func nemTopicRead(code int16) bool {
	return code == kerr.TopicAlreadyExists.Code || code == kerr.UnknownTopicOrPartition.Code || code == kerr.InvalidPartitions.Code
}

// record adds one operation called at call: err is a transport error (the
// outcome unknown), else code is the topic's answer.
func (l *nemTopics) record(client int, in nemTopicIn, call int64, code int16, err error) {
	out := nemTopicOut{code: code}
	ret := l.clock()
	switch {
	case err != nil || (code != 0 && !nemTopicRead(code) && !nemTopicRefused(code)):
		out, ret = nemTopicOut{unknown: true}, math.MaxInt64
	case nemTopicRefused(code):
		return
	}
	l.add(porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// summary counts the recorded operations by kind and answer.
func (l *nemTopics) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	count := map[string]int{}
	for _, op := range l.ops {
		d := nemTopicModel.DescribeOperation(op.Input, op.Output)
		f := strings.Fields(d)
		count[f[0]+" "+f[len(f)-1]]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, count[k]))
	}
	return strings.Join(parts, ", ")
}

// nemTopicStep is what an operation does to the register (the
// partitions, 0 for none) and the answer it gets.
func nemTopicStep(s int32, in nemTopicIn) (int32, int16) {
	switch in.op {
	case nemTopicCreate:
		if s != 0 {
			return s, kerr.TopicAlreadyExists.Code
		}
		return in.n, 0
	case nemTopicDelete:
		if s == 0 {
			return s, kerr.UnknownTopicOrPartition.Code
		}
		return 0, 0
	default:
		if s == 0 {
			return s, kerr.UnknownTopicOrPartition.Code
		}
		if in.n <= s {
			return s, kerr.InvalidPartitions.Code
		}
		return in.n, 0
	}
}

var nemTopicModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		return partitionOpsBy(h, func(op porcupine.Operation) string { return op.Input.(nemTopicIn).topic })
	},
	// The names are new to the cluster: no topic at first.
	Init: func() any { return int32(0) },
	Step: func(state, input, output any) (bool, any) {
		next, code := nemTopicStep(state.(int32), input.(nemTopicIn))
		out := output.(nemTopicOut)
		return out.unknown || out.code == code, next
	},
	Equal: func(a, b any) bool { return a.(int32) == b.(int32) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(nemTopicIn), output.(nemTopicOut)
		ans := "ok"
		if out.unknown {
			ans = "?"
		} else if out.code != 0 {
			ans = fmt.Sprint(out.code)
			if ke, ok := kerr.ErrorForCode(out.code).(*kerr.Error); ok {
				ans = ke.Message
			}
		}
		switch in.op {
		case nemTopicCreate:
			return fmt.Sprintf("create %s %d -> %s", in.topic, in.n, ans)
		case nemTopicDelete:
			return fmt.Sprintf("delete %s -> %s", in.topic, ans)
		}
		return fmt.Sprintf("grow %s to %d -> %s", in.topic, in.n, ans)
	},
}

// check runs porcupine over the history (bounded by timeout); an error
// names the topics whose history no order explains, with their last
// operations; a check that ran out of time is reported as such.
func (l *nemTopics) check(timeout time.Duration) (ops int, err error) {
	return l.nemHistory.check(nemTopicModel, "topic", "topic metadata is", func(part []porcupine.Operation) string {
		return part[0].Input.(nemTopicIn).topic
	}, timeout)
}

const (
	nemTopicNames   = 3 // scratch topics "nemt-0".."nemt-2"
	nemTopicClients = 2
	nemTopicMaxPart = 4
	// nemTopicGap: each client waits this long between operations.
	nemTopicGap = 250 * time.Millisecond
)

// topicWorkload runs nemTopicClients clients until stop, each sending one
// CreateTopics, DeleteTopics or CreatePartitions (replication factor 1,
// 1-4 partitions) on a scratch topic every nemTopicGap to a write broker
// picked at random, and recording it in n.topics.
func (n *nemesis) topicWorkload(stop chan struct{}, common []kgo.Opt) {
	var wg sync.WaitGroup
	for id := range nemTopicClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var brokers []*kgo.Client
			for _, addr := range n.c.writeAddrs {
				cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, common...)...)
				if err != nil {
					n.t.Error(err)
					return
				}
				defer cl.Close()
				brokers = append(brokers, cl)
			}
			rng := rand.New(rand.NewPCG(n.seed, uint64(id)+0x70b1c))
			for {
				select {
				case <-stop:
					return
				case <-time.After(nemTopicGap):
				}
				in := nemTopicIn{op: nemTopicOp(rng.IntN(3)), topic: fmt.Sprintf("nemt-%d", rng.IntN(nemTopicNames))}
				switch in.op {
				case nemTopicCreate:
					in.n = 1 + rng.Int32N(2)
				case nemTopicGrow:
					in.n = 2 + rng.Int32N(nemTopicMaxPart-1)
				}
				cl := brokers[rng.IntN(len(brokers))].SeedBrokers()[0]
				ctx, cancel := context.WithTimeout(n.ctx, 8*time.Second)
				call := n.topics.clock()
				code, err := nemTopicSend(ctx, cl, in)
				cancel()
				n.topics.record(id, in, call, code, err)
			}
		}()
	}
	wg.Wait()
}

// nemTopicSend sends one topic operation to broker b and returns the
// topic's error code.
func nemTopicSend(ctx context.Context, b *kgo.Broker, in nemTopicIn) (int16, error) {
	const timeoutMs = 5000
	switch in.op {
	case nemTopicCreate:
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = timeoutMs
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = in.topic, in.n, 1
		req.Topics = append(req.Topics, rt)
		resp, err := b.Request(ctx, req)
		if err != nil {
			return 0, err
		}
		if ts := resp.(*kmsg.CreateTopicsResponse).Topics; len(ts) == 1 {
			return ts[0].ErrorCode, nil
		}
	case nemTopicDelete:
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = timeoutMs
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(in.topic)
		req.Topics = append(req.Topics, rt)
		req.TopicNames = append(req.TopicNames, in.topic)
		resp, err := b.Request(ctx, req)
		if err != nil {
			return 0, err
		}
		if ts := resp.(*kmsg.DeleteTopicsResponse).Topics; len(ts) == 1 {
			return ts[0].ErrorCode, nil
		}
	default:
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = timeoutMs
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = in.topic, in.n
		req.Topics = append(req.Topics, rt)
		resp, err := b.Request(ctx, req)
		if err != nil {
			return 0, err
		}
		if ts := resp.(*kmsg.CreatePartitionsResponse).Topics; len(ts) == 1 {
			return ts[0].ErrorCode, nil
		}
	}
	return 0, errors.New("an answer without the topic")
}

// TestNemesisTopicChecker: the topic checker passes histories some order
// explains and fails ones no order does: a delete refused as unknown
// after an acknowledged create, two acknowledged creates with no delete
// between, a grow refused as not an increase below the size. Unknown
// outcomes may take effect late or never; refusals that say nothing are
// no operations.
func TestNemesisTopicChecker(t *testing.T) {
	const ok, exists, unknownTopic, invalid = 0, 36, 3, 37
	create := func(n int32) nemTopicIn { return nemTopicIn{op: nemTopicCreate, topic: "x", n: n} }
	del := nemTopicIn{op: nemTopicDelete, topic: "x"}
	grow := func(n int32) nemTopicIn { return nemTopicIn{op: nemTopicGrow, topic: "x", n: n} }
	type op struct {
		client    int
		in        nemTopicIn
		call, ret int64 // ret -1: unknown outcome
		code      int16
	}
	for _, tc := range []struct {
		name string
		ops  []op
		ok   bool
	}{
		{"create, grow, delete, create again", []op{
			{0, create(1), 1, 2, ok}, {1, grow(3), 3, 4, ok}, {0, grow(2), 5, 6, invalid},
			{1, del, 7, 8, ok}, {0, del, 9, 10, unknownTopic}, {1, create(2), 11, 12, ok}, {0, create(1), 13, 14, exists}}, true},
		{"concurrent creates: one wins", []op{
			{0, create(1), 1, 5, ok}, {1, create(2), 2, 6, exists}, {0, grow(1), 7, 8, invalid}}, true},
		{"delete refused after an acknowledged create", []op{
			{0, create(1), 1, 2, ok}, {1, del, 3, 4, unknownTopic}}, false},
		{"create refused after an acknowledged delete", []op{
			{0, create(1), 1, 2, ok}, {0, del, 3, 4, ok}, {1, create(1), 5, 6, exists}}, false},
		{"two creates acknowledged, no delete between", []op{
			{0, create(1), 1, 2, ok}, {1, create(2), 3, 4, ok}}, false},
		{"grow refused below the size", []op{
			{0, create(1), 1, 2, ok}, {1, grow(2), 3, 4, invalid}}, false},
		{"grow acknowledged, then seen smaller", []op{
			{0, create(1), 1, 2, ok}, {1, grow(4), 3, 4, ok}, {0, grow(3), 5, 6, ok}}, false},
		{"unknown create seen later", []op{
			{0, create(2), 1, -1, 0}, {1, grow(2), 5, 6, invalid}, {1, del, 7, 8, ok}}, true},
		{"unknown delete that never happened", []op{
			{0, create(1), 1, 2, ok}, {1, del, 3, -1, 0}, {0, create(1), 5, 6, exists}}, true},
		{"unknown delete cannot explain two reads", []op{
			{0, create(1), 1, 2, ok}, {1, del, 3, -1, 0}, {0, grow(2), 5, 6, unknownTopic}, {0, grow(2), 7, 8, invalid}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newNemTopics()
			for _, o := range tc.ops {
				ret, out := o.ret, nemTopicOut{code: o.code}
				if ret < 0 {
					ret, out = math.MaxInt64, nemTopicOut{unknown: true}
				}
				l.ops = append(l.ops, porcupine.Operation{ClientId: o.client, Input: o.in, Call: o.call, Output: out, Return: ret})
			}
			_, err := l.check(10 * time.Second)
			if (err == nil) != tc.ok {
				t.Fatalf("check: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	// The recorder: a transport error is an unknown outcome, a refusal
	// that says nothing is no operation.
	l := newNemTopics()
	l.record(0, create(1), l.clock(), ok, nil)
	l.record(1, del, l.clock(), kerr.RequestTimedOut.Code, nil)
	l.record(1, create(2), l.clock(), kerr.InvalidReplicationFactor.Code, nil)
	l.record(0, create(3), l.clock(), 0, errors.New("connection reset"))
	if len(l.ops) != 3 || !l.ops[1].Output.(nemTopicOut).unknown || l.ops[1].Return != math.MaxInt64 || !l.ops[2].Output.(nemTopicOut).unknown {
		t.Fatalf("recorded %+v", l.ops)
	}
	if _, err := l.check(10 * time.Second); err != nil {
		t.Fatalf("check: %v", err) // the unknown delete, then the unknown create of 3
	}
}

// TestClusterTopicOpsLinearizable runs the nemesis's topic workload on the
// split cluster (3 meta nodes, 3 write brokers, loopback) without faults
// for SLUICE_TOPIC_LIN_SECONDS (8 by default): two clients, each
// operation sent to a write broker picked at random, so that one broker
// answers about a topic another broker just created or deleted. The
// history must be linearizable.
func TestClusterTopicOpsLinearizable(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	secs := 8
	if v := os.Getenv("SLUICE_TOPIC_LIN_SECONDS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			secs = n
		}
	}
	c := startTestCluster(t, "raft")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	n := &nemesis{t: t, seed: seed, c: c, ctx: ctx, topics: newNemTopics()}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.topicWorkload(stop, []kgo.Opt{kgo.DialTimeout(time.Second), kgo.RequestTimeoutOverhead(2 * time.Second)})
	}()
	time.Sleep(time.Duration(secs) * time.Second)
	close(stop)
	<-done
	ops, err := n.topics.check(time.Minute)
	t.Logf("seed=%d: %d topic operations (%s)", seed, ops, n.topics.summary())
	if err != nil {
		t.Fatal(err)
	}
}

// TestClusterTopicAnswersCutOffBroker: a write broker cut off from the
// metastore and its peers (network namespaces; its clients still reach
// it) must not answer topic operations from its stale cache. Through
// write-1 a topic is deleted and another created while write-3 is cut
// off; write-3 is then asked to create the first, delete the second and
// grow the second. Answered from its cache (TOPIC_ALREADY_EXISTS,
// UNKNOWN_TOPIC_OR_PARTITION) those refusals contradict writes
// acknowledged before they were asked, which the topic checker reports;
// a broker that cannot read the current state answers REQUEST_TIMED_OUT
// (an unknown outcome). After the cut heals, write-3 serves them.
func TestClusterTopicAnswersCutOffBroker(t *testing.T) {
	lab := newNetLab(t)
	for _, name := range []string{"meta-1", "meta-2", "meta-3", "write-1", "write-2", "write-3", "read-1"} {
		lab.host(t, name)
	}
	ports := map[string]string{"meta": "9391", "kafka": "9092", "admin": "9644", "replica": "9491"}
	c := startTestClusterLayout(t, "raft", 1, clusterLayout{
		addr:   func(name, socket string) string { return net.JoinHostPort(lab.hosts[name].addr, ports[socket]) },
		prefix: lab.exec,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	var brokers []*kgo.Broker
	for _, addr := range c.writeAddrs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second), kgo.RequestTimeoutOverhead(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		brokers = append(brokers, cl.SeedBrokers()[0])
	}
	l := newNemTopics()
	do := func(client, broker int, in nemTopicIn) int16 {
		t.Helper()
		call := l.clock()
		code, err := nemTopicSend(ctx, brokers[broker], in)
		l.record(client, in, call, code, err)
		if err != nil {
			t.Logf("%s through write-%d: %v", nemTopicModel.DescribeOperation(in, nemTopicOut{unknown: true}), broker+1, err)
			return -1
		}
		t.Logf("%s through write-%d", nemTopicModel.DescribeOperation(in, nemTopicOut{code: code}), broker+1)
		return code
	}
	const a, b = "cut-a", "cut-b"
	if code := do(0, 0, nemTopicIn{op: nemTopicCreate, topic: a, n: 1}); code != 0 {
		t.Fatalf("creating %s: %v", a, kerr.ErrorForCode(code))
	}
	// write-3's cache holds a before the cut.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(a)
		req.Topics = append(req.Topics, mt)
		resp, err := req.RequestWith(ctx, brokers[2])
		if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("write-3 does not list %s: %v", a, err)
		}
	}
	lab.isolate(t, "write-3")
	if code := do(0, 0, nemTopicIn{op: nemTopicDelete, topic: a}); code != 0 {
		t.Fatalf("deleting %s: %v", a, kerr.ErrorForCode(code))
	}
	if code := do(0, 0, nemTopicIn{op: nemTopicCreate, topic: b, n: 1}); code != 0 {
		t.Fatalf("creating %s: %v", b, kerr.ErrorForCode(code))
	}
	do(1, 2, nemTopicIn{op: nemTopicCreate, topic: a, n: 1})
	do(1, 2, nemTopicIn{op: nemTopicDelete, topic: b})
	do(1, 2, nemTopicIn{op: nemTopicGrow, topic: b, n: 2})
	lab.heal(t, "write-3")
	// Healed, write-3 answers again (its connections to the metastore
	// come back within a few seconds).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if code := do(2, 2, nemTopicIn{op: nemTopicGrow, topic: b, n: 3}); code == 0 || code == kerr.InvalidPartitions.Code {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("write-3 did not grow the topic within 60 s of the heal")
		}
	}
	ops, err := l.check(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations linearizable (%s)", ops, l.summary())
}
