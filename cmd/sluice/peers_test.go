package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestClusterForgedRaftPeer: a connection to a write broker's replication
// port that claims to be another write broker (loopback: the address
// check passes) sends raft messages raft itself would panic on or be
// misled by: heartbeats committing far past the log from a "new term",
// appends with a gap, a proposal, messages naming another sender, and
// one for a group that does not exist; another connection claims a node
// that is not registered, another sends a garbage frame. The broker
// refuses each and counts it in sluice_raft_refused_total, no replica
// goes offline, and the cluster goes on acknowledging and serving every
// record. Costs about 10 s (6 processes).
func TestClusterForgedRaftPeer(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterN(t, "raft", 0)
	const topic, parts = "forged", 3
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, topic, parts)
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("v%03d", i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 30)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics[topic]

	victim := c.writers[0] // node 1
	addr := configValue(t, victim.cfg, "replica.listen")
	const self, peer = 1, 2
	rid := func(n int) uint64 { return uint64(n) + 1 }
	var envs []forgedEnvelope
	for _, p := range td.Partitions {
		term := uint64(p.LeaderEpoch) + 100 // a term nobody reached
		envs = append(envs,
			forgedEnvelope{td.ID, p.Partition, &raftpb.Message{Type: new(raftpb.MsgHeartbeat), From: new(rid(peer)), To: new(rid(self)), Term: new(term), Commit: new(uint64(1) << 40)}},
			forgedEnvelope{td.ID, p.Partition, &raftpb.Message{Type: new(raftpb.MsgApp), From: new(rid(peer)), To: new(rid(self)), Term: new(term),
				Index: new(uint64(1)), LogTerm: new(uint64(1)), Entries: []*raftpb.Entry{{Index: new(uint64(5)), Term: new(term)}}}},
			forgedEnvelope{td.ID, p.Partition, &raftpb.Message{Type: new(raftpb.MsgHeartbeat), From: new(rid(3)), To: new(rid(self)), Term: new(term)}},
			forgedEnvelope{td.ID, p.Partition, &raftpb.Message{Type: new(raftpb.MsgProp), From: new(rid(peer)), To: new(rid(self)), Entries: []*raftpb.Entry{{Data: []byte("x")}}}},
		)
	}
	envs = append(envs, forgedEnvelope{[16]byte{1, 2, 3}, 0, &raftpb.Message{Type: new(raftpb.MsgHeartbeat), From: new(rid(peer)), To: new(rid(self)), Term: new(uint64(1))}})
	// The frame goes with the hello in one write: broker 2's own
	// connection, which this one replaces, redials and replaces it in
	// turn, so its frame must be read at once.
	forged := raftHello(t, addr, peer, forgedFrame(t, envs))
	stranger := raftHello(t, addr, 77, nil)
	junk := raftHello(t, addr, peer, []byte{0, 0, 0, 8, 0, 0, 0, 9, 1, 2, 3, 4})
	for _, conn := range []net.Conn{stranger, junk} {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("refused connection not closed: %v", err)
		}
		conn.Close()
	}

	want := map[string]float64{"commit_past_log": parts, "entries": parts, "from": parts, "type": parts, "group": 1, "unknown_node": 1, "frame": 1}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := labelledMetric(t, victim.admin, "sluice_raft_refused_total", "reason")
		missing := ""
		for k, v := range want {
			if got[k] < v {
				missing += fmt.Sprintf(" %s=%v<%v", k, got[k], v)
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refusals counted %v:%s", got, missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
	forged.Close()
	if n := metricValue(t, victim.admin, "sluice_offline_replicas"); n != 0 {
		t.Fatalf("sluice_offline_replicas = %v", n)
	}
	if victim.cmd.ProcessState != nil {
		t.Fatalf("broker 1 exited: %v", victim.cmd.ProcessState)
	}

	// Everything is acknowledged and read back, through broker 1 too.
	produce(30, 30)
	waitLeaders(t, adm, topic, parts)
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs[0]), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < 60 && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != 60 {
		t.Fatalf("read back %d of 60 records", len(seen))
	}
}

type forgedEnvelope struct {
	topic     [16]byte
	partition int32
	msg       *raftpb.Message
}

// raftHello opens a replication connection declaring node and writes
// then with the hello.
func raftHello(t *testing.T, addr string, node int32, then []byte) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte("SLRT\x00\x01")
	b = binary.BigEndian.AppendUint32(b, uint32(node))
	if _, err := c.Write(append(b, then...)); err != nil {
		t.Fatal(err)
	}
	return c
}

// forgedFrame encodes envelopes as the replication transport frames them:
// frameLen | count | count x (topicID | partition | msgLen | message).
func forgedFrame(t *testing.T, envs []forgedEnvelope) []byte {
	t.Helper()
	body := binary.BigEndian.AppendUint32(nil, uint32(len(envs)))
	for _, e := range envs {
		m, err := proto.Marshal(e.msg)
		if err != nil {
			t.Fatal(err)
		}
		body = append(body, e.topic[:]...)
		body = binary.BigEndian.AppendUint32(body, uint32(e.partition))
		body = binary.BigEndian.AppendUint32(body, uint32(len(m)))
		body = append(body, m...)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// configValue reads a top-level key of a test config file.
func configValue(t *testing.T, path, key string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+": "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s: no %s", path, key)
	return ""
}

// labelledMetric reads a metric with one label from a broker's /metrics,
// by label value.
func labelledMetric(t *testing.T, admin, name, label string) map[string]float64 {
	t.Helper()
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	prefix := name + "{" + label + `="`
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		i := strings.Index(rest, `"} `)
		if i < 0 {
			continue
		}
		var v float64
		fmt.Sscanf(rest[i+3:], "%g", &v)
		out[rest[:i]] = v
	}
	return out
}
