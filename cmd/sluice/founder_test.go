package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterFounderMovedBack: a partition with replication factor 1 moves
// from its founding broker to another write broker and, once the founder's
// replica is deleted, back to it. The founder then opens the partition with
// no state on disk while the group lives on the other broker; it must join
// that group, not elect itself the sole voter of the configuration the
// group was created with. The group's leader is paused for 4 s as the
// move back is recorded, so the founder cannot count on hearing from it
// first (before the fix the founder recorded the move complete within the
// pause and the real group's replica was deleted: acknowledged records
// lost in 3 runs of 3). Throughout the move back, an idempotent acks=all
// producer writes through the cluster and a second writer sends Produce
// (acks=-1) straight to the founder, as a client with stale or early
// metadata does. Every record either acknowledges must be stored exactly
// once at its acknowledged offset on the founder's replica and the read
// broker's, the move must finish and the founder must lead.
// Costs about 15 s (the cluster start, two moves, the pause).
func TestClusterFounderMovedBack(t *testing.T) {
	c := startTestCluster(t, "raft")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	adm := kadm.NewClient(wcl)
	const topic = "founder"
	one := "1" // the test cluster's default is 2
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"min.insync.replicas": &one}, topic); err != nil {
		t.Fatal(err)
	}
	founder := waitLeaders(t, adm, topic, 1)[0]
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := md.Topics[topic].ID
	other := founder%3 + 1

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProduceRequestTimeout(5*time.Second),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.RecordRetries(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var mu sync.Mutex
	acked := map[string]int64{}
	ack := func(v string, off int64) {
		mu.Lock()
		acked[v] = off
		mu.Unlock()
	}
	n := 0
	produce := func(count int) {
		t.Helper()
		for range count {
			r := &kgo.Record{Value: []byte(fmt.Sprintf("p%07d", n))}
			n++
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			ack(string(r.Value), r.Offset)
		}
	}
	move := func(to int32) time.Duration {
		t.Helper()
		start := time.Now()
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topic, 0, []int32{to})
		if res, err := adm.AlterPartitionAssignments(ctx, req); err != nil || res[topic][0].Err != nil {
			t.Fatalf("move to %d: %+v %v", to, res, err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
			if err == nil && len(lr[topic]) == 0 {
				return time.Since(start)
			}
			if time.Now().After(deadline) {
				t.Fatalf("move to %d still listed after 30 s: %+v %v", to, lr, err)
			}
		}
	}

	produce(30)
	took := move(other)
	if got := waitLeaders(t, adm, topic, 1)[0]; got != other {
		t.Fatalf("led by %d after the move to %d", got, other)
	}
	waitGone(t, filepath.Join(dataDir(t, c.writers[founder-1]), "logs", topic+"-0"))
	produce(30)
	t.Logf("MOVED AWAY: %d -> %d in %v; the founder's replica is deleted", founder, other, took.Round(time.Millisecond))

	// The move back, with both writers running.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	var viaCluster, direct, directAcked atomic.Int64
	go func() { // through the cluster, as metadata routes it
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &kgo.Record{Value: []byte(fmt.Sprintf("b%07d", i))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err == nil {
				ack(string(r.Value), r.Offset)
				viaCluster.Add(1)
			}
		}
	}()
	go func() { // straight to the founder
		defer wg.Done()
		fb := wcl.Broker(int(founder))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("d%07d", i)
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = oneRecordBatch(v)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			rctx, rcancel := context.WithTimeout(ctx, 6*time.Second)
			resp, err := fb.Request(rctx, req)
			rcancel()
			direct.Add(1)
			if err == nil {
				pr := resp.(*kmsg.ProduceResponse)
				if len(pr.Topics) == 1 && len(pr.Topics[0].Partitions) == 1 && pr.Topics[0].Partitions[0].ErrorCode == 0 {
					ack(v, pr.Topics[0].Partitions[0].BaseOffset)
					directAcked.Add(1)
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	// The group's leader is paused (SIGSTOP) for 4 s, well within its
	// lease, while the move back is recorded: the founder opens its
	// replica with the leader unable to answer, as on a loaded machine.
	// Opened as a founder, it would elect itself sole voter of the
	// configuration the group was created with, which equals the target,
	// and record the move complete on an empty log. The request goes to
	// the founder, since the paused broker may be the controller.
	paused := c.writers[other-1]
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { _ = paused.cmd.Process.Signal(syscall.SIGCONT) }
	defer cont()
	start := time.Now()
	areq := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	at.Topic = topic
	ap := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	ap.Replicas = []int32{founder}
	at.Partitions = append(at.Partitions, ap)
	areq.Topics = append(areq.Topics, at)
	if resp, err := wcl.Broker(int(founder)).Request(ctx, areq); err != nil {
		t.Fatal(err)
	} else if code := resp.(*kmsg.AlterPartitionAssignmentsResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("move back: error %d", code)
	}
	time.Sleep(4 * time.Second)
	cont()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err == nil && len(lr[topic]) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("move back still listed after 30 s: %+v %v", lr, err)
		}
	}
	took = time.Since(start)
	time.Sleep(time.Second) // writes go on after the move
	close(stop)
	wg.Wait()
	if got := waitLeaders(t, adm, topic, 1)[0]; got != founder {
		t.Fatalf("led by %d after the move back to %d", got, founder)
	}
	t.Logf("MOVED BACK: %d -> %d in %v; %d records acknowledged through the cluster, %d of %d straight from the founder",
		other, founder, took.Round(time.Millisecond), viaCluster.Load(), directAcked.Load(), direct.Load())
	waitGone(t, filepath.Join(dataDir(t, c.writers[other-1]), "logs", topic+"-0"))
	produce(10)

	checkReplica(ctx, t, fmt.Sprintf("write broker %d (the founder, moved back)", founder), c.writeAddrs[founder-1], topic, id, acked)
	checkReplica(ctx, t, "read broker 4", c.readAddrs[0], topic, id, acked)
}
