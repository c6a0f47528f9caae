// Package compat holds black-box compatibility tests: each starts the real
// sluice binary (built once per run by TestMain) and drives it over TCP with
// real Kafka clients (franz-go, kcat, the Java client) and hand-built frames.
//
// Run: cd compat-tests && go test ./...   (CI=true turns missing tools into failures;
// SLUICE_BIN=path uses a prebuilt binary instead of building ./cmd/sluice.)
package compat

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

func TestMain(m *testing.M) {
	cleanup, err := harness.Setup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "compat-tests: cannot prepare the sluice binary: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}
