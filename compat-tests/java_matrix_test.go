package compat

import (
	"testing"
	"time"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

const javaClient = "java-client"

// TestJavaMatrix runs the basic, transaction, admin and group scenarios of the matrix
// with the Java client library (kafka-clients 4.4.0: KafkaProducer,
// KafkaConsumer with the classic group protocol, Admin) in one JVM
// (dev.sluice.compat.Matrix in compat-tests/java), so the column costs one
// JVM start and about as long as the scenarios take. TestGroupJava and
// TestGroupJavaRebalance go further with groups (restarts, KIP-848).
func TestJavaMatrix(t *testing.T) {
	t.Parallel()
	var cp string
	t.Run("java-build", func(t *testing.T) {
		requireTool(t, "java")
		requireTool(t, "mvn")
		cp = buildJava(t)
	})
	requireToolMatrix(t, javaClient, allScenarios(), cp != "", "java, mvn and the compat-tests/java dependencies")

	b := harness.Start(t, autoCreateOff())
	const p = "jc"
	prepareBasic(t, b.KafkaAddr, p)
	prepareGroup(t, b.KafkaAddr, p)
	prepareTxn(t, b.KafkaAddr, p)
	// The classpath goes in a java @argfile so that the logged command
	// line stays readable.
	res, _ := runScenarios(t, 4*time.Minute, ".", "java", jvm(cp, "dev.sluice.compat.Matrix", b.KafkaAddr, p)...)
	recordResults(t, javaClient, basicScenarios, res, checkBasic(t, b.KafkaAddr, p))
	// The version line was logged with the basic group; the other groups
	// share the process.
	delete(res, "\x00version")
	recordResults(t, javaClient, txnScenarios, res, checkTxn(t, b.KafkaAddr, p))
	recordResults(t, javaClient, adminScenarios, res, nil)
	recordResults(t, javaClient, groupScenarios, res, nil)
}
