package compat

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// kafkaJSRouting is kafkajs (2.2.4) through js/routing.js. It follows
// KIP-392 preferred read replicas (consumerGroup.js keeps one until
// metadataMaxAge) and sends its rackId in Fetch v11.
func kafkaJSRouting() routingClient {
	return routingClient{name: "kafkajs", rack: routingRack, prepare: requireKafkaJS, produce: kafkaJSRoutingProduce, consume: kafkaJSRoutingConsume}
}

// requireKafkaJS skips when node or kafkajs is missing, and fails under
// CI=true.
func requireKafkaJS(t *testing.T) {
	t.Helper()
	harness.RequireTool(t, "node")
	if !jsReady() {
		harness.SkipMissing(t, "kafkajs is not installed in compat-tests/js (make test-setup runs npm ci there)")
	}
}

func kafkaJSRoutingProduce(ctx context.Context, t *testing.T, addrs []string, topic string, keys, values []string) {
	t.Helper()
	var b strings.Builder
	for i := range keys {
		b.WriteString(keys[i] + " " + values[i] + "\n")
	}
	file := filepath.Join(t.TempDir(), "records")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runRoutingProc(ctx, t, "js", []string{"node", "routing.js", "produce", strings.Join(addrs, ","), topic, file}, nil)
}

func kafkaJSRoutingConsume(ctx context.Context, t *testing.T, addrs []string, topic, group, rack string, n int, hooks *routingHooks) []string {
	t.Helper()
	if rack == "" {
		rack = "-"
	}
	w := "0"
	if hooks != nil {
		w = "1"
	}
	return runRoutingProc(ctx, t, "js", []string{"node", "routing.js", "consume", strings.Join(addrs, ","), topic, group,
		strconv.Itoa(n), strconv.Itoa(routingPartitions), rack, w}, hooks)
}
