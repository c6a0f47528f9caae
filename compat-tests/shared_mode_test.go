package compat

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestSharedModeJavaMatrix runs the Java client's matrix process (Kafka's
// kafka-clients) against a broker whose topics are all in
// replication.mode=shared on a shared directory (the cluster default,
// pinned in each topic at creation): the produce, consume, admin and
// group rows must pass as they do on raft topics, and the broker-side
// checks of what the produce rows stored must hold. The transaction row
// is not checked: transactions on shared topics are not built
// (docs/shared-storage.md). Nothing is recorded in the compat matrix.
func TestSharedModeJavaMatrix(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	cp := buildJava(t)
	dir := t.TempDir()
	b := harness.Start(t, harness.Options{ExtraArgs: []string{"--set", "auto.create.topics.enable=false",
		"--set", "shared.storage.type=dir", "--set", "shared.storage.dir=" + dir, "--set", "shared.upload.linger.ms=20",
		"--set", "replication.mode=shared"}})
	const p = "sj"
	prepareBasic(t, b.KafkaAddr, p)
	prepareGroup(t, b.KafkaAddr, p)
	prepareTxn(t, b.KafkaAddr, p)
	res, _ := runScenarios(t, 4*time.Minute, ".", "java", jvm(cp, "dev.sluice.compat.Matrix", b.KafkaAddr, p)...)
	check := checkBasic(t, b.KafkaAddr, p)
	for _, group := range [][]string{basicScenarios, adminScenarios, groupScenarios} {
		for _, s := range group {
			r, ok := res[s]
			switch {
			case !ok:
				t.Errorf("%s: no result from the Java client", s)
			case r.result != "pass" && r.result != "na":
				t.Errorf("%s on a shared topic: %s %s", s, r.result, r.detail)
			case check(s) != "":
				t.Errorf("%s on a shared topic: the client passed, the broker-side check failed: %s", s, check(s))
			}
		}
	}
	for _, s := range txnScenarios {
		t.Logf("%s on a shared topic (not built, not checked): %+v", s, res[s])
	}
	objects, _ := filepath.Glob(filepath.Join(dir, "data", "*", "*", "*"))
	if len(objects) == 0 {
		t.Fatal("no objects in the shared directory: the topics were not in shared mode")
	}
	t.Logf("%d objects in the shared directory", len(objects))
}
