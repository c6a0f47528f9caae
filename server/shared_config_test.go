package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/objstore"
	"github.com/sluice-broker/sluice/shared"
)

// startSharedBroker starts a broker with shared storage in dir and a
// shared.Host serving its shared-mode partitions, as `sluice dev` with
// shared.storage.type=dir runs.
func startSharedBroker(t *testing.T, dir string) *testBroker {
	t.Helper()
	return startBrokerWith(t, func(c *configs.Config) {
		c.SharedStorageType, c.SharedStorageDir, c.SharedUploadLingerMs = "dir", dir, 10
	}, func(o *Options, meta *metastore.Node) {
		store, err := objstore.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		mc := meta.Client()
		id := o.Config.NodeID
		h := shared.NewHost(shared.Config{NodeID: id, Store: store, Catalog: mc, Linger: 10 * time.Millisecond, Logger: o.Logger,
			Incarnation: func() uint64 {
				for _, b := range mc.Brokers() {
					if b.ID == id {
						return b.Incarnation
					}
				}
				return 0
			}})
		t.Cleanup(func() { h.Close() })
		o.Shared = h
	})
}

// TestSharedProduceConsume: franz-go produces (idempotent, acks=all) to a
// shared-mode topic and consumes every record back in order; the data is
// in objects in the shared directory, not in raft logs, and ListOffsets
// answers the committed end.
func TestSharedProduceConsume(t *testing.T) {
	dir := t.TempDir()
	b := startSharedBroker(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	shared := "shared"
	adm := kadm.NewClient(b.client(t))
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"replication.mode": &shared}, "sh"); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	cl := b.client(t, kgo.DefaultProduceTopic("sh"), kgo.ProducerLinger(time.Millisecond))
	var results []*kgo.Record
	errs := make(chan error, n)
	for round := 0; round < 4; round++ { // in rounds, so in several objects
		for i := round * n / 4; i < (round+1)*n/4; i++ {
			r := &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("v%04d", i))}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) { errs <- err })
			results = append(results, r)
		}
		for i := 0; i < n/4; i++ {
			if err := <-errs; err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	want := map[int32][]string{}
	for _, r := range results {
		if int64(len(want[r.Partition])) != r.Offset {
			t.Fatalf("record %s at %d/%d, want offset %d", r.Value, r.Partition, r.Offset, len(want[r.Partition]))
		}
		want[r.Partition] = append(want[r.Partition], string(r.Value))
	}
	ends, err := adm.ListEndOffsets(ctx, "sh")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != int64(len(want[o.Partition])) {
			t.Errorf("partition %d end %d (%v), want %d", o.Partition, o.Offset, o.Err, len(want[o.Partition]))
		}
	})
	consumer := b.client(t, kgo.ConsumeTopics("sh"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32][]string{}
	for total := 0; total < n; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if int64(len(got[r.Partition])) != r.Offset {
				t.Fatalf("consumed %d/%d after %d records", r.Partition, r.Offset, len(got[r.Partition]))
			}
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			total++
		})
	}
	for p, vs := range want {
		if strings.Join(got[p], ",") != strings.Join(vs, ",") {
			t.Fatalf("partition %d: consumed %d records, produced %d, or out of order", p, len(got[p]), len(vs))
		}
	}
	objects, err := filepath.Glob(filepath.Join(dir, "data", "1", "*", "*"))
	if err != nil || len(objects) < 4 {
		t.Fatalf("no objects in the shared directory: %v", err)
	}
	if rs := b.host.Hosted().Replicas(); len(rs) != 0 {
		t.Fatalf("%d raft replicas opened for a shared-mode topic", len(rs))
	}
	t.Logf("%d records in %d objects", n, len(objects))
}

// TestSharedModeNeedsSharedStorage: replication.mode=shared is
// INVALID_CONFIG, with a message naming what is missing, on a broker
// without shared storage: at creation, by AlterConfigs and
// IncrementalAlterConfigs on a topic, and as the cluster default.
func TestSharedModeNeedsSharedStorage(t *testing.T) {
	b := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.client(t))
	shared := "shared"
	res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"replication.mode": &shared}, "sh")
	if !errors.Is(err, kerr.InvalidConfig) && !errors.Is(res.Err, kerr.InvalidConfig) {
		t.Fatalf("create with replication.mode=shared: %v %v", err, res.Err)
	}
	if !strings.Contains(res.ErrMessage, "shared.storage.type") {
		t.Fatalf("message %q does not say what to configure", res.ErrMessage)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "plain"); err != nil {
		t.Fatal(err)
	}
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "replication.mode", Value: &shared}}, "plain")
	if err != nil || len(alt) != 1 || !errors.Is(alt[0].Err, kerr.InvalidConfig) {
		t.Fatalf("incremental alter to shared: %v %+v", err, alt)
	}
	lalt, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "replication.mode", Value: &shared}}, "plain")
	if err != nil || len(lalt) != 1 || !errors.Is(lalt[0].Err, kerr.InvalidConfig) {
		t.Fatalf("legacy alter to shared: %v %+v", err, lalt)
	}
	balt, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "replication.mode", Value: &shared}})
	if err != nil || len(balt) != 1 || !errors.Is(balt[0].Err, kerr.InvalidConfig) {
		t.Fatalf("cluster default shared: %v %+v", err, balt)
	}
}

// TestSharedModeWithSharedStorage: with shared storage configured,
// replication.mode=shared is accepted at creation and pinned in a topic
// created under a cluster default of shared, and a topic's mode cannot
// change into or out of shared afterwards.
func TestSharedModeWithSharedStorage(t *testing.T) {
	b := startSharedBroker(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.client(t))
	shared, raft := "shared", "raft"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"replication.mode": &shared}, "sh"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "plain"); err != nil {
		t.Fatal(err)
	}
	for topic, to := range map[string]string{"sh": raft, "plain": shared} {
		alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "replication.mode", Value: &to}}, topic)
		if err != nil || len(alt) != 1 || !errors.Is(alt[0].Err, kerr.InvalidConfig) {
			t.Fatalf("%s: alter to %s: %v %+v", topic, to, err, alt)
		}
	}
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "replication.mode"}}, "sh")
	if err != nil || len(alt) != 1 || !errors.Is(alt[0].Err, kerr.InvalidConfig) {
		t.Fatalf("sh: delete replication.mode (back to the raft default): %v %+v", err, alt)
	}
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "replication.mode", Value: &shared}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "by-default"); err != nil {
		t.Fatal(err)
	}
	tp, _ := b.meta.Client().TopicByName("by-default")
	if tp.Configs["replication.mode"] != "shared" {
		t.Fatalf("a topic created under the shared default has configs %v, want replication.mode=shared pinned", tp.Configs)
	}
	tp, _ = b.meta.Client().TopicByName("plain")
	if _, ok := tp.Configs["replication.mode"]; ok {
		t.Fatalf("plain's configs %v changed with the default", tp.Configs)
	}
}
