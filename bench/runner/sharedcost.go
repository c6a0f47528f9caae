package main

// `make bench-shared-cost` (runner -shared-cost): what shared-storage mode
// costs in object-store requests, and how fast an empty read broker serves
// a history, on the split cluster of -modes (3 metastore, 3 write and 2
// read brokers, startIsoClusterWith), one fresh cluster per backend:
//
//   - s3: every broker on one bucket of a local S3 server (S3Proxy from
//     its jar, -s3proxy, or SeaweedFS's weed, -weed; started here,
//     unpinned, on this machine's disk);
//   - dir: every broker on one shared directory;
//   - raft: the raft mode, for comparison (no object store).
//
// Per cluster, on a topic of 6 partitions with replication factor 3:
//
//  1. history: the generator (sluice-bench) writes -shared-cost-runs' GB of
//     1 KiB records with 4 idempotent acks=all producers as fast as they
//     are acknowledged (records/s and ack p50/p99); every broker's
//     sluice_shared_puts_total, _put_bytes_total and _commits_total
//     (metastore commands) are scraped before and after;
//  2. cold start: both read brokers are stopped, their data directories
//     deleted (logs, chunk cache: everything), and started again; from that
//     moment a consumer seeded on their read listeners reads every partition
//     from offset 0 to the end offset the write brokers answered: the time
//     to the first record and to the whole history, and the MB/s; the read
//     brokers' sluice_shared_gets_total over it (GETs per GB read cold);
//  3. warm: the same consumer again on the same read brokers: the time and
//     the GETs (what the 64 MiB memory and 1 GiB disk caches saved).
//
// The shared clusters run with read.replicas=0: a read broker that is a
// learner of a partition (raft or shared) is refused a wiped disk. The raft
// cluster is measured in step 1 only, for the same reason: its read brokers
// are learners, and a fresh one needs a new node id and a reassignment.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/internal/s3test"
)

const sharedCostSection = "shared-cost"

// sharedCostRun is one backend's cluster.
type sharedCostRun struct {
	Backend string    `json:"backend"` // s3, dir or raft
	GB      float64   `json:"history_gb_asked"`
	Load    string    `json:"load_avg"` // at the cluster's start
	LoadEnd string    `json:"load_avg_end"`
	Err     string    `json:"error,omitempty"`
	Write   genResult `json:"write"`

	WrittenBytes float64 `json:"written_bytes"` // record values acknowledged
	Puts         float64 `json:"puts"`
	PutBytes     float64 `json:"put_bytes"`
	Commits      float64 `json:"commits"`
	Compactions  float64 `json:"compactions"`

	Cold histRead `json:"cold"`
	Warm histRead `json:"warm"`
}

// histRead is one read of the whole history through the read brokers.
type histRead struct {
	Bytes  float64 `json:"bytes"` // record values read
	ReadyS float64 `json:"ready_s,omitempty"`
	FirstS float64 `json:"first_record_s"`
	AllS   float64 `json:"all_s"`
	MBPerS float64 `json:"mb_per_s"` // Bytes over AllS-FirstS
	Gets   float64 `json:"gets"`
	Disk   float64 `json:"disk_hits"`
	Err    string  `json:"error,omitempty"`
}

// sharedCostPlan parses "s3:10,dir:2,raft:2" (backend:GB of history).
func sharedCostPlan(s string) ([]sharedCostRun, error) {
	var out []sharedCostRun
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		b, g, ok := strings.Cut(f, ":")
		gb, err := strconv.ParseFloat(g, 64)
		if !ok || err != nil || gb <= 0 {
			return nil, fmt.Errorf("bad -shared-cost-runs entry %q (backend:GB, e.g. s3:10)", f)
		}
		switch b {
		case "s3", "dir", "raft":
		default:
			return nil, fmt.Errorf("bad -shared-cost-runs backend %q (s3, dir, raft)", b)
		}
		out = append(out, sharedCostRun{Backend: b, GB: gb})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-shared-cost-runs is empty")
	}
	return out, nil
}

func sharedCost(o *opts) error {
	plan, err := sharedCostPlan(o.sharedCostRuns)
	if err != nil {
		return err
	}
	var raw *os.File
	if o.rawOut != "" {
		if raw, err = os.Create(o.rawOut); err != nil {
			return err
		}
		defer raw.Close()
	}
	var weed *s3test.Server
	stopClusterOnSignal(func() {
		if weed != nil {
			weed.Close()
		}
	})
	started := time.Now()
	loadStart := loadavg()
	date := time.Now().UTC().Format("2006-01-02 15:04 UTC")
	for i := range plan {
		r := &plan[i]
		logf("shared-cost %s: %.1f GB of history; load average %s", r.Backend, r.GB, loadavg())
		if r.Backend == "s3" && weed == nil {
			os.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
			os.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
			switch {
			case o.s3proxyJar != "":
				weed, err = s3test.StartS3Proxy(o.s3proxyJar, "sluice-bench")
			case o.weedBin != "":
				weed, err = s3test.StartWeed(o.weedBin, "sluice-bench")
			default:
				r.Err = "no S3 server: neither -s3proxy nor -weed"
				continue
			}
			if err != nil {
				r.Err = scrubErr(o, err)
				continue
			}
		}
		runSharedCost(o, r, weed)
		if r.Backend == "s3" && weed != nil {
			weed.Close() // its data goes with it
			weed = nil
		}
		if raw != nil {
			b, _ := json.Marshal(r)
			fmt.Fprintln(raw, string(b))
		}
		logf("  %s", summarizeSharedCost(*r))
	}
	text := renderSharedCost(o, plan, date, loadStart, loadavg(), time.Since(started))
	if err := replaceSection(o.out, sharedCostSection, text); err != nil {
		return err
	}
	logf("section %s written into %s in %s", sharedCostSection, o.out, time.Since(started).Round(time.Second))
	return nil
}

// s3ServerName says which S3 server the s3 backend ran on.
func s3ServerName(o *opts) string {
	if o.s3proxyJar != "" {
		return "an S3Proxy server (one Java process over a local directory)"
	}
	return "a SeaweedFS server (weed, one process: master, volume server, filer and S3 gateway)"
}

func summarizeSharedCost(r sharedCostRun) string {
	if r.Err != "" {
		return r.Backend + " failed: " + r.Err
	}
	gbW := r.WrittenBytes / 1e9
	return fmt.Sprintf("%s: wrote %.2f GB at %.0f rec/s (ack p99 %.0f ms): %.0f PUTs/GB, %.0f commits/GB; cold: first record %.1f s, all %.1f s (%.1f MB/s), %.0f GETs/GB; warm: %.1f s, %.0f GETs/GB",
		r.Backend, gbW, r.Write.Produce.RecordsPerS, r.Write.Produce.Ack.P99, r.Puts/gbW, r.Commits/gbW,
		r.Cold.FirstS, r.Cold.AllS, r.Cold.MBPerS, perGB(r.Cold.Gets, r.Cold.Bytes), r.Warm.AllS, perGB(r.Warm.Gets, r.Warm.Bytes))
}

func perGB(n, bytes float64) float64 {
	if bytes <= 0 {
		return 0
	}
	return n / (bytes / 1e9)
}

// sumMetric is metric summed over the named nodes (all when names is nil).
func (c *isoCluster) sumMetric(name string, names ...string) float64 {
	var s float64
	for _, n := range c.nodes {
		if strings.HasPrefix(n.name, "m") || (names != nil && !contains(names, n.name)) {
			continue
		}
		s += metric(scrape(n.admin), name)
	}
	return s
}

func runSharedCost(o *opts, r *sharedCostRun, weed *s3test.Server) {
	r.Load = loadavg()
	defer func() { r.LoadEnd = loadavg() }()
	session := fmt.Sprintf("broker.session.timeout.ms: %d\n", o.modesSession.Milliseconds())
	mode := "shared"
	if r.Backend == "raft" {
		mode = "raft"
	}
	extra := "replication.mode: " + mode + "\n" + session
	switch r.Backend {
	case "dir":
		dir, err := os.MkdirTemp(o.tmp, "sluice-bench-shared-")
		if err != nil {
			r.Err = err.Error()
			return
		}
		defer os.RemoveAll(dir)
		extra += "shared.storage.type: dir\nshared.storage.dir: " + dir + "\n"
	case "s3":
		extra += "shared.storage.type: s3\nshared.storage.s3.endpoint: " + weed.Endpoint +
			"\nshared.storage.s3.bucket: sluice-bench\nshared.storage.s3.path.style: true\nshared.storage.s3.region: us-east-1\n"
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
		return
	}
	if err := sharedCostMeasure(o, c, r); err != nil {
		r.Err = scrubErr(o, err)
	}
}

func sharedCostMeasure(o *opts, c *isoCluster, r *sharedCostRun) error {
	const recSize = 1024
	records := int64(r.GB * 1e9 / recSize)
	topic := "shared-cost"
	before := map[string]float64{}
	names := []string{"sluice_shared_puts_total", "sluice_shared_put_bytes_total", "sluice_shared_commits_total", "sluice_shared_compactions_total"}
	for _, m := range names {
		before[m] = c.sumMetric(m)
	}
	// The topic is created here: a shared one with read.replicas=0, no
	// learner replicas on the read brokers (a read broker that is a
	// learner of a partition is refused an emptied disk, its raft state
	// lost, shared partition or not).
	adm, cl, err := adminClient(c.seeds)
	if err != nil {
		return err
	}
	defer cl.Close()
	var tcfg map[string]*string
	if r.Backend != "raft" {
		zero := "0"
		tcfg = map[string]*string{"read.replicas": &zero}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	_, err = adm.CreateTopic(ctx, modesPartitions, 3, tcfg, topic)
	cancel()
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	args := []string{"-c", o.genCPU, o.genBin, "-brokers", c.seeds, "-topic", topic, "-create-topic=false",
		"-partitions", strconv.Itoa(modesPartitions), "-replication", "3", "-record-size", strconv.Itoa(recSize),
		"-producers", "4", "-consumers", "0", "-records", strconv.FormatInt(records, 10),
		"-duration", "0", "-max-duration", o.sharedCostMax.String(), "-warmup", "0s", "-quiet", "-label", r.Backend}
	out, _, err := c.runGen(o, args)
	if jerr := json.Unmarshal([]byte(lastLine(out)), &r.Write); jerr != nil || err != nil {
		return fmt.Errorf("history write: %v %v: %s", err, jerr, lastLine(out))
	}
	r.WrittenBytes = float64(r.Write.Produce.TotalRecords) * recSize
	delta := func(m string) float64 { return c.sumMetric(m) - before[m] }
	r.Puts, r.PutBytes = delta(names[0]), delta(names[1])
	r.Commits, r.Compactions = delta(names[2]), delta(names[3])

	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	ends, err := adm.ListEndOffsets(ctx, topic)
	cancel()
	if err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	end := map[int32]int64{}
	ends.Each(func(l kadm.ListedOffset) {
		if l.Err == nil {
			end[l.Partition] = l.Offset
		}
	})
	if len(end) != modesPartitions {
		return fmt.Errorf("end offsets of %d partitions, want %d", len(end), modesPartitions)
	}
	if r.Backend == "raft" {
		// A raft read broker is a learner: started again on an empty
		// disk it is refused (what it acknowledged would not be sent
		// again); a fresh one needs a new node id and a reassignment,
		// which this run does not do. The raft run is the write only.
		return nil
	}

	// Cold start: both read brokers stopped, emptied and started again.
	var readers []*isoNode
	var readAddrs, readNames []string
	for _, n := range c.nodes {
		if strings.HasPrefix(n.name, "r") {
			readers = append(readers, n)
			readAddrs = append(readAddrs, n.read)
			readNames = append(readNames, n.name)
		}
	}
	for _, n := range readers {
		stopNode(n)
		if err := os.RemoveAll(filepath.Join(c.dir, n.name)); err != nil {
			return err
		}
	}
	t0 := time.Now()
	for _, n := range readers {
		if err := c.start(n); err != nil {
			return fmt.Errorf("restart %s: %w", n.name, err)
		}
	}
	readyCh := make(chan float64, 1)
	go func() {
		for _, n := range readers {
			if waitReady(n, 5*time.Minute) != nil {
				readyCh <- -1
				return
			}
		}
		readyCh <- time.Since(t0).Seconds()
	}()
	r.Cold = readHistory(readAddrs, topic, end, t0, o.sharedCostMax)
	select {
	case r.Cold.ReadyS = <-readyCh:
	case <-time.After(5 * time.Minute):
	}
	r.Cold.Gets = c.sumMetric("sluice_shared_gets_total", readNames...)
	r.Cold.Disk = c.sumMetric("sluice_shared_cache_disk_hits_total", readNames...)
	if r.Cold.Err != "" {
		return fmt.Errorf("cold read: %s", r.Cold.Err)
	}
	r.Warm = readHistory(readAddrs, topic, end, time.Now(), o.sharedCostMax)
	r.Warm.Gets = c.sumMetric("sluice_shared_gets_total", readNames...) - r.Cold.Gets
	r.Warm.Disk = c.sumMetric("sluice_shared_cache_disk_hits_total", readNames...) - r.Cold.Disk
	if r.Warm.Err != "" {
		return fmt.Errorf("warm read: %s", r.Warm.Err)
	}
	return nil
}

// readHistory reads every partition of topic from offset 0 to end through
// the brokers addrs (the read view) with one client, and times it from t0.
func readHistory(addrs []string, topic string, end map[int32]int64, t0 time.Time, max time.Duration) histRead {
	var h histRead
	offs := map[int32]kgo.Offset{}
	left := 0
	for p, e := range end {
		if e > 0 {
			offs[p] = kgo.NewOffset().At(0)
			left++
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RetryTimeout(max))
	if err != nil {
		h.Err = err.Error()
		return h
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), max)
	defer cancel()
	next := map[int32]int64{}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.Err = fmt.Sprintf("not read within %s (%d partitions left)", max, left)
			return h
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if h.FirstS == 0 {
				h.FirstS = time.Since(t0).Seconds()
			}
			h.Bytes += float64(len(rec.Value) + len(rec.Key))
			if rec.Offset+1 > next[rec.Partition] {
				next[rec.Partition] = rec.Offset + 1
				if next[rec.Partition] == end[rec.Partition] {
					left--
				}
			}
		})
	}
	h.AllS = time.Since(t0).Seconds()
	if d := h.AllS - h.FirstS; d > 0 {
		h.MBPerS = h.Bytes / 1e6 / d
	}
	return h
}

// ---------------------------------------------------------------- report

// The prices of the cost model: AWS S3 Standard in us-east-1, taken as
// assumptions (see the text the report prints).
const (
	pricePut     = 0.005 / 1000 // $ per PUT (PUT, COPY, POST, LIST)
	priceGet     = 0.0004 / 1000
	priceGBMonth = 0.023
)

func renderSharedCost(o *opts, runs []sharedCostRun, date, loadStart, loadEnd string, elapsed time.Duration) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("Measured by `%s` on %s (Sluice %s); load average %s at the start, %s at the end. "+
		"One machine of %d cores runs the whole cluster (3 metastore, 3 write and 2 read brokers, each its own process, write brokers and metastore pinned to CPUs %s, read brokers to %s, the generator to %s), on loopback and one disk. "+
		"The s3 backend is %s on the same machine, unpinned, on the same disk; dir is one directory of that disk. "+
		"The readers run in the runner's own process, unpinned.\n\n",
		o.command, date, o.version, loadStart, loadEnd, nproc(), o.brokerCPU, o.readCPU, o.genCPU, s3ServerName(o))
	p("| backend | history written (GB of record values) | acks=all records/s, 4 producers | ack p50 / p99 ms | PUTs per GB written | bytes per PUT (MB) | metastore commits per GB written | compactions |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		if r.Err != "" && r.WrittenBytes == 0 {
			p("| %s | failed: %s | | | | | | |\n", r.Backend, r.Err)
			continue
		}
		gb := r.WrittenBytes / 1e9
		puts, per, commits := "-", "-", "-"
		if r.Backend != "raft" {
			puts = fmt.Sprintf("%.0f", r.Puts/gb)
			if r.Puts > 0 {
				per = fmt.Sprintf("%.1f", r.PutBytes/r.Puts/1e6)
			}
			commits = fmt.Sprintf("%.0f", r.Commits/gb)
		}
		p("| %s | %.2f | %.0f | %.0f / %.0f | %s | %s | %s | %.0f |\n", r.Backend, gb, r.Write.Produce.RecordsPerS,
			r.Write.Produce.Ack.P50, r.Write.Produce.Ack.P99, puts, per, commits, r.Compactions)
	}
	p("\n| backend | read brokers emptied and restarted: /readyz answers (s) | first record (s) | whole history (s) | MB/s after the first record | GETs per GB read, cold | again at once (s) | MB/s | GETs per GB read, warm | disk-cache hits, warm |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		if r.Cold.AllS == 0 {
			if r.Err != "" && r.WrittenBytes > 0 {
				p("| %s | failed: %s | | | | | | | | |\n", r.Backend, r.Err)
			}
			continue
		}
		gets, wgets, disk := "-", "-", "-"
		if r.Backend != "raft" {
			gets = fmt.Sprintf("%.0f", perGB(r.Cold.Gets, r.Cold.Bytes))
			wgets = fmt.Sprintf("%.0f", perGB(r.Warm.Gets, r.Warm.Bytes))
			disk = fmt.Sprintf("%.0f", r.Warm.Disk)
		}
		p("| %s | %.1f | %.1f | %.1f | %.1f | %s | %.1f | %.1f | %s | %s |\n", r.Backend, r.Cold.ReadyS, r.Cold.FirstS, r.Cold.AllS, r.Cold.MBPerS,
			gets, r.Warm.AllS, r.Warm.MBPerS, wgets, disk)
	}
	p("\nHow it is measured (bench/runner/sharedcost.go): a fresh cluster per backend (3 metastore, 3 write, 2 read brokers), the broker default replication.mode shared (s3, dir) or raft, log.fsync=group, every shared.* setting at its default (8 MiB uploads, 250 ms linger, 4 uploads in flight, 64 MiB memory and 1 GiB disk cache per broker, read-ahead 2). "+
		"**History**: one topic of %d partitions, replication factor 3, 1 KiB records written by 4 idempotent acks=all producers (sluice-bench) as fast as they are acknowledged, seeded on the write brokers' mixed listeners. "+
		"PUTs are the write brokers' `sluice_shared_puts_total` over the write (uploads and compacted objects), commits their `sluice_shared_commits_total` (one metastore command per object). "+
		"**Cold start**: both read brokers stopped, their data directories deleted (chunk cache included) and started again; from that moment one client seeded on their read listeners reads every partition from offset 0 to the end offsets the write brokers answered (the read view spreads the partitions over both). "+
		"The shared clusters run with read.replicas=0 (no learner replicas on the read brokers, which serve every shared partition without one); until a fix made after this measurement, a read broker that was a learner of a shared partition was refused an emptied data directory at its start, as a raft learner is. The raft cluster is measured for its writes only: its read brokers are learners, whose emptied disk is refused (their raft state would be lost), and a fresh learner needs a new node id and a partition reassignment, not done here. GETs are the read brokers' `sluice_shared_gets_total` (ranged GETs of chunks, read-ahead included). "+
		"**Warm**: the same read again at once; what the read brokers' caches hold saves GETs.\n\n", modesPartitions)
	renderCostModel(&b, runs)
	p("The run took %s. Reproduce: `make bench-shared-cost` (BENCH_SHARED_COST_ARGS, e.g. `-shared-cost-runs s3:10,dir:2,raft:2`).\n", elapsed.Round(time.Second))
	return b.String()
}

// renderCostModel turns the measured requests per GB into a monthly bill
// for a worked example.
func renderCostModel(b *strings.Builder, runs []sharedCostRun) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	var s3 *sharedCostRun
	for i := range runs {
		if runs[i].Backend == "s3" && runs[i].WrittenBytes > 0 && runs[i].Cold.Bytes > 0 {
			s3 = &runs[i]
		}
	}
	if s3 == nil {
		p("No s3 run completed: no cost model from measured figures.\n\n")
		return
	}
	const (
		mbps     = 100.0           // MB/s written
		groups   = 3.0             // consumer groups reading everything
		readers  = 2.0             // read brokers
		month    = 30 * 24 * 3600. // seconds
		days     = 7.0
		gbMonth  = mbps * month / 1000
		storedGB = mbps * days * 24 * 3600 / 1000
	)
	putsGB := s3.Puts / (s3.WrittenBytes / 1e9)
	coldGB := perGB(s3.Cold.Gets, s3.Cold.Bytes)
	puts := putsGB * gbMonth
	getsTail := coldGB * gbMonth           // the read broker serving a partition reads each chunk once; the groups share its cache
	getsWorst := coldGB * gbMonth * groups // no group finds a chunk in cache
	storage := storedGB * priceGBMonth
	p("**Cost model** (AWS S3 Standard; assumed list prices, not read from AWS's pricing page here: PUT $0.005 per 1,000, GET $0.0004 per 1,000, storage $0.023 per GB-month; DELETE free; data transfer inside a region free; LIST requests of the garbage-collection sweep, a few per minute, left out). "+
		"Worked example: %.0f MB/s written around the clock (%.0f GB a month), %.0f consumer groups reading everything through the read view (which gives each partition one read broker), %.0f days of retention (%.0f GB stored), with the s3 run's %.0f PUTs per GB written and %.0f GETs per GB read cold:\n\n",
		mbps, gbMonth, groups, days, storedGB, putsGB, coldGB)
	p("| item | requests a month | $ a month |\n|---|---|---|\n")
	p("| PUTs (uploads and compaction) | %.3g | %.0f |\n", puts, puts*pricePut)
	p("| GETs, consumers keeping up (each chunk read once, by the read broker serving its partition; the groups share its cache) | %.3g | %.0f |\n", getsTail, getsTail*priceGet)
	p("| GETs, worst case (every group's read misses every cache) | %.3g | %.0f |\n", getsWorst, getsWorst*priceGet)
	p("| storage (%.0f GB, 7 days) | | %.0f |\n", storedGB, storage)
	p("| total, consumers keeping up | | %.0f |\n\n", puts*pricePut+getsTail*priceGet+storage)
	p("The PUT count follows `shared.upload.bytes` (U) and `shared.upload.linger.ms` (L): a write broker taking R bytes/s cuts max(R/U, 1/L) objects a second. "+
		"At %.0f MB/s over 3 write brokers (%.1f MB/s each) the monthly PUT bill (compaction left out) would be:\n\n", mbps, mbps/3)
	p("| U \\ L | 100 ms | 250 ms | 1000 ms |\n|---|---|---|---|\n")
	for _, u := range []float64{4, 8, 16, 32} {
		p("| %.0f MiB |", u)
		for _, l := range []float64{0.1, 0.25, 1} {
			rw := mbps / 3 * 1e6
			perS := rw / (u * (1 << 20))
			if 1/l > perS {
				perS = 1 / l
			}
			p(" $%.0f |", 3*perS*month*pricePut)
		}
		p("\n")
	}
	p("\nLarger objects cost nothing in GETs (reads are ranged per partition chunk, one GET per chunk a read broker misses), but a longer linger adds to every acks=all latency (the ack waits for the PUT and the commit). At these prices storage dominates once retention passes a few days; PUTs are next; GETs are small unless many groups replay history that no cache holds.\n\n")
}
