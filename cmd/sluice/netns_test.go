package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchWritten adapts a function to kgo's HookProduceBatchWritten, which
// tells which broker acknowledged each batch.
type batchWritten func(meta kgo.BrokerMetadata, topic string, partition int32, m kgo.ProduceBatchMetrics)

func (f batchWritten) OnProduceBatchWritten(meta kgo.BrokerMetadata, topic string, partition int32, m kgo.ProduceBatchMetrics) {
	f(meta, topic, partition, m)
}

// TestClusterNetworkPartition is issue 5's fault test (d): every process
// runs in its own network namespace on one bridge, and twice the write
// broker that leads the most partitions is cut off for 10 s (up to 30 s
// if the producer has not reached the new leaders by then) while an
// idempotent acks=all producer keeps writing to every partition:
//
//   - "peers": cut off from the other brokers and the metastore but not
//     from the clients, so a non-idempotent acks=1 producer keeps writing
//     to it alone and it appends entries it can never commit (Kafka may
//     lose such records; they must not make the replicas diverge);
//   - "unplugged": its bridge port down, clients cut off too.
//
// Each time the majority must elect new leaders and take acks=all writes
// during the cut; after healing, every replica (3 voters, 1 learner)
// holds the same bytes up to the same high watermark, and every acks=all
// acknowledged record is there once, at its offset, in order. Failover
// and catch-up times are logged.
//
// Costs about 40 s: cluster start, then per cut 2 s + 10 s (30 s at
// most) + 3 s of production, catch-up and reading every replica.
func TestClusterNetworkPartition(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	lab := newNetLab(t)
	for _, name := range []string{"meta-1", "meta-2", "meta-3", "write-1", "write-2", "write-3", "read-1"} {
		lab.host(t, name)
	}
	// Each process has an address of its own, so every one uses the
	// ports of configs/local-cluster.
	ports := map[string]string{"meta": "9391", "kafka": "9092", "admin": "9644", "replica": "9491"}
	c := startTestClusterLayout(t, "raft", 1, clusterLayout{
		addr:   func(name, socket string) string { return net.JoinHostPort(lab.hosts[name].addr, ports[socket]) },
		prefix: lab.exec,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Second)
	defer cancel()
	s := &cutScenario{t: t, ctx: ctx, lab: lab, c: c, topic: "netcut", parts: 6, clients: map[string]*kgo.Client{}}
	s.brokers = append(append([]*proc{}, c.writers...), c.readers...)
	s.addrs = append(append([]string{}, c.writeAddrs...), c.readAddrs...)
	for _, a := range s.addrs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(a), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		s.clients[a] = cl
	}
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	s.adm = kadm.NewClient(wcl)
	mode := "raft"
	if _, err := s.adm.CreateTopic(ctx, s.parts, 3, map[string]*string{"replication.mode": &mode}, s.topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, s.adm, s.topic, int(s.parts))
	td, err := s.adm.ListTopics(ctx, s.topic)
	if err != nil || td[s.topic].Err != nil {
		t.Fatalf("describing %s: %v %v", s.topic, err, td[s.topic].Err)
	}
	s.topicID = td[s.topic].ID

	s.cut("peers")
	if !t.Failed() {
		s.cut("unplugged")
	}
}

// cutScenario is the state TestClusterNetworkPartition's cuts share:
// the acknowledged records of every cut are checked after each.
type cutScenario struct {
	t       *testing.T
	ctx     context.Context
	lab     *netLab
	c       *testCluster
	adm     *kadm.Client
	topic   string
	topicID [16]byte
	parts   int32
	brokers []*proc                // write brokers then the read broker
	addrs   []string               // their Kafka listeners
	clients map[string]*kgo.Client // one per broker, to ask its own replica

	mu    sync.Mutex
	acked []ackedRecord // acks=all, every cut so far
}

// cut runs one cut of the write broker leading the most partitions:
// "peers" or "unplugged" (see TestClusterNetworkPartition).
func (s *cutScenario) cut(how string) {
	t, ctx := s.t, s.ctx
	// acks=1, not idempotent, bootstrapped on the victim and writing
	// only to its partitions: what the victim acknowledges after the cut
	// it appended as a leader that cannot commit it. Its warm-up (one
	// record per partition, before the cut) must be acknowledged by the
	// victim itself: that proves the victim leads them as the cut
	// begins. If leadership is still moving (the elections after the
	// topic's creation, the preferred-leader rebalance that follows),
	// the victim is chosen again.
	var victim int32
	var victimParts []int32
	var one *kgo.Client
	for round := 1; ; round++ {
		victim, victimParts = s.chooseVictim()
		if how != "peers" {
			break
		}
		var err error
		if one, err = s.warmUpOneAck(victim, victimParts); err == nil {
			break
		}
		if round == 3 {
			t.Fatalf("%s: acks=1 warm-up on broker %d's partitions %v, 3 rounds: %v", how, victim, victimParts, err)
		}
		t.Logf("%s: acks=1 warm-up on broker %d's partitions %v: %v; waiting for the leaders again", how, victim, victimParts, err)
	}
	if one != nil {
		defer one.Close()
	}
	victimName, victimAddr := s.c.writers[victim-1].name, s.c.writeAddrs[victim-1]
	t.Logf("%s: cutting off broker %d (%s), leader of partitions %v", how, victim, victimName, victimParts)

	var mu sync.Mutex
	var cutAt time.Time
	newLeaderAck := map[int32]time.Time{} // first batch acknowledged by another broker after the cut
	newLeaderID := map[int32]int32{}
	isVictimPart := map[int32]bool{}
	for _, p := range victimParts {
		isVictimPart[p] = true
	}
	hook := batchWritten(func(meta kgo.BrokerMetadata, _ string, p int32, _ kgo.ProduceBatchMetrics) {
		mu.Lock()
		defer mu.Unlock()
		if !cutAt.IsZero() && isVictimPart[p] && meta.NodeID != victim {
			if _, ok := newLeaderAck[p]; !ok {
				newLeaderAck[p] = time.Now()
				newLeaderID[p] = meta.NodeID
			}
		}
	})
	prod, err := kgo.NewClient(kgo.SeedBrokers(s.c.writeAddrs...), kgo.DefaultProduceTopic(s.topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		// An unplugged leader never answers, and a new connection to it
		// hangs until ARP gives up (about 8 s): give a request up after
		// 3 s + 2 s and a dial after 1 s (kgo's defaults: overhead 10 s,
		// dial 10 s) and retry on the new leader, so the failover
		// measured is mostly the cluster's rather than the client's
		// patience.
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RequestTimeoutOverhead(2*time.Second), kgo.DialTimeout(time.Second),
		// One request in flight: an idempotent batch moves to the new
		// leader only once every request to the old one has failed.
		kgo.MaxProduceRequestsInflightPerBroker(1),
		// Room for the records of the cut-off partitions until their new
		// leaders are known, so the other partitions never block.
		kgo.MaxBufferedRecords(50000),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.WithHooks(hook))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%07d", how, i)}, func(r *kgo.Record, err error) {
				if err != nil {
					return // not acknowledged: may or may not be stored
				}
				s.mu.Lock()
				s.acked = append(s.acked, ackedRecord{r.Partition, r.Offset, string(r.Value)})
				s.mu.Unlock()
			})
			if i%10 == 9 {
				time.Sleep(10 * time.Millisecond) // about 1000 records/s
			}
		}
	}()

	type oneAck struct {
		partition int32
		offset    int64
		value     string
	}
	var oneAcked []oneAck

	time.Sleep(2 * time.Second)
	mu.Lock()
	cutAt = time.Now()
	mu.Unlock()
	var oneWG sync.WaitGroup
	if how == "peers" {
		s.lab.isolate(t, victimName)
		oneWG.Add(1)
		go func() {
			defer oneWG.Done()
			end := time.Now().Add(3 * time.Second)
			for i := 0; time.Now().Before(end); i++ {
				p := victimParts[i%len(victimParts)]
				one.Produce(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "one%06d", i)}, func(r *kgo.Record, err error) {
					if err == nil {
						mu.Lock()
						oneAcked = append(oneAcked, oneAck{r.Partition, r.Offset, string(r.Value)})
						mu.Unlock()
					}
				})
				time.Sleep(5 * time.Millisecond)
			}
			one.Flush(ctx)
		}()
	} else {
		s.lab.unplug(t, victimName)
	}

	// The majority must elect new leaders, and the producer must write
	// through them, while the cut lasts: 10 s, longer (up to 30 s) until
	// each of the victim's partitions took an acks=all write on a new
	// leader, so that a slow client-side timeout is measured, not
	// mistaken for a cluster that stopped taking writes. When the new
	// leaders appear in the metastore (as a broker of the majority
	// answers Metadata) tells the election apart from the client's
	// reaction.
	var other string
	for _, w := range s.c.writeAddrs {
		if w != victimAddr {
			other = w
		}
	}
	moved := map[int32]time.Duration{}
	resumed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(newLeaderAck) == len(victimParts)
	}
	for time.Since(cutAt) < 10*time.Second || (!resumed() && time.Since(cutAt) < 30*time.Second) {
		time.Sleep(100 * time.Millisecond)
		if len(moved) == len(victimParts) {
			continue
		}
		l, err := metadataLeaders(ctx, s.clients[other], s.topic)
		if err != nil {
			continue
		}
		for _, p := range victimParts {
			if _, ok := moved[p]; !ok && l[p] >= 0 && l[p] != victim {
				moved[p] = time.Since(cutAt)
			}
		}
	}
	healAt := time.Now()
	if how == "peers" {
		s.lab.heal(t, victimName)
	} else {
		s.lab.plug(t, victimName)
	}
	oneWG.Wait()
	mu.Lock()
	var failover, election time.Duration
	for _, p := range victimParts {
		at, ok := newLeaderAck[p]
		if !ok || at.After(healAt) {
			t.Errorf("%s: partition %d: no acks=all write acknowledged by a new leader during the %v cut (new leader in the metastore after %v, 0: never)",
				how, p, healAt.Sub(cutAt).Round(time.Second), moved[p].Round(time.Millisecond))
			continue
		}
		if moved[p] == 0 {
			t.Errorf("%s: partition %d: acknowledged by broker %d during the cut, but no new leader appeared in the metastore", how, p, newLeaderID[p])
		}
		failover, election = max(failover, at.Sub(cutAt)), max(election, moved[p])
		t.Logf("%s: partition %d: new leader in the metastore %v after the cut, first acks=all write acknowledged by it (broker %d) after %v",
			how, p, moved[p].Round(time.Millisecond), newLeaderID[p], at.Sub(cutAt).Round(time.Millisecond))
	}
	mu.Unlock()
	t.Logf("PARTITION %s: broker %d cut off for %v; new leaders of its partitions in the metastore %v after the cut, first acks=all writes acknowledged by them %v after it (at most)",
		how, victim, healAt.Sub(cutAt).Round(100*time.Millisecond), election.Round(time.Millisecond), failover.Round(time.Millisecond))

	// Catch-up: how long until the healed broker's replicas reach the
	// high watermarks the new leaders had at the heal.
	target := map[int32]int64{}
	for _, w := range s.c.writeAddrs {
		if w == victimAddr {
			continue
		}
		hws, err := replicaHWs(ctx, s.clients[w], s.topic, s.parts)
		if err != nil {
			t.Fatalf("high watermarks at %s: %v", w, err)
		}
		for p, hw := range hws {
			target[p] = max(target[p], hw)
		}
	}
	var caughtUp time.Duration
	for deadline := healAt.Add(30 * time.Second); ; {
		hws, err := replicaHWs(ctx, s.clients[victimAddr], s.topic, s.parts)
		done := err == nil
		for p, want := range target {
			done = done && hws[p] >= want
		}
		if done {
			caughtUp = time.Since(healAt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: broker %d did not catch up within 30 s of the heal: has %v, want %v (%v)", how, victim, hws, target, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("PARTITION %s: broker %d reached the high watermarks of the moment of the heal %v after it", how, victim, caughtUp.Round(time.Millisecond))

	time.Sleep(time.Until(healAt.Add(3 * time.Second)))
	close(stop)
	wg.Wait()
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	if err := prod.Flush(fctx); err != nil {
		t.Errorf("%s: flushing the acks=all producer after the heal: %v", how, err)
	}
	fcancel()

	where := s.verify(how)
	if how == "peers" {
		lost := 0
		for _, a := range oneAcked {
			if !slices.Contains(where[a.value], fmt.Sprintf("%d/%d", a.partition, a.offset)) {
				lost++
			}
		}
		// Those acknowledged by the new leader (the client finds it
		// through the other brokers) are committed; the lost ones were
		// appended by the cut-off leader and truncated on healing.
		t.Logf("PARTITION %s: acks=1 records acknowledged after the cut: %d, lost (appended by the cut-off leader, truncated on healing): %d", how, len(oneAcked), lost)
		// The point of the acks=1 writer: the old leader appended what
		// it could not commit, and the heal had to replace it.
		if lost == 0 {
			t.Errorf("%s: no acks=1 record acknowledged after the cut was lost (%d acknowledged): the cut-off leader appended nothing uncommitted, the scenario did not happen", how, len(oneAcked))
		}
	}
}

// chooseVictim waits for the preferred leaders and returns the write
// broker leading the most partitions, and those partitions in order.
func (s *cutScenario) chooseVictim() (int32, []int32) {
	leaders := s.preferredLeaders()
	led := map[int32][]int32{}
	for p, l := range leaders {
		led[l] = append(led[l], p)
	}
	var victim int32
	for id := int32(1); id <= 3; id++ {
		if len(led[id]) > len(led[victim]) {
			victim = id
		}
	}
	parts := led[victim]
	slices.Sort(parts)
	s.t.Logf("leaders %v: broker %d leads partitions %v", leaders, victim, parts)
	return victim, parts
}

// warmUpOneAck makes the acks=1 client of the "peers" cut, bootstrapped on
// victim, and writes one record to each of parts through it, so it is
// connected and has metadata before the cut. It fails unless victim
// itself acknowledged every one: a record that failed, or that another
// broker took, means leadership moved since the leaders were read.
func (s *cutScenario) warmUpOneAck(victim int32, parts []int32) (*kgo.Client, error) {
	type ack struct{ partition, broker int32 }
	acks := make(chan ack, 64)
	hook := batchWritten(func(meta kgo.BrokerMetadata, _ string, p int32, _ kgo.ProduceBatchMetrics) {
		select {
		case acks <- ack{p, meta.NodeID}:
		default:
		}
	})
	one, err := kgo.NewClient(kgo.SeedBrokers(s.c.writeAddrs[victim-1]), kgo.DefaultProduceTopic(s.topic),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(4*time.Second), kgo.ProduceRequestTimeout(2*time.Second),
		// After NOT_LEADER_FOR_PARTITION kgo waits for fresh metadata,
		// which by default it fetches at most every 5 s: longer than
		// the delivery timeout, so a record sent while leadership
		// moves would fail instead of following the new leader.
		kgo.MetadataMinAge(250*time.Millisecond), kgo.WithHooks(hook))
	if err != nil {
		s.t.Fatal(err)
	}
	for _, p := range parts {
		start := time.Now()
		if err := one.ProduceSync(s.ctx, &kgo.Record{Partition: p, Value: []byte("one-warmup")}).FirstErr(); err != nil {
			one.Close()
			return nil, fmt.Errorf("partition %d: %w (after %v)", p, err, time.Since(start).Round(time.Millisecond))
		}
		// kgo calls the hook on a goroutine of its own, possibly after
		// the record's promise.
		by := int32(-1)
		for timeout := time.After(2 * time.Second); by < 0; {
			select {
			case a := <-acks:
				if a.partition == p {
					by = a.broker
				}
			case <-timeout:
				one.Close()
				return nil, fmt.Errorf("partition %d: acknowledged, but no batch-written hook call within 2 s", p)
			}
		}
		if by != victim {
			one.Close()
			return nil, fmt.Errorf("partition %d: acknowledged by broker %d, not %d", p, by, victim)
		}
	}
	return one, nil
}

// preferredLeaders waits until every partition is led by its preferred
// leader (waitPreferredLeaders), where the clusters' preferred-leader
// rebalance (every 2 s) brings them after a heal, so the broker chosen to
// be cut off still leads when it is, and returns the leaders.
func (s *cutScenario) preferredLeaders() map[int32]int32 {
	return waitPreferredLeaders(s.ctx, s.t, s.adm, s.topic, int(s.parts))
}

// verify waits until every replica reports the same high watermarks,
// then checks that they hold the same bytes up to them and that every
// acks=all record acknowledged so far is there once, at its offset, in
// the order its producer sent it. It returns where each value is stored
// ("partition/offset").
func (s *cutScenario) verify(how string) map[string][]string {
	t, ctx := s.t, s.ctx
	var hwAll map[int32]int64
	for deadline := time.Now().Add(30 * time.Second); ; {
		hwAll = nil
		same := true
		for _, a := range s.addrs {
			hws, err := replicaHWs(ctx, s.clients[a], s.topic, s.parts)
			if err != nil {
				same = false
				break
			}
			if hwAll == nil {
				hwAll = hws
			}
			for p := range hws {
				same = same && hws[p] == hwAll[p]
			}
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: replicas did not agree on high watermarks within 30 s", how)
		}
		time.Sleep(100 * time.Millisecond)
	}

	content := map[int32][]byte{}
	var records map[int32][]kmsg.Record
	for i, a := range s.addrs {
		got := map[int32][]kmsg.Record{}
		for p := int32(0); p < s.parts; p++ {
			raw, recs, err := readReplica(ctx, s.clients[a], s.topic, s.topicID, p, hwAll[p])
			if err != nil {
				t.Fatalf("%s: reading partition %d on %s: %v", how, p, s.brokers[i].name, err)
			}
			if i == 0 {
				content[p] = raw
			} else if !bytes.Equal(raw, content[p]) {
				t.Errorf("%s: partition %d: %s's replica differs from %s's up to the high watermark %d (%d vs %d bytes)",
					how, p, s.brokers[i].name, s.brokers[0].name, hwAll[p], len(raw), len(content[p]))
			}
			got[p] = recs
		}
		if i == 0 {
			records = got
		}
	}

	// Values are "<cut>-<sequence>" from the idempotent producers,
	// "one..." from the acks=1 one.
	where := map[string][]string{}
	for p, recs := range records {
		last := map[string]string{} // per producer
		for _, r := range recs {
			v := string(r.Value)
			where[v] = append(where[v], fmt.Sprintf("%d/%d", p, r.OffsetDelta))
			if prefix, _, ok := strings.Cut(v, "-"); ok && prefix != "one" {
				if v <= last[prefix] {
					t.Errorf("%s: partition %d: %s stored after %s", how, p, v, last[prefix])
				}
				last[prefix] = v
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.acked {
		at := fmt.Sprintf("%d/%d", a.partition, a.offset)
		if len(where[a.value]) != 1 || where[a.value][0] != at {
			t.Errorf("%s: acks=all %s acknowledged at %s, stored at %v", how, a.value, at, where[a.value])
		}
	}
	for v, at := range where {
		if !strings.HasPrefix(v, "one") && len(at) > 1 {
			t.Errorf("%s: %s stored %d times: %v", how, v, len(at), at)
		}
	}
	total := int64(0)
	for _, hw := range hwAll {
		total += hw
	}
	t.Logf("PARTITION %s: all %d replicas identical up to their high watermarks (%d offsets over %d partitions); all %d acks=all records acknowledged so far stored once, at their offsets, in order",
		how, len(s.addrs), total, s.parts, len(s.acked))
	return where
}

// topicMetadata asks one broker (the seed of cl), not one it names, for
// topic's Metadata, waiting at most 2 s.
func topicMetadata(ctx context.Context, cl *kgo.Client, topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// metadataLeaders asks one broker (the seed of cl) for the leaders of
// topic's partitions (-1: none).
func metadataLeaders(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int32, error) {
	resp, err := topicMetadata(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int32{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.Leader
			if p.ErrorCode != 0 {
				out[p.Partition] = -1
			}
		}
	}
	return out, nil
}

// replicaHWs asks one broker (the seed of cl) for the high watermark of
// its own replica of every partition: ListOffsets(latest) is answered by
// any replica from its own state.
func replicaHWs(ctx context.Context, cl *kgo.Client, topic string, parts int32) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < parts; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
			out[p.Partition] = p.Offset
		}
	}
	if len(out) != int(parts) {
		return nil, fmt.Errorf("%d of %d partitions answered", len(out), parts)
	}
	return out, nil
}

// readReplica fetches partition p from one broker's own replica (the seed
// of cl) from offset 0 up to hw, and returns the raw batches, byte for
// byte as stored, and the records of its data batches with OffsetDelta
// replaced by the absolute offset. Fetch on a plain write or read view
// is served by any replica, the leader or not.
func readReplica(ctx context.Context, cl *kgo.Client, topic string, id [16]byte, p int32, hw int64) ([]byte, []kmsg.Record, error) {
	var raw []byte
	var recs []kmsg.Record
	for offset := int64(0); offset < hw; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 8<<20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = p, offset, -1, 8<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := cl.SeedBrokers()[0].Request(rctx, req)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		fr := resp.(*kmsg.FetchResponse)
		if fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			return nil, nil, fmt.Errorf("fetch at %d: error %d, %d topics", offset, fr.ErrorCode, len(fr.Topics))
		}
		sp := fr.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 {
			return nil, nil, fmt.Errorf("fetch at %d: error %d", offset, sp.ErrorCode)
		}
		b := sp.RecordBatches
		if len(b) == 0 {
			return nil, nil, fmt.Errorf("fetch at %d: no batches below the high watermark %d", offset, hw)
		}
		for len(b) >= 12 {
			size := 12 + int(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])))
			if size > len(b) {
				break // a partial batch at the end of a response
			}
			var batch kmsg.RecordBatch
			if err := batch.ReadFrom(b[:size]); err != nil {
				return nil, nil, fmt.Errorf("batch at %d: %v", offset, err)
			}
			if batch.FirstOffset+int64(batch.LastOffsetDelta) >= hw {
				b = nil // beyond what the other replicas are compared on
				break
			}
			raw = append(raw, b[:size]...)
			if batch.Attributes&0x20 == 0 { // not a control batch
				if batch.Attributes&0x07 != 0 {
					return nil, nil, fmt.Errorf("batch at %d is compressed", batch.FirstOffset)
				}
				rb := batch.Records
				for range batch.NumRecords {
					// Each record starts with its length as a varint.
					l, n := binary.Varint(rb)
					if n <= 0 || l < 0 || int64(len(rb)-n) < l {
						return nil, nil, fmt.Errorf("batch at %d: bad record length", batch.FirstOffset)
					}
					var r kmsg.Record
					if err := r.ReadFrom(rb[:n+int(l)]); err != nil {
						return nil, nil, fmt.Errorf("record in batch %d: %v", batch.FirstOffset, err)
					}
					r.OffsetDelta = int32(batch.FirstOffset + int64(r.OffsetDelta))
					recs = append(recs, r)
					rb = rb[n+int(l):]
				}
				if len(rb) != 0 {
					return nil, nil, fmt.Errorf("batch at %d: %d bytes after its records", batch.FirstOffset, len(rb))
				}
			}
			offset = batch.FirstOffset + int64(batch.LastOffsetDelta) + 1
			b = b[size:]
		}
		if b == nil {
			break
		}
	}
	return raw, recs, nil
}
