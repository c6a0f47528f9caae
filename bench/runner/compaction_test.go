package main

import (
	"strings"
	"testing"
)

// TestWithSection: the compaction section is appended once, replaced in
// place by a newer one, and kept when the workload report rewrites the
// rest of the file.
func TestWithSection(t *testing.T) {
	sec := func(v string) string { return compBegin + "\n## Log compaction\n" + v + "\n" + compEnd }
	report := "# Benchmarks\n\n## Every run\n"
	got := withSection(report, sec("one"))
	if !strings.HasPrefix(got, report) || !strings.HasSuffix(got, sec("one")) {
		t.Fatalf("appended:\n%s", got)
	}
	got = withSection(got, sec("two"))
	if strings.Count(got, compBegin) != 1 || !strings.Contains(got, "two") || strings.Contains(got, "one") {
		t.Fatalf("replaced:\n%s", got)
	}
	// A new workload report keeps the section of the file it replaces.
	kept := compactionSectionOf(got)
	if again := withSection("# Benchmarks, new\n", kept); !strings.HasSuffix(again, sec("two")) {
		t.Fatalf("kept:\n%s", again)
	}
	if withSection(report, "") != report {
		t.Fatal("an empty section changed the report")
	}
}
