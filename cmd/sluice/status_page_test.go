package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/net/html"
)

// TestClusterStatusPageAndCLI: on the 3 meta + 3 write + 2 read cluster, a
// topic is filled and a consumer group reads part of it and commits. The
// status page of the read broker that coordinates the group shows its
// state, member and, per partition, the committed offset and the lag
// (high watermark minus offset); the page of each partition's leader shows
// its leader, voters, learners, and each member's lag; `sluice topic` and
// `sluice group` (tables and JSON) and `sluice cluster status --json` give
// the same values.
func TestClusterStatusPageAndCLI(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 2)
	const topic, group, parts, n = "ops", "g-ops", 3, 300
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	fillTopic(ctx, t, c.writeAddrs, topic, parts, n, "o%04d")

	// The group consumes about half and commits what it consumed; the
	// consumer stays in the group (Stable, one member).
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.ClientID("ops-test"),
		kgo.FetchMaxWait(300*time.Millisecond), kgo.FetchMaxPartitionBytes(2000))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var recs []*kgo.Record
	for len(recs) < n/2 && ctx.Err() == nil {
		fs := cons.PollRecords(ctx, n/2-len(recs))
		recs = append(recs, fs.Records()...)
	}
	if err := cons.CommitRecords(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	committed := map[int32]int64{}
	for _, r := range recs {
		committed[r.Partition] = max(committed[r.Partition], r.Offset+1)
	}

	adm := kadm.NewClient(cons)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	var coord int32 = -1
	for _, r := range adm.FindGroupCoordinators(ctx, group) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		coord = r.NodeID
	}
	if coord < 4 || coord > 5 {
		t.Fatalf("coordinator %d is not a read broker", coord)
	}

	// The coordinator's page: the group's state, member, offsets and lag.
	eventually(t, 20*time.Second, func() error {
		doc := fetchStatus(t, c.readers[coord-4].admin)
		if s := text(find(doc, "span", "class", "group-state", "data-group", group)); s != "Stable" {
			return fmt.Errorf("group state %q", s)
		}
		members := find(doc, "table", "class", "members", "data-group", group)
		if rows := findAll(members, "tr"); len(rows) != 2 || !strings.Contains(text(rows[1]), "ops-test") {
			return fmt.Errorf("members table %q", text(members))
		}
		offs := find(doc, "table", "class", "group-offsets", "data-group", group)
		for p := int32(0); p < parts; p++ {
			row := find(offs, "tr", "data-topic", topic, "data-partition", fmt.Sprint(p))
			if row == nil {
				if committed[p] == 0 {
					continue // nothing consumed from it, nothing committed
				}
				return fmt.Errorf("no offset row for partition %d", p)
			}
			got, want := text(find(row, "td", "class", "committed")), fmt.Sprint(committed[p])
			if got != want {
				return fmt.Errorf("partition %d: committed %s on the page, want %s", p, got, want)
			}
			if got, want := text(find(row, "td", "class", "lag")), fmt.Sprint(end[p]-committed[p]); got != want {
				return fmt.Errorf("partition %d: lag %s on the page, want %s", p, got, want)
			}
		}
		return nil
	})
	t.Logf("group %s on broker %d's page: committed %v of %v", group, coord, committed, end)

	// Each partition's leader's page: leader, voters, learners, and each
	// other member's lag, which reaches 0 (nothing is being written).
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	leaders := waitLeaders(t, kadm.NewClient(wcl), topic, parts)
	for p, leader := range leaders {
		eventually(t, 20*time.Second, func() error {
			doc := fetchStatus(t, c.writers[leader-1].admin)
			row := find(doc, "tr", "data-topic", topic, "data-partition", fmt.Sprint(p))
			if row == nil {
				return fmt.Errorf("no row for partition %d", p)
			}
			if got := text(find(row, "span", "class", "leader")); got != fmt.Sprint(leader) {
				return fmt.Errorf("partition %d: leader %s on the page, %d in Metadata", p, got, leader)
			}
			voters, learners := idList(text(find(row, "td", "class", "voters"))), idList(text(find(row, "td", "class", "learners")))
			if len(voters) != 3 || !slices.Contains(voters, leader) || !sameIDs(learners, []int32{4, 5}) {
				return fmt.Errorf("partition %d: voters %v learners %v", p, voters, learners)
			}
			var lagged []int32
			for _, s := range findAll(find(row, "td", "class", "lag"), "span") {
				id := attr(s, "data-member")
				if id == "" {
					continue
				}
				m, _ := strconv.Atoi(id)
				lagged = append(lagged, int32(m))
				for _, k := range []string{"data-entries", "data-records", "data-ms"} {
					if v := attr(s, k); v != "0" {
						return fmt.Errorf("partition %d: member %s lags %s=%q", p, id, k, v)
					}
				}
			}
			others := slices.DeleteFunc(append(slices.Clone(voters), learners...), func(x int32) bool { return x == leader })
			if !sameIDs(lagged, others) {
				return fmt.Errorf("partition %d: lag shown for %v, members other than the leader %v", p, lagged, others)
			}
			return nil
		})
	}
	brokers := findAll(find(fetchStatus(t, c.meta[0].admin), "table", "id", "brokers"), "tr")
	if len(brokers) != 1+5 {
		t.Fatalf("the meta node's page lists %d brokers, want 5", len(brokers)-1)
	}

	// The commands, as tables and as JSON.
	out := sluiceCmd(t, "topic", "list", "--bootstrap-server", c.writeAddrs[0])
	if !slices.Contains(strings.Fields(out), topic) {
		t.Fatalf("topic list:\n%s", out)
	}
	out = sluiceCmd(t, "topic", "describe", topic, "--bootstrap-server", c.writeAddrs[0])
	if !strings.Contains(out, "Topic: "+topic+"\tTopicId: ") || !strings.Contains(out, "PartitionCount: 3\tReplicationFactor: 3") {
		t.Fatalf("topic describe:\n%s", out)
	}
	var tds []topicDescription
	if err := json.Unmarshal([]byte(sluiceCmd(t, "topic", "describe", topic, "--json", "--bootstrap-server", c.writeAddrs[0])), &tds); err != nil {
		t.Fatal(err)
	}
	if len(tds) != 1 || tds[0].PartitionCount != parts || tds[0].ReplicationFactor != 3 {
		t.Fatalf("topic describe --json: %+v", tds)
	}
	for _, p := range tds[0].Partitions {
		if p.Leader != leaders[p.Partition] || len(p.Replicas) != 3 || len(p.ISR) != 3 {
			t.Fatalf("topic describe --json: partition %+v, leader %d in Metadata", p, leaders[p.Partition])
		}
	}
	out = sluiceCmd(t, "group", "describe", group, "--bootstrap-server", c.readAddrs[0])
	if !strings.Contains(out, "CURRENT-OFFSET") || !strings.Contains(out, "ops-test") {
		t.Fatalf("group describe:\n%s", out)
	}
	t.Logf("sluice group describe:\n%s", out)
	var gds []groupDescription
	if err := json.Unmarshal([]byte(sluiceCmd(t, "group", "describe", group, "--json", "--bootstrap-server", c.readAddrs[0])), &gds); err != nil {
		t.Fatal(err)
	}
	if len(gds) != 1 || gds[0].State != "Stable" || len(gds[0].Members) != 1 || gds[0].Members[0].ClientID != "ops-test" {
		t.Fatalf("group describe --json: %+v", gds)
	}
	for _, p := range gds[0].Partitions {
		if committed[p.Partition] == 0 {
			continue
		}
		if p.CurrentOffset != committed[p.Partition] || p.LogEndOffset != end[p.Partition] || p.Lag != end[p.Partition]-committed[p.Partition] {
			t.Fatalf("group describe --json: %+v, committed %d, end %d", p, committed[p.Partition], end[p.Partition])
		}
	}
	var gls []groupListing
	if err := json.Unmarshal([]byte(sluiceCmd(t, "group", "list", "--json", "--bootstrap-server", c.readAddrs[0])), &gls); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(gls, func(g groupListing) bool { return g.Group == group && g.Coordinator == coord }) {
		t.Fatalf("group list --json: %+v", gls)
	}
	var cs clusterStatusJSONView
	if err := json.Unmarshal([]byte(sluiceCmd(t, "cluster", "status", "--json", "--bootstrap-server", c.writeAddrs[0])), &cs); err != nil {
		t.Fatal(err)
	}
	if cs.Summary["partitions"] != parts || len(cs.Brokers) < 3 || cs.Summary["leaderless"] != 0 {
		t.Fatalf("cluster status --json: %+v", cs)
	}
}

// sluiceCmd runs the sluice binary with args and returns its standard
// output; it fails the test when the command fails.
func sluiceCmd(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sluice %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// eventually retries fn until it returns nil, failing with its last error
// after within.
func eventually(t *testing.T, within time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// fetchStatus gets and parses a node's status page.
func fetchStatus(t *testing.T, admin string) *html.Node {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + admin + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /status: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	doc, err := html.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// matches: the attributes kv lists (key, value, ...) have those values; a
// class attribute holds several names, one of which must match.
func matches(n *html.Node, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		v := attr(n, kv[i])
		if kv[i] == "class" {
			if !slices.Contains(strings.Fields(v), kv[i+1]) {
				return false
			}
		} else if v != kv[i+1] {
			return false
		}
	}
	return true
}

// findAll returns the elements named tag under n (n included) whose
// attributes have the values kv lists (key, value, ...), in document order.
func findAll(n *html.Node, tag string, kv ...string) []*html.Node {
	var out []*html.Node
	if n == nil {
		return nil
	}
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if x.Type == html.ElementNode && x.Data == tag && matches(x, kv) {
			out = append(out, x)
		}
		for ch := x.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(n)
	return out
}

func find(n *html.Node, tag string, kv ...string) *html.Node {
	if all := findAll(n, tag, kv...); len(all) > 0 {
		return all[0]
	}
	return nil
}

// text is the trimmed text content of n ("" for nil).
func text(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if x.Type == html.TextNode {
			b.WriteString(x.Data)
		}
		for ch := x.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(n)
	return strings.TrimSpace(b.String())
}

// idList parses "1,2,3".
func idList(s string) []int32 {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, int32(v))
		}
	}
	return out
}
