package compat

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAdminEndpoints checks the admin HTTP contract of `sluice dev`:
// /healthz and /readyz answer 200, /metrics serves Prometheus text.
func TestAdminEndpoints(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get("http://" + b.AdminAddr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return resp.StatusCode, string(body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(p); code != http.StatusOK {
			t.Errorf("GET %s: %d %q, want 200", p, code, body)
		}
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	if !strings.Contains(body, "# TYPE ") {
		t.Errorf("GET /metrics: no Prometheus text exposition (no \"# TYPE\" line); got %q", head(body, 300))
	}
}

// TestAutoCreateDefaults: with the defaults (auto.create.topics.enable=true,
// num.partitions=1) a producer writing to an unknown topic creates it with
// one partition, and the record lands at offset 0. (kgo asks for
// auto-creation in Metadata only with AllowAutoTopicCreation; Java and
// librdkafka producers ask by default.)
func TestAutoCreateDefaults(t *testing.T) {
	t.Parallel()
	const topic = "auto-created"
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := newClient(t, b.KafkaAddr, kgo.AllowAutoTopicCreation())
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("first")}).First()
	if err != nil {
		t.Fatalf("produce to a new topic with auto-creation on: %v", err)
	}
	if r.Partition != 0 || r.Offset != 0 {
		t.Errorf("first record at %d/%d, want 0/0", r.Partition, r.Offset)
	}
	td, err := newAdmin(t, b.KafkaAddr).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("Metadata: %v", err)
	}
	d, ok := td[topic]
	switch {
	case !ok || d.Err != nil:
		t.Errorf("auto-created topic %q not in Metadata: %v", topic, d.Err)
	case len(d.Partitions) != 1:
		t.Errorf("auto-created topic has %d partitions, want num.partitions=1", len(d.Partitions))
	}
}
