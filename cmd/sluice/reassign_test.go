package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterReassignment: a partition with replication factor 2 moves,
// with Kafka's admin API (kadm), onto the write broker that did not hold
// it, away from its leader, while an idempotent acks=all producer writes
// to it. Every acknowledged record is then read exactly once, the removed
// broker's replica directory is gone and ListPartitionReassignments is
// empty. ElectLeaders (sent to a broker that leads nothing, so it is
// forwarded) then makes a reordered preferred replica the leader. Last, a
// read broker that joins the running cluster becomes a learner of the
// partition and serves its whole history from its own replica. Before
// that, a reassignment that cannot finish is cancelled.
// Costs about 10 s (3 writer restarts, the move, one process start).
func TestClusterReassignment(t *testing.T) {
	c := startTestCluster(t, "raft")
	// ElectLeaders must be what moves leadership, not the automatic
	// rebalance the test cluster runs every 2 s.
	for _, w := range c.writers {
		w.kill()
		f, err := os.OpenFile(w.cfg, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("auto.leader.rebalance.enable: false\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		w.start(t)
	}
	for _, w := range c.writers {
		waitReady(t, w.admin, 60*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	wcl, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	adm := kadm.NewClient(wcl)
	const topic = "moving"
	if _, err := adm.CreateTopic(ctx, 1, 2, nil, topic); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, topic, 1)
	replicas := func() []int32 {
		t.Helper()
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		return md.Topics[topic].Partitions[0].Replicas
	}
	orig := replicas()
	if len(orig) != 2 {
		t.Fatalf("replicas %v", orig)
	}
	var newcomer int32
	for id := int32(1); id <= 3; id++ {
		if !slices.Contains(orig, id) {
			newcomer = id
		}
	}
	leaving, staying := orig[0], orig[1] // orig[0] is the preferred leader
	target := []int32{staying, newcomer}

	// An idempotent acks=all producer (kgo's default) writes throughout.
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProduceRequestTimeout(5*time.Second),
		kgo.MaxBufferedRecords(1000), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var mu sync.Mutex
	acked := map[string]int64{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("m%07d", i))}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[string(r.Value)] = r.Offset
					mu.Unlock()
				}
			})
			if i%20 == 19 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	time.Sleep(1500 * time.Millisecond)

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, target)
	started := time.Now()
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[topic][0]; r.Err != nil {
		t.Fatalf("reassignment refused: %v %s", r.Err, r.ErrMessage)
	}
	// In progress, then done: listed until the raft group moved.
	sawInProgress := false
	deadline := time.Now().Add(30 * time.Second)
	for {
		lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err == nil {
			p, ok := lr[topic][0]
			if !ok {
				break
			}
			sawInProgress = true
			if !slices.Equal(p.AddingReplicas, []int32{newcomer}) || !slices.Equal(p.RemovingReplicas, []int32{leaving}) {
				t.Fatalf("listed %+v, want adding [%d] removing [%d]", p, newcomer, leaving)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("reassignment still listed after 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	moved := time.Since(started)
	time.Sleep(time.Second) // writes go on after the move
	close(stop)
	wg.Wait()
	if err := prod.Flush(ctx); err != nil {
		t.Logf("flush: %v", err)
	}
	if got := replicas(); !sameIDs(got, target) {
		t.Fatalf("replicas after the move %v, want %v", got, target)
	}
	t.Logf("REASSIGN: %d -> %v done in %v (listed while in progress: %v)", leaving, target, moved.Round(time.Millisecond), sawInProgress)

	// The removed broker deletes its replica.
	waitGone(t, filepath.Join(dataDir(t, c.writers[leaving-1]), "logs", topic+"-0"))

	// Every acknowledged record exactly once, at its offset, on each
	// voter's and the read broker's own replica.
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := md.Topics[topic].ID
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}
	check := func(who, addr string) {
		t.Helper()
		checkReplica(ctx, t, who, addr, topic, id, acked)
	}
	for _, v := range target {
		check(fmt.Sprintf("write broker %d", v), c.writeAddrs[v-1])
	}
	check("read broker 4", c.readAddrs[0])

	// A full move: replication factor 1, the only voter (the leader)
	// replaced. Raft's joint consensus makes the old leader step down
	// once it is out, and the new voter elects itself.
	const solo = "solo"
	one := "1" // the test cluster's default is 2
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"min.insync.replicas": &one}, solo); err != nil {
		t.Fatal(err)
	}
	waitLeaders(t, adm, solo, 1)
	smd, err := adm.Metadata(ctx, solo)
	if err != nil {
		t.Fatal(err)
	}
	from := smd.Topics[solo].Partitions[0].Replicas[0]
	to := from%3 + 1
	soloAcked := map[string]int64{}
	for i := range 30 {
		r := &kgo.Record{Topic: solo, Value: []byte(fmt.Sprintf("s%07d", i))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", solo, err)
		}
		soloAcked[string(r.Value)] = r.Offset
	}
	var full kadm.AlterPartitionAssignmentsReq
	full.Assign(solo, 0, []int32{to})
	if res, err := adm.AlterPartitionAssignments(ctx, full); err != nil || res[solo][0].Err != nil {
		t.Fatalf("full move: %+v %v", res, err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{solo: {0: {}}})
		if err == nil && len(lr[solo]) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("full move still listed after 30 s: %+v %v", lr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := waitLeaders(t, adm, solo, 1)[0]; got != to {
		t.Fatalf("%s led by %d after the full move to %d", solo, got, to)
	}
	waitGone(t, filepath.Join(dataDir(t, c.writers[from-1]), "logs", solo+"-0"))
	checkReplica(ctx, t, fmt.Sprintf("%s on write broker %d", solo, to), c.writeAddrs[to-1], solo, smd.Topics[solo].ID, soloAcked)
	t.Logf("FULL MOVE: %s from %d to %d", solo, from, to)

	// A cancel now has nothing to cancel.
	var cancelReq kadm.AlterPartitionAssignmentsReq
	cancelReq.CancelAssign(topic, 0)
	if res, err := adm.AlterPartitionAssignments(ctx, cancelReq); err != nil || !errors.Is(res[topic][0].Err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel after completion: %+v %v", res, err)
	}

	// ElectLeaders: reorder the replicas (completes at once) so that the
	// voter that does not lead is the preferred one, then elect it.
	lead := waitLeaders(t, adm, topic, 1)[0]
	pref, other := staying, newcomer
	if lead == staying {
		pref, other = newcomer, staying
	}
	var reorder kadm.AlterPartitionAssignmentsReq
	reorder.Assign(topic, 0, []int32{pref, other})
	if res, err := adm.AlterPartitionAssignments(ctx, reorder); err != nil || res[topic][0].Err != nil {
		t.Fatalf("reorder: %+v %v", res, err)
	}
	ereq := kmsg.NewPtrElectLeadersRequest()
	ereq.TimeoutMillis = 15000
	et := kmsg.NewElectLeadersRequestTopic()
	et.Topic, et.Partitions = topic, []int32{0}
	ereq.Topics = append(ereq.Topics, et)
	// Broker `leaving` leads nothing of this topic now: it forwards. A
	// leadership still settling after the move is answered
	// PREFERRED_LEADER_NOT_AVAILABLE: asked again. ELECTION_NOT_NEEDED
	// counts only once metadata shows the preferred replica leading.
	deadline = time.Now().Add(30 * time.Second)
	for elected := false; !elected; {
		kresp, err := wcl.Broker(int(leaving)).Request(ctx, ereq)
		if err != nil {
			t.Fatal(err)
		}
		eresp := kresp.(*kmsg.ElectLeadersResponse)
		if len(eresp.Topics) != 1 || len(eresp.Topics[0].Partitions) != 1 {
			t.Fatalf("elect preferred: %+v", eresp)
		}
		switch code := eresp.Topics[0].Partitions[0].ErrorCode; code {
		case 0:
			elected = true
		case kerr.ElectionNotNeeded.Code:
			elected = waitLeaders(t, adm, topic, 1)[0] == pref
		case kerr.PreferredLeaderNotAvailable.Code:
		default:
			t.Fatalf("elect preferred: %v", kerr.ErrorForCode(code))
		}
		if !elected {
			if time.Now().After(deadline) {
				t.Fatalf("preferred replica %d not elected within 30 s", pref)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for waitLeaders(t, adm, topic, 1)[0] != pref {
		if time.Now().After(deadline) {
			t.Fatalf("metadata does not show the preferred replica %d leading after ElectLeaders", pref)
		}
		time.Sleep(100 * time.Millisecond)
	}
	er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil || !errors.Is(er[topic][0].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("second election: %+v %v", er, err)
	}
	t.Logf("ELECT: leadership moved from %d to the preferred replica %d", lead, pref)

	// Cancel: a reassignment that cannot finish (it adds broker `leaving`,
	// killed but still registered, so it never catches up) is listed
	// until it is cancelled, and the partition keeps taking writes. The
	// requests go straight to broker `staying`: the killed broker may be
	// the controller kadm would send them to.
	c.writers[leaving-1].kill()
	at := wcl.Broker(int(staying))
	alterAt := func(replicas []int32) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Replicas = replicas
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := at.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.(*kmsg.AlterPartitionAssignmentsResponse).Topics[0].Partitions[0]
		msg := ""
		if p.ErrorMessage != nil {
			msg = *p.ErrorMessage
		}
		return p.ErrorCode, msg
	}
	listAt := func() []kmsg.ListPartitionReassignmentsResponseTopic {
		t.Helper()
		resp, err := at.Request(ctx, kmsg.NewPtrListPartitionReassignmentsRequest())
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ListPartitionReassignmentsResponse).Topics
	}
	if code, msg := alterAt([]int32{newcomer, staying, leaving}); code != 0 {
		t.Fatalf("reassignment to a dead broker: %d %s", code, msg)
	}
	time.Sleep(time.Second)
	if l := listAt(); len(l) != 1 || !slices.Equal(l[0].Partitions[0].AddingReplicas, []int32{leaving}) || len(l[0].Partitions[0].RemovingReplicas) != 0 {
		t.Fatalf("stuck reassignment listed as %+v", l)
	}
	if code, msg := alterAt(nil); code != 0 {
		t.Fatalf("cancel: %d %s", code, msg)
	}
	if l := listAt(); len(l) != 0 {
		t.Fatalf("listed after cancel: %+v", l)
	}
	if code, _ := alterAt(nil); code != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("second cancel: %d", code)
	}
	for i := range 20 {
		r := &kgo.Record{Value: []byte(fmt.Sprintf("c%07d", i))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce after cancel: %v", err)
		}
		mu.Lock()
		acked[string(r.Value)] = r.Offset
		mu.Unlock()
	}

	// A read broker that joins later follows the partition as a learner
	// and serves its whole history.
	r := addReader(t, c, 5)
	r.start(t)
	waitReady(t, r.admin, 60*time.Second)
	check("read broker 5 (joined later)", c.readAddrs[1])
	// Also of the partition whose only voter was replaced: joining it
	// replays that change from the configuration the group was created with.
	checkReplica(ctx, t, solo+" on read broker 5 (joined later)", c.readAddrs[1], solo, smd.Topics[solo].ID, soloAcked)
}

// checkReplica reads partition 0 of topic from one broker's own replica
// (the seed of a client on addr) and checks that every acknowledged record
// is stored once, at the offset it was acknowledged at.
func checkReplica(ctx context.Context, t *testing.T, who, addr, topic string, id [16]byte, acked map[string]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []kmsg.Record
	deadline := time.Now().Add(20 * time.Second)
	for {
		hws, err := replicaHWs(ctx, cl, topic, 1)
		if err == nil {
			_, recs, err = readReplica(ctx, cl, topic, id, 0, hws[0])
		}
		if err == nil && len(recs) >= len(acked) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d records (want at least the %d acknowledged), last error %v", who, len(recs), len(acked), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	seen := map[string]int{}
	for _, r := range recs {
		v := string(r.Value)
		seen[v]++
		if seen[v] > 1 {
			t.Fatalf("%s: %s stored twice", who, v)
		}
		if off, ok := acked[v]; ok && off != int64(r.OffsetDelta) {
			t.Fatalf("%s: %s acknowledged at offset %d, stored at %d", who, v, off, r.OffsetDelta)
		}
	}
	for v := range acked {
		if seen[v] != 1 {
			t.Fatalf("%s: acknowledged %s missing", who, v)
		}
	}
	t.Logf("%s: all %d acknowledged records stored once (%d records)", who, len(acked), len(recs))
}

// waitGone waits until a removed replica's directory is deleted.
func waitGone(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sameIDs(a, b []int32) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(x int32) bool { return !slices.Contains(b, x) })
}

// dataDir is the data.dir of a test cluster process, from its config.
func dataDir(t *testing.T, p *proc) string {
	t.Helper()
	b, err := os.ReadFile(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^data\.dir: (.+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no data.dir in %s", p.cfg)
	}
	return string(m[1])
}

// addReader adds read broker id to a running test cluster: the first read
// broker's config with its own id, data directory and ports. The caller
// starts it.
func addReader(t *testing.T, c *testCluster, id int) *proc {
	t.Helper()
	p := addBroker(t, c.readers[0], id, fmt.Sprintf("read-%d", len(c.readers)+1))
	c.readers = append(c.readers, p)
	c.readAddrs = append(c.readAddrs, p.kafka)
	return p
}

// addWriter is addReader for a write broker.
func addWriter(t *testing.T, c *testCluster, id int) *proc {
	t.Helper()
	p := addBroker(t, c.writers[0], id, fmt.Sprintf("write-%d", len(c.writers)+1))
	c.writers = append(c.writers, p)
	c.writeAddrs = append(c.writeAddrs, p.kafka)
	return p
}

// addBroker writes the config of a new broker, src's with its own id,
// name, data directory and ports.
func addBroker(t *testing.T, src *proc, id int, name string) *proc {
	t.Helper()
	b, err := os.ReadFile(src.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 3)
	kafka := fmt.Sprintf("127.0.0.1:%d", ports[2])
	admin := fmt.Sprintf("127.0.0.1:%d", ports[0])
	set := func(s, key, val string) string {
		re := regexp.MustCompile(`(?m)^(\s*` + regexp.QuoteMeta(key) + `: ).*$`)
		if !re.MatchString(s) {
			t.Fatalf("no %s in %s", key, src.cfg)
		}
		return re.ReplaceAllString(s, "${1}"+val)
	}
	cfg := string(b)
	cfg = set(cfg, "node.id", fmt.Sprint(id))
	cfg = set(cfg, "data.dir", filepath.Join(filepath.Dir(dataDir(t, src)), name))
	cfg = set(cfg, "admin.addr", admin)
	cfg = set(cfg, "replica.listen", fmt.Sprintf("127.0.0.1:%d", ports[1]))
	cfg = set(cfg, "address", kafka)
	path := filepath.Join(filepath.Dir(src.cfg), name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	lf, err := os.Create(strings.TrimSuffix(path, ".yaml") + ".log")
	if err != nil {
		t.Fatal(err)
	}
	return &proc{name: name, cfg: path, admin: admin, logf: lf, kafka: kafka}
}
