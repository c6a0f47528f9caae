package compat

import (
	"testing"
	"time"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

const javaClient = "java-client"

// TestJavaMatrix runs the basic and admin scenarios of the matrix with the
// Java client library (kafka-clients 4.4.0: KafkaProducer, KafkaConsumer,
// Admin) in one JVM (dev.sluice.compat.Matrix in compat-tests/java), so the
// column costs one JVM start and about as long as the scenarios take. The
// java-client group cells come from TestGroupJava and
// TestGroupJavaRebalance.
func TestJavaMatrix(t *testing.T) {
	var cp string
	t.Run("java-build", func(t *testing.T) {
		requireTool(t, "java")
		requireTool(t, "mvn")
		cp = buildJava(t)
	})
	scenarios := append(append([]string(nil), basicScenarios...), adminScenarios...)
	requireToolMatrix(t, javaClient, scenarios, cp != "", "java, mvn and the compat-tests/java dependencies")

	b := harness.Start(t, autoCreateOff())
	const p = "jc"
	prepareBasic(t, b.KafkaAddr, p)
	res, _ := runScenarios(t, 4*time.Minute, ".", "java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, "dev.sluice.compat.Matrix", b.KafkaAddr, p)
	recordResults(t, javaClient, basicScenarios, res, checkBasic(t, b.KafkaAddr, p))
	// The version line was logged with the basic group; the admin group
	// shares the process.
	delete(res, "\x00version")
	recordResults(t, javaClient, adminScenarios, res, nil)
}
