package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDevLeaseLapseKeepsLeaders: a `sluice dev` node (its own metastore's
// only voter and the sole write replica of everything) paused (SIGSTOP)
// past broker.session.timeout.ms has its own lease expired by its embedded
// metastore when it resumes, and registers again with a new incarnation.
// Topics in raft and shared mode created before the pause, and more created
// right as it resumes, must all have a leader in Metadata and take an
// acks=all produce on every partition within 10 s of the re-registration;
// every record acknowledged before the pause is still read back.
func TestDevLeaseLapseKeepsLeaders(t *testing.T) {
	d := startSharedDev(t, "broker.session.timeout.ms=1000")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(d.kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	kadmc := kadm.NewClient(adm)
	shared := "shared"
	const parts = 3
	create := func(name string, sh bool) {
		var cfg map[string]*string
		if sh {
			cfg = map[string]*string{"replication.mode": &shared}
		}
		r, err := kadmc.CreateTopic(ctx, parts, 1, cfg, name)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	topics := []string{"raft-before", "shared-before"}
	create("raft-before", false)
	create("shared-before", true)

	prod, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	acked := map[string]map[int32][]string{}
	produce := func(pctx context.Context, topic string, tag string) error {
		for p := int32(0); p < parts; p++ {
			v := fmt.Sprintf("%s-%d-%s", topic, p, tag)
			if err := prod.ProduceSync(pctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				return fmt.Errorf("%s[%d]: %w", topic, p, err)
			}
			if acked[topic] == nil {
				acked[topic] = map[int32][]string{}
			}
			acked[topic][p] = append(acked[topic][p], v)
		}
		return nil
	}
	for i := 0; i < 20; i++ {
		for _, tp := range topics {
			if err := produce(ctx, tp, fmt.Sprintf("a%02d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Pause past the lease until the metastore expires it: the broker's
	// first heartbeat after the resume may win the race with the expiry
	// check, so pause again until a lapse is counted.
	var resumed time.Time
	for try := 0; ; try++ {
		if try == 5 {
			t.Fatal("5 pauses past the lease, and the lease never lapsed")
		}
		if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)
		if err := d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		resumed = time.Now()
		// Topics created right around the resume: around the expiry
		// and the re-registration.
		for _, sh := range []bool{false, true} {
			name := fmt.Sprintf("raft-resume%d", try)
			if sh {
				name = fmt.Sprintf("shared-resume%d", try)
			}
			create(name, sh)
			topics = append(topics, name)
		}
		lapsed := false
		for dl := time.Now().Add(3 * time.Second); time.Now().Before(dl); time.Sleep(100 * time.Millisecond) {
			if metricValue(t, d.admin, "sluice_lease_lapses_total") > 0 {
				lapsed = true
				break
			}
		}
		if lapsed {
			t.Logf("lease lapsed after pause %d", try+1)
			break
		}
	}
	create("raft-after", false)
	create("shared-after", true)
	topics = append(topics, "raft-after", "shared-after")

	// Every partition of every topic has a leader within 10 s, and takes
	// an acks=all produce.
	deadline := resumed.Add(10 * time.Second)
	for {
		missing := leaderless(ctx, t, adm, topics)
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the resume, partitions without a leader: %v", time.Since(resumed).Round(time.Millisecond), missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, tp := range topics {
		pctx, pcancel := context.WithDeadline(ctx, deadline.Add(time.Second))
		err := produce(pctx, tp, "after")
		pcancel()
		if err != nil {
			t.Fatalf("%s after the resume: acks=all produce: %v", time.Since(resumed).Round(time.Millisecond), err)
		}
	}
	t.Logf("every partition led and writable %s after the resume", time.Since(resumed).Round(time.Millisecond))

	// Nothing acknowledged is lost.
	for _, tp := range topics {
		got := consumeAll(t, ctx, d.kafka, tp, parts)
		for p, want := range acked[tp] {
			i := 0
			for _, v := range got[p] {
				if i < len(want) && v == want[i] {
					i++
				}
			}
			if i != len(want) {
				t.Fatalf("%s[%d]: acknowledged %v, read %v", tp, p, want, got[p])
			}
		}
	}
}

// leaderless returns the partitions of topics that Metadata shows without
// a leader (or with an error).
func leaderless(ctx context.Context, t *testing.T, cl *kgo.Client, topics []string) []string {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return []string{"metadata: " + err.Error()}
	}
	var out []string
	for _, rt := range resp.Topics {
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		}
		if rt.ErrorCode != 0 {
			out = append(out, fmt.Sprintf("%s: %v", name, kerr.ErrorForCode(rt.ErrorCode)))
			continue
		}
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				out = append(out, fmt.Sprintf("%s[%d]: leader %d %v", name, p.Partition, p.Leader, kerr.ErrorForCode(p.ErrorCode)))
			}
		}
	}
	return out
}
