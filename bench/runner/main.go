// Command runner drives `make bench`: it measures the machine's limits, runs
// each workload against Sluice and Apache Kafka alternately (A B B A ...,
// fresh broker process and data directory per run, broker and load generator
// pinned to different cores), and writes BENCHMARKS.md with per-pair ratios
// and their medians. bench/run.sh builds the binaries and fetches Kafka
// first; run it rather than this program directly.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-broker/sluice/internal/s3test"
)

type opts struct {
	pairs       int
	duration    time.Duration
	warmup      time.Duration
	workloads   string
	out         string
	rawOut      string
	sluiceBin   string
	genBin      string
	kafkaLibs   string
	brokerCPU   string
	genCPU      string
	tmp         string
	profileDir  string
	ddMiB       int
	command     string
	kafkaHeap   string
	quiet       bool
	profileSecs int
	version     string
	w5Groups    bool
	profileWls  string
	compaction  bool
	compRecords int64
	compKeys    int64
	compCodecs  string
	section     string // -section: one section of the report only (sections.go)
	certs       string // directory of the CA and server certificate both brokers serve (secure workloads)
	shareRecs   int64  // -share-records: records prefilled for a share-group drain (sections.go)

	isolation       bool // -isolation: make bench-isolation (isolation.go)
	isoGroups       string
	isoSystems      string
	isoRate         float64
	isoPrefill      int64
	isoFsync        string
	isoScaleRecords int64
	isoScaleReaders int
	readCPU         string
	writeGenCPU     string // -isolation: the writer-side generator
	readGenCPU      string // -isolation: the reader-side generator
	isoFromRaw      string

	clusterPairs   int // the cluster section (cluster.go)
	clusterRecords int64
	clusterMaxDur  time.Duration
	modes          bool // -modes: make bench-modes (modes.go)
	sharedCostOn   bool // -shared-cost: make bench-shared-cost (sharedcost.go)
	sharedCostRuns string
	sharedCostMax  time.Duration
	weedBin        string
	s3proxyJar     string // -s3proxy: the S3Proxy jar (make bench-shared-cost)
	modesList      string
	modesRounds    int
	modesRecords   int64
	modesRate      float64
	modesLoadRate  float64
	modesOutage    time.Duration
	modesSession   time.Duration
}

// durability names a matched pair of settings.
type durability string

const (
	durable   durability = "fsync"      // Sluice log.fsync=group, Kafka log.flush.interval.messages=1
	pageCache durability = "page-cache" // Sluice log.fsync=never, Kafka default
)

func (d durability) sluice() string {
	if d == durable {
		return "log.fsync=group (default: group-committed fdatasync before acks=all)"
	}
	return "log.fsync=never (page cache)"
}

func (d durability) kafka() string {
	if d == durable {
		return "flush.messages=1 (fsync per partition append)"
	}
	return "default (page cache, flush left to the OS)"
}

type workload struct {
	Name  string
	Desc  string
	Dur   durability
	Args  []string // generator flags beyond brokers/duration/warmup
	Latcy bool     // latency workload: e2e figures matter
	// Proto is the listener the generator uses on a broker started with
	// PLAINTEXT, SSL and SASL_SSL listeners (sections.go); "" is the
	// usual broker with one PLAINTEXT listener.
	Proto string
	// Share: the generator drains a prefilled topic with share-group
	// consumers (-share-consumers in Args); the figures are the drain's.
	Share bool
}

func allWorkloads() []workload {
	w3 := []string{"-partitions", "100", "-record-size", "1024", "-rate", "50000", "-producers", "1", "-consumers", "1"}
	return []workload{
		{Name: "W1", Dur: durable, Desc: "1 KiB, acks=all, 8 partitions, 4 producers, max throughput",
			Args: []string{"-partitions", "8", "-record-size", "1024", "-producers", "4", "-consumers", "0"}},
		{Name: "W1-cache", Dur: pageCache, Desc: "W1 without fsync on either broker",
			Args: []string{"-partitions", "8", "-record-size", "1024", "-producers", "4", "-consumers", "0"}},
		{Name: "W1-1p", Dur: durable, Desc: "W1 on 1 partition",
			Args: []string{"-partitions", "1", "-record-size", "1024", "-producers", "4", "-consumers", "0"}},
		{Name: "W1-1p-cache", Dur: pageCache, Desc: "W1 on 1 partition without fsync",
			Args: []string{"-partitions", "1", "-record-size", "1024", "-producers", "4", "-consumers", "0"}},
		{Name: "W2", Dur: durable, Latcy: true, Desc: "fixed 10 MB/s (9,766 x 1 KiB records/s), 8 partitions, 1 producer, 1 consumer",
			Args: []string{"-partitions", "8", "-record-size", "1024", "-rate", "9766", "-producers", "1", "-consumers", "1"}},
		{Name: "W2-cache", Dur: pageCache, Latcy: true, Desc: "W2 without fsync",
			Args: []string{"-partitions", "8", "-record-size", "1024", "-rate", "9766", "-producers", "1", "-consumers", "1"}},
		{Name: "W3", Dur: durable, Latcy: true, Desc: "OMB shape: 100 partitions, 1 KiB, 50,000 records/s, 1 producer, 1 consumer", Args: w3},
		{Name: "W3-cache", Dur: pageCache, Latcy: true, Desc: "W3 without fsync", Args: w3},
		{Name: "W4", Dur: durable, Desc: "1,000 partitions, 1 KiB, 1,000 records/s, 1 producer, 1 consumer",
			Args: []string{"-partitions", "1000", "-record-size", "1024", "-rate", "1000", "-producers", "1", "-consumers", "1"}},
		{Name: "W5", Dur: durable, Latcy: true, Desc: "W3 while 4 extra consumers read the topic from the start (250,000 records prefilled)",
			Args: append(append([]string{}, w3...), "-backlog-readers", "4", "-prefill", "250000")},
	}
}

const defaultWorkloads = "W1,W1-cache,W1-1p,W2,W3,W3-cache,W4,W5"

func main() {
	var o opts
	flag.IntVar(&o.pairs, "pairs", 3, "Sluice/Kafka pairs per workload (run order A B B A A B ...)")
	flag.DurationVar(&o.duration, "duration", 12*time.Second, "generator sending time per run, warm-up included")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "warm-up left out of each run's figures")
	flag.StringVar(&o.workloads, "workloads", defaultWorkloads, "comma-separated workloads; all: "+names())
	flag.StringVar(&o.out, "out", "BENCHMARKS.md", "report to write")
	flag.StringVar(&o.rawOut, "raw", "", "also write every run's figures as JSON lines here")
	flag.StringVar(&o.sluiceBin, "sluice", "bin/sluice", "sluice binary")
	flag.StringVar(&o.genBin, "gen", "bin/sluice-bench", "load generator binary")
	flag.StringVar(&o.kafkaLibs, "kafka-libs", "", "directory of the Kafka 4.4.0 jars")
	flag.StringVar(&o.brokerCPU, "broker-cpu", "0", "cores for the broker (taskset list)")
	flag.StringVar(&o.genCPU, "gen-cpu", "1", "cores for the generator (taskset list)")
	flag.StringVar(&o.tmp, "tmp", os.TempDir(), "where data directories go (its disk is the one measured)")
	flag.StringVar(&o.profileDir, "profile", "", "instead of comparing, profile Sluice under W1 and W3 and write pprof files here")
	flag.IntVar(&o.profileSecs, "profile-seconds", 8, "CPU profile length")
	flag.StringVar(&o.profileWls, "profile-workloads", "W1,W3", "workloads profiled by -profile")
	flag.IntVar(&o.ddMiB, "dd-mib", 1024, "MiB written by the dd fdatasync test")
	flag.StringVar(&o.command, "command", "make bench", "command line recorded in the report")
	flag.StringVar(&o.kafkaHeap, "kafka-heap", "1G", "Kafka JVM heap (-Xms and -Xmx)")
	flag.StringVar(&o.version, "sluice-version", "", "Sluice version shown in the report (default: git describe)")
	flag.BoolVar(&o.w5Groups, "w5-groups", true, "W5's readers join consumer groups (one each); false: they consume partitions directly")
	flag.BoolVar(&o.quiet, "quiet", false, "no generator progress lines")
	flag.BoolVar(&o.compaction, "compaction", false, "instead of the workloads, compare the log cleaners (make bench-compaction) and write its section of -out")
	flag.Int64Var(&o.compRecords, "compaction-records", 262144, "records of 1 KiB written before the clean (-compaction)")
	flag.Int64Var(&o.compKeys, "compaction-keys", 32768, "key cardinality of those records (-compaction)")
	flag.StringVar(&o.compCodecs, "compaction-codecs", "none,lz4", "producer compression codecs, one comparison each (-compaction)")
	flag.StringVar(&o.section, "section", "", "run only the workloads of one section and replace just that section of -out: "+sectionNames())
	flag.Int64Var(&o.shareRecs, "share-records", 200000, "records of 1 KiB prefilled and then drained by the share-group consumers (-section share)")
	flag.BoolVar(&o.isolation, "isolation", false, "instead of the workloads, run the read/write isolation comparison on a Sluice split cluster and a 3-broker Kafka cluster (make bench-isolation) and write its section of -out")
	flag.StringVar(&o.isoGroups, "iso-groups", "1,4,8", "reader counts N: N tailing consumers, then N replaying consumer groups (-isolation)")
	flag.StringVar(&o.isoSystems, "iso-systems", "sluice,kafka,kafka-follower", "systems compared (-isolation)")
	flag.Float64Var(&o.isoRate, "iso-rate", 0, "fixed produce rate, records/s (-isolation; 0 = half the first Sluice cluster's saturation)")
	flag.Int64Var(&o.isoPrefill, "iso-prefill", 0, "records of history before a replay run (-isolation; 0 = rate x duration)")
	flag.StringVar(&o.isoFsync, "iso-fsync", "group", "Sluice log.fsync of the cluster (-isolation; Kafka flushes every message unless never)")
	flag.Int64Var(&o.isoScaleRecords, "iso-scale-records", 1000000, "records of 1 KiB read back in the read scale-out runs (-isolation)")
	flag.IntVar(&o.isoScaleReaders, "iso-scale-readers", 4, "consumers reading the backlog in the read scale-out runs (-isolation; 0 = none)")
	flag.StringVar(&o.isoFromRaw, "iso-from-raw", "", "with -isolation: render the section from this -raw file of an earlier run instead of running")
	flag.StringVar(&o.readCPU, "read-cpu", "1", "cores for Sluice's read brokers (taskset list, -isolation)")
	flag.StringVar(&o.writeGenCPU, "write-gen-cpu", "0", "cores for the writer-side generator: producers and the latency-probe consumer (taskset list, -isolation; with -broker-cpu by default)")
	flag.StringVar(&o.readGenCPU, "read-gen-cpu", "1", "cores for the reader-side generator: the tailing and replaying readers (taskset list, -isolation; with -read-cpu by default)")
	flag.IntVar(&o.clusterPairs, "cluster-pairs", 2, "Sluice/Kafka cluster pairs of the cluster section (-section cluster, and part of a whole run; 0 leaves it out of a whole run)")
	flag.Int64Var(&o.clusterRecords, "cluster-records", 1000000, "records of 1 KiB per run of the cluster section")
	flag.DurationVar(&o.clusterMaxDur, "cluster-max-duration", 90*time.Second, "bound on a cluster section run's sending time")
	flag.BoolVar(&o.sharedCostOn, "shared-cost", false, "instead of the workloads, measure shared-storage mode's object-store requests and a read broker's cold start (make bench-shared-cost) and write its section of -out")
	flag.StringVar(&o.sharedCostRuns, "shared-cost-runs", "s3:10,dir:2,raft:2", "backend:GB of history per cluster, in order (-shared-cost; backends s3, dir, raft)")
	flag.DurationVar(&o.sharedCostMax, "shared-cost-max", 30*time.Minute, "bound on writing the history and on each read of it (-shared-cost)")
	flag.StringVar(&o.weedBin, "weed", "", "SeaweedFS weed binary for the s3 backend (-shared-cost), when -s3proxy is not given")
	flag.StringVar(&o.s3proxyJar, "s3proxy", "", "S3Proxy jar with dependencies for the s3 backend (-shared-cost)")
	flag.BoolVar(&o.modes, "modes", false, "instead of the workloads, compare the replication modes on a Sluice split cluster (make bench-modes) and write its section of -out")
	flag.StringVar(&o.modesList, "modes-list", "raft,semi-sync,async,shared", "replication modes compared (-modes; shared runs every broker on one shared directory)")
	flag.IntVar(&o.modesRounds, "modes-rounds", 2, "rounds; each runs every mode on a fresh cluster, the order rotating (-modes)")
	flag.Int64Var(&o.modesRecords, "modes-records", 100000, "records of 1 KiB in the throughput run (-modes)")
	flag.Float64Var(&o.modesRate, "modes-rate", 1000, "records/s of the end-to-end and staleness run, which lasts -duration (-modes)")
	flag.Float64Var(&o.modesLoadRate, "modes-load-rate", 500, "records/s of the load under which write brokers are killed (-modes)")
	flag.DurationVar(&o.modesOutage, "modes-outage", 25*time.Second, "how long the load goes on after a kill (-modes)")
	flag.DurationVar(&o.modesSession, "modes-session", 10*time.Second, "broker.session.timeout.ms of the cluster: the async failover waits for it (-modes)")
	flag.Parse()
	if err := mainErr(&o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func names() string {
	var n []string
	for _, w := range allWorkloads() {
		n = append(n, w.Name)
	}
	return strings.Join(n, ",")
}

func pick(list string) ([]workload, error) {
	all := map[string]workload{}
	for _, w := range allWorkloads() {
		all[w.Name] = w
	}
	var out []workload
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		w, ok := all[n]
		if !ok {
			return nil, fmt.Errorf("unknown workload %q (have %s)", n, names())
		}
		out = append(out, w)
	}
	return out, nil
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func mainErr(o *opts) error {
	wls, err := pick(o.workloads)
	if err != nil {
		return err
	}
	if o.profileDir != "" {
		return profile(o)
	}
	if o.compaction {
		return compaction(o)
	}
	if o.modes {
		return modes(o)
	}
	if o.sharedCostOn {
		return sharedCost(o)
	}
	if o.pairs < 1 {
		return errors.New("-pairs must be at least 1")
	}
	if o.kafkaLibs == "" {
		return errors.New("-kafka-libs is required")
	}
	if o.section != "" {
		return runSection(o)
	}
	if o.isolation {
		return isolation(o)
	}
	started := time.Now()
	m := machineInfo(o)
	logf("machine: %s; load average %s", m.CPU, m.LoadStart)
	lim, err := measureLimits(o)
	if err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	m.Limits = lim
	logf("limits: loopback TCP %.0f MB/s, dd fdatasync %.0f MB/s (%v)", lim.TCPMBps, lim.DiskMBps, lim.DiskRuns)

	var raw *os.File
	if o.rawOut != "" {
		if raw, err = os.Create(o.rawOut); err != nil {
			return err
		}
		defer raw.Close()
	}
	results := map[string][]pair{}
	var failures []string
	for _, w := range wls {
		for p := 0; p < o.pairs; p++ {
			order := []string{"sluice", "kafka"}
			if p%2 == 1 {
				order = []string{"kafka", "sluice"}
			}
			var pr pair
			for _, b := range order {
				logf("%s pair %d/%d: %s (%s)", w.Name, p+1, o.pairs, b, w.Dur)
				r, err := runOnce(o, w, b)
				if err != nil {
					// One retry with a fresh broker; a second failure
					// drops the pair (listed in the report) rather than
					// the whole run.
					logf("  failed: %v; retrying once", err)
					if r, err = runOnce(o, w, b); err != nil {
						msg := strings.Join(strings.Fields(fmt.Sprintf("%s pair %d, %s: %v", w.Name, p+1, b, err)), " ")
						logf("  failed again, pair dropped: %v", err)
						failures = append(failures, msg)
						pr = pair{}
						break
					}
				}
				logf("  %.0f rec/s, %.1f MB/s, ack p99 %.2f ms, e2e p99 %.2f ms, broker CPU %.2f s/GB, peak RSS %.0f MiB",
					r.Gen.Produce.RecordsPerS, r.Gen.Produce.MBPerS, r.Gen.Produce.Ack.P99, r.Gen.Consume.E2E.P99, r.CPUPerGB, r.PeakRSSMiB)
				if raw != nil {
					b, _ := json.Marshal(r)
					raw.Write(append(b, '\n'))
				}
				if b == "sluice" {
					pr.S = r
				} else {
					pr.K = r
				}
			}
			if pr.S != nil && pr.K != nil {
				results[w.Name] = append(results[w.Name], pr)
			}
		}
	}
	m.LoadEnd = loadavg()
	if v, err := ddMBps(o); err == nil {
		m.Limits.DiskRuns = append(m.Limits.DiskRuns, v)
		m.Limits.DiskMBps = math.Max(m.Limits.DiskMBps, v)
		logf("dd fdatasync at the end: %.0f MB/s", v)
	}
	m.Elapsed = time.Since(started)
	m.Failures = failures
	// The sections measured on their own (-section, -compaction) are kept.
	rep := keepSections(o.out, report(o, m, wls, results))
	if err := os.WriteFile(o.out, []byte(rep), 0o644); err != nil {
		return err
	}
	logf("wrote %s in %s", o.out, m.Elapsed.Round(time.Second))
	// The cluster section is part of the whole run: it replaces its last
	// version, kept above.
	if o.clusterPairs > 0 {
		return clusterBench(o)
	}
	return nil
}

// ---------------------------------------------------------------- machine

type limits struct {
	TCPMBps  float64
	DiskMBps float64 // the higher of the two dd runs: the ceiling
	DiskRuns []float64
}

type machine struct {
	CPU, Kernel, Mem, Disk, GoVersion, JavaVersion, SluiceVersion, FranzGo string
	NProc                                                                  int
	LoadStart, LoadEnd                                                     string
	Date                                                                   string
	Limits                                                                 limits
	Failures                                                               []string
	Elapsed                                                                time.Duration
}

func sh(name string, args ...string) string {
	out, _ := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out))
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func machineInfo(o *opts) machine {
	m := machine{NProc: runtime.NumCPU(), Date: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m.CPU = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	if n, err := strconv.Atoi(sh("nproc")); err == nil {
		m.NProc = n
	}
	m.Kernel = sh("uname", "-sr")
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				f := strings.Fields(l)
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.Mem = fmt.Sprintf("%.1f GiB", kb/1024/1024)
			}
		}
	}
	// The file system and block device under the data directories.
	src := sh("findmnt", "-n", "-o", "SOURCE,FSTYPE", "--target", o.tmp)
	dev := strings.Fields(src)
	disk := src
	if len(dev) > 0 && strings.HasPrefix(dev[0], "/dev/") {
		if model := sh("lsblk", "-ndo", "MODEL,SIZE,ROTA", dev[0]); model != "" {
			disk += " (" + strings.Join(strings.Fields(model), " ") + ")"
		}
	}
	m.Disk = disk
	m.GoVersion = runtime.Version()
	m.JavaVersion = firstLine(sh("java", "-version"))
	m.SluiceVersion = o.version
	if m.SluiceVersion == "" {
		m.SluiceVersion = sh("git", "describe", "--always", "--dirty")
	}
	m.FranzGo = "franz-go " + modVersion("github.com/twmb/franz-go")
	m.LoadStart = loadavg()
	return m
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func modVersion(path string) string {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	return "?"
}

func measureLimits(o *opts) (limits, error) {
	var l limits
	// Loopback TCP: sink on the broker's core, source on the generator's.
	port, err := freePort()
	if err != nil {
		return l, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	sink := exec.Command("taskset", "-c", o.brokerCPU, o.genBin, "tcp-sink", "-addr", addr, "-duration", "3s")
	var sinkOut bytes.Buffer
	sink.Stdout = &sinkOut
	sink.Stderr = os.Stderr
	if err := sink.Start(); err != nil {
		return l, err
	}
	time.Sleep(300 * time.Millisecond)
	src := exec.Command("taskset", "-c", o.genCPU, o.genBin, "tcp-source", "-addr", addr, "-duration", "3s")
	src.Stderr = os.Stderr
	if err := src.Run(); err != nil {
		sink.Process.Kill()
		return l, fmt.Errorf("tcp-source: %w", err)
	}
	if err := sink.Wait(); err != nil {
		return l, fmt.Errorf("tcp-sink: %w", err)
	}
	var t struct {
		MBps float64 `json:"mb_per_s"`
	}
	if err := json.Unmarshal(sinkOut.Bytes(), &t); err != nil {
		return l, fmt.Errorf("tcp-sink output %q: %w", sinkOut.String(), err)
	}
	l.TCPMBps = t.MBps

	for i := 0; i < 2; i++ {
		v, err := ddMBps(o)
		if err != nil {
			return l, err
		}
		l.DiskRuns = append(l.DiskRuns, v)
		l.DiskMBps = math.Max(l.DiskMBps, v)
	}
	return l, nil
}

// ddMBps is a sequential durable write: dd in 1 MiB blocks with one
// fdatasync at the end, in the file system of the data directories.
func ddMBps(o *opts) (float64, error) {
	f := filepath.Join(o.tmp, fmt.Sprintf("sluice-bench-dd-%d", os.Getpid()))
	defer os.Remove(f)
	out, err := exec.Command("taskset", "-c", o.brokerCPU, "dd", "if=/dev/zero", "of="+f, "bs=1M",
		fmt.Sprintf("count=%d", o.ddMiB), "conv=fdatasync").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("dd: %v: %s", err, out)
	}
	// "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 2.1 s, 511 MB/s"
	re := regexp.MustCompile(`(\d+) bytes .* copied, ([0-9.]+) s`)
	mm := re.FindStringSubmatch(string(out))
	if mm == nil {
		return 0, fmt.Errorf("dd output %q", out)
	}
	by, _ := strconv.ParseFloat(mm[1], 64)
	secs, _ := strconv.ParseFloat(mm[2], 64)
	return by / secs / 1e6, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// freePorts returns n loopback ports free now and not handed out before
// in this process. They lie below the kernel's ephemeral range
// (s3test.LoopbackPorts): a port from that range, as listening on port 0
// gives, can be taken by any outgoing connection, a starting cluster's own
// among them, before the broker meant to listen there binds it (a write
// broker of the cluster section found its port taken so on 2026-12-07).
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var out []int
	for tries := 0; len(out) < n && tries < 10; tries++ {
		ps, err := s3test.LoopbackPorts(n - len(out))
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if !portsGiven[p] {
				portsGiven[p] = true
				out = append(out, p)
			}
		}
	}
	if len(out) < n {
		return nil, errors.New("no free loopback ports")
	}
	return out, nil
}

func freePort() (int, error) {
	p, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ---------------------------------------------------------------- one run

type genResult struct {
	WindowS float64 `json:"window_s"`
	Produce struct {
		Records       int64   `json:"records"`
		TotalRecords  int64   `json:"total_records"`
		TotalBytes    int64   `json:"total_bytes"`
		RecordsPerS   float64 `json:"records_per_s"`
		MBPerS        float64 `json:"mb_per_s"`
		Batches       int64   `json:"batches"`
		Requests      int64   `json:"requests"`
		RecordsPerReq float64 `json:"records_per_request"`
		Ack           lat     `json:"ack_latency"`
		SendDelay     lat     `json:"send_delay"`
		TLS           string  `json:"tls"`
	} `json:"produce"`
	Consume struct {
		RecordsPerS float64 `json:"records_per_s"`
		MBPerS      float64 `json:"mb_per_s"`
		E2E         lat     `json:"e2e_latency"`
	} `json:"consume"`
	Txn struct {
		Committed int64   `json:"committed"`
		PerS      float64 `json:"per_s"`
		Latency   lat     `json:"latency"`
		Commit    lat     `json:"commit_latency"`
	} `json:"txn"`
	Backlog struct {
		MBPerS float64 `json:"mb_per_s"`
		// Readers-only runs: seconds until every backlog reader had
		// read the whole topic, and the MB/s over that time (0: not
		// within the run).
		CaughtUpS      float64 `json:"caught_up_s"`
		CaughtUpMBPerS float64 `json:"caught_up_mb_per_s"`
	} `json:"backlog"`
	Share struct {
		Records          int64   `json:"records"`
		Bytes            int64   `json:"bytes"`
		Redelivered      int64   `json:"redelivered"`
		Duplicates       int64   `json:"duplicates"`
		FirstRecordS     float64 `json:"first_record_s"`
		DrainS           float64 `json:"drain_s"`
		RecordsPerS      float64 `json:"records_per_s"`
		MBPerS           float64 `json:"mb_per_s"`
		PerConsumer      []int64 `json:"per_consumer"`
		Fetch            lat     `json:"sharefetch_with_records"`
		FetchEmpty       int64   `json:"sharefetch_empty"`
		FetchRequests    int64   `json:"sharefetch_requests"`
		BrokerJoinCPUS   float64 `json:"broker_join_cpu_s"`
		BrokerCPUS       float64 `json:"broker_cpu_s"`
		BrokerPeakRSSMiB float64 `json:"broker_peak_rss_mib"`
	} `json:"share"`
}

type lat struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

type runResult struct {
	Workload   string    `json:"workload"`
	Broker     string    `json:"broker"`
	Gen        genResult `json:"gen"`
	CPUSec     float64   `json:"broker_cpu_s"`
	CPUPerGB   float64   `json:"broker_cpu_s_per_gb"`
	PeakRSSMiB float64   `json:"broker_peak_rss_mib"`
	GenCPUUtil float64   `json:"gen_cpu_util"` // generator CPU-seconds per wall second
	DiskWriteB int64     `json:"broker_disk_write_bytes"`
	SysCalls   int64     `json:"broker_rw_syscalls"`
	StartS     float64   `json:"broker_start_s"`
	// Sluice's metastore writes during a share run (prefill included):
	// how many, and their summed latency (sluice_metastore_write_seconds).
	MetaWrites float64 `json:"broker_metastore_writes,omitempty"`
	MetaWriteS float64 `json:"broker_metastore_write_s,omitempty"`
	WallS      float64 `json:"gen_wall_s"`
	Load       string  `json:"load_avg"` // at the start of the run
}

type procStat struct {
	cpu      float64 // seconds
	writeB   int64
	syscalls int64
}

var clkTck = 100.0 // sysconf(_SC_CLK_TCK) is 100 on Linux

func readProc(pid int) (procStat, error) {
	var s procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	s.cpu = (ut + st) / clkTck
	if io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		for _, l := range strings.Split(string(io), "\n") {
			k, v, _ := strings.Cut(l, ": ")
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "write_bytes":
				s.writeB = n
			case "syscr", "syscw":
				s.syscalls += n
			}
		}
	}
	return s, nil
}

func peakRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

type broker struct {
	cmd     *exec.Cmd
	dir     string
	addr    string            // PLAINTEXT
	secure  map[string]string // SSL and SASL_SSL listeners of a secure broker
	admin   string            // Sluice only
	pprof   string            // Sluice only: pprof.listen
	logFile *os.File
	started time.Duration
}

func (b *broker) pid() int { return b.cmd.Process.Pid }

func (b *broker) stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		b.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { b.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(8 * time.Second):
			b.cmd.Process.Kill()
			<-done
		}
	}
	if b.logFile != nil {
		b.logFile.Close()
	}
	os.RemoveAll(b.dir)
}

// startBroker starts a broker of kind (sluice or kafka) for workload w
// (its durability and listeners), with the broker settings extra
// (key=value, the same name on both).
func startBroker(o *opts, kind string, w workload, extra ...string) (*broker, error) {
	d := w.Dur
	dir, err := os.MkdirTemp(o.tmp, "sluice-bench-"+kind+"-")
	if err != nil {
		return nil, err
	}
	b := &broker{dir: dir}
	port, err := freePort()
	if err != nil {
		return b, err
	}
	b.addr = fmt.Sprintf("127.0.0.1:%d", port)
	b.logFile, err = os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		return b, err
	}
	t0 := time.Now()
	switch kind {
	case "sluice":
		ap, err := freePort()
		if err != nil {
			return b, err
		}
		b.admin = fmt.Sprintf("127.0.0.1:%d", ap)
		pp, err := freePort()
		if err != nil {
			return b, err
		}
		b.pprof = fmt.Sprintf("127.0.0.1:%d", pp)
		listen := []string{"--kafka-addr", b.addr}
		if w.Proto != "" {
			// PLAINTEXT, SSL and SASL_SSL listeners (--kafka-addr would
			// replace them with one).
			if listen, err = b.secureSluice(o); err != nil {
				return b, err
			}
		}
		args := append([]string{"-c", o.brokerCPU, o.sluiceBin, "dev", "--data-dir", filepath.Join(dir, "data"),
			"--admin-addr", b.admin, "--log-level", "warn", "--log-format", "json",
			"--set", "pprof.listen=" + b.pprof}, listen...)
		if d == pageCache {
			args = append(args, "--set", "log.fsync=never")
		} else {
			args = append(args, "--set", "log.fsync=group")
		}
		for _, kv := range extra {
			args = append(args, "--set", kv)
		}
		b.cmd = exec.Command("taskset", args...)
		if w.Proto != "" {
			b.cmd.Env = append(os.Environ(), "SLUICE_BOOTSTRAP_USER="+benchUser+":"+benchPassword)
		}
	case "kafka":
		cport, err := freePort()
		if err != nil {
			return b, err
		}
		listeners, advertised, protoMap := "PLAINTEXT://"+b.addr, "PLAINTEXT://"+b.addr, "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
		var secureProps string
		var formatArgs []string
		if w.Proto != "" {
			if secureProps, formatArgs, err = b.secureKafka(o); err != nil {
				return b, err
			}
			for _, p := range secureProtos {
				listeners += "," + p + "://" + b.secure[p]
				advertised += "," + p + "://" + b.secure[p]
				protoMap += "," + p + ":" + p
			}
		}
		props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%d
listeners=%s,CONTROLLER://127.0.0.1:%d
advertised.listeners=%s
controller.listener.names=CONTROLLER
listener.security.protocol.map=%s
inter.broker.listener.name=PLAINTEXT
log.dirs=%s
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
`, cport, listeners, cport, advertised, protoMap, filepath.Join(dir, "data")) + secureProps
		if d == durable {
			props += "log.flush.interval.messages=1\n"
		}
		for _, kv := range extra {
			props += kv + "\n"
		}
		pf := filepath.Join(dir, "server.properties")
		lf := filepath.Join(dir, "log4j2.properties")
		if err := os.WriteFile(pf, []byte(props), 0o644); err != nil {
			return b, err
		}
		if err := os.WriteFile(lf, []byte(log4j2), 0o644); err != nil {
			return b, err
		}
		cp := filepath.Join(o.kafkaLibs, "*")
		logProp := "-Dlog4j2.configurationFile=" + lf
		format := exec.Command("taskset", append([]string{"-c", o.brokerCPU, "java", "-Xmx256m", logProp, "-cp", cp,
			"kafka.tools.StorageTool", "format", "-t", clusterID(), "-c", pf}, formatArgs...)...)
		if out, err := format.CombinedOutput(); err != nil {
			return b, fmt.Errorf("kafka-storage format: %v: %s", err, out)
		}
		t0 = time.Now()
		// The JVM options of kafka-server-start.sh / kafka-run-class.sh.
		b.cmd = exec.Command("taskset", "-c", o.brokerCPU, "java",
			"-Xmx"+o.kafkaHeap, "-Xms"+o.kafkaHeap, "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
			"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
			logProp, "-cp", cp, "kafka.Kafka", pf)
	}
	b.cmd.Stdout = b.logFile
	b.cmd.Stderr = b.logFile
	if err := b.cmd.Start(); err != nil {
		return b, err
	}
	exited := make(chan struct{})
	go func() {
		// Only watches; stop() does the Wait.
		for {
			if err := syscall.Kill(b.pid(), 0); err != nil {
				close(exited)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	deadline := time.Now().Add(90 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			return b, fmt.Errorf("%s exited on start; log in %s", kind, b.logFile.Name())
		default:
		}
		if time.Now().After(deadline) {
			return b, fmt.Errorf("%s did not listen on %s within 90s", kind, b.addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.started = time.Since(t0)
	return b, nil
}

const log4j2 = `rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.cleaner.name = org.apache.kafka.storage.internals.log.LogCleaner
logger.cleaner.level = INFO
logger.cleanerthread.name = org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread
logger.cleanerthread.level = INFO
`

func clusterID() string {
	for {
		var b [16]byte
		rand.Read(b[:])
		// The format tool's option parser takes a leading '-' for a flag.
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' && id[0] != '_' {
			return id
		}
	}
}

func genArgs(o *opts, w workload, b *broker) []string {
	addr := b.addr
	if w.Proto != "" && w.Proto != "PLAINTEXT" {
		addr = b.secure[w.Proto]
	}
	topic := "bench-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(w.Name))
	args := []string{"-c", o.genCPU, o.genBin, "-brokers", addr, "-topic", topic,
		"-duration", o.duration.String(), "-warmup", o.warmup.String(), "-label", w.Name}
	if w.Proto != "" {
		args = append(args, "-command-config", filepath.Join(o.certs, w.Proto+".properties"))
	}
	if o.quiet {
		args = append(args, "-quiet")
	}
	if w.Share {
		args = append(args, "-prefill", strconv.FormatInt(o.shareRecs, 10), "-broker-pid", strconv.Itoa(b.pid()))
	}
	if w.Name == "W5" && o.w5Groups {
		args = append(args, "-backlog-groups")
	}
	return append(args, w.Args...)
}

func runOnce(o *opts, w workload, kind string) (*runResult, error) {
	b, err := startBroker(o, kind, w)
	defer b.stop()
	if err != nil {
		return nil, err
	}
	r := &runResult{Workload: w.Name, Broker: kind, StartS: b.started.Seconds(), Load: loadavg()}
	before, err := readProc(b.pid())
	if err != nil {
		return nil, err
	}
	var metaBefore []byte
	if w.Share && kind == "sluice" {
		metaBefore = scrape(b.admin)
	}
	gen := exec.Command("taskset", genArgs(o, w, b)...)
	var out bytes.Buffer
	gen.Stdout = &out
	gen.Stderr = os.Stderr
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.duration+5*time.Minute)
	defer cancel()
	go func() { <-ctx.Done(); gen.Process.Kill() }()
	runErr := gen.Run()
	wall := time.Since(t0).Seconds()
	after, perr := readProc(b.pid())
	if perr != nil {
		return nil, fmt.Errorf("broker gone after the run: %v (log %s)", perr, b.logFile.Name())
	}
	r.PeakRSSMiB = peakRSS(b.pid())
	line := lastLine(out.String())
	if err := json.Unmarshal([]byte(line), &r.Gen); err != nil {
		return nil, fmt.Errorf("generator output %q: %v (run error %v)", line, err, runErr)
	}
	if runErr != nil {
		return nil, fmt.Errorf("generator: %v", runErr)
	}
	r.CPUSec = after.cpu - before.cpu
	r.WallS = wall
	if gb := float64(r.Gen.Produce.TotalBytes) / 1e9; gb > 0 {
		r.CPUPerGB = r.CPUSec / gb
	}
	r.DiskWriteB = after.writeB - before.writeB
	r.SysCalls = after.syscalls - before.syscalls
	if ps := gen.ProcessState; ps != nil && wall > 0 {
		r.GenCPUUtil = (ps.UserTime() + ps.SystemTime()).Seconds() / wall
	}
	if w.Share {
		// The drain's figures only, without the prefill before it: the
		// broker's CPU from the first record delivered to the last
		// acknowledgement, per GB drained, and its peak RSS from the
		// consumers' start to that end.
		sh := r.Gen.Share
		if sh.Records != o.shareRecs || sh.Duplicates != 0 {
			return nil, fmt.Errorf("share drain accepted %d distinct records of %d prefilled, %d delivered twice", sh.Records, o.shareRecs, sh.Duplicates)
		}
		r.CPUSec, r.CPUPerGB, r.PeakRSSMiB = sh.BrokerCPUS, 0, sh.BrokerPeakRSSMiB
		if metaBefore != nil {
			if after := scrape(b.admin); after != nil {
				r.MetaWrites = metric(after, "sluice_metastore_write_seconds_count") - metric(metaBefore, "sluice_metastore_write_seconds_count")
				r.MetaWriteS = metric(after, "sluice_metastore_write_seconds_sum") - metric(metaBefore, "sluice_metastore_write_seconds_sum")
			}
		}
		if gb := float64(sh.Bytes) / 1e9; gb > 0 {
			r.CPUPerGB = sh.BrokerCPUS / gb
		}
	}
	return r, nil
}

// ---------------------------------------------------------------- profile

func profile(o *opts) error {
	if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
		return err
	}
	ws, err := pick(o.profileWls)
	if err != nil {
		return err
	}
	for _, w := range ws {
		name := w.Name
		b, err := startBroker(o, "sluice", w)
		if err != nil {
			b.stop()
			return err
		}
		get := func(path, file string) error {
			addr := b.admin
			if strings.HasPrefix(path, "/debug/pprof/") {
				addr = b.pprof // pprof has its own address (pprof.listen)
			}
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			f, err := os.Create(filepath.Join(o.profileDir, file))
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = bufio.NewReader(resp.Body).WriteTo(f)
			return err
		}
		gen := exec.Command("taskset", genArgs(o, w, b)...)
		var out bytes.Buffer
		gen.Stdout = &out
		gen.Stderr = os.Stderr
		before, _ := readProc(b.pid())
		if err := gen.Start(); err != nil {
			b.stop()
			return err
		}
		time.Sleep(o.warmup + 500*time.Millisecond)
		lower := strings.ToLower(name)
		err = get("/metrics", lower+"-metrics-before.txt")
		if err == nil {
			err = get("/debug/pprof/allocs", lower+"-allocs-before.pb.gz")
		}
		if err == nil {
			err = get(fmt.Sprintf("/debug/pprof/profile?seconds=%d", o.profileSecs), lower+"-cpu.pb.gz")
		}
		if err == nil {
			err = get("/debug/pprof/allocs", lower+"-allocs-after.pb.gz")
		}
		if err == nil {
			err = get("/metrics", lower+"-metrics-after.txt")
		}
		if err == nil {
			// Syscall counts over 3 s (strace slows the broker, so this
			// comes after the profiles and only its ratios matter).
			if _, lerr := exec.LookPath("strace"); lerr == nil {
				exec.Command("timeout", "-s", "INT", "3", "strace", "-c", "-f", "-o",
					filepath.Join(o.profileDir, lower+"-strace.txt"), "-p", strconv.Itoa(b.pid())).Run()
			}
		}
		gerr := gen.Wait()
		after, _ := readProc(b.pid())
		b.stop()
		if err != nil {
			return err
		}
		if gerr != nil {
			return fmt.Errorf("generator: %v", gerr)
		}
		os.WriteFile(filepath.Join(o.profileDir, lower+"-gen.json"), out.Bytes(), 0o644)
		mb, _ := os.ReadFile(filepath.Join(o.profileDir, lower+"-metrics-before.txt"))
		ma, _ := os.ReadFile(filepath.Join(o.profileDir, lower+"-metrics-after.txt"))
		d := func(k string) float64 { return metric(ma, k) - metric(mb, k) }
		recs := d("sluice_produced_bytes_total") / 1024
		if recs > 0 {
			logf("%s: over the CPU profile: %.0f records produced, %.2f heap allocations and %.0f bytes allocated per record",
				name, recs, d("go_memstats_mallocs_total")/recs, d("go_memstats_alloc_bytes_total")/recs)
		}
		logf("%s: broker %.2f CPU-s, %d read/write syscalls, %d disk bytes written; profiles in %s",
			name, after.cpu-before.cpu, after.syscalls-before.syscalls, after.writeB-before.writeB, o.profileDir)
		os.WriteFile(filepath.Join(o.profileDir, lower+"-proc.txt"), []byte(fmt.Sprintf(
			"cpu_s %.2f\nrw_syscalls %d\ndisk_write_bytes %d\n", after.cpu-before.cpu, after.syscalls-before.syscalls, after.writeB-before.writeB)), 0o644)
	}
	return nil
}

// scrape is a Sluice broker's /metrics page (nil if it cannot be read).
func scrape(admin string) []byte {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	return text
}

// metric sums the samples of one Prometheus metric (all label sets).
func metric(text []byte, name string) float64 {
	var sum float64
	for _, l := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(l, name) {
			continue
		}
		rest := l[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// ---------------------------------------------------------------- report

type pair struct{ S, K *runResult }

func median(v []float64) float64 {
	var c []float64
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			c = append(c, x)
		}
	}
	if len(c) == 0 {
		return math.NaN()
	}
	sort.Float64s(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

type figure struct {
	name   string
	unit   string
	better string // "higher" or "lower"
	get    func(*runResult) float64
}

func figuresFor(w workload) []figure {
	f := []figure{
		{"produce throughput", "records/s", "higher", func(r *runResult) float64 { return r.Gen.Produce.RecordsPerS }},
		{"produce throughput", "MB/s", "higher", func(r *runResult) float64 { return r.Gen.Produce.MBPerS }},
		{"produce ack p50", "ms", "lower", func(r *runResult) float64 { return r.Gen.Produce.Ack.P50 }},
		{"produce ack p99", "ms", "lower", func(r *runResult) float64 { return r.Gen.Produce.Ack.P99 }},
		{"produce ack p99.9", "ms", "lower", func(r *runResult) float64 { return r.Gen.Produce.Ack.P999 }},
		{"produce ack max", "ms", "lower", func(r *runResult) float64 { return r.Gen.Produce.Ack.Max }},
	}
	if rate := targetRate(w); rate > 0 {
		f = append(f,
			figure{"target rate achieved", "%", "higher", func(r *runResult) float64 { return 100 * r.Gen.Produce.RecordsPerS / rate }},
			figure{"send delay behind schedule p99", "ms", "lower", func(r *runResult) float64 { return r.Gen.Produce.SendDelay.P99 }})
	}
	if w.Latcy || w.Name == "W4" {
		f = append(f,
			figure{"end-to-end p50", "ms", "lower", func(r *runResult) float64 { return r.Gen.Consume.E2E.P50 }},
			figure{"end-to-end p99", "ms", "lower", func(r *runResult) float64 { return r.Gen.Consume.E2E.P99 }},
			figure{"end-to-end p99.9", "ms", "lower", func(r *runResult) float64 { return r.Gen.Consume.E2E.P999 }},
			figure{"end-to-end max", "ms", "lower", func(r *runResult) float64 { return r.Gen.Consume.E2E.Max }},
		)
	}
	if w.Name == "W5" {
		f = append(f, figure{"backlog read (4 readers)", "MB/s", "higher", func(r *runResult) float64 { return r.Gen.Backlog.MBPerS }})
	}
	f = append(f,
		figure{"broker CPU per GB ingested", "CPU-s/GB", "lower", func(r *runResult) float64 { return r.CPUPerGB }},
		figure{"broker CPU, share of its core", "%", "lower", func(r *runResult) float64 { return 100 * r.CPUSec / r.WallS }},
		figure{"broker peak RSS", "MiB", "lower", func(r *runResult) float64 { return r.PeakRSSMiB }},
		figure{"broker disk writes per byte ingested", "x", "lower", func(r *runResult) float64 {
			return float64(r.DiskWriteB) / float64(r.Gen.Produce.TotalBytes)
		}},
		figure{"generator core busy", "%", "", func(r *runResult) float64 { return 100 * r.GenCPUUtil }},
	)
	return f
}

// targetRate is the workload's -rate, 0 for max throughput.
func targetRate(w workload) float64 {
	for i := 0; i+1 < len(w.Args); i++ {
		if w.Args[i] == "-rate" {
			v, _ := strconv.ParseFloat(w.Args[i+1], 64)
			return v
		}
	}
	return 0
}

func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return commas(int64(math.Round(v)))
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// agg holds the medians of Sluice, Kafka and the per-pair ratios, and the
// range of those ratios.
type agg struct{ S, K, R, Rmin, Rmax float64 }

func aggregate(ps []pair, get func(*runResult) float64) agg {
	return aggregateN(len(ps), func(i int) (float64, float64) { return get(ps[i].S), get(ps[i].K) })
}

// aggregateN is aggregate over n pairs whose Sluice and Kafka figures
// get(i) returns.
func aggregateN(n int, get func(i int) (float64, float64)) agg {
	var s, k, r []float64
	for i := 0; i < n; i++ {
		a, b := get(i)
		s = append(s, a)
		k = append(k, b)
		if b != 0 {
			r = append(r, a/b)
		}
	}
	a := agg{median(s), median(k), median(r), math.NaN(), math.NaN()}
	for i, x := range r {
		if i == 0 || x < a.Rmin {
			a.Rmin = x
		}
		if i == 0 || x > a.Rmax {
			a.Rmax = x
		}
	}
	return a
}

func report(o *opts, m machine, wls []workload, res map[string][]pair) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Benchmarks: Sluice and Apache Kafka, side by side\n\n")
	p("Generated by `%s` (bench/run.sh, bench/runner) on %s; do not edit by hand.\n", o.command, m.Date)
	p("Every figure is a median over %d pairs (fewer where a run failed: see Notes); the Sluice/Kafka column is the median of the per-pair ratios ", o.pairs)
	p("(runs alternate A B B A ..., each with a fresh broker process and a fresh data directory), ")
	p("which holds far better than absolute figures on a shared machine.\n\n")

	p("## Machine and versions\n\n")
	p("| | |\n|---|---|\n")
	p("| CPU | %s, %d cores (nproc) |\n", m.CPU, m.NProc)
	p("| memory | %s |\n", m.Mem)
	p("| kernel | %s |\n", m.Kernel)
	p("| data directories on | %s |\n", m.Disk)
	p("| load average (1/5/15 min) | %s at start, %s at end |\n", m.LoadStart, m.LoadEnd)
	p("| pinning | broker on core %s, generator on core %s (taskset) |\n", o.brokerCPU, o.genCPU)
	p("| Sluice | %s, %s |\n", m.SluiceVersion, m.GoVersion)
	p("| Apache Kafka | 4.4.0 (kafka_2.13 from Maven Central), single KRaft combined node, JVM heap %s, G1, %s |\n", o.kafkaHeap, m.JavaVersion)
	p("| generator | cmd/sluice-bench, %s, linger 5 ms, idempotent producer, no compression |\n", m.FranzGo)
	p("| runs | %d pairs per workload, %s per run of which %s warm-up, total %s |\n", o.pairs, o.duration, o.warmup, m.Elapsed.Round(time.Second))
	p("\n## Machine limits (same run)\n\n")
	p("| limit | value | how |\n|---|---|---|\n")
	p("| loopback TCP | %s MB/s | one connection, 1 MiB writes, sender and receiver on the two cores, 3 s |\n", fmtNum(m.Limits.TCPMBps))
	var runs []string
	for _, v := range m.Limits.DiskRuns {
		runs = append(runs, fmtNum(v))
	}
	p("| sequential durable write | %s MB/s | `dd if=/dev/zero bs=1M count=%d conv=fdatasync` in the data directories' file system, twice before the workloads and once after (%s MB/s); the highest is the ceiling |\n",
		fmtNum(m.Limits.DiskMBps), o.ddMiB, strings.Join(runs, " and "))

	p("\n## Durability\n\n")
	p("| mode | Sluice | Kafka |\n|---|---|---|\n")
	p("| fsync | %s | %s |\n", durable.sluice(), durable.kafka())
	p("| page-cache | %s | %s |\n", pageCache.sluice(), pageCache.kafka())
	p("\nBoth acknowledge acks=all after their single replica has the write; in fsync mode, only after it is on disk.\n")

	p("\n## Workloads\n\n| workload | durability | shape |\n|---|---|---|\n")
	for _, w := range wls {
		p("| %s | %s | %s |\n", w.Name, w.Dur, w.Desc)
	}

	p("\n## Results\n\n")
	p("Throughput is acknowledged records in the measured window; ack latency is from `Produce` to the acknowledgement; ")
	p("end-to-end latency is from `Produce` to the record in a consumer's hands. At a fixed rate a producer held back by ")
	p("the broker (its buffer full) falls behind its schedule and then catches up; the send delay rows say how far behind it was ")
	p("(the OpenMessaging Benchmark's 'publish delay'), and are part of the latency a user would see. CPU per GB counts the broker's user+system ")
	p("time over the whole generator run (consumers' fetches included) per 10^9 bytes of record values acknowledged. ")
	p("Peak RSS is VmHWM. The generator line shows how busy its one core was: near 100 %% means the generator, not the broker, may be the limit.\n\n")
	p("| workload | figure | Sluice | Kafka | Sluice/Kafka | pair ratios |\n|---|---|---:|---:|---:|---:|\n")
	for _, w := range wls {
		ps := res[w.Name]
		if len(ps) == 0 {
			continue
		}
		for _, f := range figuresFor(w) {
			a := aggregate(ps, f.get)
			rng := "n/a"
			if !math.IsNaN(a.Rmin) {
				rng = fmt.Sprintf("%.2f-%.2f", a.Rmin, a.Rmax)
			}
			p("| %s | %s (%s) | %s | %s | %s | %s |\n", w.Name, f.name, f.unit, fmtNum(a.S), fmtNum(a.K), ratio(a.R), rng)
		}
	}
	// W5 against W3: how much the backlog readers cost the producer.
	if len(res["W3"]) > 0 && len(res["W5"]) > 0 {
		get := func(r *runResult) float64 { return r.Gen.Produce.Ack.P99 }
		a3, a5 := aggregate(res["W3"], get), aggregate(res["W5"], get)
		p("| W5 vs W3 | produce ack p99, W5 / W3 | %s | %s | | |\n", ratio(a5.S/a3.S), ratio(a5.K/a3.K))
	}

	p("\n## Sluice against the machine's limits\n\n")
	p("| workload | Sluice MB/s | of dd fdatasync (%s MB/s) | of loopback TCP (%s MB/s) |\n|---|---:|---:|---:|\n",
		fmtNum(m.Limits.DiskMBps), fmtNum(m.Limits.TCPMBps))
	for _, w := range wls {
		ps := res[w.Name]
		if len(ps) == 0 {
			continue
		}
		a := aggregate(ps, func(r *runResult) float64 { return r.Gen.Produce.MBPerS })
		p("| %s | %s | %.0f %% | %.1f %% |\n", w.Name, fmtNum(a.S), 100*a.S/m.Limits.DiskMBps, 100*a.S/m.Limits.TCPMBps)
	}

	p("\n## Goals (issue 7)\n\n| goal | measured | met |\n|---|---|---|\n")
	goals(&b, m, res)

	notes(&b, o, m, wls, res)

	p("\n## Reproduce\n\n")
	p("```\n")
	p("make bench                                   # this report; needs Go, Java 17+, Maven, taskset, 2 cores\n")
	p("make bench BENCH_ARGS='-pairs 5 -duration 15s'\n")
	p("BENCH_SOURCE=head make bench                 # Sluice built from the last commit instead of the working tree\n")
	p("bash bench/run.sh -workloads W1,W3 -pairs 1 -out /tmp/quick.md\n")
	p("bash bench/run.sh -profile /tmp/prof         # pprof CPU and allocation profiles of Sluice under W1 and W3\n")
	p("make bench BENCH_ARGS='-section tls'         # only the section 'W1 over TLS' (also: -section txn), the rest of this file kept\n")
	p("make bench BENCH_ARGS='-section cluster'     # only the cluster section (split Sluice cluster and 3 Kafka brokers)\n")
	p("make bench-isolation                         # the section on producers under heavy readers (split cluster and 3 Kafka brokers)\n")
	p("make bench BENCH_ARGS='-section share'       # only the section on share-group consumers (8 share consumers draining 1 and 8 partitions)\n")
	p("go run ./cmd/sluice-bench -help              # the load generator on its own, against any Kafka-compatible broker\n")
	p("```\n")

	p("\n## Every run\n\n| workload | pair | broker | records/s | MB/s | ack p99 ms | e2e p99 ms | CPU-s/GB | peak RSS MiB | broker start s | gen core |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range wls {
		for i, pr := range res[w.Name] {
			for _, r := range []*runResult{pr.S, pr.K} {
				p("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %.1f | %.0f %% |\n", w.Name, i+1, r.Broker,
					fmtNum(r.Gen.Produce.RecordsPerS), fmtNum(r.Gen.Produce.MBPerS), fmtNum(r.Gen.Produce.Ack.P99),
					fmtNum(r.Gen.Consume.E2E.P99), fmtNum(r.CPUPerGB), fmtNum(r.PeakRSSMiB), r.StartS, 100*r.GenCPUUtil)
			}
		}
	}
	return b.String()
}

func notes(b *strings.Builder, o *opts, m machine, wls []workload, res map[string][]pair) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("\n## Notes\n\n")
	if len(m.Failures) > 0 {
		p("- **Runs that failed twice, their pairs left out:** %s\n", strings.Join(m.Failures, "; "))
	}
	p("- Each run: a fresh broker in a fresh temporary data directory; the generator creates the topic (replication factor 1), ")
	p("then %s of sending of which the first %s is left out of throughput and latency figures; consumers then get up to 10 s to read the rest. ", o.duration, o.warmup)
	p("Kafka is started as `kafka.Kafka server.properties` with the JVM options of `kafka-server-start.sh`, after `kafka-storage format` (StorageTool); ")
	p("Sluice as `sluice dev`. Broker start-up is outside the measured interval.\n")
	p("- The machine has %d cores: the broker gets one, the generator (every producer and consumer client) the other. ", m.NProc)
	p("The 'generator core busy' rows show whether the generator itself came near its limit.\n")
	p("- Other work on the machine shows in the load average above; pair ratios cancel most of it, absolute figures do not.\n")
	if o.w5Groups {
		p("- W5's four readers are consumer-group members, one group each, reset to the start of the topic; they join when the warm-up ends, ")
		p("with the 250,000 prefilled records (256 MB) and everything produced since to read.\n")
	} else {
		p("- W5's four readers consume every partition directly from offset 0 (kgo.ConsumePartitions), not as consumer groups: ")
		p("(-w5-groups=false). They start when the warm-up ends, with the 250,000 prefilled records (256 MB) and everything since to read.\n")
	}
	var short []string
	for _, w := range wls {
		rate := targetRate(w)
		if rate == 0 {
			continue
		}
		for _, side := range []string{"Sluice", "Kafka"} {
			a := aggregate(res[w.Name], func(r *runResult) float64 { return r.Gen.Produce.RecordsPerS })
			v := a.S
			if side == "Kafka" {
				v = a.K
			}
			if v < 0.97*rate {
				short = append(short, fmt.Sprintf("%s on %s (%.0f %% of the target)", side, w.Name, 100*v/rate))
			}
		}
	}
	if len(short) > 0 {
		p("- Target rate not held (median): %s. The producer then waits on its full buffer (see the send delay rows) and the latency figures are mostly queueing behind the broker.\n", strings.Join(short, "; "))
	}
	p("- Kafka with flush.messages=1 fsyncs every partition it appends to, in the request path, once per produce request and partition; ")
	p("Sluice's group commit syncs each partition written since the last round once per round, shared by every request that waited on it.\n")
	p("- CPU per GB at low rates (W2, W4) is dominated by what a broker spends per second regardless of data (timers, ")
	p("metadata, idle fetch sessions); the 'share of its core' rows are the better figure there.\n")
	p("- Peak RSS (VmHWM) covers the whole process life, start-up included; Kafka's heap is fixed at %s, so its RSS says little about its needs. ", o.kafkaHeap)
	p("Runs of %s cannot show RSS as retained data grows; W1 retains about 3 GB per run, W4 about 10 MB.\n", o.duration)
}

func ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", v)
}

func goals(b *strings.Builder, m machine, res map[string][]pair) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	mb := func(r *runResult) float64 { return r.Gen.Produce.MBPerS }
	if ps := res["W1"]; len(ps) > 0 {
		a := aggregate(ps, mb)
		p("| W1 (fsync) throughput >= 1.5x Kafka | %s | %s |\n", ratio(a.R), yes(a.R >= 1.5))
		f := a.S / m.Limits.DiskMBps
		p("| W1 (fsync) throughput >= 65 %% of dd fdatasync | %.0f %% (%s of %s MB/s) | %s |\n", 100*f, fmtNum(a.S), fmtNum(m.Limits.DiskMBps), yes(f >= 0.65))
		c := aggregate(ps, func(r *runResult) float64 { return r.CPUPerGB })
		p("| W1 (fsync) broker CPU <= 2.0 CPU-s/GB | %s | %s |\n", fmtNum(c.S), yes(c.S <= 2.0))
		if p1 := res["W1-1p"]; len(p1) > 0 {
			b1 := aggregate(p1, mb)
			p("| W1 1 partition >= 0.9x 8 partitions | %.2fx | %s |\n", b1.S/a.S, yes(b1.S/a.S >= 0.9))
		}
	}
	for _, n := range []string{"W2", "W3"} {
		if ps := res[n]; len(ps) > 0 {
			a := aggregate(ps, func(r *runResult) float64 { return r.Gen.Consume.E2E.P99 })
			p("| %s (fsync) end-to-end p99 <= 0.5x Kafka | %s (%s vs %s ms) | %s |\n", n, ratio(a.R), fmtNum(a.S), fmtNum(a.K), yes(a.R <= 0.5))
		}
	}
	for _, n := range []string{"W1", "W3", "W4"} {
		ps := res[n]
		if len(ps) == 0 {
			continue
		}
		a := aggregate(ps, func(r *runResult) float64 { return r.PeakRSSMiB })
		parts := map[string]float64{"W1": 8, "W3": 100, "W4": 1000}[n]
		lim := 64 + parts*16/1024
		p("| %s peak RSS <= 0.25x Kafka and <= %.0f MiB (64 MiB + 16 KiB x %.0f partitions) | %s MiB, %s | %s |\n",
			n, lim, parts, fmtNum(a.S), ratio(a.R), yes(a.R <= 0.25 && a.S <= lim))
	}
}
