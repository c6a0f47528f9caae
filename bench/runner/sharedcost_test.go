package main

import (
	"strings"
	"testing"
)

func TestSharedCostPlan(t *testing.T) {
	p, err := sharedCostPlan("s3:10, dir:2,raft:0.5")
	if err != nil || len(p) != 3 || p[0].Backend != "s3" || p[0].GB != 10 || p[2].GB != 0.5 {
		t.Fatalf("plan %+v, %v", p, err)
	}
	for _, bad := range []string{"", "s3", "s3:0", "s3:-1", "nfs:1", "dir:x"} {
		if _, err := sharedCostPlan(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The cost model multiplies the measured requests per GB by the worked
// example's volume: 100 MB/s for 30 days is 259,200 GB.
func TestSharedCostModel(t *testing.T) {
	r := sharedCostRun{Backend: "s3", WrittenBytes: 2e9, Puts: 240}
	r.Cold.Bytes, r.Cold.Gets = 2e9, 100
	var b strings.Builder
	renderCostModel(&b, []sharedCostRun{r})
	out := b.String()
	for _, want := range []string{
		"| PUTs (uploads and compaction) | 3.11e+07 | 156 |", // 120/GB x 259,200 GB x $0.005/1000
		"| 1.3e+07 | 5 |",   // GETs keeping up: 50/GB x 259,200 GB x $0.0004/1000
		"| 3.89e+07 | 16 |", // worst case: x 3 groups
		"| storage (60480 GB, 7 days) | | 1391 |",
		"| 8 MiB | $389 | $156 | $154 |", // 3 writers, 33.3 MB/s each: 10 objects/s at 100 ms, 4 at 250 ms, 3.97 by size
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	var none strings.Builder
	renderCostModel(&none, []sharedCostRun{{Backend: "dir", WrittenBytes: 1e9}})
	if !strings.Contains(none.String(), "No s3 run") {
		t.Errorf("a model without an s3 run: %s", none.String())
	}
}
