package compat

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestShareGroupPythonConfluentKafka drives share groups (KIP-932) with
// confluent-kafka (Python)'s ShareConsumer (librdkafka's, in preview):
// eight consumers in one group on one partition each get records (more are
// produced, up to four times the first 200, while one has had none: which
// consumer gets a record is a race among their fetches) and every record is
// accepted exactly once; the record one consumer releases comes
// back to the group with delivery count 2. It records the
// python-confluent-kafka share-consume cell of the matrix.
func TestShareGroupPythonConfluentKafka(t *testing.T) {
	t.Parallel()
	const client, scenario = "python-confluent-kafka", "share-consume"
	requireToolMatrix(t, client, []string{scenario}, pythonHas("confluent_kafka"),
		"python3 with the confluent_kafka module (make test-setup installs it into compat-tests/.venv)")
	b := startBroker(t)
	ctx := harness.Context(t, 4*time.Minute)
	adm := newAdmin(t, b.KafkaAddr)
	const topic, group, consumers, n = "share-py", "share-py-g", 8, 200
	createTopic(ctx, t, adm, topic, 1, nil)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(pctx, "python3", "share.py", b.KafkaAddr, topic, group,
		strconv.Itoa(consumers), strconv.Itoa(n), "120")
	cmd.Dir = filepath.Join(".", "python")
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if err != nil || !strings.Contains(out, "DONE") {
		recordMatrix(t, client, scenario, "fail", fmt.Sprintf("share.py: %v", err))
		t.Fatalf("share.py: %v\n%s", err, tail(out, 16<<10))
	}
	seen := map[string][]string{} // value -> "consumer/count"
	per := map[string]int{}
	released := ""
	produced := 0
	var problems []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 4 && f[0] == "GOT":
			seen[f[2]] = append(seen[f[2]], f[1]+"/"+f[3])
			per[f[1]]++
		case len(f) == 2 && f[0] == "RELEASED":
			released = f[1]
		case len(f) == 2 && f[0] == "PRODUCED":
			produced, _ = strconv.Atoi(f[1])
		case len(f) > 0 && (f[0] == "ACKFAIL" || f[0] == "ERR"):
			problems = append(problems, l)
		}
	}
	if produced < n {
		problems = append(problems, fmt.Sprintf("share.py produced %d records, want at least %d", produced, n))
	}
	for i := 0; i < produced; i++ {
		v := "rec-" + strconv.Itoa(i)
		want := "1"
		if v == released {
			want = "2"
		}
		if gs := seen[v]; len(gs) != 1 || !strings.HasSuffix(gs[0], "/"+want) {
			problems = append(problems, fmt.Sprintf("%s accepted as %v, want once with delivery count %s", v, gs, want))
		}
	}
	if released == "" {
		problems = append(problems, "consumer 0 released nothing")
	}
	if len(per) != consumers {
		problems = append(problems, fmt.Sprintf("%d of %d consumers got records: %v", len(per), consumers, per))
	}
	t.Logf("records per consumer: %v; released %s", per, released)
	if len(problems) > 0 {
		recordMatrix(t, client, scenario, "fail", strings.Join(problems[:min(len(problems), 5)], "; "))
		t.Fatalf("%d problems:\n%s\nshare.py output (tail):\n%s", len(problems), strings.Join(problems, "\n"), tail(out, 8<<10))
	}
	recordMatrix(t, client, scenario, "pass", fmt.Sprintf("%d consumers accepted %d records once each; a released record came back with delivery count 2", consumers, produced))
}
