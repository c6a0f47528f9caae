package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterTopicRecreated: a topic deleted and at once created again
// under its name (a new topic id, the same partition directories on every
// broker) takes acks=all writes on every partition, and a consumer of the
// read view sees exactly the new topic's records: none of the old one's
// come back, none of the new one's are lost. In each generation one write
// broker is paused (SIGSTOP) across the deletion and the creation, so it
// learns of both in one catalog refresh: it must remove the old replicas
// before opening the new ones in their directories, and be back in every
// new partition's ISR soon after it resumes. (Before, it tried the new
// ones first, the log's directory lock refused them, and they stayed
// closed until the next catalog change.)
func TestClusterTopicRecreated(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 1)
	const topic, parts, n = "again", 16, 800
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	// A request to the paused broker (franz-go sends metadata requests to
	// any broker) must time out well within its lease, or the deletion
	// and the creation come after the lease lapsed (10 s by default).
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.RequestTimeoutOverhead(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	fillTopic(ctx, t, c.writeAddrs, topic, parts, n, "gen0-%05d")
	for gen := 1; gen <= 6; gen++ {
		// Not write-1: the lowest live id is the controller admin
		// requests go to.
		paused := c.writers[1+gen%2]
		if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		resume := func() { _ = paused.cmd.Process.Signal(syscall.SIGCONT) }
		t.Cleanup(resume)
		if _, err := adm.DeleteTopic(ctx, topic); err != nil {
			t.Fatalf("generation %d: delete: %v", gen, err)
		}
		// Created again at once, within the paused broker's lease (a
		// broker whose lease lapsed takes no new replicas).
		var created kadm.CreateTopicResponse
		for deadline := time.Now().Add(20 * time.Second); ; {
			created, err = adm.CreateTopic(ctx, parts, 3, nil, topic)
			if err == nil {
				break
			}
			if !errors.Is(err, kerr.TopicAlreadyExists) || time.Now().After(deadline) {
				t.Fatalf("generation %d: create: %v", gen, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		resume()
		waitLeaders(t, adm, topic, parts)
		// The clients below are new: one that first asked a broker not
		// caught up yet (the resumed one) would learn the deleted
		// topic's id, and franz-go takes a later, different id for a
		// topic recreated under it and fails its records
		// (UNKNOWN_TOPIC_ID). That is the client's rule, not the
		// broker's, so the test waits for every broker to answer with
		// the new id.
		waitTopicID(ctx, t, append(append([]string{}, c.writeAddrs...), c.readAddrs...), topic, created.ID, 20*time.Second)
		prefix := fmt.Sprintf("gen%d-", gen)
		prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RecordDeliveryTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s%05d", prefix, i)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("generation %d: produce: %v", gen, err)
				}
			})
		}
		err = prod.Flush(ctx)
		prod.Close()
		if err != nil || t.Failed() {
			t.Fatalf("generation %d: flush: %v", gen, err)
		}
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for deadline := time.Now().Add(30 * time.Second); len(seen) < n && time.Now().Before(deadline); {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			fs := cons.PollRecords(pctx, 500)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				v := string(r.Value)
				if !strings.HasPrefix(v, prefix) {
					t.Errorf("generation %d: partition %d offset %d holds %q, a record of an earlier generation", gen, r.Partition, r.Offset, v)
				}
				if seen[v] {
					t.Errorf("generation %d: %q read twice", gen, v)
				}
				seen[v] = true
			})
		}
		cons.Close()
		if len(seen) != n {
			t.Fatalf("generation %d: read %d of the %d records acknowledged", gen, len(seen), n)
		}
		waitFullISR(ctx, t, adm, topic, parts, 3, 30*time.Second)
	}
	for _, p := range append(append([]*proc{}, c.writers...), c.readers...) {
		b, err := os.ReadFile(p.logf.Name())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "directory is locked by another open log") {
			t.Errorf("%s opened a recreated topic's partition over the deleted one's files", p.name)
		}
	}
}

// waitFullISR waits until every partition of topic has want replicas in
// its ISR, and fails the test naming those that do not within d.
func waitFullISR(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, parts, want int, d time.Duration) {
	t.Helper()
	var short []string
	for deadline := time.Now().Add(d); ; {
		short = short[:0]
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			short = append(short, err.Error())
		} else if td, ok := md.Topics[topic]; !ok || len(td.Partitions) != parts {
			short = append(short, fmt.Sprintf("%d partitions in metadata", len(td.Partitions)))
		} else {
			for _, p := range td.Partitions.Sorted() {
				if len(p.ISR) != want {
					short = append(short, fmt.Sprintf("%d: ISR %v", p.Partition, p.ISR))
				}
			}
		}
		if len(short) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: partitions without %d replicas in sync after %v: %s", topic, want, d, strings.Join(short, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitTopicID waits until the broker at each of addrs answers Metadata
// for topic with id, and fails the test naming the first that does not
// within d.
func waitTopicID(ctx context.Context, t *testing.T, addrs []string, topic string, id [16]byte, d time.Duration) {
	t.Helper()
	for _, addr := range addrs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestTimeoutOverhead(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		last := "no answer"
		for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
			resp, err := topicMetadata(ctx, cl, topic)
			if err == nil {
				mt := resp.Topics
				if len(mt) == 1 && mt[0].ErrorCode == 0 && mt[0].TopicID == id {
					break
				}
				if len(mt) == 1 {
					last = fmt.Sprintf("topic id %x, error %d", mt[0].TopicID, mt[0].ErrorCode)
				}
			} else {
				last = err.Error()
			}
			if time.Now().After(deadline) {
				cl.Close()
				t.Fatalf("the broker at %s did not answer topic %s with its new id %x within %v: %s", addr, topic, id, d, last)
			}
		}
		cl.Close()
	}
}
