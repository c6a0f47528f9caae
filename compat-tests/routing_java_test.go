package compat

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// javaRouting is the Java client (kafka-clients 4.4, java/pom.xml) through
// dev.sluice.compat.Routing: the producer with its defaults (idempotent,
// acks=all) and a classic-protocol group consumer. The consumer follows
// KIP-392 preferred read replicas (FetchCollector keeps one until the
// metadata max age) and sends client.rack in Fetch v11+.
func javaRouting() routingClient {
	var classpath string
	return routingClient{
		name: "java",
		rack: routingRack,
		prepare: func(t *testing.T) {
			requireTool(t, "java")
			requireTool(t, "mvn")
			classpath = buildJava(t)
		},
		produce: func(ctx context.Context, t *testing.T, addrs []string, topic string, keys, values []string) {
			t.Helper()
			var b strings.Builder
			for i := range keys {
				b.WriteString(keys[i] + " " + values[i] + "\n")
			}
			file := filepath.Join(t.TempDir(), "records")
			if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			runRoutingProc(ctx, t, ".", javaRoutingArgv(classpath, "produce", strings.Join(addrs, ","), topic, file), nil)
		},
		consume: func(ctx context.Context, t *testing.T, addrs []string, topic, group, rack string, n int, hooks *routingHooks) []string {
			t.Helper()
			if rack == "" {
				rack = "-"
			}
			w := "0"
			if hooks != nil {
				w = "1"
			}
			return runRoutingProc(ctx, t, ".", javaRoutingArgv(classpath, "consume", strings.Join(addrs, ","), topic, group,
				strconv.Itoa(n), strconv.Itoa(routingPartitions), rack, w), hooks)
		},
	}
}

func javaRoutingArgv(classpath string, args ...string) []string {
	return append([]string{"java"}, jvm(classpath, append([]string{"dev.sluice.compat.Routing"}, args...)...)...)
}
