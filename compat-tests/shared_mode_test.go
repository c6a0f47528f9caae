package compat

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestSharedMatrixJava runs the Java client's matrix process (Kafka's
// kafka-clients) against a broker whose topics are all in
// replication.mode=shared on a shared directory: the basic group's topics
// are created with replication.mode=shared, and the cluster default is
// shared too, so the admin and group scenarios' topics are shared as
// well. The produce and consume rows are recorded as the java-client
// column of the matrix's shared-mode table (shared_matrix_test.go), with
// the broker-side checks of what the produce rows stored; the admin and
// group rows must pass as they do on raft topics (checked, not
// recorded). The transaction rows are not checked: transactions on
// shared topics are not built (docs/shared-storage.md).
func TestSharedMatrixJava(t *testing.T) {
	t.Parallel()
	var cp string
	t.Run("java-build", func(t *testing.T) {
		requireTool(t, "java")
		requireTool(t, "mvn")
		cp = buildJava(t)
	})
	requireToolMatrix(t, javaClient, sharedRows(), cp != "", "java, mvn and the compat-tests/java dependencies")
	dir := t.TempDir()
	b := harness.Start(t, harness.Options{ExtraArgs: []string{"--set", "auto.create.topics.enable=false",
		"--set", "shared.storage.type=dir", "--set", "shared.storage.dir=" + dir, "--set", "shared.upload.linger.ms=20",
		"--set", "replication.mode=shared"}})
	const p = "sj"
	prepareSharedBasic(t, b.KafkaAddr, p)
	prepareGroup(t, b.KafkaAddr, p)
	prepareTxn(t, b.KafkaAddr, p)
	res, _ := runScenarios(t, 4*time.Minute, ".", "java", jvm(cp, "dev.sluice.compat.Matrix", b.KafkaAddr, p)...)
	recordSharedResults(t, javaClient, res, checkShared(t, b.KafkaAddr, p, dir))
	for _, group := range [][]string{adminScenarios, groupScenarios} {
		for _, s := range group {
			r, ok := res[s]
			switch {
			case !ok:
				t.Errorf("%s: no result from the Java client", s)
			case r.result != "pass" && r.result != "na":
				t.Errorf("%s on a shared topic: %s %s", s, r.result, r.detail)
			}
		}
	}
	for _, s := range txnScenarios {
		t.Logf("%s on a shared topic (not built, not checked): %+v", s, res[s])
	}
	objects, _ := filepath.Glob(filepath.Join(dir, "data", "*", "*", "*"))
	t.Logf("%d objects in the shared directory", len(objects))
}
