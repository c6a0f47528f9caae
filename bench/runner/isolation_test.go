package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func isoTestRun(sys, label string, p99, backlog float64, errText string) isoRun {
	r := isoRun{System: sys, Label: label, Backlog: backlog, Err: errText, CPU: map[string]float64{"w1": 0.5, "r1": 0.25}}
	r.Gen.Produce.RecordsPerS = 1000
	r.Gen.Produce.Ack.P50, r.Gen.Produce.Ack.P99, r.Gen.Produce.Ack.P999 = 1, p99, 2*p99
	r.Gen.WindowS = 10
	return r
}

// The table's "p99 vs alone" is each row's median p99 against the same
// system's alone row; a row whose every run failed says so; a scale-out
// run that read its whole backlog within the window is marked a lower
// bound; and the section survives a whole new report.
func TestRenderIsolation(t *testing.T) {
	o := &opts{command: "make bench-isolation", version: "test", pairs: 2, duration: 8 * time.Second, warmup: 3 * time.Second,
		isoFsync: "group", isoScaleRecords: 1000, isoScaleReaders: 2, brokerCPU: "0", readCPU: "1", genCPU: "1"}
	runs := []isoRun{
		isoTestRun("sluice", "alone", 10, 0, ""), isoTestRun("sluice", "alone", 12, 0, ""),
		isoTestRun("sluice", "replay-1", 11, 5, ""), isoTestRun("sluice", "replay-1", 11, 5, ""),
		isoTestRun("kafka", "alone", 10, 0, ""), isoTestRun("kafka", "replay-1", 20, 5, ""),
		isoTestRun("kafka-follower", "alone", 0, 0, "boom | broken"),
	}
	scale := []isoRun{isoTestRun("sluice", "scale-2", 0, 0.2, ""), isoTestRun("sluice", "scale-1", 0, 0.1, "")}
	text := renderIsolation(o, runs, scale, map[string][]float64{"sluice": {2000}}, []int{1}, 1000,
		"2026-01-01 00:00 UTC", "50.0 40.0 30.0", "1.0 1.0 1.0", time.Minute)
	for _, want := range []string{
		"| sluice | replay-1 | 1000 | 1.0 | 11.0 | 22.0 | +0 % |",
		"| kafka | replay-1 | 1000 | 1.0 | 20.0 | 40.0 | +100 % |",
		"| kafka-follower | alone | failed: boom / broken |",
		"| 2 | 0.2 (readers finished within the window",
		"| 1 | 0.1 | r1 0.25 w1 0.50 |",
		"a loaded machine",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	path := filepath.Join(t.TempDir(), "B.md")
	if err := os.WriteFile(path, []byte("# B\n\n## Reproduce\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceSection(path, isolationSection, text); err != nil {
		t.Fatal(err)
	}
	if rep := keepSections(path, "# B\n\nnew\n\n## Reproduce\n"); strings.Count(rep, "replay-1") != 2 {
		t.Fatalf("isolation section not carried over:\n%s", rep)
	}
}
