package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func clusterTestRun(sys string, pair int, mbps, cpuS float64, rss map[string]float64) *clusterRun {
	r := &clusterRun{System: sys, Pair: pair, Load: "0.5 0.5 0.5", RSSMiB: rss, CPUSec: map[string]float64{}}
	r.Gen.Produce.MBPerS, r.Gen.Produce.TotalBytes = mbps, 2e9
	r.Gen.Produce.Ack.P99 = 100 / mbps
	for n := range rss {
		r.CPUSec[n] = cpuS / float64(len(rss))
	}
	return r
}

// The order alternates A B, B A; the cluster table's figures are the
// medians of the per-pair ratios; CPU per GB sums every process and peak
// RSS is given as the sum and the largest process; the section goes into
// the report between its markers and a whole new report keeps it.
func TestRenderCluster(t *testing.T) {
	if got := clusterOrder(0); got[0] != "sluice" || got[1] != "kafka" {
		t.Fatalf("pair 1 order %v", got)
	}
	if got := clusterOrder(1); got[0] != "kafka" || got[1] != "sluice" {
		t.Fatalf("pair 2 order %v", got)
	}
	o := &opts{command: "make bench BENCH_ARGS='-section cluster'", version: "test", clusterPairs: 3, clusterRecords: 1000,
		warmup: 3 * time.Second, brokerCPU: "0", readCPU: "1", genCPU: "1", kafkaHeap: "1G"}
	sl := map[string]float64{"m1": 10, "w1": 40, "r1": 20}
	ka := map[string]float64{"k1": 600, "k2": 500, "k3": 400}
	cr := clusterReport{o: o, date: "2026-01-01 00:00 UTC", loadStart: "50.0 1 1", loadEnd: "1 1 1", elapsed: time.Minute,
		failures: []string{"pair 4, kafka: boom"},
		pairs: []clusterPair{
			{S: clusterTestRun("sluice", 1, 200, 4, sl), K: clusterTestRun("kafka", 1, 100, 8, ka)},  // ratio 2
			{S: clusterTestRun("sluice", 2, 150, 4, sl), K: clusterTestRun("kafka", 2, 100, 8, ka)},  // ratio 1.5
			{S: clusterTestRun("sluice", 3, 300, 6, sl), K: clusterTestRun("kafka", 3, 100, 12, ka)}, // ratio 3
		}}
	text := renderCluster(cr)
	for _, want := range []string{
		"| produce throughput (MB/s) | 200 | 100 | 2.00x | 1.50-3.00 |",
		"| produce ack p99 (ms) | 0.500 | 1.00 | 0.50x | 0.33-0.67 |",
		"| CPU per GB ingested, all processes (CPU-s/GB) | 2.00 | 4.00 | 0.50x | 0.50-0.50 |",
		"| peak RSS, sum of all processes (MiB) | 70.0 | 1,500 | 0.05x |",
		"| peak RSS, largest process (MiB) | 40.0 | 600 | 0.07x |",
		"| 2 | kafka | 0.5 0.5 0.5 |",
		"m1 10, r1 20, w1 40",
		"pair 4, kafka: boom",
		"a loaded machine",
		"make bench BENCH_ARGS='-section cluster'",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	path := filepath.Join(t.TempDir(), "B.md")
	if err := os.WriteFile(path, []byte("# B\n\n## Reproduce\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceSection(path, clusterSection, text); err != nil {
		t.Fatal(err)
	}
	if rep := keepSections(path, "# B\n\nnew\n\n## Reproduce\n"); strings.Count(rep, "peak RSS, largest process") != 1 {
		t.Fatalf("cluster section not carried over once:\n%s", rep)
	}
}

// A cluster that failed to start keeps its processes' logs (the start
// error names their directory) and loses its data directories on stop; a
// cluster that started leaves nothing.
func TestStopKeepsLogsOfFailedStart(t *testing.T) {
	for _, keep := range []bool{true, false} {
		dir := filepath.Join(t.TempDir(), "c")
		if err := os.MkdirAll(filepath.Join(dir, "w1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "w1.log"), []byte("not ready"), 0o644); err != nil {
			t.Fatal(err)
		}
		(&isoCluster{kind: "sluice", dir: dir, keepLogs: keep}).stop()
		_, logErr := os.Stat(filepath.Join(dir, "w1.log"))
		_, dataErr := os.Stat(filepath.Join(dir, "w1"))
		if keep && (logErr != nil || dataErr == nil) {
			t.Fatalf("failed start: log %v, data directory %v; want the log only", logErr, dataErr)
		}
		if !keep && (logErr == nil || dataErr == nil) {
			t.Fatal("started cluster: directory left behind")
		}
	}
}
