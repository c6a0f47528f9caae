package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterNemesis drives the split cluster (3 meta nodes, 3 write
// brokers, 2 read brokers, raft mode, each process in a network namespace
// of its own when the test runs as root) through rounds of faults chosen
// by a seeded PRNG, under a workload of idempotent acks=all producers and
// a consumer group reading through the read brokers and committing
// offsets. Each round one fault:
//
//   - kill: kill -9 of a meta node, write or read broker, restarted 0.5-2.5 s later;
//   - pause: SIGSTOP of one process for longer than a broker lease, then SIGCONT;
//   - isolate: one process cut off from every other process both ways
//     (the test's clients still reach it), 5-9 s;
//   - unplug: one process cut off from everything, clients included, 5-9 s;
//   - oneway-out / oneway-in: what one process sends to the others
//     (out), or what they send to it (in), dropped, 5-9 s;
//   - reassign-crash: a partition of a replication-factor-2 topic moved
//     to another write broker, and one broker of the move killed (-9) and
//     restarted while it runs; the move must then finish;
//   - meta-change: a meta node removed from the metastore's quorum and
//     added back empty through the admin API, another meta node killed
//     (-9) right after each change is proposed (nemesis_meta_test.go);
//     the three must end agreeing on the members and the leader;
//   - power: kill -9 and the process's own file system shut down without
//     writing back its page cache or committing its journal (a power
//     cut; nemesis_disk_test.go), restarted 0.5-2.5 s later;
//   - diskfull / slowdisk: a write broker's file system filled, or its
//     writes throttled to 20 a second, for 5-9 s;
//   - clockjump (with SLUICE_NEMESIS_CLOCK=1): one process's wall clock
//     stepped 1 min to 2 h either way for 5-9 s (nemesis_clock_test.go).
//
// After every round the cluster must serve again within 90 s of the
// healing (every process ready, every partition led, taking acknowledged
// writes and seeing the group's commit rise) and the group's committed
// offsets must not have gone back. At the end the producers flush, the group catches up and the
// whole log is read through the read brokers; the checker then requires:
// every acknowledged record present exactly once, at its acknowledged
// offset; each producer's records in sequence order in every partition;
// no record twice; every record a consumer saw present at the offset it
// saw it (nothing a read broker served was lost later); no offset going
// back within one consumer's assignment; every acknowledged record
// delivered to the group; the group's committed offsets linearizable
// (nemesis_lin_test.go); and the topic operations two admin clients send
// meanwhile to random write brokers (create, delete, grow scratch topics)
// linearizable per topic name (nemesis_topic_test.go).
//
// Every failure names the seed and the round. SLUICE_NEMESIS_SEED replays
// a seed (the fault schedule; process timing differs), SLUICE_NEMESIS_ROUNDS
// sets the rounds (8 by default, 70-110 s; `make nemesis ROUNDS=n` runs a
// long one). The checker holds raft's promise (nothing acknowledged lost);
// SLUICE_NEMESIS_MODE runs the cluster in another replication mode, whose
// promise is weaker: there the checker reports what the mode lost.
// SLUICE_NEMESIS_MODE=shared runs shared-storage mode on the directory
// backend, a directory every broker sees that no fault touches (a durable
// NFS server); its promise is raft's.
// SLUICE_NEMESIS_FAULTS, a comma-separated list of the fault names above,
// restricts the faults to those, SLUICE_NEMESIS_VICTIMS (process names,
// meta-1, write-2, read-1...) the processes that kill, pause and the cuts
// pick from.
func TestClusterNemesis(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	rounds := 8
	if v := os.Getenv("SLUICE_NEMESIS_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_NEMESIS_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SLUICE_NEMESIS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_NEMESIS_SEED=%q: want a number", v)
		}
		seed = n
	}
	t.Logf("NEMESIS seed=%d rounds=%d (replay: SLUICE_NEMESIS_SEED=%d SLUICE_NEMESIS_ROUNDS=%d go test -run '^TestClusterNemesis$' ./cmd/sluice)", seed, rounds, seed, rounds)

	mode := "raft"
	if v := os.Getenv("SLUICE_NEMESIS_MODE"); v != "" {
		mode = v
	}
	n := &nemesis{t: t, seed: seed, rounds: rounds, mode: mode, rng: rand.New(rand.NewPCG(seed, 0x5eed)), faults: map[string]int{}, lin: newNemLin(), topics: newNemTopics(),
		kinds: []string{"kill", "kill", "pause", "reassign-crash", "meta-change"}}
	n.run(rounds)
}

const (
	nemTopic     = "nem"     // replication factor 3: the workload's main topic
	nemMoveTopic = "nemmove" // replication factor 2: its partitions are reassigned
	nemGroup     = "nemgroup"
	nemParts     = 4
	nemMoveParts = 2
	nemProducers = 2
	nemConsumers = 2
	// nemPause is longer than a broker's lease (the metastore's default,
	// 10 s): a paused broker's lease lapses, a paused meta leader is
	// replaced.
	nemPause = 11500 * time.Millisecond
	// nemMetaKillCommitBound bounds how long after a killed meta node
	// restarted the group takes to commit on every partition again (a
	// formed group; measured: under 0.2 s, and up to 14.6 s before
	// offset writes stopped holding the group lock and metastore
	// followers stopped proposing towards a dead leader).
	nemMetaKillCommitBound = 10 * time.Second
)

type nemTP struct {
	topic string
	part  int32
}

func (tp nemTP) String() string { return fmt.Sprintf("%s/%d", tp.topic, tp.part) }

// nemRecord is one record a producer had acknowledged (or a consumer
// read): its offset and value ("p<producer> s<seq> r<round>").
type nemRecord struct {
	offset int64
	value  string
}

type nemesis struct {
	t      *testing.T
	seed   uint64
	rounds int
	mode   string // the cluster's replication.mode
	rng    *rand.Rand
	round  atomic.Int64
	ctx    context.Context

	lab   *netLab // nil: loopback, no network faults
	c     *testCluster
	procs map[string]*proc
	names []string // every process name, in a fixed order
	adm   *kadm.Client
	radm  *kadm.Client // on the read listeners

	faults map[string]int
	kinds  []string // the faults a round picks from (a fault listed twice is picked twice as often)
	// disks: each process's own file system (power, diskfull, slowdisk);
	// nil when this machine cannot make them.
	disks map[string]*nemDisk
	// clocks: each process's wall clock offset (clockjump); nil when the
	// fault is not in the mix.
	clocks map[string]nemClock

	mu        sync.Mutex
	acked     map[nemTP][]nemRecord
	failed    int // produce callbacks with an error (not acknowledged)
	firstErrs []string
	consumed  map[nemTP]map[int64]string
	consumes  int
	// commitAcked: the highest offset per partition whose commit the
	// group's coordinator acknowledged; commitSeen: the highest offset
	// per partition a later OffsetFetch returned.
	commitAcked, commitSeen map[nemTP]int64
	// firstAck, firstCommit: when, since healed, a record of each
	// partition was first acknowledged, and the group's commit of it
	// first rose.
	firstAck, firstCommit map[nemTP]time.Time
	// commitErrs counts the group's failed commits this round, by error.
	commitErrs map[string]int
	// commitCalls and commitRequests: the consumers' commits and the
	// OffsetCommit requests they took (franz-go's retries included).
	commitCalls, commitRequests atomic.Int64
	tps                         []nemTP
	// lin: the group's commits and fetches, checked for linearizability
	// at the end (nemesis_lin_test.go).
	lin *nemLin
	// topics: the scratch topics' creations, deletions and growths,
	// checked for linearizability at the end (nemesis_topic_test.go).
	topics *nemTopics
}

// wants says whether SLUICE_NEMESIS_FAULTS (unset: every fault) allows
// any of faults.
func (n *nemesis) wants(faults ...string) bool {
	only := os.Getenv("SLUICE_NEMESIS_FAULTS")
	if only == "" {
		return true
	}
	for _, f := range faults {
		if slices.Contains(strings.Split(only, ","), f) {
			return true
		}
	}
	return false
}

// failf reports a failure with what replays it.
func (n *nemesis) failf(format string, args ...any) {
	n.t.Helper()
	n.t.Errorf("seed=%d %s: %s (replay: SLUICE_NEMESIS_SEED=%d)", n.seed, n.when(), fmt.Sprintf(format, args...), n.seed)
}

func (n *nemesis) fatalf(format string, args ...any) {
	n.t.Helper()
	n.t.Fatalf("seed=%d %s: %s (replay: SLUICE_NEMESIS_SEED=%d)", n.seed, n.when(), fmt.Sprintf(format, args...), n.seed)
}

// when names the round under way, or the final check.
func (n *nemesis) when() string {
	if r := n.round.Load(); r <= int64(n.rounds) {
		return fmt.Sprintf("round=%d", r)
	}
	return "final check"
}

func (n *nemesis) run(rounds int) {
	t := n.t
	names := []string{"meta-1", "meta-2", "meta-3", "write-1", "write-2", "write-3", "read-1", "read-2"}
	layout := clusterLayout{}
	if os.Geteuid() == 0 {
		n.lab = newNetLab(t)
		for _, name := range names {
			n.lab.host(t, name)
		}
		ports := map[string]string{"meta": "9391", "kafka": "9092", "admin": "9644", "replica": "9491"}
		layout.addr = func(name, socket string) string { return net.JoinHostPort(n.lab.hosts[name].addr, ports[socket]) }
		layout.prefix = n.lab.exec
		// meta-change calls the meta nodes' admin API, which on a
		// non-loopback address takes mutating calls only with a token.
		layout.metaExtra = func(int) string { return "admin.http.token: " + nemAdminToken + "\n" }
		n.kinds = append(n.kinds, "isolate", "unplug", "oneway-out", "oneway-in")
		// Each process on a file system of its own, for the disk faults.
		if n.wants("power", "diskfull", "slowdisk") {
			dir := t.TempDir()
			n.disks = map[string]*nemDisk{}
			for _, name := range names {
				d, why := newNemDisk(t, dir, name)
				if d == nil {
					noteMissing(t, "no file system per process ("+why+"), so the nemesis runs without disk faults")
					n.disks = nil
					break
				}
				n.disks[name] = d
			}
		}
		if n.disks != nil {
			n.kinds = append(n.kinds, "power", "power", "diskfull", "slowdisk")
			layout.dataDir = func(name string) string { return n.disks[name].dataDir() }
			layout.prefix = func(name string) []string { return n.disks[name].prefix(n.lab.exec(name)) }
		}
	} else {
		noteMissing(t, "not root: no network namespaces, so the nemesis runs without partitions or disk faults")
	}
	// Clock jumps need a second build of the binary (a minute or two), so
	// they are in the mix only when asked for.
	if os.Getenv("SLUICE_NEMESIS_CLOCK") != "" || slices.Contains(strings.Split(os.Getenv("SLUICE_NEMESIS_FAULTS"), ","), "clockjump") {
		dir := t.TempDir()
		bin, err := buildClockBinary(t, dir)
		if err != nil {
			t.Fatalf("clockjump: %v", err)
		}
		layout.bin = bin
		n.clocks = map[string]nemClock{}
		inner := layout.prefix
		layout.prefix = func(name string) []string {
			c := nemClock{path: filepath.Join(dir, name+".clock")}
			n.clocks[name] = c
			var pre []string
			if inner != nil {
				pre = inner(name)
			}
			return append(pre, "env", "SLUICE_TEST_CLOCK_FILE="+c.path)
		}
		n.kinds = append(n.kinds, "clockjump")
	}
	if only := os.Getenv("SLUICE_NEMESIS_FAULTS"); only != "" {
		n.kinds = slices.DeleteFunc(n.kinds, func(k string) bool { return !slices.Contains(strings.Split(only, ","), k) })
		if len(n.kinds) == 0 {
			n.fatalf("SLUICE_NEMESIS_FAULTS=%s names no fault this run can make", only)
		}
	}
	if n.mode == "shared" {
		// Shared-storage mode on the directory backend: one directory
		// every broker process sees (each process's mount namespace
		// inherits it), outside every node's data directory and outside
		// the file systems a power cut shuts down. It stands for a
		// durable NFS server (a sync export): what a broker wrote there
		// survives the broker's own power cut, diskfull and slowdisk
		// stay on the broker's own data directory, and no fault touches
		// the storage itself.
		layout.extra += "shared.storage.type: dir\nshared.storage.dir: " + t.TempDir() + "\nshared.upload.linger.ms: 20\n"
	}
	n.c = startTestClusterLayout(t, n.mode, 2, layout)
	n.procs = map[string]*proc{}
	for _, p := range n.c.all() {
		n.procs[p.name] = p
	}
	n.names = names
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n.ctx = ctx
	n.acked = map[nemTP][]nemRecord{}
	n.consumed = map[nemTP]map[int64]string{}
	n.commitAcked, n.commitSeen = map[nemTP]int64{}, map[nemTP]int64{}
	n.firstAck, n.firstCommit = map[nemTP]time.Time{}, map[nemTP]time.Time{}
	n.commitErrs = map[string]int{}

	// Short timeouts throughout: an unplugged broker never answers, and
	// a dial to it hangs until ARP gives up.
	common := []kgo.Opt{kgo.DialTimeout(time.Second), kgo.RequestTimeoutOverhead(2 * time.Second), kgo.MetadataMinAge(250 * time.Millisecond)}
	wcl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.c.writeAddrs...)}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer wcl.Close()
	n.adm = kadm.NewClient(wcl)
	rcl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.c.readAddrs...)}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	n.radm = kadm.NewClient(rcl)
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	for topic, shape := range map[string][2]int{nemTopic: {nemParts, 3}, nemMoveTopic: {nemMoveParts, 2}} {
		if _, err := n.adm.CreateTopic(cctx, int32(shape[0]), int16(shape[1]), nil, topic); err != nil {
			t.Fatalf("creating %s: %v", topic, err)
		}
	}
	ccancel()
	n.waitLed(60 * time.Second)
	var tps []nemTP
	for p := range int32(nemParts) {
		tps = append(tps, nemTP{nemTopic, p})
	}
	for p := range int32(nemMoveParts) {
		tps = append(tps, nemTP{nemMoveTopic, p})
	}
	n.tps = tps

	// Producers: idempotent, acks=all (kgo's defaults), one record per
	// partition every 40 ms each, sequence-numbered per partition.
	stopProd := make(chan struct{})
	var prodWG sync.WaitGroup
	var producers []*kgo.Client
	for id := range nemProducers {
		prod, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.c.writeAddrs...),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProduceRequestTimeout(3 * time.Second),
			kgo.MaxBufferedRecords(50000), kgo.ProducerBatchCompression(kgo.NoCompression())}, common...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		producers = append(producers, prod)
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			seq := map[nemTP]int{}
			for {
				select {
				case <-stopProd:
					return
				case <-time.After(40 * time.Millisecond):
				}
				for _, tp := range tps {
					seq[tp]++
					r := &kgo.Record{Topic: tp.topic, Partition: tp.part,
						Value: []byte(fmt.Sprintf("p%d s%08d r%d", id, seq[tp], n.round.Load()))}
					prod.TryProduce(ctx, r, n.onAck)
				}
			}
		}()
	}

	// Consumers: one group through the read brokers, committing what
	// each poll returned.
	stopCons := make(chan struct{})
	var consWG sync.WaitGroup
	for id := range nemConsumers {
		consWG.Add(1)
		go func() {
			defer consWG.Done()
			n.consume(id, stopCons, common)
		}()
	}

	// Topic operations on scratch topics, through the write brokers.
	stopTopics := make(chan struct{})
	topicsDone := make(chan struct{})
	go func() {
		defer close(topicsDone)
		n.topicWorkload(stopTopics, common)
	}()

	for r := 1; r <= rounds; r++ {
		n.round.Store(int64(r))
		n.oneRound(r)
		n.checkCommits()
		if t.Failed() {
			break
		}
	}
	n.round.Store(int64(rounds + 1)) // the final check
	t.Logf("NEMESIS faults: %v", n.faults)

	// Final: producers stop and flush, the group catches up, and the
	// whole log is read through the read brokers.
	close(stopTopics)
	<-topicsDone
	close(stopProd)
	prodWG.Wait()
	for i, prod := range producers {
		fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
		if err := prod.Flush(fctx); err != nil {
			n.failf("producer %d: records still unacknowledged 60 s after the last fault healed: %v", i, err)
		}
		fcancel()
	}
	end := n.endOffsets(tps)
	deadline := time.Now().Add(60 * time.Second)
	for {
		n.mu.Lock()
		behind := []string{}
		for _, tp := range tps {
			if n.commitAcked[tp] < end[tp] {
				behind = append(behind, fmt.Sprintf("%s committed %d of %d", tp, n.commitAcked[tp], end[tp]))
			}
		}
		n.mu.Unlock()
		if len(behind) == 0 {
			break
		}
		if time.Now().After(deadline) {
			n.failf("the group did not commit to the end within 60 s: %v", behind)
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	close(stopCons)
	consWG.Wait()
	n.mu.Lock()
	t.Logf("NEMESIS commits that failed after the last round: %v; %d commits sent %d OffsetCommit requests", n.commitErrs,
		n.commitCalls.Load(), n.commitRequests.Load())
	n.mu.Unlock()
	n.checkCommits()
	final := n.readAll(tps, end)
	n.check(tps, final)
	if n.mode == "shared" {
		n.logSharedCache()
	}
	if ops, err := n.lin.check(2 * time.Minute); err != nil {
		n.failf("%v", err)
	} else {
		t.Logf("NEMESIS committed offsets linearizable: %d commits and fetches checked", ops)
	}
	if ops, err := n.topics.check(2 * time.Minute); err != nil {
		n.failf("%v", err)
	} else {
		t.Logf("NEMESIS topic metadata linearizable: %d creations, deletions and growths checked (%s)", ops, n.topics.summary())
	}
}

// logSharedCache logs, per broker, what its chunk cache's disk tier did
// since the broker last started: a power cut leaves entries torn (they are
// written without fsync), which a read must find invalid and replace
// from shared storage; the checker above says whether any reached a
// client.
func (n *nemesis) logSharedCache() {
	var parts []string
	for _, p := range append(append([]*proc{}, n.c.writers...), n.c.readers...) {
		m := func(name string) int64 {
			return int64(metricValue(n.t, p.admin, "sluice_shared_cache_disk_"+name+"_total"))
		}
		parts = append(parts, fmt.Sprintf("%s hits %d invalid %d writes %d", p.name, m("hits"), m("invalid"), m("writes")))
	}
	n.t.Logf("NEMESIS shared chunk cache on disk, since each broker's last start: %s", strings.Join(parts, "; "))
}

// onAck records a producer's outcome for one record.
func (n *nemesis) onAck(r *kgo.Record, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		n.failed++
		if len(n.firstErrs) < 5 && !errors.Is(err, kgo.ErrMaxBuffered) {
			n.firstErrs = append(n.firstErrs, fmt.Sprintf("%s/%d %s: %v", r.Topic, r.Partition, r.Value, err))
		}
		return
	}
	tp := nemTP{r.Topic, r.Partition}
	n.acked[tp] = append(n.acked[tp], nemRecord{r.Offset, string(r.Value)})
	if _, ok := n.firstAck[tp]; !ok {
		n.firstAck[tp] = time.Now()
	}
}

// consume runs one group member until stop: every record it gets is
// recorded (partition, offset, value), offsets must rise within one
// assignment, and what each poll returned is committed.
func (n *nemesis) consume(id int, stop chan struct{}, common []kgo.Opt) {
	var lmu sync.Mutex
	last := map[nemTP]int64{} // the last offset read in the current assignment
	forget := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		lmu.Lock()
		defer lmu.Unlock()
		for topic, ps := range m {
			for _, p := range ps {
				delete(last, nemTP{topic, p})
			}
		}
	}
	attempts := &commitAttempts{}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.c.readAddrs...), kgo.ConsumerGroup(nemGroup),
		kgo.ConsumeTopics(nemTopic, nemMoveTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(300 * time.Millisecond),
		kgo.SessionTimeout(10 * time.Second), kgo.HeartbeatInterval(time.Second), kgo.WithHooks(attempts),
		kgo.OnPartitionsAssigned(forget), kgo.OnPartitionsRevoked(forget), kgo.OnPartitionsLost(forget)}, common...)...)
	if err != nil {
		n.t.Error(err)
		return
	}
	defer cl.Close()
	defer func() { n.commitRequests.Add(attempts.n.Load()) }()
	for {
		select {
		case <-stop:
			return
		default:
		}
		pctx, pcancel := context.WithTimeout(n.ctx, 2*time.Second)
		fs := cl.PollRecords(pctx, 1000)
		pcancel()
		var regress []string
		lmu.Lock()
		n.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			tp := nemTP{r.Topic, r.Partition}
			if l, ok := last[tp]; ok && r.Offset <= l {
				regress = append(regress, fmt.Sprintf("%s offset %d after %d", tp, r.Offset, l))
			}
			last[tp] = r.Offset
			m := n.consumed[tp]
			if m == nil {
				m = map[int64]string{}
				n.consumed[tp] = m
			}
			if v, ok := m[r.Offset]; ok && v != string(r.Value) {
				regress = append(regress, fmt.Sprintf("%s offset %d read as %q and as %q", tp, r.Offset, v, r.Value))
			}
			m[r.Offset] = string(r.Value)
			n.consumes++
		})
		n.mu.Unlock()
		lmu.Unlock()
		for _, s := range regress {
			n.failf("consumer %d: %s", id, s)
		}
		unc := cl.UncommittedOffsets()
		if len(unc) == 0 {
			continue
		}
		cctx, ccancel := context.WithTimeout(n.ctx, 5*time.Second)
		call := n.lin.clock()
		sent := attempts.n.Load()
		n.commitCalls.Add(1)
		cl.CommitOffsetsSync(cctx, unc, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			tries := attempts.n.Load() - sent
			if err != nil || resp == nil {
				n.commitErrs[fmt.Sprint(err)]++
				if req != nil {
					for _, rt := range req.Topics {
						for _, rp := range rt.Partitions {
							n.lin.commit(id, nemTP{rt.Topic, rp.Partition}, rp.Offset, call, fmt.Errorf("commit: %v", err))
						}
					}
				}
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					tp := nemTP{rt.Topic, rp.Partition}
					if o, ok := unc[rt.Topic][rp.Partition]; ok {
						n.lin.commit(id, tp, o.Offset, call, refusedAfterRetry(tries, kerr.ErrorForCode(rp.ErrorCode)))
					}
					if rp.ErrorCode != 0 {
						key := kerr.ErrorForCode(rp.ErrorCode).Error()
						if tries > 1 {
							key += " (at a retry)"
						}
						n.commitErrs[key]++
						continue
					}
					if o := unc[rt.Topic][rp.Partition].Offset; o > n.commitAcked[tp] {
						n.commitAcked[tp] = o
						if _, ok := n.firstCommit[tp]; !ok {
							n.firstCommit[tp] = time.Now()
						}
					}
				}
			}
		})
		ccancel()
	}
}

// checkCommits reads the group's committed offsets through the read
// brokers: none may be below an acknowledged commit made before the read,
// nor below what an earlier read returned.
func (n *nemesis) checkCommits() {
	n.mu.Lock()
	floor := maps2(n.commitAcked)
	n.mu.Unlock()
	var resp kadm.OffsetResponses
	var err error
	var call int64
	for range 10 {
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		call = n.lin.clock()
		resp, err = n.radm.FetchOffsets(ctx, nemGroup)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		n.t.Logf("seed=%d %s: fetching the group's offsets: %v (not checked this time)", n.seed, n.when(), err)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			return
		}
		tp := nemTP{o.Topic, o.Partition}
		n.lin.fetch(nemLinFetcher, tp, o.At, call)
		if o.At < floor[tp] {
			n.failf("group %s: %s committed offset %d, below the commit of %d acknowledged earlier", nemGroup, tp, o.At, floor[tp])
		}
		if o.At < n.commitSeen[tp] {
			n.failf("group %s: %s committed offset went back from %d to %d", nemGroup, tp, n.commitSeen[tp], o.At)
		}
		n.commitSeen[tp] = max(n.commitSeen[tp], o.At)
	})
}

func maps2(m map[nemTP]int64) map[nemTP]int64 {
	out := make(map[nemTP]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// oneRound applies one fault the PRNG picks, heals it, and waits for the
// cluster to serve again.
func (n *nemesis) oneRound(r int) {
	kind := n.kinds[n.rng.IntN(len(n.kinds))]
	victims := n.names
	if kind == "diskfull" || kind == "slowdisk" {
		victims = []string{"write-1", "write-2", "write-3"}
	}
	if only := os.Getenv("SLUICE_NEMESIS_VICTIMS"); only != "" {
		victims = slices.DeleteFunc(slices.Clone(victims), func(v string) bool { return !slices.Contains(strings.Split(only, ","), v) })
		if len(victims) == 0 {
			n.fatalf("SLUICE_NEMESIS_VICTIMS=%s names no process (meta-1..3, write-1..3, read-1..2)", only)
		}
	}
	victim := victims[n.rng.IntN(len(victims))]
	p := n.procs[victim]
	// formed: the group had committed on every partition before the
	// fault, so its first rebalance is not part of the recovery time.
	n.mu.Lock()
	formed := true
	for _, tp := range n.tps {
		if _, ok := n.commitAcked[tp]; !ok {
			formed = false
		}
	}
	n.mu.Unlock()
	hold := 5*time.Second + time.Duration(n.rng.IntN(4000))*time.Millisecond
	start := time.Now()
	detail := victim
	switch kind {
	case "kill":
		hold = 500*time.Millisecond + time.Duration(n.rng.IntN(2000))*time.Millisecond
		p.kill()
		time.Sleep(hold)
		p.start(n.t)
	case "pause":
		hold = nemPause
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			n.fatalf("SIGSTOP %s: %v", victim, err)
		}
		time.Sleep(hold)
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			n.fatalf("SIGCONT %s: %v", victim, err)
		}
	case "isolate":
		n.lab.isolate(n.t, victim)
		time.Sleep(hold)
		n.lab.heal(n.t, victim)
	case "unplug":
		n.lab.unplug(n.t, victim)
		time.Sleep(hold)
		n.lab.plug(n.t, victim)
	case "oneway-out", "oneway-in":
		n.oneWay(victim, kind == "oneway-out", true)
		time.Sleep(hold)
		n.oneWay(victim, kind == "oneway-out", false)
	case "power":
		hold = 500*time.Millisecond + time.Duration(n.rng.IntN(2000))*time.Millisecond
		detail += ": " + n.disks[victim].powerCut(n.t, p)
		time.Sleep(hold)
		p.start(n.t)
	case "diskfull":
		ballast, left := n.disks[victim].fill(n.t, p)
		detail += fmt.Sprintf(": %d bytes left free", left)
		time.Sleep(hold)
		n.disks[victim].free(n.t, ballast)
	case "slowdisk":
		n.disks[victim].throttle(n.t, true)
		time.Sleep(hold / 2)
		detail += fmt.Sprintf(": a 4 KiB fsync took %v", n.disks[victim].fsyncTime(n.t, p).Round(time.Millisecond))
		time.Sleep(hold - hold/2)
		n.disks[victim].throttle(n.t, false)
	case "clockjump":
		// A step of 1 min to 2 h either way, then back (as an NTP step
		// would correct it).
		off := time.Minute + time.Duration(n.rng.Int64N(int64(119*time.Minute)))
		if n.rng.IntN(2) == 0 {
			off = -off
		}
		off = off.Round(time.Second)
		n.clocks[victim].jump(n.t, off)
		sign := "+"
		if off < 0 {
			sign = ""
		}
		detail += ": wall clock " + sign + off.String()
		time.Sleep(hold)
		n.clocks[victim].jump(n.t, 0)
	case "reassign-crash":
		detail, hold = n.reassignCrash()
	case "meta-change":
		detail, hold = n.metaChange(r)
	}
	n.faults[kind]++
	// The checkers' clock (their operation times) dates each fault.
	n.t.Logf("NEMESIS seed=%d round %d: %s %s (held %v, healed at %v)", n.seed, r, kind, detail, hold.Round(time.Millisecond),
		time.Duration(n.lin.clock()).Round(time.Millisecond))
	healed := time.Now()
	n.mu.Lock()
	clear(n.firstAck)
	clear(n.firstCommit)
	n.mu.Unlock()
	writes, group := n.waitServing(healed)
	n.mu.Lock()
	errs := n.commitErrs
	n.commitErrs = map[string]int{}
	n.mu.Unlock()
	n.t.Logf("NEMESIS round %d: every partition took writes again %v after the fault healed, the group committed on every partition again after %v (fault began %v before healing; failed commits this round: %v)",
		r, writes.Round(time.Millisecond), group.Round(time.Millisecond), healed.Sub(start).Round(time.Millisecond), errs)
	if kind == "kill" && strings.HasPrefix(victim, "meta-") && formed && group > nemMetaKillCommitBound {
		// A new meta leader is elected within about a second; the
		// group's commits must not wait for the metastore client's
		// timeout or a lost proposal (docs/reliability.md).
		n.failf("after %s was killed the group committed on every partition again only %v after it restarted (bound %v)",
			victim, group.Round(time.Millisecond), nemMetaKillCommitBound)
	}
	time.Sleep(time.Second) // some traffic between faults
}

// oneWay drops (on) or lets through again (off) what name sends to every
// other process (out) or what they send to name (!out), with neighbour
// entries that send to nobody in the sender's namespace. TCP over such a
// link fails both ways, but the peers see different things: one side's
// packets arrive, the other's do not.
func (n *nemesis) oneWay(name string, out, on bool) {
	v := n.lab.hosts[name]
	for _, other := range n.lab.order {
		if other == name {
			continue
		}
		o := n.lab.hosts[other]
		from, to := v, o
		if !out {
			from, to = o, v
		}
		if on {
			n.lab.must(n.t, "-n", from.ns, "neigh", "replace", to.addr, "lladdr", bogusMAC, "nud", "permanent", "dev", "eth0")
		} else {
			n.lab.must(n.t, "-n", from.ns, "neigh", "del", to.addr, "dev", "eth0")
		}
	}
}

// reassignCrash moves a partition of the replication-factor-2 topic onto
// the write broker that does not hold it, kills one of the three brokers
// involved mid-move and restarts it; the move must finish within 60 s.
func (n *nemesis) reassignCrash() (string, time.Duration) {
	part := int32(n.rng.IntN(nemMoveParts))
	delay := time.Duration(n.rng.IntN(1500)) * time.Millisecond
	pick, order := n.rng.IntN(4), n.rng.IntN(2)
	var cur []int32
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(n.ctx, 3*time.Second)
		md, err := n.adm.Metadata(ctx, nemMoveTopic)
		cancel()
		if err == nil {
			if p, ok := md.Topics[nemMoveTopic].Partitions[part]; ok && p.Err == nil {
				cur = nil
				for _, id := range p.Replicas {
					if id >= 1 && id <= 3 {
						cur = append(cur, id)
					}
				}
				if len(cur) == 2 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			n.fatalf("%s/%d: no two write replicas in the metadata within 30 s (%v, %v)", nemMoveTopic, part, cur, err)
		}
	}
	var newcomer int32
	for id := int32(1); id <= 3; id++ {
		if !slices.Contains(cur, id) {
			newcomer = id
		}
	}
	target := []int32{cur[1], newcomer}
	if order == 1 {
		target = []int32{newcomer, cur[1]}
	}
	// The victim: a broker of the move, or a meta node (the metastore
	// records the move's state).
	involved := []*proc{n.c.writers[cur[0]-1], n.c.writers[cur[1]-1], n.c.writers[newcomer-1], n.c.meta[n.rng.IntN(3)]}
	w := involved[pick]
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(nemMoveTopic, part, target)
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	res, err := n.adm.AlterPartitionAssignments(ctx, req)
	cancel()
	if err == nil {
		if r := res[nemMoveTopic][part]; r.Err != nil {
			err = fmt.Errorf("%v %s", r.Err, r.ErrMessage)
		}
	}
	if err != nil {
		n.failf("reassigning %s/%d %v -> %v: %v", nemMoveTopic, part, cur, target, err)
		return fmt.Sprintf("%s/%d %v -> %v refused", nemMoveTopic, part, cur, target), 0
	}
	time.Sleep(delay)
	w.kill()
	time.Sleep(time.Second)
	w.start(n.t)
	n.waitReady(w)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(n.ctx, 3*time.Second)
		lr, err := n.adm.ListPartitionReassignments(ctx, kadm.TopicsSet{nemMoveTopic: {part: {}}})
		md, merr := n.adm.Metadata(ctx, nemMoveTopic)
		cancel()
		if err == nil && merr == nil {
			_, moving := lr[nemMoveTopic][part]
			var got []int32
			for _, id := range md.Topics[nemMoveTopic].Partitions[part].Replicas {
				if id >= 1 && id <= 3 {
					got = append(got, id)
				}
			}
			if !moving && sameIDs(got, target) {
				break
			}
		}
		if time.Now().After(deadline) {
			n.failf("%s/%d: reassignment %v -> %v not finished 60 s after %s was killed %v into it", nemMoveTopic, part, cur, target, w.name, delay)
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Sprintf("%s/%d %v -> %v, killed %s %v into it", nemMoveTopic, part, cur, target, w.name, delay), delay
}

func (n *nemesis) waitReady(p *proc) {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + p.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			n.fatalf("%s not ready within 60 s after the fault healed", p.name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitServing waits until every process is ready, every partition of
// both topics has a leader, has acknowledged a write since healed and has
// had the group's commit rise since healed; it returns how long after
// healed the last partition took a write, and the last commit rose.
func (n *nemesis) waitServing(healed time.Time) (writes, group time.Duration) {
	n.t.Helper()
	for _, name := range n.names {
		n.waitReady(n.procs[name])
	}
	n.waitLed(60 * time.Second)
	deadline := healed.Add(90 * time.Second)
	for {
		var stuck []string
		n.mu.Lock()
		writes, group = 0, 0
		for _, tp := range n.tps {
			if a, ok := n.firstAck[tp]; ok {
				writes = max(writes, a.Sub(healed))
			} else {
				stuck = append(stuck, tp.String()+" no write acknowledged")
			}
			if c, ok := n.firstCommit[tp]; ok {
				group = max(group, c.Sub(healed))
			} else {
				stuck = append(stuck, tp.String()+" no group commit")
			}
		}
		n.mu.Unlock()
		if len(stuck) == 0 {
			return writes, group
		}
		if time.Now().After(deadline) {
			n.stuckState()
			n.fatalf("90 s after the fault healed: %v", stuck)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stuckState logs, for a liveness failure, what the test knows of each
// partition (the highest offset acknowledged, read by the group and
// committed) beside what the write and read views answer (end offsets,
// leaders) and the group's assignment, so the kept process logs can be
// read against it.
func (n *nemesis) stuckState() {
	n.mu.Lock()
	for _, tp := range n.tps {
		ack, read := int64(-1), int64(-1)
		if a := n.acked[tp]; len(a) > 0 {
			ack = a[len(a)-1].offset
		}
		for o := range n.consumed[tp] {
			read = max(read, o)
		}
		n.t.Logf("stuck state %s: last acknowledged %d, highest read %d, highest commit acknowledged %d", tp, ack, read, n.commitAcked[tp])
	}
	n.t.Logf("stuck state: failed commits this round: %v", n.commitErrs)
	n.mu.Unlock()
	for _, v := range []struct {
		name string
		adm  *kadm.Client
	}{{"write", n.adm}, {"read", n.radm}} {
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		lo, err := v.adm.ListEndOffsets(ctx, nemTopic, nemMoveTopic)
		md, merr := v.adm.Metadata(ctx, nemTopic, nemMoveTopic)
		cancel()
		n.t.Logf("stuck state, %s view: end offsets %v (err %v)", v.name, lo, err)
		if merr == nil {
			for _, topic := range []string{nemTopic, nemMoveTopic} {
				for _, p := range md.Topics[topic].Partitions.Sorted() {
					n.t.Logf("stuck state, %s view: %s/%d leader %d epoch %d replicas %v isr %v err %v", v.name, topic, p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.Err)
				}
			}
		} else {
			n.t.Logf("stuck state, %s view: metadata: %v", v.name, merr)
		}
	}
	defer n.dumpStacks()
	ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	dg, err := n.radm.DescribeGroups(ctx, nemGroup)
	cancel()
	if err != nil {
		n.t.Logf("stuck state: describing the group: %v", err)
		return
	}
	for _, g := range dg.Sorted() {
		n.t.Logf("stuck state: group %s coordinator %d state %s err %v", g.Group, g.Coordinator.NodeID, g.State, g.Err)
		for _, m := range g.Members {
			a, _ := m.Assigned.AsConsumer()
			var tps []string
			if a != nil {
				for _, t := range a.Topics {
					tps = append(tps, fmt.Sprintf("%s%v", t.Topic, t.Partitions))
				}
			}
			n.t.Logf("stuck state: member %s (%s) assigned %v", m.MemberID, m.ClientID, tps)
		}
	}
}

// dumpStacks, for a liveness failure, logs each process's counts of raft
// messages it refused (a replica refusing its leader logs only the first
// refusal every 10 s) and makes it write every goroutine's stack to its
// log (SIGQUIT, which ends it), so the kept logs show where a stuck
// partition waits.
func (n *nemesis) dumpStacks() {
	for _, p := range n.c.all() {
		if resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.admin + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "sluice_raft_refused_total") && !strings.HasSuffix(line, " 0") {
					n.t.Logf("stuck state, %s: %s", p.name, line)
				}
			}
		}
		if p.cmd != nil && p.cmd.Process != nil {
			p.cmd.Process.Signal(syscall.SIGQUIT)
		}
	}
	time.Sleep(2 * time.Second)
}

func (n *nemesis) waitLed(within time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		ctx, cancel := context.WithTimeout(n.ctx, 3*time.Second)
		md, err := n.adm.Metadata(ctx, nemTopic, nemMoveTopic)
		cancel()
		if err == nil {
			led := 0
			last = ""
			for _, topic := range []string{nemTopic, nemMoveTopic} {
				for _, p := range md.Topics[topic].Partitions {
					if p.Err == nil && p.Leader >= 1 && p.Leader <= 3 {
						led++
					} else {
						last += fmt.Sprintf(" %s/%d leader %d err %v", topic, p.Partition, p.Leader, p.Err)
					}
				}
			}
			if led == nemParts+nemMoveParts {
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			n.fatalf("not every partition led within %v after the fault healed:%s", within, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (n *nemesis) endOffsets(tps []nemTP) map[nemTP]int64 {
	var lo kadm.ListedOffsets
	var err error
	for range 10 {
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		lo, err = n.adm.ListEndOffsets(ctx, nemTopic, nemMoveTopic)
		cancel()
		if err == nil {
			err = lo.Error()
		}
		if err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		n.fatalf("listing end offsets: %v", err)
	}
	end := map[nemTP]int64{}
	for _, tp := range tps {
		o, ok := lo.Lookup(tp.topic, tp.part)
		if !ok {
			n.fatalf("no end offset for %s", tp)
		}
		end[tp] = o.Offset
	}
	return end
}

// readAll reads every partition from its start to end through the read
// brokers.
func (n *nemesis) readAll(tps []nemTP, end map[nemTP]int64) map[nemTP]map[int64]string {
	assign := map[string]map[int32]kgo.Offset{}
	for _, tp := range tps {
		if assign[tp.topic] == nil {
			assign[tp.topic] = map[int32]kgo.Offset{}
		}
		assign[tp.topic][tp.part] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.c.readAddrs...), kgo.ConsumePartitions(assign), kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		n.t.Fatal(err)
	}
	defer cl.Close()
	final := map[nemTP]map[int64]string{}
	next := map[nemTP]int64{}
	for _, tp := range tps {
		final[tp] = map[int64]string{}
	}
	done := func() bool {
		for _, tp := range tps {
			if next[tp] < end[tp] {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(90 * time.Second)
	for !done() && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
		fs := cl.PollRecords(ctx, 5000)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			tp := nemTP{r.Topic, r.Partition}
			if r.Offset < next[tp] {
				n.failf("final read: %s offset %d after %d", tp, r.Offset, next[tp]-1)
			}
			final[tp][r.Offset] = string(r.Value)
			next[tp] = r.Offset + 1
		})
	}
	if !done() {
		for _, tp := range tps {
			if next[tp] < end[tp] {
				n.failf("final read through the read brokers: %s reached offset %d of %d within 90 s", tp, next[tp], end[tp])
			}
		}
	}
	return final
}

// check compares what was acknowledged and consumed with the final log.
func (n *nemesis) check(tps []nemTP, final map[nemTP]map[int64]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	const show = 10
	problems := 0
	kinds := map[string]int{} // problems per kind
	report := func(format string, args ...any) {
		problems++
		kind, _, _ := strings.Cut(format, ":")
		kinds[kind]++
		if kinds[kind] <= show {
			n.failf(format, args...)
		}
	}
	ackedTotal, finalTotal := 0, 0
	for _, tp := range tps {
		log := final[tp]
		finalTotal += len(log)
		// Acknowledged: present at its offset.
		for _, a := range n.acked[tp] {
			ackedTotal++
			if v, ok := log[a.offset]; !ok {
				report("LOST: %s %q acknowledged at offset %d is not in the log (round %s)", tp, a.value, a.offset, roundOf(a.value))
			} else if v != a.value {
				report("LOST: %s %q acknowledged at offset %d, the log holds %q there (round %s)", tp, a.value, a.offset, v, roundOf(a.value))
			}
		}
		// The log: no value twice, each producer's sequence rising.
		offs := make([]int64, 0, len(log))
		for o := range log {
			offs = append(offs, o)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		where := map[string]int64{}
		lastSeq := map[string]int{}
		for _, o := range offs {
			v := log[o]
			if prev, ok := where[v]; ok {
				report("DUPLICATE: %s %q at offsets %d and %d (round %s)", tp, v, prev, o, roundOf(v))
			}
			where[v] = o
			var prod, seq, rnd int
			if _, err := fmt.Sscanf(v, "p%d s%d r%d", &prod, &seq, &rnd); err != nil {
				report("UNKNOWN VALUE: %s offset %d holds %q, which no producer wrote", tp, o, v)
				continue
			}
			key := strconv.Itoa(prod)
			if s, ok := lastSeq[key]; ok && seq <= s {
				report("REORDERED: %s producer %d's seq %d at offset %d after seq %d (round %d)", tp, prod, seq, o, s, rnd)
			}
			lastSeq[key] = seq
		}
		// Consumed: never lost later, at the same offset.
		for o, v := range n.consumed[tp] {
			if lv, ok := log[o]; !ok || lv != v {
				report("READ THEN LOST: a consumer read %s offset %d = %q through a read broker; the log holds %q there (round %s)", tp, o, v, lv, roundOf(v))
			}
		}
		// Every acknowledged record delivered to the group.
		for _, a := range n.acked[tp] {
			if _, ok := n.consumed[tp][a.offset]; !ok {
				report("NOT DELIVERED: %s %q acknowledged at offset %d never reached the group (round %s)", tp, a.value, a.offset, roundOf(a.value))
			}
		}
	}
	if problems > 0 {
		n.failf("%d problems in all (at most %d of each kind shown): %v", problems, show, kinds)
	}
	n.t.Logf("NEMESIS seed=%d result: %d rounds, faults %v; %d records acknowledged, %d produce attempts failed (first: %v); %d records in the final log; %d records consumed by the group (%d distinct); %d problems",
		n.seed, n.round.Load()-1, n.faults, ackedTotal, n.failed, n.firstErrs, finalTotal, n.consumes, countConsumed(n.consumed), problems)
}

func countConsumed(m map[nemTP]map[int64]string) int {
	c := 0
	for _, x := range m {
		c += len(x)
	}
	return c
}

// roundOf is the round a record value was produced in.
func roundOf(v string) string {
	if i := strings.LastIndex(v, " r"); i >= 0 {
		return v[i+2:]
	}
	return "?"
}
