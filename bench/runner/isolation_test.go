package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
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
		isoFsync: "group", isoScaleRecords: 1000, isoScaleReaders: 2, brokerCPU: "0", readCPU: "1", genCPU: "1",
		writeGenCPU: "0", readGenCPU: "1"}
	runs := []isoRun{
		isoTestRun("sluice", "alone", 10, 0, ""), isoTestRun("sluice", "alone", 12, 0, ""),
		isoTestRun("sluice", "replay-1", 11, 5, ""), isoTestRun("sluice", "replay-1", 11, 5, ""),
		isoTestRun("kafka", "alone", 10, 0, ""), isoTestRun("kafka", "replay-1", 20, 5, ""),
		isoTestRun("kafka-follower", "alone", 0, 0, "boom | broken"),
	}
	// Two replay runs whose reader side read 3 of the 5 MB/s and whose
	// generators' CPU is known; the other runs come from older raw files.
	for i := 2; i < 4; i++ {
		runs[i].GenCPU = map[string]float64{"writer": 0.3, "reader": 0.5 + 0.1*float64(i)}
	}
	scale := []isoRun{isoTestRun("sluice", "scale-2", 0, 0.2, ""), isoTestRun("sluice", "scale-1", 0, 0.1, "")}
	// scale-1's backlog write hit its time bound: 500 records of 1000.
	scale[1].Written = 500
	text := renderIsolation(o, runs, scale, map[string][]float64{"sluice": {2000}, "kafka": {1900}}, []int{1}, 1000,
		"2026-01-01 00:00 UTC", "50.0 40.0 30.0", "1.0 1.0 1.0", time.Minute)
	for _, want := range []string{
		"| sluice | replay-1 | 1000 | 1.0 | 11.0 | 22.0 | +0 % |",
		"| 5.0 | r1 0.25 w1 0.50 | reader 0.75 writer 0.30 | 2/2 |",
		"| sluice | alone | 1000 | 1.0 | 11.0 | 22.0 | — |",
		"| r1 0.25 w1 0.50 | — | 2/2 |",
		"CPU 0 holds Sluice's write brokers and metastore, all three Kafka brokers, and (CPU 0) the writer-side generator",
		"CPU 1 holds Sluice's read brokers and (CPU 1) the reader-side generator",
		"| kafka | replay-1 | 1000 | 1.0 | 20.0 | 40.0 | +100 % |",
		"| kafka-follower | alone | failed: boom / broken ||||||||||| 0/1 |",
		"| 2 | 0.2 (readers finished within the window",
		"| 1 (500 records written of 1000: the write hit its 2m0s bound) | 0.1 (readers finished within the window",
		"half the lowest saturation of the systems compared, kafka's 1900",
		"records/s; measured before the rounds on a fresh cluster of each system, which the measured runs do not reuse): sluice 2000; kafka 1900;",
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

// The writer side of every run is the same fixed-rate producers and one
// latency probe, pinned with the write side; the readers go to a second
// process with no producers, pinned with the read side; a replay run's
// history is written by a run of its own on the write side.
func TestIsoWorkloadArgs(t *testing.T) {
	o := &opts{genBin: "gen", duration: 8 * time.Second, warmup: 2 * time.Second, writeGenCPU: "0", readGenCPU: "1"}
	ws := isoWorkloads(o, []int{1, 4}, 3000)
	var labels []string
	for _, w := range ws {
		labels = append(labels, w.label)
		if got := strings.Join(w.writer, " "); got != "-producers 4 -rate 3000 -consumers 1" {
			t.Errorf("%s: writer side %q", w.label, got)
		}
	}
	if got := strings.Join(labels, ","); got != "alone,tail-1,tail-4,replay-1,replay-4" {
		t.Fatalf("workloads %s", got)
	}
	if ws[0].reader != nil || ws[0].prefill != 0 {
		t.Errorf("alone has a reader side %v or history %d", ws[0].reader, ws[0].prefill)
	}
	if got := strings.Join(ws[2].reader, " "); got != "-producers 0 -consumers 4" || ws[2].prefill != 0 {
		t.Errorf("tail-4: reader side %q, history %d", got, ws[2].prefill)
	}
	if got := strings.Join(ws[4].reader, " "); got != "-producers 0 -consumers 0 -backlog-readers 4 -backlog-groups" ||
		ws[4].prefill != 24000 {
		t.Errorf("replay-4: reader side %q, history %d (want rate x duration = 24000)", got, ws[4].prefill)
	}
	for _, tc := range []struct {
		round int
		want  string
	}{
		{1, "alone,tail-1,tail-4,replay-1,replay-4,alone/end"},
		{2, "alone,replay-4,replay-1,tail-4,tail-1,alone/end"},
		{3, "alone,tail-1,tail-4,replay-1,replay-4,alone/end"},
	} {
		var got []string
		for _, w := range isoRoundOrder(ws, tc.round) {
			l := w.label
			if w.topicTag != "" {
				l += "/" + w.topicTag
			}
			got = append(got, l)
		}
		if g := strings.Join(got, ","); g != tc.want {
			t.Errorf("round %d order %s, want %s", tc.round, g, tc.want)
		}
	}
	labels = labels[:0]
	for _, w := range ws {
		labels = append(labels, w.label+w.topicTag)
	}
	if got := strings.Join(labels, ","); got != "alone,tail-1,tail-4,replay-1,replay-4" {
		t.Errorf("isoRoundOrder changed its argument: %s", got)
	}
	o.isoPrefill = 500
	if w := isoWorkloads(o, []int{1}, 3000)[2]; w.prefill != 500 {
		t.Errorf("-iso-prefill 500: history %d", w.prefill)
	}
	rd := isoGenArgs(o, o.readGenCPU, "s:1", "t", "replay-4", "r3", ws[4].reader)
	if got := strings.Join(rd, " "); got != "-c 1 gen -brokers s:1 -topic t -partitions 8 -replication 3 -record-size 1024 "+
		"-duration 8s -warmup 2s -label replay-4 -quiet -client-rack r3 -producers 0 -consumers 0 -backlog-readers 4 -backlog-groups" {
		t.Errorf("reader-side command line %q", got)
	}
	if got := strings.Join(isoFillArgs(o, "s:1", "t", 24000), " "); !strings.HasPrefix(got, "-c 0 gen ") ||
		!strings.Contains(got, "-records 24000 -duration 0") || !strings.Contains(got, "-consumers 0") ||
		!strings.Contains(got, "-max-duration 2m0s") {
		t.Errorf("history command line %q", got)
	}
}

// The row's produce and latency figures are the writer side's, its read
// MB/s both sides'; either side's failure fails the row.
func TestMergeIsoRun(t *testing.T) {
	w := `progress
{"window_s":6,"produce":{"records_per_s":3000,"ack_latency":{"p99_ms":4}},"consume":{"mb_per_s":3,"e2e_latency":{"p99_ms":7}},"backlog":{"mb_per_s":0}}`
	rd := `{"produce":{"records_per_s":0},"consume":{"mb_per_s":12},"backlog":{"mb_per_s":40}}`
	var r isoRun
	mergeIsoRun(&r, w, nil, rd, nil, true)
	if r.Err != "" || r.Gen.Produce.RecordsPerS != 3000 || r.Gen.Produce.Ack.P99 != 4 || r.Gen.Consume.E2E.P99 != 7 {
		t.Fatalf("writer-side figures lost: %+v", r)
	}
	if r.tailMBPerS() != 15 || r.Backlog != 40 || r.ReadGen == nil {
		t.Fatalf("tail %.1f MB/s, replay %.1f MB/s, want 15 and 40", r.tailMBPerS(), r.Backlog)
	}
	r = isoRun{}
	mergeIsoRun(&r, w, nil, "", errors.New("exit status 1"), true)
	if !strings.Contains(r.Err, "reader-side generator output") || r.Gen.Produce.RecordsPerS != 3000 {
		t.Fatalf("a reader side without output: %q", r.Err)
	}
	r = isoRun{}
	mergeIsoRun(&r, w, errors.New("exit status 1"), rd, nil, true)
	if !strings.HasPrefix(r.Err, "writer-side generator: exit status 1") || r.Backlog != 40 {
		t.Fatalf("a failed writer side: %q", r.Err)
	}
	r = isoRun{}
	mergeIsoRun(&r, w, nil, "", nil, false)
	if r.Err != "" || r.ReadGen != nil || r.tailMBPerS() != 3 {
		t.Fatalf("no reader side: %+v", r)
	}
}

// The fixed rate is half of the lowest system's saturation (the median
// of its starts), whichever system was measured first.
func TestLowestSaturation(t *testing.T) {
	for _, c := range []struct {
		sat  map[string][]float64
		kind string
		v    float64
	}{
		{map[string][]float64{"sluice": {91700}, "kafka": {38338}}, "kafka", 38338},
		{map[string][]float64{"kafka": {50000, 70000, 60000}, "sluice": {40000}}, "sluice", 40000},
		{map[string][]float64{"sluice": {30000, 90000, 100000}, "kafka": {80000}}, "kafka", 80000},
		{map[string][]float64{}, "none", 0},
	} {
		if k, v := lowestSaturation(c.sat); k != c.kind || v != c.v {
			t.Errorf("%v: %s %.0f, want %s %.0f", c.sat, k, v, c.kind, c.v)
		}
	}
}

// A process that exits before it is ready is reported at once, with the
// last line it logged, not waited for until the deadline.
func TestWaitReadyReportsExitedProcess(t *testing.T) {
	dir := t.TempDir()
	n := &isoNode{name: "w9"}
	var err error
	if n.log, err = os.Create(filepath.Join(dir, "w9.log")); err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command("sh", "-c", "echo starting; echo 'listen tcp: bind: address already in use' >&2; exit 1")
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer kill9(n)
	port, err := freePort() // nothing answers there
	if err != nil {
		t.Fatal(err)
	}
	n.admin = fmt.Sprintf("127.0.0.1:%d", port)
	start := time.Now()
	err = waitReady(n, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "exited: listen tcp: bind: address already in use") {
		t.Fatalf("waitReady = %v, want the process's exit and its last log line", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("waitReady took %v to notice the exit", took)
	}
}
