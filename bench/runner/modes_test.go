package main

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestModeOrderRotates(t *testing.T) {
	list := []string{"raft", "semi-sync", "async"}
	want := [][]string{
		{"raft", "semi-sync", "async"},
		{"semi-sync", "async", "raft"},
		{"async", "raft", "semi-sync"},
		{"raft", "semi-sync", "async"},
	}
	for i, w := range want {
		if got := modeOrder(list, i+1); !slices.Equal(got, w) {
			t.Errorf("round %d: %v, want %v", i+1, got, w)
		}
	}
	if _, err := modesList("raft,kraft"); err == nil {
		t.Error("an unknown mode was accepted")
	}
}

// A read broker's staleness in time is when the leader's high watermark
// passed the read broker's, interpolated between the leader's samples.
func TestStalenessFirstAbove(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := &staleness{history: map[int32][]hwmAt{0: {
		{t0, 100},
		{t0.Add(100 * time.Millisecond), 200},
		{t0.Add(200 * time.Millisecond), 200},
		{t0.Add(300 * time.Millisecond), 300},
	}}}
	for _, c := range []struct {
		hwm  int64
		want time.Duration
	}{
		{149, 50 * time.Millisecond},  // offset 149 visible when the hwm reached 150
		{100, 1 * time.Millisecond},   // offset 100: hwm 101
		{199, 100 * time.Millisecond}, // offset 199: hwm 200 at the second sample
		{249, 250 * time.Millisecond}, // the latest crossing, after the flat stretch
		{50, 0},                       // already past at the first sample
	} {
		if got := s.firstAbove(0, c.hwm).Sub(t0); got != c.want {
			t.Errorf("read hwm %d: leader passed it at +%v, want +%v", c.hwm, got, c.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3}
	if p := percentile(v, 0.99); p != 5 {
		t.Errorf("p99 %v", p)
	}
	if p := percentile(v, 0.5); p != 3 {
		t.Errorf("p50 %v", p)
	}
	if !math.IsNaN(percentile(nil, 0.99)) {
		t.Error("p99 of nothing is a number")
	}
}

func TestRenderModesFailedRun(t *testing.T) {
	o := &opts{command: "make bench-modes", modesRounds: 1, modesRecords: 10, modesRate: 10, modesLoadRate: 10,
		modesOutage: time.Second, modesSession: time.Second, brokerCPU: "0", readCPU: "1", genCPU: "1", isoFsync: "group"}
	text := renderModes(o, []string{"raft"}, []modeRun{{Mode: "raft", Round: 1, Err: "no cluster | here"}}, "d", "1 1 1", "1 1 1", 0)
	if !strings.Contains(text, "| raft | failed |") || !strings.Contains(text, "no cluster / here") {
		t.Errorf("a failed run is not shown as failed:\n%s", text)
	}
}

func TestScrubErr(t *testing.T) {
	o := &opts{tmp: "/data/scratch"}
	got := scrubErr(o, errors.New("metastore 127.0.0.1:1: not ready in time (logs in /data/scratch/sluice-bench-iso-1); open /data/scratch/a: gone"))
	if want := "metastore 127.0.0.1:1: not ready in time; open $TMPDIR/a: gone"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
