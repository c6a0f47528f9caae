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
