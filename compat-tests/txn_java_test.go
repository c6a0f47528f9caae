package compat

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestTransactionsJava runs compat-tests/java's Transactions program
// against `sluice dev`: the Java client's transactional producer with
// sendOffsetsToTransaction in a consume-transform-produce loop (a round
// aborted, a round committed), read_committed and read_uncommitted
// consumers of the output, the group's offsets, and fencing by a second
// producer with the same transactional.id. The program checks each and
// prints RESULT OK.
func TestTransactionsJava(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	classpath := buildJava(t)
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", jvm(classpath, "dev.sluice.compat.Transactions", b.KafkaAddr, "jtxn-in", "jtxn-out", "jtxn-group", "200")...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	t.Logf("java ran for %v\nstdout:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil || !strings.HasSuffix(out.String(), "RESULT OK\n") {
		t.Errorf("java transactions failed (%v, ctx %v)\nstderr (tail):\n%s", err, ctx.Err(), tail(errb.String(), 16<<10))
	}
	// Transaction version 2 (the Java client takes it from the finalized
	// feature): the abort and the commit each bumped the epoch.
	if e := txnEpoch(ctx, t, newAdmin(t, b.KafkaAddr), "java-ctp"); e != 2 {
		t.Errorf("java-ctp's producer epoch after an abort and a commit: %d, want 2 (EndTxn v5 bumps it)", e)
	}
	for _, want := range []string{"CTP OK\n", "READ_COMMITTED 200\n", "READ_UNCOMMITTED 400\n", "OFFSETS 200\n", "FENCED\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("java output lacks %q", strings.TrimSpace(want))
		}
	}
}
