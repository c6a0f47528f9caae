package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// TestReadReplicasConfig: read.replicas travels through CreateTopics,
// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs, values below
// -1 are INVALID_CONFIG, its broker default may be set cluster-wide but
// not for one broker, and the metastore places learners by it.
func TestReadReplicasConfig(t *testing.T) {
	b := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, id := range []int32{10, 11} {
		if _, err := b.meta.Client().RegisterBroker(ctx, metastore.Broker{ID: id, Role: metastore.RoleRead}); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(b.client(t))
	one := "1"
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"read.replicas": &one}, "rr"); err != nil {
		t.Fatal(err)
	}
	bad := "-2"
	res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"read.replicas": &bad}, "rr-bad")
	if !errors.Is(err, kerr.InvalidConfig) && !errors.Is(res.Err, kerr.InvalidConfig) {
		t.Fatalf("read.replicas=-2 at creation: %v %v", err, res.Err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "rr-default"); err != nil {
		t.Fatal(err)
	}
	learners := func(topic string) []int {
		tp, _ := b.meta.Client().TopicByName(topic)
		var out []int
		for _, p := range tp.Partitions {
			out = append(out, len(p.Learners))
		}
		return out
	}
	if got := learners("rr"); len(got) != 3 || got[0] != 1 || got[1] != 1 || got[2] != 1 {
		t.Fatalf("learners per partition %v", got)
	}

	describe := func(topic string) (string, kmsg.ConfigSource) {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Key == "read.replicas" {
				return c.MaybeValue(), c.Source
			}
		}
		t.Fatalf("DescribeConfigs of %s has no read.replicas", topic)
		return "", 0
	}
	if v, src := describe("rr"); v != "1" || src != kmsg.ConfigSource(sourceDynamicTopic) {
		t.Fatalf("rr: %q source %v", v, src)
	}
	if v, src := describe("rr-default"); v != "-1" || src != kmsg.ConfigSource(sourceDefault) {
		t.Fatalf("rr-default: %q source %v", v, src)
	}

	// Incremental: grow to every read broker.
	all := "-1"
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "read.replicas", Value: &all}}, "rr")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("incremental alter: %v %+v", err, ar)
	}
	if got := learners("rr"); got[0] != 2 || got[1] != 2 || got[2] != 2 {
		t.Fatalf("after read.replicas=-1: %v", got)
	}
	ar, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "read.replicas", Value: &bad}}, "rr")
	if len(ar) != 1 || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Fatalf("incremental read.replicas=-2: %+v", ar)
	}
	// Legacy AlterConfigs replaces the whole set: 0 read replicas.
	zero := "0"
	ar, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "read.replicas", Value: &zero}}, "rr")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("alter configs: %v %+v", err, ar)
	}
	if got := learners("rr"); got[0] != 0 || got[1] != 0 || got[2] != 0 {
		t.Fatalf("after read.replicas=0: %v", got)
	}

	// The broker default: cluster-wide only.
	ar, _ = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "read.replicas", Value: &one}}, 1)
	if len(ar) != 1 || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Fatalf("per-broker read.replicas: %+v", ar)
	}
	ar, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "read.replicas", Value: &one}})
	if err != nil || len(ar) != 1 || ar[0].Err != nil {
		t.Fatalf("cluster-wide read.replicas: %v %+v", err, ar)
	}
	if v, src := describe("rr-default"); v != "1" || src != kmsg.ConfigSource(sourceDynamicDefaultBroker) {
		t.Fatalf("rr-default after the cluster default: %q source %v", v, src)
	}
	if got := learners("rr-default"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("rr-default learners after the cluster default: %v", got)
	}
}
