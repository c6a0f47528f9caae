package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
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
// runs in its own network namespace; the write broker that leads the
// most partitions is cut off from its peers and the metastore for 10 s
// while idempotent acks=all producers keep writing, and a non-idempotent
// acks=1 producer keeps writing to it alone, so that it appends entries
// it can never commit. The majority elects new leaders and production
// goes on; after healing, every replica (3 voters, 1 learner) holds the
// same bytes up to the same high watermark, and every acks=all
// acknowledged record is there once, at its offset, in order.
//
// Costs about 35 s: cluster start, 2 s + 10 s + 3 s of production,
// catch-up, and reading every replica.
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
	brokers := append(append([]*proc{}, c.writers...), c.readers...)
	brokerAddrs := append(append([]string{}, c.writeAddrs...), c.readAddrs...)

	const topic, parts = "netcut", 6
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	adm := kadm.NewClient(wcl)
	mode := "raft"
	if _, err := adm.CreateTopic(ctx, parts, 3, map[string]*string{"replication.mode": &mode}, topic); err != nil {
		t.Fatal(err)
	}
	leaders := waitLeaders(t, adm, topic, parts)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("describing %s: %v %v", topic, err, td[topic].Err)
	}
	topicID := td[topic].ID

	// The victim: the write broker leading the most partitions.
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
	victimParts := led[victim]
	sort.Slice(victimParts, func(i, j int) bool { return victimParts[i] < victimParts[j] })
	victimName := c.writers[victim-1].name
	t.Logf("leaders %v: cutting off broker %d (%s), leader of partitions %v", leaders, victim, victimName, victimParts)

	var mu sync.Mutex
	var acked []ackedRecord
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
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProduceRequestTimeout(5*time.Second),
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
			prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "a%07d", i)}, func(r *kgo.Record, err error) {
				if err != nil {
					return // not acknowledged: may or may not be stored
				}
				mu.Lock()
				acked = append(acked, ackedRecord{r.Partition, r.Offset, string(r.Value)})
				mu.Unlock()
			})
			if i%10 == 9 {
				time.Sleep(10 * time.Millisecond) // about 1000 records/s
			}
		}
	}()

	// acks=1, not idempotent, talking to the victim only: what it gets
	// acknowledged after the cut is appended by a leader that cannot
	// commit it. Kafka allows such records to be lost; they must not make
	// the replicas diverge.
	one, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs[victim-1]), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(4*time.Second), kgo.ProduceRequestTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	for _, p := range victimParts {
		if err := one.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("one-warmup")}).FirstErr(); err != nil {
			t.Fatalf("acks=1 warm-up on partition %d: %v", p, err)
		}
	}
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
	lab.isolate(t, victimName)
	var oneWG sync.WaitGroup
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

	// The majority must elect new leaders while the cut lasts.
	time.Sleep(10 * time.Second)
	healAt := time.Now()
	lab.heal(t, victimName)
	oneWG.Wait()
	mu.Lock()
	var failover time.Duration
	for _, p := range victimParts {
		at, ok := newLeaderAck[p]
		if !ok || at.After(healAt) {
			t.Errorf("partition %d: no acks=all write acknowledged by a new leader during the 10 s cut", p)
			continue
		}
		if newLeaderID[p] < 1 || newLeaderID[p] > 3 {
			t.Errorf("partition %d: acknowledged by broker %d, not a write broker", p, newLeaderID[p])
		}
		failover = max(failover, at.Sub(cutAt))
	}
	ackedAtHeal := len(acked)
	mu.Unlock()
	t.Logf("PARTITION: broker %d cut off; first acks=all write acknowledged by a new leader on each of its partitions %v after the cut at most (%d records acknowledged by the heal)",
		victim, failover.Round(time.Millisecond), ackedAtHeal)

	// Catch-up: how long until the healed broker's replicas reach the
	// high watermarks the new leaders had at the heal.
	clients := map[string]*kgo.Client{}
	for _, a := range brokerAddrs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(a), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		clients[a] = cl
	}
	target := map[int32]int64{}
	for _, w := range c.writeAddrs {
		if w == c.writeAddrs[victim-1] {
			continue
		}
		hws, err := replicaHWs(ctx, clients[w], topic, parts)
		if err != nil {
			t.Fatalf("high watermarks at %s: %v", w, err)
		}
		for p, hw := range hws {
			target[p] = max(target[p], hw)
		}
	}
	var caughtUp time.Duration
	for deadline := healAt.Add(30 * time.Second); ; {
		hws, err := replicaHWs(ctx, clients[c.writeAddrs[victim-1]], topic, parts)
		done := err == nil
		for p, want := range target {
			done = done && hws[p] >= want
		}
		if done {
			caughtUp = time.Since(healAt)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d did not catch up within 30 s of the heal: has %v, want %v (%v)", victim, hws, target, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("PARTITION: broker %d caught up with the high watermarks of the heal %v after it", victim, caughtUp.Round(time.Millisecond))

	time.Sleep(time.Until(healAt.Add(3 * time.Second)))
	close(stop)
	wg.Wait()
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	if err := prod.Flush(fctx); err != nil {
		t.Errorf("flushing the acks=all producer after the heal: %v", err)
	}
	fcancel()

	// Convergence: every replica reports the same high watermark.
	var hwAll map[int32]int64
	for deadline := time.Now().Add(30 * time.Second); ; {
		hwAll = nil
		same := true
		for _, a := range brokerAddrs {
			hws, err := replicaHWs(ctx, clients[a], topic, parts)
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
			t.Fatalf("replicas did not agree on high watermarks within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Every replica holds the same bytes, batch by batch.
	content := map[int32][]byte{}
	var records map[int32][]kmsg.Record
	for i, a := range brokerAddrs {
		got := map[int32][]kmsg.Record{}
		for p := int32(0); p < parts; p++ {
			raw, recs, err := readReplica(ctx, clients[a], topic, topicID, p, hwAll[p])
			if err != nil {
				t.Fatalf("reading partition %d on %s: %v", p, brokers[i].name, err)
			}
			if i == 0 {
				content[p] = raw
			} else if !bytes.Equal(raw, content[p]) {
				t.Errorf("partition %d: %s's replica differs from %s's up to the high watermark %d (%d vs %d bytes)",
					p, brokers[i].name, brokers[0].name, hwAll[p], len(raw), len(content[p]))
			}
			got[p] = recs
		}
		if i == 0 {
			records = got
		}
	}

	// Every acks=all acknowledged record once, at its offset; the
	// idempotent producer's records in the order it sent them.
	where := map[string][]string{}
	for p, recs := range records {
		last := ""
		for _, r := range recs {
			v := string(r.Value)
			where[v] = append(where[v], fmt.Sprintf("%d/%d", p, r.OffsetDelta))
			if strings.HasPrefix(v, "a") {
				if v <= last {
					t.Errorf("partition %d: %s after %s", p, v, last)
				}
				last = v
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range acked {
		at := fmt.Sprintf("%d/%d", a.partition, a.offset)
		if len(where[a.value]) != 1 || where[a.value][0] != at {
			t.Errorf("acks=all %s acknowledged at %s, stored at %v", a.value, at, where[a.value])
		}
	}
	for v, at := range where {
		if strings.HasPrefix(v, "a") && len(at) > 1 {
			t.Errorf("%s stored %d times: %v", v, len(at), at)
		}
	}
	lost := 0
	for _, a := range oneAcked {
		at := fmt.Sprintf("%d/%d", a.partition, a.offset)
		if !slices.Contains(where[a.value], at) {
			lost++
		}
	}
	total := 0
	for _, p := range hwAll {
		total += int(p)
	}
	t.Logf("PARTITION: all %d replicas identical up to their high watermarks (%d offsets over %d partitions); %d acks=all records acknowledged, all stored once in order; acks=1 records acknowledged by the cut-off leader: %d, lost: %d",
		len(brokerAddrs), total, parts, len(acked), len(oneAcked), lost)
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
