package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/log"
)

// TestCompactedTopic: cleanup.policy=compact is accepted and shown, a
// record without a key is refused with INVALID_RECORD (keyed ones in the
// same topic go through), and the cleaner run over the broker's partitions
// (CleanTargets) leaves a consumer the latest value of each key, while a
// topic with the default policy keeps everything.
func TestCompactedTopic(t *testing.T) {
	b := startBroker(t, nil)
	cl := b.client(t, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	compact, seg := "compact", "1024"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact, "segment.bytes": &seg}, "kv"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &seg}, "plain"); err != nil {
		t.Fatal(err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "kv")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rc.On("kv", nil); err != nil || describedValue(c, "cleanup.policy") != "compact" || describedValue(c, "delete.retention.ms") != "86400000" {
		t.Fatalf("described configs: %v %v", c, err)
	}

	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kv", Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on a compacted topic: %v, want INVALID_RECORD", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "plain", Value: []byte("no key")}).FirstErr(); err != nil {
		t.Fatalf("keyless record on a topic that is not compacted: %v", err)
	}
	for round := 0; round < 20; round++ {
		for k := 0; k < 5; k++ {
			for _, topic := range []string{"kv", "plain"} {
				r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("k", k)), Value: []byte(fmt.Sprintf("v%02d-%040d", round, 0))}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	c := log.NewCleaner(log.CleanerConfig{Targets: b.host.CleanTargets, Backoff: 10 * time.Millisecond})
	for c.CleanOnce(nil) {
	}
	read := func(topic string) map[string][]string {
		cons := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
		out := map[string][]string{}
		n := 0
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
			pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			fs := cons.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				out[string(r.Key)] = append(out[string(r.Key)], string(r.Value[:3]))
				n++
			})
		}
		return out
	}
	kv := read("kv")
	// The active segment is never cleaned: keys written there again may
	// appear more than once, but only with their latest values, and
	// each key's last value is v19.
	for k := 0; k < 5; k++ {
		vs := kv[fmt.Sprint("k", k)]
		if len(vs) == 0 || vs[len(vs)-1] != "v19" || len(vs) > 4 {
			t.Fatalf("key k%d after cleaning: %v", k, vs)
		}
	}
	if total := len(read("plain")["k0"]); total != 20 {
		t.Fatalf("topic without compaction lost records: k0 has %d values", total)
	}
	if tot := c.Totals(); tot.Passes == 0 || tot.RecordsGone == 0 {
		t.Fatalf("cleaner totals %+v", tot)
	}
}

func describedValue(rc kadm.ResourceConfig, name string) string {
	for _, c := range rc.Configs {
		if c.Key == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}
