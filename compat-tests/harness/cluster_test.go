package harness

import (
	"strings"
	"testing"
)

// The exposition format as client_golang writes it: labels sorted, HELP
// and TYPE comments, a label value with an escaped quote.
const sampleMetrics = `# HELP sluice_requests_total Kafka requests received, by API and listener view.
# TYPE sluice_requests_total counter
sluice_requests_total{api="Fetch",view="mixed"} 3
sluice_requests_total{api="Fetch",view="read"} 5
sluice_requests_total{api="Metadata",view="read"} 2
sluice_requests_total{api="OffsetCommit",view="read"} 0
sluice_forwarded_produce_total 7
sluice_fetched_bytes_total{topic="a\"b"} 1.5e+06
`

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"Fetch, any view", m.Requests("Fetch", ""), 8},
		{"Fetch on read", m.Requests("Fetch", ViewRead), 5},
		{"all on read", m.Requests("", ViewRead), 7},
		{"all", m.Requests("", ""), 10},
		{"Produce", m.Requests("Produce", ""), 0},
		{"unlabelled", m.Sum("sluice_forwarded_produce_total", nil), 7},
		{"escaped label", m.Sum("sluice_fetched_bytes_total", map[string]string{"topic": `a"b`}), 1.5e6},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
	by := m.RequestsByAPI()
	if len(by) != 3 || by["Fetch@mixed"] != 3 || by["Metadata@read"] != 2 {
		t.Errorf("RequestsByAPI = %v", by)
	}

	before, err := ParseMetrics(strings.NewReader(`sluice_requests_total{view="read",api="Fetch"} 4`))
	if err != nil {
		t.Fatal(err)
	}
	d := m.Sub(before)
	if got := d.Requests("Fetch", ViewRead); got != 1 {
		t.Errorf("delta of Fetch on read = %v, want 1 (label order must not matter)", got)
	}
	if got := d.Requests("Fetch", ViewMixed); got != 3 {
		t.Errorf("delta of a series missing before = %v, want 3", got)
	}
}

func TestParseMetricsRejectsGarbage(t *testing.T) {
	for _, bad := range []string{"sluice_requests_total{api=\"Fetch\" 3", "novalue", "x{a=\"b\"} notanumber"} {
		if _, err := ParseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseMetrics(%q) accepted it", bad)
		}
	}
}
