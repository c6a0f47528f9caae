package compat

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTopicsSurviveKill9 creates topics, one with retention.ms set, SIGKILLs
// the broker, restarts it on the same data dir and checks that the topics,
// their partition counts and the topic config (value and source
// DYNAMIC_TOPIC_CONFIG), a config altered after creation, and the topic ids
// are all still there.
func TestTopicsSurviveKill9(t *testing.T) {
	t.Parallel()
	const (
		withConfig     = "retained"
		plain          = "plain"
		retention      = "3600000"
		retentionBytes = "123456789"
	)
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, withConfig, 3, map[string]*string{"retention.ms": kmsg.StringPtr(retention)})
	createTopic(ctx, t, adm, plain, 2, nil)
	// A config set after creation (IncrementalAlterConfigs) must survive too.
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.bytes", Value: kmsg.StringPtr(retentionBytes)}}, plain)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs %q: %v", plain, err)
	}
	for _, r := range alt {
		if r.Err != nil {
			t.Fatalf("IncrementalAlterConfigs %q retention.bytes=%s: %v (%s)", plain, retentionBytes, r.Err, r.ErrMessage)
		}
	}
	ids := map[string]kadm.TopicID{}

	check := func(when string) {
		t.Helper()
		td := freshTopics(ctx, t, b.KafkaAddr, withConfig, plain)
		for name, want := range map[string]int{withConfig: 3, plain: 2} {
			d, ok := td[name]
			switch {
			case !ok:
				t.Errorf("%s: topic %q missing from Metadata", when, name)
			case d.ErrorCode != 0:
				t.Errorf("%s: topic %q: error %d", when, name, d.ErrorCode)
			case len(d.Partitions) != want:
				t.Errorf("%s: topic %q has %d partitions, want %d", when, name, len(d.Partitions), want)
			}
			// Topic ids never change (clients using Fetch v13+ address topics by id).
			id := kadm.TopicID(d.TopicID)
			if prev, ok := ids[name]; ok && prev != id {
				t.Errorf("%s: topic %q id changed from %s to %s", when, name, prev, id)
			}
			ids[name] = id
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, withConfig)
		if err != nil {
			t.Fatalf("%s: DescribeConfigs: %v", when, err)
		}
		rc, err := rcs.On(withConfig, nil)
		if err != nil {
			t.Fatalf("%s: DescribeConfigs %q: %v", when, withConfig, err)
		}
		if rc.Err != nil {
			t.Fatalf("%s: DescribeConfigs %q: %v (%s)", when, withConfig, rc.Err, rc.ErrMessage)
		}
		found := false
		for _, c := range rc.Configs {
			if c.Key != "retention.ms" {
				continue
			}
			found = true
			if c.Value == nil || *c.Value != retention {
				t.Errorf("%s: retention.ms = %v, want %s", when, strp(c.Value), retention)
			}
			if c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("%s: retention.ms source %v, want DYNAMIC_TOPIC_CONFIG", when, c.Source)
			}
		}
		if !found {
			t.Errorf("%s: DescribeConfigs %q does not return retention.ms", when, withConfig)
		}
		rcs, err = adm.DescribeTopicConfigs(ctx, plain)
		if err != nil {
			t.Fatalf("%s: DescribeConfigs %q: %v", when, plain, err)
		}
		rc, err = rcs.On(plain, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("%s: DescribeConfigs %q: %v %v", when, plain, err, rc.Err)
		}
		found = false
		for _, c := range rc.Configs {
			switch c.Key {
			case "retention.bytes":
				found = true
				if c.Value == nil || *c.Value != retentionBytes || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
					t.Errorf("%s: %q retention.bytes = %s (source %v), want %s (DYNAMIC_TOPIC_CONFIG)", when, plain, strp(c.Value), c.Source, retentionBytes)
				}
			case "retention.ms":
				// Not overridden on this topic: it must come from the broker, not the topic.
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
					t.Errorf("%s: %q has no retention.ms override, but it is reported with source DYNAMIC_TOPIC_CONFIG", when, plain)
				}
			}
		}
		if !found {
			t.Errorf("%s: DescribeConfigs %q does not return retention.bytes", when, plain)
		}
	}

	check("before the kill")
	if t.Failed() {
		t.FailNow()
	}
	b.Kill()
	b.Restart()
	// A new client: the old one's connections died with the broker.
	adm = newAdmin(t, b.KafkaAddr)
	check("after SIGKILL and restart")
}

func strp(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
