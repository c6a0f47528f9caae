package compat

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// confluent-kafka-go v2 (cgo over the librdkafka it bundles as a static
// library), driven through the ckg command (ckg/main.go), which the test
// builds with cgo: one process per scenario group (see matrix_test.go).

const ckgClient = "confluent-kafka-go"

var (
	ckgOnce sync.Once
	ckgBin  string
	ckgErr  string
)

// buildCkg builds ckg once per run; it returns the binary, or "" and why not.
func buildCkg(t *testing.T) (string, string) {
	ckgOnce.Do(func() {
		if _, err := exec.LookPath("gcc"); err != nil {
			ckgErr = "gcc (cgo) is missing"
			return
		}
		dir, err := os.MkdirTemp("", "sluice-compat-ckg-")
		if err != nil {
			ckgErr = err.Error()
			return
		}
		out := filepath.Join(dir, "ckg")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./ckg")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		start := time.Now()
		if err := cmd.Run(); err != nil {
			ckgErr = "go build ./ckg (cgo) failed: " + err.Error() + ": " + tail(buf.String(), 2000)
			return
		}
		t.Logf("built ckg in %v", time.Since(start).Round(time.Millisecond))
		ckgBin = out
	})
	return ckgBin, ckgErr
}

func TestConfluentKafkaGo(t *testing.T) {
	t.Parallel()
	bin, why := buildCkg(t)
	requireToolMatrix(t, ckgClient, allScenarios(), bin != "", "a cgo build of confluent-kafka-go ("+why+")")
	runClientScenarios(t, ckgClient, "ckg", ".", 90*time.Second,
		func(group, addr, prefix string) []string { return []string{bin, group, addr, prefix} })
}
