package compat

import (
	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// autoCreateOff returns broker options that turn auto.create.topics.enable
// off, through the generic config override flag of `sluice dev`.
func autoCreateOff() harness.Options {
	return harness.Options{ExtraArgs: []string{"--set", "auto.create.topics.enable=false"}}
}
