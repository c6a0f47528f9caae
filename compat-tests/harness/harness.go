// Package harness starts the real sluice binary for the compat tests and drives
// it from outside: free loopback ports, a fresh data directory, readiness via
// the admin /readyz endpoint, SIGKILL and restart on the same data directory
// and ports, and the broker's stderr in the test log when a test fails.
//
// The compat tests reach the broker over TCP only; nothing here imports broker
// packages (compat-tests is its own Go module).
package harness

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables understood by the harness.
const (
	// EnvBinary names a prebuilt sluice binary to use instead of building one.
	EnvBinary = "SLUICE_BIN"
	// EnvCI, when "true", turns skips for missing tools into failures.
	EnvCI = "CI"
	// EnvRace, when "1", builds the broker with -race; a data race the
	// broker reports on stderr then fails the test that ran it.
	EnvRace = "SLUICE_RACE"
	// EnvSkipFile names a file to which every skip for a missing tool
	// appends a line ("TestName: what is missing"); `make test` prints it
	// at the end, so a skipped client column is never silent.
	EnvSkipFile = "SLUICE_SKIP_FILE"
)

// logAlarms are stderr lines that fail a test whatever else happened: the
// Go runtime's crash and race reports.
var logAlarms = []string{"panic: ", "fatal error: ", "WARNING: DATA RACE"}

const (
	readyTimeout = 60 * time.Second
	stopTimeout  = 20 * time.Second
	// logTailBytes is how much of the broker's stderr a failing test prints.
	logTailBytes = 48 << 10
)

var binPath string

// Setup builds the sluice binary once for the whole `go test` run of a package
// (call it from TestMain) and returns a cleanup func that removes it. When
// SLUICE_BIN is set, that binary is used and nothing is built.
func Setup() (cleanup func(), err error) {
	if p := os.Getenv(EnvBinary); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		binPath = abs
		return func() {}, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-compat-bin-")
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "sluice")
	args := []string{"build", "-o", out}
	if os.Getenv(EnvRace) == "1" {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/sluice")...)
	cmd.Dir = root
	cmd.Env = os.Environ()
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("go build ./cmd/sluice in %s: %w\n%s", root, err, buf.String())
	}
	fmt.Fprintf(os.Stderr, "harness: built sluice in %v\n", time.Since(start).Round(time.Millisecond))
	binPath = out
	return func() { os.RemoveAll(dir) }, nil
}

// Binary returns the path of the sluice binary Setup prepared.
func Binary() string { return binPath }

// RepoRoot finds the broker's repository root: the nearest parent of the
// working directory (a package dir under compat-tests when `go test` runs)
// whose go.mod declares the broker module and which has cmd/sluice.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(mod), "module github.com/sluice-broker/sluice\n") {
			if st, err := os.Stat(filepath.Join(dir, "cmd", "sluice")); err == nil && st.IsDir() {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no parent of %s holds the sluice module with cmd/sluice", wd)
		}
		dir = parent
	}
}

// RequireTool skips the test when an external tool is not on PATH, and fails it
// instead when CI=true: on CI a missing tool is a broken CI script, not a reason
// to pass quietly.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		SkipMissing(t, fmt.Sprintf("tool %q not found on PATH: %v", name, err))
	}
	return p
}

// SkipMissing ends a test that cannot run because something outside the
// repository is missing (a tool, a language package): a failure under
// CI=true, otherwise a skip recorded in the file EnvSkipFile names.
func SkipMissing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(EnvCI) == "true" {
		t.Fatalf("%s (CI=true, so this is a failure)", what)
	}
	if name := os.Getenv(EnvSkipFile); name != "" {
		if f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%s: %s\n", t.Name(), strings.ReplaceAll(what, "\n", " "))
			f.Close()
		}
	}
	t.Skip(what)
}

// Options configure a broker.
type Options struct {
	// ExtraArgs are appended to `sluice dev ...` (e.g. config overrides).
	ExtraArgs []string
	// Env is added to the broker's environment (KEY=VALUE).
	Env []string
	// Listeners, when set, replaces --kafka-addr with --listeners: it is
	// given the address picked for KafkaAddr and returns the listeners
	// (NAME://host:port,...), which must include that address. FreeAddr
	// gives the others.
	Listeners func(kafkaAddr string) string
}

// FreeAddr returns a free loopback address for a broker's extra listener,
// as the harness picks its own.
func FreeAddr(t testing.TB) string { return freeAddr(t) }

// Broker is one `sluice dev` process.
type Broker struct {
	t       testing.TB
	opts    Options
	DataDir string
	// KafkaAddr and AdminAddr are host:port on loopback; they stay the same
	// across restarts.
	KafkaAddr string
	AdminAddr string
	listeners string // Options.Listeners' answer, fixed at Start

	process
}

// Start starts `sluice dev` on free loopback ports with a fresh data dir and
// waits for /readyz. The broker is stopped with SIGTERM when the test ends; a
// broker that does not exit cleanly, or that exited on its own during the
// test, fails the test. On failure the tail of its stderr goes to the test log.
func Start(t testing.TB, opts Options) *Broker {
	t.Helper()
	if binPath == "" {
		t.Fatal("harness.Setup was not called from TestMain")
	}
	tmp := t.TempDir()
	b := &Broker{
		t:         t,
		opts:      opts,
		DataDir:   filepath.Join(tmp, "data"),
		KafkaAddr: freeAddr(t),
		AdminAddr: freeAddr(t),
	}
	if opts.Listeners != nil {
		b.listeners = opts.Listeners(b.KafkaAddr)
	}
	if err := os.MkdirAll(b.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b.openLog(filepath.Join(tmp, "broker.stderr")); err != nil {
		t.Fatal(err)
	}
	// Registered before the stop so that it runs after it (cleanups are LIFO):
	// the log then includes whatever the broker said while stopping.
	t.Cleanup(func() {
		b.checkAlarms()
		if t.Failed() {
			t.Logf("broker %s stderr (last %d KiB):\n%s", b.KafkaAddr, logTailBytes>>10, b.LogTail(logTailBytes))
		}
		b.logFile.Close()
	})
	t.Cleanup(b.stopAtEnd)
	if err := b.launch(); err != nil {
		t.Fatal(err)
	}
	return b
}

// freeAddr returns a loopback address that is free now, its port below
// the kernel's ephemeral range: a port picked from that range (listening
// on port 0) may be taken by any outgoing connection, of this or another
// process, before the broker binds it ("address already in use"). Ports
// are never handed out twice in one test process.
func freeAddr(t testing.TB) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	if lo := ephemeralLow(); lo > portsFrom+1000 {
		for range 1000 {
			p := portsFrom + rand.IntN(lo-portsFrom)
			if portsGiven[p] {
				continue
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue
			}
			l.Close()
			portsGiven[p] = true
			return l.Addr().String()
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

const portsFrom = 20000

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range (Linux;
// 32768 where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return 32768
	}
	return lo
}

// Args returns the command line the broker runs with (without the binary).
func (b *Broker) Args() []string {
	args := []string{"dev",
		"--data-dir", b.DataDir,
		"--admin-addr", b.AdminAddr,
	}
	if b.opts.Listeners != nil {
		args = append(args, "--listeners", b.listeners)
	} else {
		args = append(args, "--kafka-addr", b.KafkaAddr)
	}
	return append(args, b.opts.ExtraArgs...)
}

func (b *Broker) launch() error {
	if err := b.start(b.Args(), b.opts.Env); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := b.waitReady(b.AdminAddr); err != nil {
		return fmt.Errorf("broker %w; its stderr is printed below", err)
	}
	return nil
}

// Exited waits up to d for the current broker process to exit and reports
// whether it has.
func (b *Broker) Exited(d time.Duration) bool {
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// RequireRunning fails the test now if the broker process has exited.
func (b *Broker) RequireRunning(t testing.TB) {
	t.Helper()
	if !b.Running() {
		b.mu.Lock()
		err := b.werr
		b.mu.Unlock()
		t.Fatalf("broker process is gone: %v", err)
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (b *Broker) Kill() {
	b.t.Helper()
	b.kill()
}

// Stop sends SIGTERM and waits for a clean exit (status 0).
func (b *Broker) Stop() error {
	if err := b.stop(); err != nil {
		return fmt.Errorf("broker %w", err)
	}
	return nil
}

// Restart starts the broker again on the same data dir and ports (after Kill
// or Stop) and waits for /readyz.
func (b *Broker) Restart() {
	b.t.Helper()
	if b.Running() {
		b.t.Fatal("Restart: broker is still running")
	}
	if err := b.launch(); err != nil {
		b.t.Fatalf("restart: %v", err)
	}
}

func (b *Broker) stopAtEnd() {
	for _, c := range b.crashes() {
		b.t.Errorf("broker crashed during the test: %s", c)
	}
	if !b.Running() {
		return
	}
	if err := b.Stop(); err != nil {
		b.t.Errorf("stopping broker: %v", err)
	}
}

// checkAlarms fails the test if the broker's stderr holds a crash or race
// report.
func (b *Broker) checkAlarms() {
	if line := b.alarm(); line != "" {
		b.t.Errorf("broker stderr reports %q", line)
	}
}

// Context returns a context bounded by d and cancelled at the end of the test.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
