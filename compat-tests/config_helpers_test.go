package compat

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// autoCreateOff returns broker options that turn auto.create.topics.enable
// off.
//
// TODO(compat): the command-line form of a config override was not settled
// when this was written. This uses `--set key=value` when `sluice dev --help`
// mentions it, else a flag named after the key, else the SLUICE_ environment
// variable (viper: SLUICE_ prefix, dots as underscores). Replace with the one
// real flag once cmd/sluice has it. The test that uses this checks that the
// setting took effect (Metadata does not create the topic).
func autoCreateOff(t *testing.T) harness.Options {
	t.Helper()
	help, _ := exec.Command(harness.Binary(), "dev", "--help").CombinedOutput()
	h := string(help)
	switch {
	case strings.Contains(h, "--set"), strings.Contains(h, "  -set "):
		return harness.Options{ExtraArgs: []string{"--set", "auto.create.topics.enable=false"}}
	case strings.Contains(h, "--auto.create.topics.enable"):
		return harness.Options{ExtraArgs: []string{"--auto.create.topics.enable=false"}}
	default:
		t.Logf("TODO: `sluice dev --help` shows no config override flag; using SLUICE_AUTO_CREATE_TOPICS_ENABLE=false")
		return harness.Options{Env: []string{"SLUICE_AUTO_CREATE_TOPICS_ENABLE=false"}}
	}
}
