package main

// The cluster section of BENCHMARKS.md (-section cluster, and part of a
// whole `make bench` run): Sluice's split cluster against a 3-broker Kafka
// 4.4 cluster, both started by startIsoCluster (isolation.go) with the
// same settings: replication factor 3, min.insync.replicas=2, fsync before
// the acknowledgement (Sluice log.fsync=group, Kafka flush.messages=1).
//
// Each run starts a fresh cluster and runs the generator once: 4
// idempotent producers (acks=all) writing -cluster-records records of
// 1 KiB as fast as they are acknowledged to a new topic of 8 partitions,
// and one tailing consumer measuring end-to-end latency. Sluice's clients
// are seeded on the write brokers' mixed listeners, so the producers reach
// the raft leaders and the consumer is sent to the read brokers. Runs
// alternate A B B A over -cluster-pairs pairs; every figure is the median
// of per-pair ratios, as in the other sections.
//
// CPU is every process's user+system time over the generator's run
// (metastore included on Sluice's side: Kafka's controllers live in its
// broker processes), per GB of record values acknowledged; peak RSS is
// each process's VmHWM at the end of the run, summed and the largest.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

const clusterSection = "cluster"

// clusterRun is one generator run on a fresh cluster.
type clusterRun struct {
	System     string             `json:"system"`
	Pair       int                `json:"pair"`
	Load       string             `json:"load_avg"` // at the start of the generator
	StartS     float64            `json:"cluster_start_s"`
	Gen        genResult          `json:"gen"`
	WallS      float64            `json:"gen_wall_s"`
	GenCPUUtil float64            `json:"gen_cpu_util"`
	CPUSec     map[string]float64 `json:"cpu_s"`        // process -> CPU-seconds over the run
	RSSMiB     map[string]float64 `json:"peak_rss_mib"` // process -> VmHWM
}

func (r *clusterRun) cpuSum() float64 {
	var s float64
	for _, v := range r.CPUSec {
		s += v
	}
	return s
}

func (r *clusterRun) cpuPerGB() float64 {
	if gb := float64(r.Gen.Produce.TotalBytes) / 1e9; gb > 0 {
		return r.cpuSum() / gb
	}
	return 0
}

func (r *clusterRun) rssSum() float64 {
	var s float64
	for _, v := range r.RSSMiB {
		s += v
	}
	return s
}

func (r *clusterRun) rssMax() float64 {
	var m float64
	for _, v := range r.RSSMiB {
		m = math.Max(m, v)
	}
	return m
}

// clusterPair is one Sluice run and one Kafka run of the same pair.
type clusterPair struct{ S, K *clusterRun }

// clusterOrder is the order of the two systems in pair i (0-based):
// A B, B A, A B ...
func clusterOrder(i int) []string {
	if i%2 == 1 {
		return []string{"kafka", "sluice"}
	}
	return []string{"sluice", "kafka"}
}

// clusterGenArgs are the generator's taskset arguments for a run.
func clusterGenArgs(o *opts, seeds, topic string) []string {
	return []string{"-c", o.genCPU, o.genBin, "-brokers", seeds, "-topic", topic,
		"-partitions", "8", "-replication", "3", "-record-size", "1024",
		"-producers", "4", "-consumers", "1",
		"-records", strconv.FormatInt(o.clusterRecords, 10), "-duration", "0",
		"-max-duration", o.clusterMaxDur.String(), "-warmup", o.warmup.String(),
		"-label", "cluster", "-quiet"}
}

func runClusterOnce(o *opts, kind string, pair int) (*clusterRun, error) {
	t0 := time.Now()
	c, err := startIsoCluster(o, kind, "group")
	setIsoCurrent(c)
	defer func() {
		setIsoCurrent(nil)
		if c != nil {
			c.stop()
		}
	}()
	if err != nil {
		return nil, err
	}
	r := &clusterRun{System: kind, Pair: pair, StartS: time.Since(t0).Seconds(), Load: loadavg(), RSSMiB: map[string]float64{}}
	m := c.measure(o, clusterGenArgs(o, c.seeds, fmt.Sprintf("cluster-%d", pair)))
	r.WallS, r.GenCPUUtil, r.CPUSec = m.wall, m.genUtil, m.cpuSec
	for _, n := range c.nodes {
		if n.cmd.ProcessState != nil {
			return nil, fmt.Errorf("%s exited during the run (logs in %s)", n.name, c.dir)
		}
		r.RSSMiB[n.name] = peakRSS(n.cmd.Process.Pid)
	}
	line := lastLine(m.out)
	if jerr := json.Unmarshal([]byte(line), &r.Gen); jerr != nil {
		return nil, fmt.Errorf("generator output %q: %v (run error %v)", line, jerr, m.err)
	}
	if m.err != nil {
		return nil, fmt.Errorf("generator: %v", m.err)
	}
	return r, nil
}

// clusterBench runs the cluster section and writes it into o.out.
func clusterBench(o *opts) error {
	if o.clusterPairs < 1 || o.clusterRecords < 1 {
		return fmt.Errorf("the cluster section needs -cluster-pairs and -cluster-records of at least 1")
	}
	var raw *os.File
	if o.rawOut != "" && o.section == clusterSection {
		var err error
		if raw, err = os.Create(o.rawOut); err != nil {
			return err
		}
		defer raw.Close()
	}
	stopClusterOnSignal()
	started := time.Now()
	cr := clusterReport{o: o, loadStart: loadavg(), date: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	logf("section %s: %d pairs of clusters, %d records each; load average %s", clusterSection, o.clusterPairs, o.clusterRecords, cr.loadStart)
	for i := 0; i < o.clusterPairs; i++ {
		pr := &clusterPair{}
		for _, kind := range clusterOrder(i) {
			logf("cluster pair %d/%d: %s; load average %s", i+1, o.clusterPairs, kind, loadavg())
			r, err := runClusterOnce(o, kind, i+1)
			if err != nil {
				logf("  failed: %v; retrying once", err)
				if r, err = runClusterOnce(o, kind, i+1); err != nil {
					logf("  failed again, pair dropped: %v", err)
					cr.failures = append(cr.failures, strings.Join(strings.Fields(fmt.Sprintf("pair %d, %s: %v", i+1, kind, err)), " "))
					pr = nil
					break
				}
			}
			logf("  %.1f MB/s, ack p50 %.1f p99 %.1f ms, e2e p99 %.1f ms, consumed %.1f MB/s, %.2f CPU-s/GB, RSS sum %.0f max %.0f MiB, cpu-s %s",
				r.Gen.Produce.MBPerS, r.Gen.Produce.Ack.P50, r.Gen.Produce.Ack.P99, r.Gen.Consume.E2E.P99, r.Gen.Consume.MBPerS,
				r.cpuPerGB(), r.rssSum(), r.rssMax(), fmtCPU(r.CPUSec))
			if raw != nil {
				b, _ := json.Marshal(r)
				raw.Write(append(b, '\n'))
			}
			if kind == "sluice" {
				pr.S = r
			} else {
				pr.K = r
			}
		}
		if pr != nil {
			cr.pairs = append(cr.pairs, *pr)
		}
	}
	cr.loadEnd = loadavg()
	cr.elapsed = time.Since(started)
	if err := replaceSection(o.out, clusterSection, renderCluster(cr)); err != nil {
		return err
	}
	logf("section %s written into %s in %s", clusterSection, o.out, cr.elapsed.Round(time.Second))
	return nil
}

type clusterReport struct {
	o                  *opts
	pairs              []clusterPair
	failures           []string
	loadStart, loadEnd string
	date               string
	elapsed            time.Duration
}

type clusterFig struct {
	name, unit string
	get        func(*clusterRun) float64
}

var clusterFigs = []clusterFig{
	{"produce throughput", "records/s", func(r *clusterRun) float64 { return r.Gen.Produce.RecordsPerS }},
	{"produce throughput", "MB/s", func(r *clusterRun) float64 { return r.Gen.Produce.MBPerS }},
	{"produce ack p50", "ms", func(r *clusterRun) float64 { return r.Gen.Produce.Ack.P50 }},
	{"produce ack p99", "ms", func(r *clusterRun) float64 { return r.Gen.Produce.Ack.P99 }},
	{"end-to-end p99 (tailing consumer)", "ms", func(r *clusterRun) float64 { return r.Gen.Consume.E2E.P99 }},
	{"consumer throughput", "MB/s", func(r *clusterRun) float64 { return r.Gen.Consume.MBPerS }},
	{"CPU per GB ingested, all processes", "CPU-s/GB", func(r *clusterRun) float64 { return r.cpuPerGB() }},
	{"peak RSS, sum of all processes", "MiB", func(r *clusterRun) float64 { return r.rssSum() }},
	{"peak RSS, largest process", "MiB", func(r *clusterRun) float64 { return r.rssMax() }},
	{"generator core busy", "%", func(r *clusterRun) float64 { return 100 * r.GenCPUUtil }},
}

func renderCluster(cr clusterReport) string {
	o := cr.o
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## Cluster: the split Sluice cluster against 3 Kafka brokers (issue 12)\n\n")
	p("Measured by `%s` on %s (%s; Sluice %s, Kafka 4.4.0); this section alone is regenerated by `make bench BENCH_ARGS='-section cluster'`, and a whole `make bench` run measures it too. ",
		o.command, cr.date, firstLine(sh("java", "-version")), o.version)
	p("%d pair(s) (the order alternating: Sluice then Kafka, Kafka then Sluice, ...), a fresh cluster with fresh data directories per run, %d records per run of which the first %s are left out of the figures, %s in all. ",
		o.clusterPairs, o.clusterRecords, o.warmup, cr.elapsed.Round(time.Second))
	p("Load average (1/5/15 min): %s at the start, %s at the end", cr.loadStart, cr.loadEnd)
	if l, _ := strconv.ParseFloat(strings.Fields(cr.loadStart + " 0")[0], 64); l > float64(2*nproc()) {
		p(" — **a loaded machine** (other work was running), so these figures show that the harness works, not what either system can do")
	}
	p(".\n\n")
	if len(cr.failures) > 0 {
		p("Runs that failed twice, their pairs left out: %s.\n\n", strings.Join(cr.failures, "; "))
	}
	p("Workload: 4 idempotent producers, acks=all, 1 KiB records, as fast as they are acknowledged, to a new topic of 8 partitions with replication factor 3 and min.insync.replicas=2; one tailing consumer measures end-to-end latency (send to the record in the consumer's hands). ")
	p("**Sluice** is the split cluster: 3 metastore, 3 write and 2 read brokers, each its own process, log.fsync=group (acknowledged after a group-committed fdatasync); the clients are seeded on the write brokers' mixed listeners, so the producers reach the raft leaders and the consumer is sent to the read brokers. ")
	p("**Kafka** is 3 brokers in KRaft combined mode (broker and controller in one JVM each, heap %s), log.flush.interval.messages=1 (a flush after every append), the consumer on the partition leaders. ", o.kafkaHeap)
	p("The generator (cmd/sluice-bench, franz-go) is the same for both.\n\n")
	p("CPU layout (taskset CPU lists): %s holds Sluice's write brokers and metastore and all three Kafka brokers; %s Sluice's read brokers; %s the generator. ", o.brokerCPU, o.readCPU, o.genCPU)
	p("All processes share one disk, one page cache and loopback, so this is the cost of replication on one machine, not the throughput of three. ")
	p("CPU per GB is the user+system time of every process of the cluster (Sluice's metastore included, as Kafka's controllers run in its broker processes) over the generator's whole run, per 10^9 bytes of record values acknowledged; peak RSS is each process's VmHWM at the end of its run (start-up included).\n\n")
	p("| figure | Sluice | Kafka | Sluice/Kafka | pair ratios |\n|---|---:|---:|---:|---:|\n")
	for _, f := range clusterFigs {
		a := aggregateN(len(cr.pairs), func(i int) (float64, float64) { return f.get(cr.pairs[i].S), f.get(cr.pairs[i].K) })
		rng := "n/a"
		if !math.IsNaN(a.Rmin) {
			rng = fmt.Sprintf("%.2f-%.2f", a.Rmin, a.Rmax)
		}
		p("| %s (%s) | %s | %s | %s | %s |\n", f.name, f.unit, fmtNum(a.S), fmtNum(a.K), ratio(a.R), rng)
	}
	p("\nAt full speed every producer keeps its client's buffer full (16,384 records, the generator's MaxBufferedRecords), and a record's ack latency runs from its hand-over to that client: ")
	p("so at saturation the ack latency is mostly the wait in that buffer, about 4 x 16,384 records / the records acknowledged per second, and its ratio follows the throughput's (the same measure as W1 on one broker). ")
	p("End-to-end latency adds the consumer's lag: a consumer that falls behind (consumed MB/s under produced MB/s) sees its end-to-end latency grow through the run.\n\n")
	p("A latency of 0 means no record was handed to a producer after the warm-up: the run was too short (raise -cluster-records). ")
	p("*Window* is the measured part of the run, from the end of the warm-up to the last acknowledgement (the whole run where it ended inside the warm-up); ")
	p("*cluster start* is from the first process's start to every broker being ready (Sluice: /readyz; Kafka: listening), the storage format included.\n\n")
	p("Every run (CPU-seconds and peak RSS per process: m metastore, w write broker, r read broker, k Kafka broker):\n\n")
	p("| pair | system | load avg at start | cluster start s | window s | MB/s | ack p99 ms | e2e p99 ms | consumed MB/s | CPU-s/GB | CPU-s per process | peak RSS MiB per process | gen core |\n")
	p("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|\n")
	for _, pr := range cr.pairs {
		for _, r := range []*clusterRun{pr.S, pr.K} {
			p("| %d | %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %.0f %% |\n", r.Pair, r.System, r.Load, r.StartS,
				fmtNum(r.Gen.WindowS), fmtNum(r.Gen.Produce.MBPerS), fmtNum(r.Gen.Produce.Ack.P99), fmtNum(r.Gen.Consume.E2E.P99),
				fmtNum(r.Gen.Consume.MBPerS), fmtNum(r.cpuPerGB()), fmtPerNode(r.CPUSec, "%.1f"), fmtPerNode(r.RSSMiB, "%.0f"), 100*r.GenCPUUtil)
		}
	}
	p("\nReproduce: `make bench BENCH_ARGS='-section cluster'` (`-cluster-pairs`, `-cluster-records`, e.g. `-cluster-pairs 4 -cluster-records 500000`; `-cluster-pairs 0` leaves the section out of a whole run).\n")
	return b.String()
}

// fmtPerNode lists a figure per process, in name order.
func fmtPerNode(m map[string]float64, format string) string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var s []string
	for _, n := range names {
		s = append(s, n+" "+fmt.Sprintf(format, m[n]))
	}
	return strings.Join(s, ", ")
}
