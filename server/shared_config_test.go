package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/configs"
)

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
	dir := t.TempDir()
	b := startBroker(t, func(c *configs.Config) {
		c.SharedStorageType, c.SharedStorageDir = "dir", dir
	})
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
