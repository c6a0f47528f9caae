package compat

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// kafkajs (2.2.4, from npm; js/package-lock.json), driven through
// js/scenarios.js, one node process per scenario group (see matrix_test.go).
// `make test-setup` (run by `make test`) installs it with `npm ci` in
// compat-tests/js.

const jsClient = "kafkajs"

// jsReady reports whether node is on PATH and js/node_modules holds kafkajs.
func jsReady() bool {
	if _, err := exec.LookPath("node"); err != nil {
		return false
	}
	_, err := os.Stat(filepath.Join("js", "node_modules", "kafkajs", "package.json"))
	return err == nil
}

func jsArgv(group, addr, prefix string, rest ...string) []string {
	return append([]string{"node", "scenarios.js", group, addr, prefix}, rest...)
}

func TestJSKafkaJS(t *testing.T) {
	t.Parallel()
	requireToolMatrix(t, jsClient, allScenarios(), jsReady(), "node with kafkajs (npm ci in compat-tests/js)")
	runClientScenarios(t, jsClient, "js", filepath.Join(".", "js"), 90*time.Second,
		func(group, addr, prefix string) []string { return jsArgv(group, addr, prefix) })
}
