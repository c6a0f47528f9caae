package main

// `make bench-modes` (runner -modes): the replication modes raft, semi-sync
// and async side by side on the split cluster of -isolation (3 metastore, 3
// write and 2 read brokers, startIsoClusterWith), a fresh cluster per mode
// and round, the broker default replication.mode set to the mode. Rounds
// rotate the order of the modes (round 1: raft, semi-sync, async; round 2:
// semi-sync, async, raft; ...), so that a drift in the machine's load does
// not land on one mode.
//
// Per cluster, on topics of 6 partitions with replication factor 3:
//
//  1. throughput: the generator (sluice-bench) writes a fixed count of 1 KiB
//     records with 4 idempotent acks=all producers: records/s and ack p50/p99;
//  2. ack and end-to-end latency and read staleness: the generator at a
//     fixed rate, its consumer seeded on the mixed listeners and so sent to
//     a read broker (preferred read replica); meanwhile every 100 ms every
//     broker's high watermark of each partition is asked for at once
//     (ListOffsets sent to that broker), each read broker's compared with
//     the leader's, in records and in time (type staleness): p99 and max;
//  3. one write broker killed: an idempotent acks=all load (the runner's own
//     producer, every acknowledged record remembered), kill -9 of partition
//     0's leader, the load goes on for -modes-outage: whether the partitions
//     it led acknowledge a record sent after the kill, and how long after
//     it; then the broker is started again and every partition read from
//     the start: acknowledged records missing are lost; the restarted
//     broker's sluice_truncated_records_total;
//  4. two write brokers killed: the same load on a new topic, kill -9 of two
//     of the three write brokers at once: which partitions take writes
//     again within -modes-outage and after how long.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const modesSection = "modes"

const modesPartitions = 6

// modeRun is everything measured on one cluster.
type modeRun struct {
	Mode  string `json:"mode"`
	Round int    `json:"round"`
	Load  string `json:"load_avg"` // at the cluster's start
	Err   string `json:"error,omitempty"`

	Tput     genResult `json:"throughput"`
	Rate     genResult `json:"rate_run"`
	ReadFrac float64   `json:"read_broker_fetch_share"` // of the rate run's fetched bytes, served by read brokers

	StaleSamples int     `json:"staleness_samples"`
	StaleRecP99  float64 `json:"staleness_records_p99"`
	StaleMsP99   float64 `json:"staleness_ms_p99"`
	StaleRecMax  float64 `json:"staleness_records_max"`
	StaleMsMax   float64 `json:"staleness_ms_max"`

	One outage `json:"one_killed"`
	Two outage `json:"two_killed"`

	Acked     int     `json:"kill_acked"`     // records acknowledged in the one-kill load
	Lost      int     `json:"kill_lost"`      // of those, missing after the restart
	ReadAll   bool    `json:"kill_read_all"`  // every partition read to its end offset
	Truncated float64 `json:"kill_truncated"` // sluice_truncated_records_total of the restarted broker
	LagAtKill float64 `json:"kill_write_lag"` // write replicas' lag (records) behind the victim just before the kill
}

// outage is what producers saw after write brokers were killed.
type outage struct {
	Killed   []string `json:"killed"`
	Affected int      `json:"affected"` // partitions the killed brokers led
	Resumed  int      `json:"resumed"`  // of those, taking acknowledged writes again within the window
	Others   int      `json:"others_ok"`
	OthersN  int      `json:"others"`
	MaxWaitS float64  `json:"max_wait_s"` // longest time from the kill to an affected partition's first ack of a record sent after it
	WindowS  float64  `json:"window_s"`
	Acked    int      `json:"acked"`
	Errors   int64    `json:"errors"`
}

func modesList(s string) ([]string, error) {
	var m []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "raft", "semi-sync", "async", "shared":
			m = append(m, f)
		case "":
		default:
			return nil, fmt.Errorf("bad -modes-list entry %q (raft, semi-sync, async, shared)", f)
		}
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("empty -modes-list")
	}
	return m, nil
}

func modes(o *opts) error {
	list, err := modesList(o.modesList)
	if err != nil {
		return err
	}
	if o.modesRounds < 1 {
		return fmt.Errorf("-modes-rounds must be at least 1")
	}
	var raw *os.File
	if o.rawOut != "" {
		if raw, err = os.Create(o.rawOut); err != nil {
			return err
		}
		defer raw.Close()
	}
	stopClusterOnSignal()
	started := time.Now()
	loadStart := loadavg()
	date := time.Now().UTC().Format("2006-01-02 15:04 UTC")
	var runs []modeRun
	for round := 1; round <= o.modesRounds; round++ {
		for _, mode := range modeOrder(list, round) {
			logf("modes round %d/%d: %s; load average %s", round, o.modesRounds, mode, loadavg())
			r := runMode(o, mode, round)
			if raw != nil {
				b, _ := json.Marshal(r)
				fmt.Fprintln(raw, string(b))
			}
			logf("  %s", summarizeMode(r))
			runs = append(runs, r)
		}
	}
	text := renderModes(o, list, runs, date, loadStart, loadavg(), time.Since(started))
	if err := replaceSection(o.out, modesSection, text); err != nil {
		return err
	}
	logf("section %s written into %s in %s", modesSection, o.out, time.Since(started).Round(time.Second))
	return nil
}

// modeOrder is the order of the modes in a round: rotated by one each
// round (round 1 as listed).
func modeOrder(list []string, round int) []string {
	out := make([]string, len(list))
	for i := range list {
		out[i] = list[(i+round-1)%len(list)]
	}
	return out
}

func summarizeMode(r modeRun) string {
	if r.Err != "" {
		return r.Mode + " failed: " + r.Err
	}
	return fmt.Sprintf("%s: %.0f rec/s ack p50 %.1f p99 %.1f ms; e2e p50 %.1f p99 %.1f ms (read brokers served %.0f%%); staleness p99 %.0f records %.0f ms; "+
		"1 killed: %d/%d resumed, within %.1f s; 2 killed: %d/%d resumed (others %d/%d), within %.1f s; lost %d of %d (read all %v), truncated %.0f, write lag at kill %.0f",
		r.Mode, r.Tput.Produce.RecordsPerS, r.Tput.Produce.Ack.P50, r.Tput.Produce.Ack.P99,
		r.Rate.Consume.E2E.P50, r.Rate.Consume.E2E.P99, 100*r.ReadFrac, r.StaleRecP99, r.StaleMsP99,
		r.One.Resumed, r.One.Affected, r.One.MaxWaitS, r.Two.Resumed, r.Two.Affected, r.Two.Others, r.Two.OthersN, r.Two.MaxWaitS,
		r.Lost, r.Acked, r.ReadAll, r.Truncated, r.LagAtKill)
}

func runMode(o *opts, mode string, round int) modeRun {
	r := modeRun{Mode: mode, Round: round, Load: loadavg()}
	session := fmt.Sprintf("broker.session.timeout.ms: %d\n", o.modesSession.Milliseconds())
	extra := "replication.mode: " + mode + "\n" + session
	if mode == "shared" {
		// Every broker on one shared directory (docs/shared-storage.md),
		// a stand-in for an NFS mount on this one machine.
		dir, err := os.MkdirTemp(o.tmp, "sluice-bench-shared-")
		if err != nil {
			r.Err = err.Error()
			return r
		}
		defer os.RemoveAll(dir)
		extra += "shared.storage.type: dir\nshared.storage.dir: " + dir + "\n"
	}
	c, err := startIsoClusterWith(o, "sluice", o.isoFsync, extra, session)
	setIsoCurrent(c)
	defer func() {
		setIsoCurrent(nil)
		if c != nil {
			c.stop()
		}
	}()
	if err != nil {
		r.Err = scrubErr(o, err)
		return r
	}
	if err := modeMeasure(o, c, mode, round, &r); err != nil {
		r.Err = scrubErr(o, err)
	}
	return r
}

var logsInRE = regexp.MustCompile(`\s*\(logs? in [^)]*\)`)

// scrubErr is err's text without this machine's directories, which the
// report must not carry (the cluster's directory is gone by then anyway).
func scrubErr(o *opts, err error) string {
	s := logsInRE.ReplaceAllString(err.Error(), "")
	return strings.ReplaceAll(s, o.tmp, "$TMPDIR")
}

func (c *isoCluster) node(name string) *isoNode {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// writeNode is the write broker of node id 1..3 (w1..w3).
func (c *isoCluster) writeNode(id int32) *isoNode { return c.node(fmt.Sprintf("w%d", id)) }

func modeMeasure(o *opts, c *isoCluster, mode string, round int, r *modeRun) error {
	parts := strconv.Itoa(modesPartitions)
	// 1. Throughput over a fixed count.
	args := []string{"-c", o.genCPU, o.genBin, "-brokers", c.seeds, "-topic", fmt.Sprintf("modes-tput-%d", round),
		"-partitions", parts, "-replication", "3", "-record-size", "1024", "-producers", "4", "-consumers", "0",
		"-records", strconv.FormatInt(o.modesRecords, 10), "-duration", "0", "-warmup", "0s", "-quiet", "-label", mode}
	out, _, err := c.runGen(o, args)
	if jerr := json.Unmarshal([]byte(lastLine(out)), &r.Tput); jerr != nil || err != nil {
		return fmt.Errorf("throughput run: %v %v: %s", err, jerr, lastLine(out))
	}
	// 2. Fixed rate: end-to-end latency through the read brokers, and
	// the read brokers' staleness as the leaders see it.
	topic := fmt.Sprintf("modes-rate-%d", round)
	args = []string{"-c", o.genCPU, o.genBin, "-brokers", c.seeds, "-topic", topic,
		"-partitions", parts, "-replication", "3", "-record-size", "1024", "-producers", "1", "-consumers", "1",
		"-rate", strconv.FormatFloat(o.modesRate, 'f', 0, 64),
		"-duration", o.duration.String(), "-warmup", o.warmup.String(), "-quiet", "-label", mode}
	st, err := newStaleness(c, topic)
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Leave the topic's creation and the warm-up out.
		select {
		case <-stop:
			return
		case <-time.After(o.warmup + time.Second):
		}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				st.sample()
			}
		}
	}()
	fetchedBefore := fetchedBytes(c, topic)
	out, _, err = c.runGen(o, args)
	close(stop)
	wg.Wait()
	if jerr := json.Unmarshal([]byte(lastLine(out)), &r.Rate); jerr != nil || err != nil {
		return fmt.Errorf("rate run: %v %v: %s", err, jerr, lastLine(out))
	}
	fetched := fetchedBytes(c, topic)
	var all, read float64
	for n, v := range fetched {
		d := v - fetchedBefore[n]
		all += d
		if strings.HasPrefix(n, "r") {
			read += d
		}
	}
	if all > 0 {
		r.ReadFrac = read / all
	}
	st.close()
	r.StaleSamples = len(st.recs)
	r.StaleRecP99, r.StaleMsP99 = percentile(st.recs, 0.99), percentile(st.ms, 0.99)
	r.StaleRecMax, r.StaleMsMax = percentile(st.recs, 1), percentile(st.ms, 1)

	// 3. One write broker killed: partition 0's leader.
	topic = fmt.Sprintf("modes-kill-%d", round)
	adm, cl, err := adminClient(c.seeds)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, modesPartitions, 3, nil, topic); err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	l, err := startLoad(c.seeds, topic, o.modesLoadRate)
	if err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	leaders, err := partitionLeaders(adm, topic)
	if err != nil {
		l.stop()
		return err
	}
	victim := leaders[0]
	vn := c.writeNode(victim)
	if vn == nil {
		l.stop()
		return fmt.Errorf("partition 0 of %s led by %d, not a write broker", topic, victim)
	}
	for _, s := range scrapeSamples(vn.admin) {
		if s.name == "sluice_partition_follower_lag_offsets" && s.labels["topic"] == topic {
			if id, _ := strconv.Atoi(s.labels["replica"]); id >= 1 && id <= 3 {
				r.LagAtKill = math.Max(r.LagAtKill, s.value)
			}
		}
	}
	kill9(vn)
	killed := time.Now() // once the process is gone (kill9 waits for it)
	logf("  killed %s (leader of partition 0 of %s)", vn.name, topic)
	time.Sleep(o.modesOutage)
	l.stop()
	r.One = l.outage(killed, leaders, map[int32]bool{victim: true}, o.modesOutage)
	r.One.Killed = []string{vn.name}
	// The victim returns; then everything acknowledged is read back.
	if err := c.start(vn); err != nil {
		return err
	}
	if err := waitReady(vn, 90*time.Second); err != nil {
		return fmt.Errorf("%s after its restart: %v", vn.name, err)
	}
	r.Acked, r.Lost, r.ReadAll = l.verify(c.seeds, topic, adm)
	r.Truncated = metric(scrape(vn.admin), "sluice_truncated_records_total")

	// 4. Two write brokers killed: partition 0's leader of a new topic
	// and the next write broker.
	topic = fmt.Sprintf("modes-two-%d", round)
	if _, err := adm.CreateTopic(ctx, modesPartitions, 3, nil, topic); err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	l2, err := startLoad(c.seeds, topic, o.modesLoadRate)
	if err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	leaders, err = partitionLeaders(adm, topic)
	if err != nil {
		l2.stop()
		return err
	}
	first := leaders[0]
	if first < 1 || first > 3 {
		first = 1
	}
	second := first%3 + 1
	kill9(c.writeNode(first))
	kill9(c.writeNode(second))
	// Once both are gone: a record sent between the two kills may still
	// be committed by the leader and the second.
	killed = time.Now()
	logf("  killed w%d and w%d", first, second)
	time.Sleep(o.modesOutage)
	l2.stop()
	r.Two = l2.outage(killed, leaders, map[int32]bool{first: true, second: true}, o.modesOutage)
	r.Two.Killed = []string{fmt.Sprintf("w%d", first), fmt.Sprintf("w%d", second)}
	return nil
}

func adminClient(seeds string) (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

func partitionLeaders(adm *kadm.Client, topic string) (map[int32]int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	leaders := map[int32]int32{}
	for _, p := range m.Topics[topic].Partitions {
		leaders[p.Partition] = p.Leader
	}
	if len(leaders) != modesPartitions {
		return nil, fmt.Errorf("%s: leaders %v", topic, leaders)
	}
	return leaders, nil
}

// ---------------------------------------------------------------- load

// load is an idempotent acks=all producer at a fixed rate over every
// partition in turn, remembering each acknowledged record.
type load struct {
	cl    *kgo.Client
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	acked map[string][2]int64   // value id -> partition, offset
	acks  map[int32][]sentAcked // per partition, each acknowledged record's send and ack
	errs  int64
	full  int64 // sends refused because the client's buffer was full
}

func startLoad(seeds, topic string, rate float64) (*load, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProduceRequestTimeout(5*time.Second),
		kgo.MaxBufferedRecords(4000),
		// kgo refreshes metadata at most every 5 s by default; measure the
		// broker's failover, not the client's refresh floor.
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return nil, err
	}
	l := &load{cl: cl, done: make(chan struct{}), acked: map[string][2]int64{}, acks: map[int32][]sentAcked{}}
	pad := strings.Repeat("x", 1024-10)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		start := time.Now()
		sent := 0
		for {
			select {
			case <-l.done:
				return
			case <-t.C:
			}
			due := int(time.Since(start).Seconds() * rate)
			for ; sent < due; sent++ {
				v := fmt.Sprintf("m%09d", sent)
				rec := &kgo.Record{Partition: int32(sent % modesPartitions), Value: []byte(v + pad)}
				cl.TryProduce(context.Background(), rec, func(rec *kgo.Record, err error) {
					l.mu.Lock()
					defer l.mu.Unlock()
					if err != nil {
						if err == kgo.ErrMaxBuffered {
							l.full++
						} else {
							l.errs++
						}
						return
					}
					l.acked[string(rec.Value[:10])] = [2]int64{int64(rec.Partition), rec.Offset}
					// kgo stamps a record with the time Produce was called.
					l.acks[rec.Partition] = append(l.acks[rec.Partition], sentAcked{rec.Timestamp, time.Now()})
				})
			}
		}
	}()
	return l, nil
}

// stop ends the sending and waits up to 15 s for what is in flight.
func (l *load) stop() {
	close(l.done)
	l.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	l.cl.Flush(ctx)
	l.cl.Close() // fails what is still buffered
}

type sentAcked struct{ sent, acked time.Time }

// outage: of the partitions led by a killed broker, which acknowledged a
// record sent after the kill within the window, and the longest time from
// the kill to the first such acknowledgement; the other partitions
// likewise (whether they did).
func (l *load) outage(killed time.Time, leaders map[int32]int32, dead map[int32]bool, window time.Duration) outage {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := outage{WindowS: window.Seconds(), Acked: len(l.acked), Errors: l.errs}
	for p := int32(0); p < modesPartitions; p++ {
		var first time.Time
		for _, a := range l.acks[p] {
			if a.sent.After(killed) && (first.IsZero() || a.acked.Before(first)) {
				first = a.acked
			}
		}
		resumed := !first.IsZero() && first.Sub(killed) <= window
		if dead[leaders[p]] {
			out.Affected++
			if resumed {
				out.Resumed++
				out.MaxWaitS = math.Max(out.MaxWaitS, first.Sub(killed).Seconds())
			}
		} else {
			out.OthersN++
			if resumed {
				out.Others++
			}
		}
	}
	return out
}

// verify reads every partition from the start to its end offset (through
// the mixed listeners: the read brokers) and counts the acknowledged
// records missing.
func (l *load) verify(seeds, topic string, adm *kadm.Client) (acked, lost int, complete bool) {
	l.mu.Lock()
	want := make(map[string][2]int64, len(l.acked))
	for v, a := range l.acked {
		want[v] = a
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The end offsets once the restarted broker has had a moment to catch
	// up; what a read broker has not received yet is waited for below.
	time.Sleep(2 * time.Second)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		logf("  end offsets of %s: %v", topic, err)
		return len(want), len(want), false
	}
	offs := map[int32]kgo.Offset{}
	need := map[int32]int64{}
	ends.Each(func(e kadm.ListedOffset) {
		offs[e.Partition] = kgo.NewOffset().AtStart()
		if e.Offset > 0 {
			need[e.Partition] = e.Offset
		}
	})
	cons, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return len(want), len(want), false
	}
	defer cons.Close()
	seen := map[string]bool{}
	deadline := time.Now().Add(45 * time.Second)
	for len(need) > 0 && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(rec *kgo.Record) {
			if len(rec.Value) >= 10 {
				seen[string(rec.Value[:10])] = true
			}
			if rec.Offset+1 >= need[rec.Partition] {
				delete(need, rec.Partition)
			}
		})
	}
	for v := range want {
		if !seen[v] {
			lost++
		}
	}
	return len(want), lost, len(need) == 0
}

// ---------------------------------------------------------------- staleness

// staleness samples every broker's high watermark of the topic's
// partitions at once (ListOffsets latest, sent to that broker: any replica
// answers with its own) and compares each read broker's with the leader's
// (the highest a write broker answers): how many records the read broker
// does not show yet, and since when the leader shows the first of them
// (interpolated between the leader's samples).
type staleness struct {
	topic   string
	write   []*kgo.Client
	read    []*kgo.Client
	history map[int32][]hwmAt // the leader's high watermark over time
	recs    []float64
	ms      []float64
}

type hwmAt struct {
	at  time.Time
	hwm int64
}

func newStaleness(c *isoCluster, topic string) (*staleness, error) {
	s := &staleness{topic: topic, history: map[int32][]hwmAt{}}
	for _, n := range c.nodes {
		addr := n.mixed
		if addr == "" {
			addr = n.read
		}
		if addr == "" {
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			s.close()
			return nil, err
		}
		if n.read != "" {
			s.read = append(s.read, cl)
		} else {
			s.write = append(s.write, cl)
		}
	}
	return s, nil
}

func (s *staleness) close() {
	for _, cl := range append(s.write, s.read...) {
		cl.Close()
	}
}

// hwms asks the broker behind cl for its high watermark of every partition.
func (s *staleness) hwms(cl *kgo.Client) map[int32]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = s.topic
	for p := int32(0); p < modesPartitions; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	out := map[int32]int64{}
	if err != nil {
		return out
	}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out
}

func (s *staleness) sample() {
	now := time.Now()
	all := append(append([]*kgo.Client{}, s.write...), s.read...)
	res := make([]map[int32]int64, len(all))
	var wg sync.WaitGroup
	for i, cl := range all {
		wg.Add(1)
		go func() { defer wg.Done(); res[i] = s.hwms(cl) }()
	}
	wg.Wait()
	leader := map[int32]int64{}
	for _, m := range res[:len(s.write)] {
		for p, h := range m {
			if v, ok := leader[p]; !ok || h > v {
				leader[p] = h
			}
		}
	}
	for p, h := range leader {
		s.history[p] = append(s.history[p], hwmAt{now, h})
	}
	for _, m := range res[len(s.write):] {
		for p, h := range m {
			lh, ok := leader[p]
			if !ok {
				continue
			}
			if h >= lh {
				s.recs = append(s.recs, 0)
				s.ms = append(s.ms, 0)
				continue
			}
			s.recs = append(s.recs, float64(lh-h))
			s.ms = append(s.ms, float64(now.Sub(s.firstAbove(p, h)))/1e6)
		}
	}
}

// firstAbove is when the leader's high watermark passed h (offset h became
// visible there), interpolated between two samples; the first sample's
// time if it was already past h then.
func (s *staleness) firstAbove(p int32, h int64) time.Time {
	hist := s.history[p]
	for i := len(hist) - 1; i > 0; i-- {
		a, b := hist[i-1], hist[i]
		if a.hwm <= h && b.hwm > h {
			f := float64(h+1-a.hwm) / float64(b.hwm-a.hwm)
			return a.at.Add(time.Duration(f * float64(b.at.Sub(a.at))))
		}
	}
	return hist[0].at
}

// ---------------------------------------------------------------- metrics

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// scrapeSamples is the labelled samples of one broker's /metrics.
func scrapeSamples(admin string) []sample {
	var out []sample
	for _, line := range strings.Split(string(scrape(admin)), "\n") {
		if !strings.HasPrefix(line, "sluice_") {
			continue
		}
		i := strings.IndexByte(line, '{')
		j := strings.LastIndexByte(line, '}')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(line[j+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s := sample{name: line[:i], labels: map[string]string{}, value: v}
		for _, m := range labelRE.FindAllStringSubmatch(line[i:j], -1) {
			s.labels[m[1]] = m[2]
		}
		out = append(out, s)
	}
	return out
}

// fetchedBytes is, per broker name, the record bytes it returned to
// fetchers of topic.
func fetchedBytes(c *isoCluster, topic string) map[string]float64 {
	out := map[string]float64{}
	for _, n := range c.nodes {
		if strings.HasPrefix(n.name, "m") {
			continue
		}
		for _, s := range scrapeSamples(n.admin) {
			if s.name == "sluice_fetched_bytes_total" && s.labels["topic"] == topic {
				out[n.name] += s.value
			}
		}
	}
	return out
}

func percentile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	i := int(math.Ceil(q*float64(len(c)))) - 1
	if i < 0 {
		i = 0
	}
	return c[i]
}

// ---------------------------------------------------------------- report

func renderModes(o *opts, list []string, runs []modeRun, date, loadStart, loadEnd string, elapsed time.Duration) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("Measured by `%s` on %s (Sluice %s), %d round(s), the modes in rotating order; load average %s at the start, %s at the end",
		o.command, date, o.version, o.modesRounds, loadStart, loadEnd)
	if l, _ := strconv.ParseFloat(strings.Fields(loadStart + " 0")[0], 64); l > float64(2*nproc()) {
		p(" — **a loaded machine** (other work was running): the figures compare the modes with each other in the same minutes, they are not what a cluster can do")
	}
	p(". One machine of %d cores runs the whole cluster (3 metastore, 3 write and 2 read brokers, each its own process, write brokers and metastore pinned to CPUs %s, read brokers to %s, the clients to %s), on loopback and one disk, log.fsync=%s, broker.session.timeout.ms=%d; a fresh cluster per mode and round. Each cell gives every round's figure, in round order, separated by semicolons.\n\n",
		nproc(), o.brokerCPU, o.readCPU, o.genCPU, o.isoFsync, o.modesSession.Milliseconds())
	by := map[string][]modeRun{}
	for _, r := range runs {
		by[r.Mode] = append(by[r.Mode], r)
	}
	cells := func(rs []modeRun, f func(modeRun) string) string {
		var s []string
		for _, r := range rs {
			if r.Err != "" {
				s = append(s, "failed")
				continue
			}
			s = append(s, f(r))
		}
		return strings.Join(s, "; ")
	}
	num := func(v float64, prec int) string {
		if math.IsNaN(v) {
			return "n/a"
		}
		return strconv.FormatFloat(v, 'f', prec, 64)
	}
	p("| mode | acks=all records/s, %d records, 4 producers | ack p50 / p99 ms, same run | ack p50 / p99 ms at %.0f records/s | end-to-end p50 / p99 ms, consumer on a read broker | read staleness p99 (max): records | read staleness p99 (max): ms |\n",
		o.modesRecords, o.modesRate)
	p("|---|---|---|---|---|---|---|\n")
	for _, m := range list {
		rs := by[m]
		pair := func(a, b float64) string { return num(a, 1) + " / " + num(b, 1) }
		p("| %s | %s | %s | %s | %s | %s | %s |\n", m,
			cells(rs, func(r modeRun) string { return num(r.Tput.Produce.RecordsPerS, 0) }),
			cells(rs, func(r modeRun) string { return pair(r.Tput.Produce.Ack.P50, r.Tput.Produce.Ack.P99) }),
			cells(rs, func(r modeRun) string { return pair(r.Rate.Produce.Ack.P50, r.Rate.Produce.Ack.P99) }),
			cells(rs, func(r modeRun) string { return pair(r.Rate.Consume.E2E.P50, r.Rate.Consume.E2E.P99) }),
			cells(rs, func(r modeRun) string { return num(r.StaleRecP99, 0) + " (" + num(r.StaleRecMax, 0) + ")" }),
			cells(rs, func(r modeRun) string { return num(r.StaleMsP99, 0) + " (" + num(r.StaleMsMax, 0) + ")" }))
	}
	p("\n")
	avail := func(x outage) string {
		s := fmt.Sprintf("%d of %d", x.Resumed, x.Affected)
		if x.Resumed > 0 {
			s += fmt.Sprintf(", within %.1f s", x.MaxWaitS)
		}
		if x.OthersN > 0 {
			s += fmt.Sprintf(" (others %d of %d)", x.Others, x.OthersN)
		}
		return s
	}
	p("| mode | one write broker killed: its partitions taking acks again (longest wait) | two write brokers killed: likewise | leader kill -9 under load: acknowledged records lost (of acknowledged) | truncated by the returning broker | write replicas' lag at the kill (records) |\n")
	p("|---|---|---|---|---|---|\n")
	for _, m := range list {
		rs := by[m]
		p("| %s | %s | %s | %s | %s | %s |\n", m,
			cells(rs, func(r modeRun) string { return avail(r.One) }),
			cells(rs, func(r modeRun) string { return avail(r.Two) }),
			cells(rs, func(r modeRun) string {
				s := fmt.Sprintf("%d (of %d)", r.Lost, r.Acked)
				if !r.ReadAll {
					s += " (read incomplete)"
				}
				return s
			}),
			cells(rs, func(r modeRun) string { return num(r.Truncated, 0) }),
			cells(rs, func(r modeRun) string { return num(r.LagAtKill, 0) }))
	}
	p("\n")
	failed := false
	for _, r := range runs {
		if r.Err != "" {
			p("- round %d, %s failed: %s\n", r.Round, r.Mode, strings.ReplaceAll(r.Err, "|", "/"))
			failed = true
		}
	}
	if failed {
		p("\n")
	}
	p("How it is measured (bench/runner/modes.go): topics of %d partitions, replication factor 3, 1 KiB records, idempotent acks=all producers seeded on the write brokers' mixed listeners (so they reach the partition leaders). "+
		"**records/s and its ack latency**: %d records written by 4 producers (sluice-bench) as fast as they are acknowledged, the window ending with the last acknowledgement; the ack latency there includes the time a record waits in the client's buffer. "+
		"**At %.0f records/s** (one producer, %s, the first %s left out): the ack latency, and the end-to-end latency to one consumer that the mixed listener sends to a read broker (preferred read replica), from the send to its receipt. "+
		"**Read staleness**: during that run, every 100 ms, every broker is asked at once for its high watermark of each partition (ListOffsets, latest, sent to that broker); a read broker's staleness is the leader's high watermark minus its own (records), and the time since the leader's high watermark passed the read broker's (interpolated between the leader's samples, so a few ms is the resolution); p99 and max over every sample of both read brokers and all partitions. "+
		"**Kills**: a producer at %.0f records/s over all partitions; kill -9 of partition 0's leader (then, on a new topic, of it and a second write broker at once); the load goes on for %s. Of the partitions the killed brokers led, those that acknowledge a record sent after the kill within that time *take acks again*; the wait is the longest time from the kill to such a partition's first acknowledgement of a record sent after the kill (the producer's metadata refresh included); *others* are the partitions led elsewhere (and whether they took acks again). "+
		"**Lost**: after the one-broker kill the broker is started again, and every partition is read from the start to its end offset through the read brokers: an acknowledged record not read is lost. *Truncated* is the restarted broker's `sluice_truncated_records_total` (records it cut from its log: in async those the new master lacked, in raft and semi-sync entries that were never committed); the lag is the most any write replica was behind the killed leader (`sluice_partition_follower_lag_offsets`) just before the kill: what async may lose.\n\n",
		modesPartitions, o.modesRecords, o.modesRate, o.duration, o.warmup, o.modesLoadRate, o.modesOutage)
	if elapsed > 0 {
		p("The run took %s. ", elapsed.Round(time.Second))
	}
	p("Reproduce: `make bench-modes` (BENCH_MODES_ARGS, e.g. `-modes-rounds 1 -modes-outage 15s`; see `-help` of bench/runner for the `-modes-*` flags).\n")
	return b.String()
}
