package compat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	t.Parallel()
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
	cmd := exec.CommandContext(rctx, "java", jvm(classpath, "dev.sluice.compat.ProduceConsume", b.KafkaAddr, topic, itoa(partitions), itoa(n))...)
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
// serves every test of the run (each took 10-40 s of mvn before). flags
// are the JVM options every Java process of the run starts with (jvm).
var javaBuild struct {
	sync.Mutex
	cp    string
	flags []string
}

// cdsJars are the jars (file name prefixes) whose classes go into the
// run's class-data sharing archive: the Kafka client and tools and what
// they load at start.
var cdsJars = []string{"sluice-compat-java", "kafka-clients", "kafka-tools", "kafka-server-common", "jopt-simple",
	"argparse4j", "slf4j", "jackson-core", "jackson-databind", "jackson-annotations", "lz4", "snappy", "zstd"}

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
	deps, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatal(err)
	}
	// The program's jar rather than target/classes: class-data sharing
	// archives only classes from jars.
	jars, _ := filepath.Glob(filepath.Join(proj, "target", "sluice-compat-java-*.jar"))
	if len(jars) != 1 {
		t.Fatalf("mvn package left %d program jars in compat-tests/java/target, want 1: %v", len(jars), jars)
	}
	cp := jars[0] + string(os.PathListSeparator) + strings.TrimSpace(string(deps))
	javaBuild.flags = []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"}
	if archive := classDataArchive(t, proj, cp); archive != "" {
		// Unusable archive (another JVM, another class path): the JVM
		// starts without it, and says nothing (tests read stderr).
		javaBuild.flags = append(javaBuild.flags, "-XX:SharedArchiveFile="+archive, "-Xlog:cds=off,cds+dynamic=off")
	}
	return cp
}

// classDataArchive makes the run's class-data sharing archive (Java's
// AppCDS, a dynamic archive on top of the JDK's): one JVM loads the
// classes of cdsJars and dumps them at exit. Each later JVM maps them
// instead of parsing and verifying them, which takes about 40% off the
// CPU time of starting a Kafka tool (the suite starts a few hundred). The
// archive is named after the class path and the java binary, so a rerun
// on the same build reuses it. "" when it cannot be made: the suite then
// runs without it.
func classDataArchive(t *testing.T, proj, cp string) string {
	t.Helper()
	javaBin, err := exec.LookPath("java")
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(javaBin); err == nil {
		javaBin = real
	}
	// The program's jar is rebuilt in place: its size and time are part
	// of the name (the dependencies' jars carry their versions).
	key := javaBin + "\x00" + cp
	if fi, err := os.Stat(strings.SplitN(cp, string(os.PathListSeparator), 2)[0]); err == nil {
		key += fmt.Sprintf("\x00%d\x00%d", fi.Size(), fi.ModTime().UnixNano())
	}
	sum := sha256.Sum256([]byte(key))
	archive := filepath.Join(proj, "target", "cds-"+hex.EncodeToString(sum[:8])+".jsa")
	if _, err := os.Stat(archive); err == nil {
		return archive
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tmp := archive + ".tmp"
	os.Remove(tmp)
	args := append([]string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:ArchiveClassesAtExit=" + tmp,
		"-Xlog:cds=off,cds+dynamic=off", "-cp", cp, "dev.sluice.compat.LoadClasses"}, cdsJars...)
	start := time.Now()
	out, err := exec.CommandContext(ctx, "java", args...).CombinedOutput()
	if err == nil {
		err = os.Rename(tmp, archive)
	}
	if err != nil {
		t.Logf("no class-data sharing archive, the JVMs start without one: %v: %s", err, tail(string(out), 2000))
		os.Remove(tmp)
		return ""
	}
	t.Logf("class-data sharing archive made in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))
	return archive
}

// jvm is the argument list of a JVM of the suite: the run's flags, the
// simple logger at warn (a -D in args overrides it), the class path, then
// args (more JVM options if any, the main class and its arguments).
// buildJava must have returned cp first.
func jvm(cp string, args ...string) []string {
	javaBuild.Lock()
	flags := javaBuild.flags
	javaBuild.Unlock()
	full := append(append([]string{}, flags...), "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp)
	return append(full, args...)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }
