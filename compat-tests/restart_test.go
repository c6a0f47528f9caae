package compat

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTopicsSurviveKill9 creates topics, one with retention.ms set, SIGKILLs
// the broker, restarts it on the same data dir and checks that the topics,
// their partition counts and the topic config (value and source
// DYNAMIC_TOPIC_CONFIG) are all still there.
func TestTopicsSurviveKill9(t *testing.T) {
	const (
		withConfig = "retained"
		plain      = "plain"
		retention  = "3600000"
	)
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, withConfig, 3, map[string]*string{"retention.ms": kmsg.StringPtr(retention)})
	createTopic(ctx, t, adm, plain, 2, nil)

	check := func(when string) {
		t.Helper()
		td, err := adm.ListTopics(ctx, withConfig, plain)
		if err != nil {
			t.Fatalf("%s: Metadata: %v", when, err)
		}
		for name, want := range map[string]int{withConfig: 3, plain: 2} {
			d, ok := td[name]
			switch {
			case !ok:
				t.Errorf("%s: topic %q missing from Metadata", when, name)
			case d.Err != nil:
				t.Errorf("%s: topic %q: %v", when, name, d.Err)
			case len(d.Partitions) != want:
				t.Errorf("%s: topic %q has %d partitions, want %d", when, name, len(d.Partitions), want)
			}
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
		// The topic without overrides shows retention.ms from the broker default.
		rcs, err = adm.DescribeTopicConfigs(ctx, plain)
		if err == nil {
			if rc, err := rcs.On(plain, nil); err == nil && rc.Err == nil {
				for _, c := range rc.Configs {
					if c.Key == "retention.ms" && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
						t.Errorf("%s: topic %q has no overrides, but retention.ms has source DYNAMIC_TOPIC_CONFIG", when, plain)
					}
				}
			}
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
