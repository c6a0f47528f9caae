package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sample is one line of a /metrics page.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrapeText fetches a process's /metrics page.
func scrapeText(t *testing.T, admin string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// parseSamples reads the text exposition format's sample lines.
func parseSamples(text string) []sample {
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		s := sample{value: v, labels: map[string]string{}}
		head := line[:sp]
		if i := strings.IndexByte(head, '{'); i >= 0 {
			s.name = head[:i]
			for _, m := range labelRE.FindAllStringSubmatch(head[i:], -1) {
				s.labels[m[1]] = m[2]
			}
		} else {
			s.name = head
		}
		out = append(out, s)
	}
	return out
}

// total sums the samples of name whose labels include want; n counts them.
func total(ss []sample, name string, want map[string]string) (sum float64, n int) {
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && s.labels[k] == v
		}
		if ok {
			sum += s.value
			n++
		}
	}
	return sum, n
}

// promtool finds promtool: $PROMTOOL (make test builds it into bin/), then
// PATH; a missing one is reported as skipMissing does.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	return ""
}

// TestMonitoringRules checks deploy/monitoring/alerts.yml with promtool:
// its syntax and expressions (check rules) and that each alert tested in
// alerts_test.yml fires, or stays silent, as written there (test rules).
func TestMonitoringRules(t *testing.T) {
	p := promtool(t)
	if p == "" {
		skipMissing(t, "promtool not found (make test-setup builds it into bin/; or put it on PATH)")
	}
	dir := filepath.Join("..", "..", "deploy", "monitoring")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, p, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// monitoringNames returns the sluice_* series names the dashboard and the
// alert rules use, histogram suffixes removed.
func monitoringNames(t *testing.T) map[string]bool {
	t.Helper()
	dir := filepath.Join("..", "..", "deploy", "monitoring")
	names := map[string]bool{}
	re := regexp.MustCompile(`sluice_[a-z0-9_]+`)
	for _, f := range []string{"alerts.yml", "sluice-dashboard.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".json") {
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		for _, n := range re.FindAllString(string(b), -1) {
			if strings.HasPrefix(n, "sluice_overview") {
				continue // the dashboard's uid
			}
			for _, suf := range []string{"_bucket", "_count", "_sum"} {
				n = strings.TrimSuffix(n, suf)
			}
			names[n] = true
		}
	}
	return names
}

// TestClusterMetrics runs the 3 meta + 3 write + 1 read cluster, produces
// and consumes with franz-go, and checks each process's /metrics: the
// partition, raft, metastore, group and request series with sane values;
// that the dashboard and alert rules use only series the processes export;
// promtool check metrics on a broker's page; that a deleted topic's
// series disappear from every broker; and that a killed broker's lease
// expiry is counted.
func TestClusterMetrics(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestCluster(t, "raft")
	const topic, group, parts, n = "obs", "obs-group", 3, 300
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	adm := kadm.NewClient(wcl)
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, topic, parts)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("record-%04d-%s", i, strings.Repeat("v", 90)))})
	}
	if err := wcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rcl, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	for got := 0; got < n; {
		fs := rcl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, ctx.Err())
		}
		got += fs.NumRecords()
	}
	if err := rcl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	// The values settle within a few heartbeats (in-sync voters, the
	// read broker's replicas): check until all hold or the deadline.
	type page struct {
		p    *proc
		text string
		ss   []sample
	}
	scrapeAll := func() (meta, writers, readers []page) {
		for _, p := range c.meta {
			s := scrapeText(t, p.admin)
			meta = append(meta, page{p, s, parseSamples(s)})
		}
		for _, p := range c.writers {
			s := scrapeText(t, p.admin)
			writers = append(writers, page{p, s, parseSamples(s)})
		}
		for _, p := range c.readers {
			s := scrapeText(t, p.admin)
			readers = append(readers, page{p, s, parseSamples(s)})
		}
		return
	}
	tl := map[string]string{"topic": topic}
	var problems []string
	var meta, writers, readers []page
	for deadline := time.Now().Add(20 * time.Second); ; {
		problems = nil
		check := func(ok bool, format string, args ...any) {
			if !ok {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
		meta, writers, readers = scrapeAll()
		var leaders, records, hw, isr, flushes, writes, produceReqs float64
		var lagSeries int
		for _, w := range writers {
			v, _ := total(w.ss, "sluice_leader_partitions", nil)
			leaders += v
			v, _ = total(w.ss, "sluice_produced_records_total", tl)
			records += v
			h, _ := total(w.ss, "sluice_partition_high_watermark", tl)
			check(h >= n, "%s: high watermarks of %s sum to %v, want >= %d", w.p.name, topic, h, n)
			v, _ = total(w.ss, "sluice_partition_high_watermark", tl)
			hw = max(hw, v)
			v, _ = total(w.ss, "sluice_partition_in_sync_replicas", tl)
			isr += v
			terms, nt := total(w.ss, "sluice_partition_raft_term", tl)
			check(nt == parts && terms >= parts, "%s: %d raft term series summing to %v, want %d of at least 1", w.p.name, nt, terms, parts)
			_, k := total(w.ss, "sluice_partition_raft_apply_lag_entries", tl)
			check(k == parts, "%s: %d apply lag series, want %d", w.p.name, k, parts)
			last, _ := total(w.ss, "sluice_partition_raft_last_index", tl)
			check(last >= 2*parts, "%s: raft last indexes sum to %v, want at least 2 per partition (an election entry and a batch)", w.p.name, last)
			size, _ := total(w.ss, "sluice_partition_log_size_bytes", tl)
			check(size >= n*100, "%s: log size %v, want >= %d", w.p.name, size, n*100)
			segs, _ := total(w.ss, "sluice_partition_log_segments", tl)
			check(segs >= parts, "%s: %v segments, want >= %d", w.p.name, segs, parts)
			for _, name := range []string{"sluice_under_replicated_partitions", "sluice_leaderless_partitions", "sluice_offline_partitions"} {
				v, k := total(w.ss, name, nil)
				check(k == 1 && v == 0, "%s: %s = %v (%d series), want 0", w.p.name, name, v, k)
			}
			_, k = total(w.ss, "sluice_partition_follower_lag_entries", tl)
			lagSeries += k
			_, ko := total(w.ss, "sluice_partition_follower_lag_offsets", tl)
			_, ks := total(w.ss, "sluice_partition_follower_lag_seconds", tl)
			check(ko == k && ks == k, "%s: %d lag series in entries, %d in offsets, %d in seconds", w.p.name, k, ko, ks)
			v, _ = total(w.ss, "sluice_log_flush_seconds_count", nil)
			flushes += v
			v, _ = total(w.ss, "sluice_metastore_write_seconds_count", nil)
			writes += v
			v, _ = total(w.ss, "sluice_request_seconds_count", map[string]string{"api": "Produce", "view": "write"})
			produceReqs += v
		}
		check(leaders == parts, "leader partitions over the write brokers: %v, want %d", leaders, parts)
		check(records == n, "records in over the write brokers: %v, want %d", records, n)
		check(isr == 3*parts, "in-sync voters reported by the leaders: %v, want %d", isr, 3*parts)
		// Each leader reports its 2 other voters and the read broker.
		check(lagSeries == 3*parts, "follower lag series: %d, want %d", lagSeries, 3*parts)
		check(flushes > 0, "no log flush observed on the write brokers (log.fsync is group)")
		check(writes > 0, "no metastore write observed on the write brokers")
		check(produceReqs > 0, "no Produce request time observed in the write view")

		r := readers[0]
		v, k := total(r.ss, "sluice_group_members", map[string]string{"group": group})
		check(k == 1 && v == 1, "%s: group members %v (%d series), want 1", r.p.name, v, k)
		v, k = total(r.ss, "sluice_group_lag", map[string]string{"group": group, "topic": topic})
		check(k == parts && v == 0, "%s: group lag %v over %d partitions, want 0 over %d", r.p.name, v, k, parts)
		v, _ = total(r.ss, "sluice_group_committed_offset", map[string]string{"group": group, "topic": topic})
		// Raft's own entries take offsets too: at least n.
		check(v >= n, "%s: committed offsets sum to %v, want at least %d", r.p.name, v, n)
		v, _ = total(r.ss, "sluice_request_seconds_count", map[string]string{"api": "Fetch", "view": "read"})
		check(v > 0, "%s: no Fetch request time observed in the read view", r.p.name)
		v, _ = total(r.ss, "sluice_connections", map[string]string{"view": "read"})
		check(v >= 1, "%s: %v read-view connections, want the consumer's", r.p.name, v)

		var metaLeaders float64
		for _, m := range meta {
			v, _ := total(m.ss, "sluice_metastore_leader", nil)
			metaLeaders += v
			term, _ := total(m.ss, "sluice_metastore_term", nil)
			check(term >= 1, "%s: metastore term %v", m.p.name, term)
			has, _ := total(m.ss, "sluice_metastore_has_leader", nil)
			check(has == 1, "%s: knows no metastore leader", m.p.name)
		}
		check(metaLeaders == 1, "metastore leaders: %v, want 1", metaLeaders)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}

	// Every series the dashboard and the alerts use is exported.
	exported := map[string]bool{}
	for _, pg := range append(append(append([]page{}, meta...), writers...), readers...) {
		for _, line := range strings.Split(pg.text, "\n") {
			if strings.HasPrefix(line, "# TYPE ") {
				exported[strings.Fields(line)[2]] = true
			}
		}
	}
	var missing []string
	for name := range monitoringNames(t) {
		if !exported[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("deploy/monitoring uses series no process exports: %v", missing)
	}

	if p := promtool(t); p == "" {
		noteMissing(t, "promtool not found: promtool check metrics left out")
	} else {
		for _, pg := range []page{writers[0], readers[0], meta[0]} {
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			cmd := exec.CommandContext(cctx, p, "check", "metrics")
			cmd.Stdin = strings.NewReader(pg.text)
			out, err := cmd.CombinedOutput()
			ccancel()
			if err != nil {
				t.Errorf("promtool check metrics on %s: %v\n%s", pg.p.name, err, out)
			}
		}
	}

	rcl.Close()
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	var left []string
	for deadline := time.Now().Add(15 * time.Second); ; {
		left = nil
		for _, p := range append(append([]*proc{}, c.writers...), c.readers...) {
			for _, s := range parseSamples(scrapeText(t, p.admin)) {
				if s.labels["topic"] == topic {
					left = append(left, p.name+": "+s.name)
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("15 s after deleting %s its series remain: %v", topic, left)
	}

	// A killed broker's lease expires (10 s) and the metastore leader
	// counts it.
	c.writers[2].kill()
	expired := func() float64 {
		var sum float64
		for _, m := range c.meta {
			v, _ := total(parseSamples(scrapeText(t, m.admin)), "sluice_metastore_lease_expiries_total", nil)
			sum += v
		}
		return sum
	}
	deadline := time.Now().Add(30 * time.Second)
	for expired() < 1 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	if v := expired(); v != 1 {
		t.Errorf("lease expiries after killing one broker: %v, want 1", v)
	}
}
