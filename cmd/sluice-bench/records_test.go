package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRecordsWindow: a run bounded by -records against a real `sluice dev`
// counts every record it produced after the warm-up in its window: the
// window ends with the last acknowledgement, not when the producers have
// handed the last record to their clients (then up to MaxBufferedRecords
// per client were still unacknowledged and left out of the throughput).
func TestRecordsWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the broker")
	}
	addr := startDev(t)
	c := &config{Brokers: addr, Topic: "records-window", Partitions: 4, Replication: 1, RecordSize: 1024,
		Acks: "all", Idempotent: true, Compression: "none", Linger: 5 * time.Millisecond, Producers: 1,
		Consumers: 0, Records: 40000, MaxDuration: 2 * time.Minute, Drain: 10 * time.Second,
		CreateTopic: true, Isolation: "read_uncommitted", Quiet: true}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// No warm-up: the window holds every record.
	if res.Produce.Records != c.Records || res.Produce.TotalRecords != c.Records {
		t.Fatalf("window counted %d records, the run acknowledged %d, want %d in both", res.Produce.Records, res.Produce.TotalRecords, c.Records)
	}
	// The window in the result is rounded to the millisecond.
	want := float64(c.Records) / res.WindowS
	if d := res.Produce.RecordsPerS/want - 1; d > 0.01 || d < -0.01 || res.Produce.MBPerS <= 0 {
		t.Fatalf("%.1f records/s (%.2f MB/s) over %.3f s, want %.1f", res.Produce.RecordsPerS, res.Produce.MBPerS, res.WindowS, want)
	}
}

// startDev builds and starts a `sluice dev` broker for the test and
// returns its Kafka address.
func startDev(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, "../sluice").CombinedOutput(); err != nil {
		t.Fatalf("building sluice: %v\n%s", err, out)
	}
	port := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	addr, admin := fmt.Sprintf("127.0.0.1:%d", port()), fmt.Sprintf("127.0.0.1:%d", port())
	broker := exec.Command(bin, "dev", "--data-dir", filepath.Join(dir, "data"), "--kafka-addr", addr,
		"--admin-addr", admin, "--log-level", "warn")
	broker.Stdout, broker.Stderr = os.Stderr, os.Stderr
	if err := broker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		broker.Process.Signal(syscall.SIGTERM)
		broker.Wait()
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get("http://" + admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("sluice dev not ready within a minute")
		}
	}
	return addr
}
