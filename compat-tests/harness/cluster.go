package harness

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Views of a broker's Kafka listeners (docs/architecture.md, "Routing").
const (
	ViewWrite = "write"
	ViewRead  = "read"
	ViewMixed = "mixed"
)

// ClusterOptions shape a real-process cluster of `sluice serve` nodes. Zero
// values give the local-cluster shape with one meta node instead of three
// (configs/local-cluster): 3 write brokers (ids 1..3) with a write and a
// mixed listener, 2 read brokers (ids 4, 5) with a read and a mixed listener.
type ClusterOptions struct {
	// Meta is the number of meta nodes (default 1), Write of write
	// brokers (default 3), Read of read brokers (default 2; -1 for none).
	Meta, Write, Read int
	// ReadRacks sets broker.rack on read broker i (in order); brokers past
	// its end, and every write broker, have no rack.
	ReadRacks []string
	// Extra is YAML appended to every broker's config (not the meta nodes').
	Extra string
}

// Cluster is a running real-process cluster. Every node is stopped with
// SIGTERM when the test ends; a node that exited on its own during the test,
// did not exit cleanly, or wrote a crash or race report fails the test.
type Cluster struct {
	Meta, Writers, Readers []*Node
}

// Node is one `sluice serve` process of a Cluster. Its ports and data
// directory stay the same across Kill/Stop and Restart.
type Node struct {
	Name string
	// ID is the Kafka node.id (brokers) or 100+meta.id (meta nodes).
	ID   int32
	Role string // meta, write or read
	// AdminAddr serves /metrics and /readyz; Listeners maps a view to the
	// host:port of the Kafka listener with that view.
	AdminAddr string
	Listeners map[string]string

	t       testing.TB
	cfgPath string
	process
}

// StartCluster writes one YAML config per node (free loopback ports, data
// directories under t.TempDir()), starts the meta nodes, waits for their
// /readyz, then starts the brokers and waits for theirs.
func StartCluster(t testing.TB, o ClusterOptions) *Cluster {
	t.Helper()
	if binPath == "" {
		t.Fatal("harness.Setup was not called from TestMain")
	}
	if o.Meta <= 0 {
		o.Meta = 1
	}
	if o.Write <= 0 {
		o.Write = 3
	}
	if o.Read < 0 {
		o.Read = 0
	} else if o.Read == 0 {
		o.Read = 2
	}
	dir := t.TempDir()
	c := &Cluster{}
	metaRaft := make([]string, o.Meta)
	var peers []string
	for i := range metaRaft {
		metaRaft[i] = freeAddr(t)
		peers = append(peers, strconv.Quote(fmt.Sprintf("%d=%s", i+1, metaRaft[i])))
	}
	for i := 1; i <= o.Meta; i++ {
		n := newNode(t, dir, fmt.Sprintf("meta-%d", i), int32(100+i), "meta")
		n.write(fmt.Sprintf("node.id: %d\nprocess.roles: [meta]\ndata.dir: %s\nadmin.addr: %s\nmeta.id: %d\nmeta.listen: %s\nmeta.peers: [%s]\nlisteners: []\n",
			n.ID, filepath.Join(dir, n.Name), n.AdminAddr, i, metaRaft[i-1], strings.Join(peers, ", ")))
		c.Meta = append(c.Meta, n)
	}
	metaAddrs := `["` + strings.Join(metaRaft, `", "`) + `"]`
	for i := 1; i <= o.Write+o.Read; i++ {
		role, name, own, rack := "write", fmt.Sprintf("write-%d", i), ViewWrite, ""
		if i > o.Write {
			role, name, own = "read", fmt.Sprintf("read-%d", i-o.Write), ViewRead
			if k := i - o.Write - 1; k < len(o.ReadRacks) {
				rack = o.ReadRacks[k]
			}
		}
		n := newNode(t, dir, name, int32(i), role)
		n.Listeners = map[string]string{own: freeAddr(t), ViewMixed: freeAddr(t)}
		var b strings.Builder
		fmt.Fprintf(&b, "node.id: %d\nprocess.roles: [%s]\ndata.dir: %s\nadmin.addr: %s\nmeta.addrs: %s\nreplica.listen: %s\n",
			n.ID, role, filepath.Join(dir, name), n.AdminAddr, metaAddrs, freeAddr(t))
		if rack != "" {
			fmt.Fprintf(&b, "broker.rack: %s\n", rack)
		}
		fmt.Fprintf(&b, "listeners:\n  - name: %s\n    view: %s\n    address: %s\n  - name: MIXED\n    view: mixed\n    address: %s\n",
			strings.ToUpper(own), own, n.Listeners[own], n.Listeners[ViewMixed])
		fmt.Fprintf(&b, "default.replication.factor: %d\nmin.insync.replicas: %d\n", min(o.Write, 3), min(o.Write, 2))
		b.WriteString(o.Extra)
		n.write(b.String())
		if role == "write" {
			c.Writers = append(c.Writers, n)
		} else {
			c.Readers = append(c.Readers, n)
		}
	}
	// Registered first, so it runs last (cleanups are LIFO): the tails
	// then include what the nodes said while stopping.
	t.Cleanup(func() {
		for _, n := range c.Nodes() {
			n.checkAlarms()
			if t.Failed() {
				t.Logf("%s stderr (last 12 KiB):\n%s", n.Name, n.LogTail(12<<10))
			}
			n.logFile.Close()
		}
	})
	t.Cleanup(c.stopAtEnd)
	start := func(ns []*Node) {
		for _, n := range ns {
			if err := n.launch(); err != nil {
				t.Fatalf("%s: %v", n.Name, err)
			}
		}
		for _, n := range ns {
			if err := n.waitReady(n.AdminAddr); err != nil {
				t.Fatalf("%s: %v", n.Name, err)
			}
		}
	}
	start(c.Meta)
	start(c.Brokers())
	return c
}

func newNode(t testing.TB, dir, name string, id int32, role string) *Node {
	n := &Node{Name: name, ID: id, Role: role, AdminAddr: freeAddr(t), t: t,
		cfgPath: filepath.Join(dir, name+".yaml")}
	if err := n.openLog(filepath.Join(dir, name+".stderr")); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *Node) write(cfg string) {
	if err := os.WriteFile(n.cfgPath, []byte(cfg), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// Nodes returns every node: meta nodes, write brokers, read brokers.
func (c *Cluster) Nodes() []*Node {
	return append(append(append([]*Node{}, c.Meta...), c.Writers...), c.Readers...)
}

// Brokers returns the write brokers, then the read brokers.
func (c *Cluster) Brokers() []*Node {
	return append(append([]*Node{}, c.Writers...), c.Readers...)
}

// Addrs returns the addresses of the listeners with view on the given
// brokers (a broker without such a listener is left out).
func Addrs(view string, brokers []*Node) []string {
	var out []string
	for _, n := range brokers {
		if a, ok := n.Listeners[view]; ok {
			out = append(out, a)
		}
	}
	return out
}

func (n *Node) launch() error {
	return n.start([]string{"serve", "--config", n.cfgPath, "--log-format", "json"}, nil)
}

// Kill sends SIGKILL and waits for the process to be gone.
func (n *Node) Kill() { n.kill() }

// Stop sends SIGTERM and waits for a clean exit (status 0).
func (n *Node) Stop() error { return n.stop() }

// Restart starts the node again on the same config and data (after Kill or
// Stop) and waits for /readyz.
func (n *Node) Restart() {
	n.t.Helper()
	if n.Running() {
		n.t.Fatalf("Restart: %s is still running", n.Name)
	}
	if err := n.launch(); err != nil {
		n.t.Fatalf("restart %s: %v", n.Name, err)
	}
	if err := n.waitReady(n.AdminAddr); err != nil {
		n.t.Fatalf("restart %s: %v", n.Name, err)
	}
}

// stopAtEnd stops the brokers, in parallel, before the meta nodes they
// depend on, and reports nodes that crashed or did not stop cleanly.
func (c *Cluster) stopAtEnd() {
	for _, group := range [][]*Node{c.Brokers(), c.Meta} {
		var wg sync.WaitGroup
		for _, n := range group {
			for _, e := range n.crashes() {
				n.t.Errorf("%s crashed during the test: %s", n.Name, e)
			}
			if !n.Running() {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := n.Stop(); err != nil {
					n.t.Errorf("stopping %s: %v", n.Name, err)
				}
			}()
		}
		wg.Wait()
	}
}

func (n *Node) checkAlarms() {
	if line := n.alarm(); line != "" {
		n.t.Errorf("%s stderr reports %q", n.Name, line)
	}
}

// Metrics are one scrape of a node's /metrics: each sample's value keyed by
// its series, the metric name with its labels sorted, as in
// `sluice_requests_total{api="Fetch",view="read"}`.
type Metrics map[string]float64

// Metrics scrapes the node's /metrics.
func (n *Node) Metrics() (Metrics, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + n.AdminAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: %s", n.Name, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads the Prometheus text format. Histogram and summary
// series are kept like any other sample.
func ParseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("metrics: malformed line %q", line)
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: line %q: %w", line, err)
		}
		name, labels, err := splitSeries(line[:sp])
		if err != nil {
			return nil, err
		}
		m[seriesKey(name, labels)] = v
	}
	return m, sc.Err()
}

// splitSeries parses `name{k="v",...}` (label values may hold escaped
// quotes and commas).
func splitSeries(s string) (string, map[string]string, error) {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return strings.TrimSpace(s), nil, nil
	}
	name, rest := s[:open], s[open+1:]
	labels := map[string]string{}
	for {
		rest = strings.TrimLeft(rest, ", ")
		if strings.HasPrefix(rest, "}") {
			return name, labels, nil
		}
		eq := strings.Index(rest, `="`)
		if eq < 0 {
			return "", nil, fmt.Errorf("metrics: malformed series %q", s)
		}
		key := rest[:eq]
		rest = rest[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				if rest[i] == 'n' {
					val.WriteByte('\n')
					continue
				}
			}
			val.WriteByte(rest[i])
		}
		if i == len(rest) {
			return "", nil, fmt.Errorf("metrics: unterminated label in %q", s)
		}
		labels[key] = val.String()
		rest = rest[i+1:]
	}
}

func seriesKey(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

// Sum adds up the samples of metric name whose labels include every
// key/value of match (every sample of name when match is empty).
func (m Metrics) Sum(name string, match map[string]string) float64 {
	var total float64
	for series, v := range m {
		n, labels, err := splitSeries(series)
		if err != nil || n != name {
			continue
		}
		ok := true
		for k, want := range match {
			if labels[k] != want {
				ok = false
				break
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// Requests is sluice_requests_total for api on listeners of view; an
// empty api or view matches all.
func (m Metrics) Requests(api, view string) float64 {
	match := map[string]string{}
	if api != "" {
		match["api"] = api
	}
	if view != "" {
		match["view"] = view
	}
	return m.Sum("sluice_requests_total", match)
}

// RequestsByAPI maps "API@view" to its sluice_requests_total, leaving out
// those with none.
func (m Metrics) RequestsByAPI() map[string]float64 {
	out := map[string]float64{}
	for series, v := range m {
		n, labels, err := splitSeries(series)
		if err != nil || n != "sluice_requests_total" || v == 0 {
			continue
		}
		out[labels["api"]+"@"+labels["view"]] += v
	}
	return out
}

// Sub returns m minus before, series by series (a series missing from
// before counts from zero).
func (m Metrics) Sub(before Metrics) Metrics {
	out := make(Metrics, len(m))
	for k, v := range m {
		out[k] = v - before[k]
	}
	return out
}

// ClusterMetrics holds one scrape per broker, keyed by node name.
type ClusterMetrics map[string]Metrics

// Snapshot scrapes every running broker's /metrics (the meta nodes serve no
// Kafka requests) and fails the test if one cannot be read.
func (c *Cluster) Snapshot(t testing.TB) ClusterMetrics {
	t.Helper()
	cm, err := c.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// Scrape is Snapshot for callers that may not end the test (goroutines
// other than the test's).
func (c *Cluster) Scrape() (ClusterMetrics, error) {
	out := ClusterMetrics{}
	for _, n := range c.Brokers() {
		if !n.Running() {
			continue
		}
		m, err := n.Metrics()
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", n.Name, err)
		}
		out[n.Name] = m
	}
	return out, nil
}

// Sub returns the per-broker deltas from before to cm.
func (cm ClusterMetrics) Sub(before ClusterMetrics) ClusterMetrics {
	out := ClusterMetrics{}
	for name, m := range cm {
		out[name] = m.Sub(before[name])
	}
	return out
}
