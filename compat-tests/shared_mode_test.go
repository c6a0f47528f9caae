package compat

import (
	"context"
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
// group rows must pass as they do on raft topics, and the transaction
// rows (on shared topics too, by the cluster default) must pass with the
// broker-side checks of the raft rows (checkTxn: what read_committed and
// read_uncommitted consumers read back, the group's committed offset);
// checked, not recorded.
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
	txnCheck := checkTxn(t, b.KafkaAddr, p)
	for _, s := range txnScenarios {
		r, ok := res[s]
		switch {
		case !ok:
			t.Errorf("%s: no result from the Java client", s)
		case r.result != "pass":
			t.Errorf("%s on a shared topic: %s %s", s, r.result, r.detail)
		default:
			if problem := txnCheck(s); problem != "" {
				t.Errorf("%s on a shared topic, checked on the broker: %s", s, problem)
			}
		}
	}
	rcs, err := newAdmin(t, b.KafkaAddr).DescribeTopicConfigs(context.Background(), p+"-txn", p+"-txo-in", p+"-txo-out", p+"-txf")
	if err != nil {
		t.Fatalf("describing the transaction topics: %v", err)
	}
	for _, rc := range rcs {
		mode := ""
		for _, c := range rc.Configs {
			if c.Key == "replication.mode" {
				mode = c.MaybeValue()
			}
		}
		if rc.Err != nil || mode != "shared" {
			t.Errorf("transaction topic %s: replication.mode %q (%v), want shared", rc.Name, mode, rc.Err)
		}
	}
	objects, _ := filepath.Glob(filepath.Join(dir, "data", "*", "*", "*"))
	t.Logf("%d objects in the shared directory", len(objects))
}
