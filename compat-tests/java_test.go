package compat

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestJavaClient builds compat-tests/java offline (its dependencies are
// fetched beforehand by .ci/run) and runs it once: it creates the topic with
// the Java Admin client, produces with the Java
// producer's default settings (idempotence on, acks=all) and consumes with
// assign()+seekToBeginning(), validating every record itself.
func TestJavaClient(t *testing.T) {
	requireTool(t, "java")
	requireTool(t, "mvn")
	const (
		topic      = "java-clients"
		partitions = 3
		n          = 20_000
	)
	classpath := buildJava(t)

	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)

	rctx, rcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer rcancel()
	cmd := exec.CommandContext(rctx, "java",
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", classpath,
		"dev.sluice.compat.ProduceConsume", b.KafkaAddr, topic, itoa(partitions), itoa(n))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	t.Logf("java ran for %v\nstdout:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil || rctx.Err() != nil {
		t.Errorf("java client failed (%v, ctx %v)\nstderr (tail):\n%s", err, rctx.Err(), tail(errb.String(), 16<<10))
	}
	if !strings.Contains(out.String(), "CREATED "+topic+" "+itoa(partitions)+"\n") ||
		!strings.Contains(out.String(), "PRODUCED "+itoa(n)+"\n") || !strings.Contains(out.String(), "CONSUMED "+itoa(n)+"\n") ||
		!strings.HasSuffix(out.String(), "RESULT OK\n") {
		t.Errorf("java client did not report CREATED, PRODUCED/CONSUMED %d and RESULT OK", n)
	}

	// The broker's own view agrees: n records in all.
	lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer lcancel()
	var total int64
	ends := endOffsets(lctx, t, adm, topic)
	if len(ends) != partitions {
		t.Errorf("topic created by the Java Admin client has %d partitions, want %d", len(ends), partitions)
	}
	for _, e := range ends {
		total += e
	}
	if total != n {
		t.Errorf("high watermarks add up to %d, want %d", total, n)
	}
}

// buildJava compiles the Java program offline and returns its runtime
// classpath. Missing dependencies in the local Maven repository are treated
// like a missing tool (skip; fail under CI=true).
func buildJava(t *testing.T) string {
	t.Helper()
	javaBuild.Lock()
	defer javaBuild.Unlock()
	if javaBuild.cp == "" {
		javaBuild.cp = buildJavaOnce(t)
	}
	return javaBuild.cp
}

// javaBuild is the classpath of the first successful build: one build
// serves every test of the run (each took 10-40 s of mvn before).
var javaBuild struct {
	sync.Mutex
	cp string
}

func buildJavaOnce(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(wd, "java")
	cpFile := filepath.Join(proj, "target", "classpath.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mvn", "-o", "-q", "-B", "-DskipTests",
		"package", "dependency:build-classpath", "-Dmdep.outputFile="+cpFile)
	cmd.Dir = proj
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		msg := "mvn -o package in compat-tests/java failed (" + err.Error() + "); fetch the dependencies first, as make test-setup does " +
			"(mvn -B -f compat-tests/java/pom.xml -DskipTests package):\n" + tail(out.String(), 8<<10)
		if !strings.Contains(out.String(), "offline") {
			t.Fatal(msg)
		}
		harness.SkipMissing(t, msg)
	}
	t.Logf("built compat-tests/java in %v", time.Since(start).Round(time.Millisecond))
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(proj, "target", "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(cp))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }
