package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A section (the -section ones and make bench-compaction's) goes in before
// "## Reproduce" the first time, replaces its
// last version in place after that, and a whole report written afterwards
// keeps it.
func TestSectionsReplacedAndKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	whole := "# Benchmarks\n\n## Results\n\nfigures\n\n## Reproduce\n\n```\nmake bench\n```\n"
	if err := os.WriteFile(path, []byte(whole), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := replaceSection(path, "tls", "## W1 over TLS\n\nfirst\n"); err != nil {
		t.Fatal(err)
	}
	doc := read()
	if i, j := strings.Index(doc, "first"), strings.Index(doc, "## Reproduce"); i < 0 || j < i {
		t.Fatalf("section not before Reproduce:\n%s", doc)
	}
	if err := replaceSection(path, "txn", "## Transactions\n\ntxn-first\n"); err != nil {
		t.Fatal(err)
	}
	if err := replaceSection(path, compactionSection, "## Log compaction\n\ncleaned\n"); err != nil {
		t.Fatal(err)
	}
	if err := replaceSection(path, "tls", "## W1 over TLS\n\nsecond\n"); err != nil {
		t.Fatal(err)
	}
	doc = read()
	if strings.Contains(doc, "\nfirst\n") || strings.Count(doc, "## W1 over TLS") != 1 || !strings.Contains(doc, "second") {
		t.Fatalf("tls section not replaced in place:\n%s", doc)
	}
	if strings.Index(doc, "second") > strings.Index(doc, "txn-first") {
		t.Fatalf("tls section moved:\n%s", doc)
	}
	// A whole new report: every section carried over, once each.
	rep := keepSections(path, strings.Replace(whole, "figures", "new figures", 1))
	for _, want := range []string{"new figures", "second", "txn-first", "cleaned"} {
		if strings.Count(rep, want) != 1 {
			t.Fatalf("%q %d times in the new report:\n%s", want, strings.Count(rep, want), rep)
		}
	}
	if strings.Index(rep, "txn-first") > strings.Index(rep, "## Reproduce") {
		t.Fatalf("kept sections after Reproduce:\n%s", rep)
	}
}

// The share section: per-pair ratios of the drain figures, each broker's
// 1-partition run over its 8-partition run, Sluice's metastore writes in
// the table of runs, and the loaded-machine warning.
func TestRenderShare(t *testing.T) {
	var s section
	for _, x := range sections() {
		if x.name == "share" {
			s = x
		}
	}
	if len(s.workloads) != 2 {
		t.Fatalf("share section workloads: %+v", s.workloads)
	}
	run := func(broker string, recPerS float64, meta float64) *runResult {
		r := &runResult{Broker: broker, Load: "1.00 1.00 1.00", CPUPerGB: 10, PeakRSSMiB: 100, MetaWrites: meta, MetaWriteS: meta / 100}
		r.Gen.Share.RecordsPerS = recPerS
		r.Gen.Share.MBPerS = recPerS * 1024 / 1e6
		r.Gen.Share.PerConsumer = []int64{10, 30}
		r.Gen.Share.Fetch.P50 = 5
		r.Gen.Share.Fetch.Count = 4
		return r
	}
	r := sectionRun{o: &opts{command: "make bench", pairs: 1, shareRecs: 40}, loadStart: "99.0 1 1", loadEnd: "1 1 1",
		res: map[string][]*pair{
			"S-1p": {{S: run("sluice", 1000, 50), K: run("kafka", 4000, 0)}},
			"S-8p": {{S: run("sluice", 2000, 60), K: run("kafka", 4000, 0)}},
		}}
	var b strings.Builder
	renderShare(&b, s, r)
	out := b.String()
	for _, want := range []string{
		"| S-1p | drained (records/s) | 1,000 | 4,000 | 0.25x | 0.25-0.25 | 0.50x | 1.00x |",
		"| S-8p | drained (records/s) | 2,000 | 4,000 | 0.50x | 0.50-0.50 | 1 | 1 |",
		"| 10-30 | 0 | 0.00 | 10.0 | 100 | 50 / 0.5 |",
		"| 10-30 | 0 | 0.00 | 10.0 | 100 | — |",
		"a loaded machine",
		"prefills 40 records",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
