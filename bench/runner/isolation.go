package main

// `make bench-isolation` (runner -isolation): do heavy readers harm
// producers, and do reads scale with read brokers?
//
// Sluice runs as its split cluster (3 meta, 3 write and 2 read brokers, each
// its own process, the layout of configs/local-cluster on free ports);
// Kafka as 3 brokers in KRaft combined mode (broker and controller in one
// JVM), each with broker.rack r1..r3 and the rack-aware replica selector
// (KIP-392). The same generator (sluice-bench) runs the same workload on
// both: producers at a fixed rate (acks=all, idempotent, RF 3, 8
// partitions, 1 KiB), with one tailing consumer measuring end-to-end
// latency, first alone, then with N more tailing consumers, then with N
// consumer groups replaying the topic's history from the start (N from
// -iso-groups). Kafka's readers go to the partition leaders, then (the
// "kafka-follower" system) with client.rack=r3 to the follower replicas on
// broker 3. Sluice's clients are seeded on the write brokers' mixed
// listeners: producers stay on the raft leaders, consumers are sent to the
// read brokers (preferred read replica).
//
// The generator runs as two processes at once, so that the readers' client
// work lands where the readers' broker work does: the writer side (the
// producers at the fixed rate and the one tailing consumer that measures
// end-to-end latency) and the reader side (sluice-bench -producers 0: the
// N tailing consumers or the N replaying groups). Every process is pinned
// with taskset:
//
//	-broker-cpu    (0)  Sluice's write brokers and metastore; Kafka's three brokers
//	-write-gen-cpu (0)  the writer-side generator, both systems
//	-read-cpu      (1)  Sluice's read brokers
//	-read-gen-cpu  (1)  the reader-side generator, both systems
//
// This models write machines (write brokers and their producer clients)
// next to read machines (read brokers and their reader clients). Kafka has
// no read brokers: its reader side is alone on -read-gen-cpu and its reads
// are served on -broker-cpu (kafka-follower's by broker 3, there too). A
// replay run's history is written before both processes start, by a
// writer-side run of its own, outside the measured window. Each broker's
// CPU is its user+system time from /proc over the two processes' run,
// divided by that run's wall time; each generator's CPU is reported too.
//
// Then read scale-out (Sluice): a backlog written once is read from the
// start by -iso-scale-readers direct consumers of a reader-side generator
// alone, with both read brokers and again after read-2 has left (SIGTERM:
// it releases its lease and the read view drops it).
//
// Rounds (-pairs) alternate which system goes first. The rate is
// -iso-rate, or half the lowest acks=all saturation (4 producers, no
// consumers) of the systems compared, each measured on a fresh cluster of
// its own before the rounds, so that no system runs above its saturation;
// every saturation is reported.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const isolationSection = "isolation"

var (
	isoMu      sync.Mutex
	isoCurrent *isoCluster // the running cluster, for the signal handler
)

func setIsoCurrent(c *isoCluster) {
	isoMu.Lock()
	isoCurrent = c
	isoMu.Unlock()
}

// stopClusterOnSignal makes SIGINT or SIGTERM stop the cluster of the
// moment (three JVMs or eight Sluice processes), then run each of also
// (what else the caller started, such as an S3 server), before the
// runner leaves.
func stopClusterOnSignal(also ...func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		logf("%v: stopping the cluster", s)
		isoMu.Lock()
		if isoCurrent != nil {
			isoCurrent.stop()
		}
		for _, f := range also {
			f()
		}
		os.Exit(1)
	}()
}

// isoNode is one broker (or metastore) process of a cluster.
type isoNode struct {
	name  string // w1, r1, m1, k1 ...
	cmd   *exec.Cmd
	admin string // Sluice: admin HTTP address
	read  string // Sluice read brokers: the read listener
	mixed string // Sluice write brokers: the mixed listener
	kafka string // Kafka: its PLAINTEXT listener
	log   *os.File
	args  []string // the taskset command line, for a restart (-modes)
}

type isoCluster struct {
	kind  string // sluice or kafka
	dir   string
	nodes []*isoNode
	seeds string
	// keepLogs: stop removes the data directories but keeps the
	// processes' logs and configs (a cluster that failed to start).
	keepLogs bool
	// extra: YAML lines added to every Sluice broker's config, metaExtra
	// to every metastore node's (-modes: replication.mode, the lease).
	extra, metaExtra string
}

// isoRun is one generator run and the CPU of every node during it.
type isoRun struct {
	System  string    `json:"system"`
	Label   string    `json:"label"` // alone, tail-N, replay-N, scale-K
	Readers int       `json:"readers"`
	Round   int       `json:"round"`
	Rate    float64   `json:"rate"`
	Gen     genResult `json:"gen"` // the writer side (the reader side alone in scale-N runs)
	// ReadGen is the reader-side generator's result (nil when the run
	// had none).
	ReadGen *genResult `json:"read_gen,omitempty"`
	// Backlog is the replaying readers' MB/s, both sides together.
	Backlog float64            `json:"backlog_mb_per_s"`
	CPU     map[string]float64 `json:"cpu_cores"` // node -> CPU-seconds per wall second
	// GenCPU is each generator's CPU-seconds per wall second: "writer",
	// "reader".
	GenCPU map[string]float64 `json:"gen_cpu_cores,omitempty"`
	// Written is the backlog records the scale-out runs read (fewer
	// than -iso-scale-records when the write hit isoFillBound).
	Written int64 `json:"written,omitempty"`
	// CaughtUpS: in a scale-out run, the seconds its readers took to
	// read the whole backlog (Backlog is then the MB/s over that time);
	// 0 when they had not within isoScaleBound.
	CaughtUpS float64 `json:"caught_up_s,omitempty"`
	Load      string  `json:"load_avg"`
	Err       string  `json:"error,omitempty"`
}

// tailMBPerS is the tailing consumers' MB/s, both sides together (the
// latency probe included).
func (r isoRun) tailMBPerS() float64 {
	t := r.Gen.Consume.MBPerS
	if r.ReadGen != nil {
		t += r.ReadGen.Consume.MBPerS
	}
	return t
}

func isoGroups(s string) ([]int, error) {
	var g []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad -iso-groups %q", s)
		}
		g = append(g, n)
	}
	return g, nil
}

func isolation(o *opts) error {
	groups, err := isoGroups(o.isoGroups)
	if err != nil {
		return err
	}
	systems := strings.Split(o.isoSystems, ",")
	for _, s := range systems {
		if s != "sluice" && s != "kafka" && s != "kafka-follower" {
			return fmt.Errorf("bad -iso-systems entry %q (sluice, kafka, kafka-follower)", s)
		}
	}
	if o.isoFromRaw != "" {
		return isolationFromRaw(o, groups)
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
	var runs []isoRun
	sat := map[string][]float64{}
	rate := o.isoRate
	record := func(r isoRun) {
		runs = append(runs, r)
		if raw != nil {
			b, _ := json.Marshal(r)
			fmt.Fprintln(raw, string(b))
		}
		logf("  %s %s: produce %.0f rec/s ack p99 %.1f ms, e2e p99 %.1f ms, tail %.1f MB/s, backlog %.1f MB/s, cpu %s, generators %s %s",
			r.System, r.Label, r.Gen.Produce.RecordsPerS, r.Gen.Produce.Ack.P99, r.Gen.Consume.E2E.P99,
			r.tailMBPerS(), r.Backlog, fmtCPU(r.CPU), fmtCPU(r.GenCPU), r.Err)
	}
	// One cluster start per kind per round; kafka and kafka-follower
	// share it.
	kinds := []string{}
	for _, s := range systems {
		k := "sluice"
		if s != "sluice" {
			k = "kafka"
		}
		if len(kinds) == 0 || !contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	// Saturation first, on a fresh cluster of every kind, and the fixed
	// rate half of the lowest: a rate above one system's saturation
	// would leave every row of that system behind, its latencies those
	// of a queue rather than of the fixed rate.
	for _, kind := range kinds {
		logf("saturation: %s cluster; load average %s", kind, loadavg())
		c, err := startIsoCurrent(o, kind)
		if err != nil {
			return err
		}
		r := c.gen(o, isoWorkload{label: "saturation", writer: []string{"-producers", "4", "-consumers", "0"}}, 0, "")
		setIsoCurrent(nil)
		c.stop()
		record(r)
		if r.Err != "" {
			return fmt.Errorf("%s saturation: %s", kind, r.Err)
		}
		if r.Gen.Produce.RecordsPerS <= 0 {
			// Half of nothing is no rate to compare at.
			return fmt.Errorf("%s saturation: no record acknowledged in the measured window (a longer -duration, or a less loaded machine)", kind)
		}
		sat[kind] = append(sat[kind], r.Gen.Produce.RecordsPerS)
	}
	if rate <= 0 {
		kind, lowest := lowestSaturation(sat)
		rate = max(float64(int(lowest/2/100)*100), 100)
		logf("fixed produce rate: %.0f records/s (half of %s's saturation, the lowest)", rate, kind)
	}
	var scale []isoRun
	for round := 1; round <= o.pairs; round++ {
		order := kinds
		if round%2 == 0 {
			order = reverse(kinds)
		}
		for _, kind := range order {
			logf("isolation round %d/%d: %s cluster; load average %s", round, o.pairs, kind, loadavg())
			c, err := startIsoCurrent(o, kind)
			if err != nil {
				return err
			}
			err = func() error {
				for _, sys := range systems {
					if (sys == "sluice") != (kind == "sluice") {
						continue
					}
					rack := ""
					if sys == "kafka-follower" {
						rack = "r3"
					}
					// The first run of a fresh cluster pays for its
					// start (leaders settling, first segments, cold
					// caches): Sluice's first alone run measured ack
					// p99 164 and 430 ms where the later ones measured
					// 39-108 ms. One unmeasured alone run first. It did
					// not remove the effect (the next run at 21:42 UTC
					// on 2026-12-06: alone p99 124 and 470 ms, later
					// rows 29-147 ms, falling over each round), so a
					// fresh cluster settles for longer than one run.
					warm := isoWorkloads(o, nil, rate)[0]
					warm.label = "warm-up"
					logf("  %s: an unmeasured warm-up run", sys)
					c.gen(o, warm, round, rack)
					for _, w := range isoRoundOrder(isoWorkloads(o, groups, rate), round) {
						r := c.gen(o, w, round, rack)
						r.System, r.Rate = sys, rate
						record(r)
					}
				}
				if kind == "sluice" && o.isoScaleReaders > 0 {
					scale = append(scale, c.scaleOut(o, round, rate, record)...)
				}
				return nil
			}()
			setIsoCurrent(nil)
			c.stop()
			if err != nil {
				return err
			}
		}
	}
	text := renderIsolation(o, runs, scale, sat, groups, rate, date, loadStart, loadavg(), time.Since(started))
	if err := replaceSection(o.out, isolationSection, text); err != nil {
		return err
	}
	logf("section %s written into %s in %s", isolationSection, o.out, time.Since(started).Round(time.Second))
	return nil
}

// isoWorkload is one measured run: the writer side's generator arguments,
// the reader side's (nil: no reader side), and the records of history
// written before both start (replay runs).
type isoWorkload struct {
	label   string
	readers int
	writer  []string
	reader  []string
	prefill int64
	// topicTag tells apart the topics of two runs of one label in a
	// round (alone, first and last).
	topicTag string
}

func isoWorkloads(o *opts, groups []int, rate float64) []isoWorkload {
	r := strconv.FormatFloat(rate, 'f', 0, 64)
	prefill := o.isoPrefill
	if prefill <= 0 {
		prefill = int64(rate * o.duration.Seconds())
	}
	// The writer side is the same in every run: the producers at the
	// fixed rate and one tailing consumer measuring end-to-end latency.
	writer := func() []string { return []string{"-producers", "4", "-rate", r, "-consumers", "1"} }
	ws := []isoWorkload{{label: "alone", writer: writer()}}
	for _, n := range groups {
		ws = append(ws, isoWorkload{label: fmt.Sprintf("tail-%d", n), readers: n, writer: writer(),
			reader: []string{"-producers", "0", "-consumers", strconv.Itoa(n)}})
	}
	for _, n := range groups {
		ws = append(ws, isoWorkload{label: fmt.Sprintf("replay-%d", n), readers: n, writer: writer(),
			reader:  []string{"-producers", "0", "-consumers", "0", "-backlog-readers", strconv.Itoa(n), "-backlog-groups"},
			prefill: prefill})
	}
	return ws
}

// isoRoundOrder is the order of one round's runs on its cluster: alone
// first and again last, the reader rows between them, reversed in even
// rounds. With a fixed order, alone was always a fresh cluster's first
// run, compared against reader rows always measured later (on
// 2026-12-06 alone measured p99 124-470 ms and the later rows 29-147 ms).
// With alone at both ends and the middle reversed every other round,
// every row's mean position in the cluster's life is the same over two
// rounds, so a drift over that life cancels out of the medians that
// "p99 vs alone" compares. (The first trial of this order found no
// drift: its last alone runs were as slow as its first.)
func isoRoundOrder(ws []isoWorkload, round int) []isoWorkload {
	if len(ws) == 0 || ws[0].label != "alone" {
		return ws
	}
	mid := slices.Clone(ws[1:])
	if round%2 == 0 {
		slices.Reverse(mid)
	}
	out := append([]isoWorkload{ws[0]}, mid...)
	end := ws[0]
	end.topicTag = "end" // a topic of its own, as every run has
	return append(out, end)
}

// isoGenArgs is the taskset command line of one generator process pinned
// to cpu, on topic, with extra (the side's own flags) last.
func isoGenArgs(o *opts, cpu, seeds, topic, label, rack string, extra []string) []string {
	args := []string{"-c", cpu, o.genBin, "-brokers", seeds, "-topic", topic,
		"-partitions", "8", "-replication", "3", "-record-size", "1024",
		"-duration", o.duration.String(), "-warmup", o.warmup.String(), "-label", label, "-quiet"}
	if rack != "" {
		args = append(args, "-client-rack", rack)
	}
	return append(args, extra...)
}

// isoFillArgs writes records records to topic (created if need be) with 4
// producers on the writer side's CPU, as fast as they are acknowledged,
// for at most isoFillBound.
func isoFillArgs(o *opts, seeds, topic string, records int64) []string {
	return []string{"-c", o.writeGenCPU, o.genBin, "-brokers", seeds, "-topic", topic,
		"-partitions", "8", "-replication", "3", "-record-size", "1024", "-producers", "4", "-consumers", "0",
		"-records", strconv.FormatInt(records, 10), "-duration", "0", "-warmup", "0s",
		"-max-duration", isoFillBound.String(), "-quiet"}
}

// startIsoCurrent starts a fresh cluster of kind as the current one
// (setIsoCurrent); a cluster that failed to start is stopped.
func startIsoCurrent(o *opts, kind string) (*isoCluster, error) {
	c, err := startIsoCluster(o, kind, o.isoFsync)
	if err != nil {
		if c != nil {
			c.stop()
		}
		setIsoCurrent(nil)
		return nil, err
	}
	return c, nil
}

// isoScaleBound bounds a read scale-out run: its readers reading the
// whole backlog.
const isoScaleBound = 3 * time.Minute

// isoFillBound bounds the time a history or backlog write may take (a
// slow machine writes fewer records than asked rather than stalling the
// run).
const isoFillBound = 2 * time.Minute

// mergeIsoRun fills r from the writer side's output and the reader
// side's (readOut "" when the run had no reader side): the produce and
// latency figures are the writer side's, the read MB/s both sides'.
func mergeIsoRun(r *isoRun, writeOut string, writeErr error, readOut string, readErr error, hasReader bool) {
	mergeIsoRunAs(r, "writer-side", writeOut, writeErr, readOut, readErr, hasReader)
}

// mergeIsoRunAs is mergeIsoRun whose first generator is named first in
// errors (scale-N runs have a reader side alone).
func mergeIsoRunAs(r *isoRun, first, writeOut string, writeErr error, readOut string, readErr error, hasReader bool) {
	var errs []string
	line := lastLine(writeOut)
	if jerr := json.Unmarshal([]byte(line), &r.Gen); jerr != nil {
		errs = append(errs, fmt.Sprintf("%s generator output %q: %v (run error %v)", first, line, jerr, writeErr))
	} else if writeErr != nil {
		errs = append(errs, first+" generator: "+writeErr.Error())
	}
	r.Backlog = r.Gen.Backlog.MBPerS
	if hasReader {
		var g genResult
		line := lastLine(readOut)
		if jerr := json.Unmarshal([]byte(line), &g); jerr != nil {
			errs = append(errs, fmt.Sprintf("reader-side generator output %q: %v (run error %v)", line, jerr, readErr))
		} else {
			r.ReadGen = &g
			r.Backlog += g.Backlog.MBPerS
			if readErr != nil {
				errs = append(errs, "reader-side generator: "+readErr.Error())
			}
		}
	}
	r.Err = strings.Join(errs, "; ")
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func reverse(l []string) []string {
	r := make([]string, len(l))
	for i, x := range l {
		r[len(l)-1-i] = x
	}
	return r
}

func fmtCPU(cpu map[string]float64) string {
	var names []string
	for n := range cpu {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s %.2f", n, cpu[n])
	}
	return b.String()
}

// gen runs workload w once on a fresh topic: its history first (replay
// runs), then the writer-side and the reader-side generators at the same
// time, reading every node's CPU around the two.
func (c *isoCluster) gen(o *opts, w isoWorkload, round int, rack string) isoRun {
	r := isoRun{System: c.kind, Label: w.label, Readers: w.readers, Round: round, Load: loadavg(), CPU: map[string]float64{}}
	topic := fmt.Sprintf("iso-%s-%s-%d", w.label, rack, round)
	if w.topicTag != "" {
		topic += "-" + w.topicTag
	}
	if w.prefill > 0 {
		// Outside the measured window, as the history a replay reads
		// was written before the replay.
		if m := c.measure(o, isoFillArgs(o, c.seeds, topic, w.prefill)); m.err != nil {
			r.Err = fmt.Sprintf("writing the history: %v: %s", m.err, lastLine(m.out))
			return r
		}
	}
	argss := [][]string{isoGenArgs(o, o.writeGenCPU, c.seeds, topic, w.label, rack, w.writer)}
	if w.reader != nil {
		argss = append(argss, isoGenArgs(o, o.readGenCPU, c.seeds, topic, w.label, rack, w.reader))
	}
	wall, cpuSec, gens := c.measureAll(o, argss...)
	for n, v := range cpuSec {
		r.CPU[n] = v / wall
	}
	r.GenCPU = map[string]float64{"writer": gens[0].util}
	readOut, readErr := "", error(nil)
	if len(gens) > 1 {
		r.GenCPU["reader"] = gens[1].util
		readOut, readErr = gens[1].out, gens[1].err
	}
	mergeIsoRun(&r, gens[0].out, gens[0].err, readOut, readErr, w.reader != nil)
	return r
}

// runGen runs the generator (taskset args) and returns its output and
// every node's CPU-seconds per wall second over the run.
func (c *isoCluster) runGen(o *opts, args []string) (string, map[string]float64, error) {
	m := c.measure(o, args)
	cpu := map[string]float64{}
	for n, v := range m.cpuSec {
		cpu[n] = v / m.wall
	}
	return m.out, cpu, m.err
}

// genMeasure is one generator run on a cluster: its output, its wall time,
// how busy the generator was, and every node's CPU-seconds over the run.
type genMeasure struct {
	out     string
	wall    float64
	genUtil float64 // generator CPU-seconds per wall second
	cpuSec  map[string]float64
	err     error
}

func (c *isoCluster) measure(o *opts, args []string) genMeasure {
	wall, cpuSec, gens := c.measureAll(o, args)
	return genMeasure{out: gens[0].out, wall: wall, genUtil: gens[0].util, cpuSec: cpuSec, err: gens[0].err}
}

// genProc is one generator process of a measured run.
type genProc struct {
	out  string
	err  error
	util float64 // its CPU-seconds per wall second of the whole run
}

// measureAll starts one generator per argument list (taskset args) at
// once and waits for all of them; wall is from their start until the last
// has ended, cpuSec every node's CPU-seconds over that time.
func (c *isoCluster) measureAll(o *opts, argss ...[]string) (wall float64, cpuSec map[string]float64, gens []genProc) {
	before := map[string]float64{}
	for _, n := range c.nodes {
		if s, err := readProc(n.cmd.Process.Pid); err == nil {
			before[n.name] = s.cpu
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.duration+5*time.Minute)
	defer cancel()
	gens = make([]genProc, len(argss))
	cmds := make([]*exec.Cmd, len(argss))
	outs := make([]strings.Builder, len(argss))
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, args := range argss {
		cmds[i] = exec.CommandContext(ctx, "taskset", args...)
		cmds[i].Stdout = &outs[i]
		cmds[i].Stderr = os.Stderr
		if err := cmds[i].Start(); err != nil {
			gens[i].err = err
			continue
		}
		wg.Add(1)
		go func(i int) { defer wg.Done(); gens[i].err = cmds[i].Wait() }(i)
	}
	wg.Wait()
	wall = time.Since(t0).Seconds()
	cpuSec = map[string]float64{}
	for _, n := range c.nodes {
		if s, perr := readProc(n.cmd.Process.Pid); perr == nil {
			cpuSec[n.name] = s.cpu - before[n.name]
		}
	}
	for i := range gens {
		gens[i].out = outs[i].String()
		if ps := cmds[i].ProcessState; ps != nil && wall > 0 {
			gens[i].util = (ps.UserTime() + ps.SystemTime()).Seconds() / wall
		}
	}
	return wall, cpuSec, gens
}

// scaleOut writes a backlog and reads it from the start with both read
// brokers, then with one.
func (c *isoCluster) scaleOut(o *opts, round int, rate float64, record func(isoRun)) []isoRun {
	topic := fmt.Sprintf("iso-backlog-%d", round)
	logf("scale-out: writing %d records (at most %s)", o.isoScaleRecords, isoFillBound)
	out, _, err := c.runGen(o, isoFillArgs(o, c.seeds, topic, o.isoScaleRecords))
	var fill genResult
	if jerr := json.Unmarshal([]byte(lastLine(out)), &fill); err != nil || jerr != nil {
		logf("  backlog write failed: %v %v", err, jerr)
		return nil
	}
	// What the readers can read: fewer than asked when the write hit
	// its time bound.
	written := fill.Produce.TotalRecords
	// The readers alone: a reader-side generator with no producers.
	read := func(label string) isoRun {
		// The readers start at once and the run ends when each has
		// read the whole backlog (sluice-bench's caught-up time), within
		// isoScaleBound.
		args := isoGenArgs(o, o.readGenCPU, c.seeds, topic, label, "", []string{"-create-topic=false",
			"-producers", "0", "-consumers", "0", "-backlog-readers", strconv.Itoa(o.isoScaleReaders),
			"-duration", isoScaleBound.String(), "-warmup", "0s"})
		r := isoRun{System: "sluice", Label: label, Round: round, Readers: o.isoScaleReaders, Load: loadavg(), Written: written}
		m := c.measure(o, args)
		r.CPU = map[string]float64{}
		for n, v := range m.cpuSec {
			r.CPU[n] = v / m.wall
		}
		r.GenCPU = map[string]float64{"reader": m.genUtil}
		mergeIsoRunAs(&r, "reader-side", m.out, m.err, "", nil, false)
		if b := r.Gen.Backlog; b.CaughtUpMBPerS > 0 {
			r.Backlog, r.CaughtUpS = b.CaughtUpMBPerS, b.CaughtUpS
		}
		record(r)
		return r
	}
	var res []isoRun
	res = append(res, read("scale-2"))
	var r2, r1 *isoNode
	for _, n := range c.nodes {
		switch n.name {
		case "r2":
			r2 = n
		case "r1":
			r1 = n
		}
	}
	stopNode(r2)
	// Until the read view lists one broker.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if n, err := readViewBrokers(r1.read); err == nil && n == 1 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	res = append(res, read("scale-1"))
	// The producers alone again with one learner fewer: the difference in
	// the write brokers' CPU from the "alone" run is the cost of one read
	// broker's learner stream (docs/capacity.md).
	w := isoWorkloads(o, nil, rate)[0]
	w.label = "alone-1r"
	r := c.gen(o, w, round, "")
	r.System, r.Rate = "sluice", rate
	record(r)
	res = append(res, r)
	return res
}

func readViewBrokers(addr string) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return 0, err
	}
	return len(m.Brokers), nil
}

// ---------------------------------------------------------------- clusters

// startIsoCluster starts a cluster of kind (sluice: the split cluster;
// kafka: 3 brokers in KRaft combined mode) with RF 3 and
// min.insync.replicas=2 by default. fsync is Sluice's log.fsync; Kafka
// flushes every message unless it is "never". The isolation runs, the
// cluster section (cluster.go) and the modes (modes.go) all start their
// clusters here.
func startIsoCluster(o *opts, kind, fsync string) (*isoCluster, error) {
	return startIsoClusterWith(o, kind, fsync, "", "")
}

// startIsoClusterWith is startIsoCluster whose Sluice brokers get the
// YAML lines extra in their config, its metastore nodes metaExtra.
//
// A start that fails is tried twice more, each time a fresh cluster on
// fresh ports: the ports are picked free and bound later by the
// processes, and another process can take one in between (a read
// listener found its port in use at 00:38 UTC on 2026-12-07 and ended a
// 20-minute run); on a loaded machine a start can also miss its
// deadline. The last attempt's cluster and error are returned.
func startIsoClusterWith(o *opts, kind, fsync, extra, metaExtra string) (*isoCluster, error) {
	var c *isoCluster
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if c != nil {
			c.stop()
		}
		c, err = startIsoClusterOnce(o, kind, fsync, extra, metaExtra)
		if err == nil {
			return c, nil
		}
		logf("%s cluster did not start (attempt %d of 3): %v", kind, attempt, err)
	}
	return c, err
}

func startIsoClusterOnce(o *opts, kind, fsync, extra, metaExtra string) (*isoCluster, error) {
	dir, err := os.MkdirTemp(o.tmp, "sluice-bench-iso-"+kind+"-")
	if err != nil {
		return nil, err
	}
	c := &isoCluster{kind: kind, dir: dir, extra: extra, metaExtra: metaExtra}
	// A signal during the start stops what has started so far.
	setIsoCurrent(c)
	if kind == "sluice" {
		err = c.startSluice(o, fsync)
	} else {
		err = c.startKafka(o, fsync)
	}
	// The error names this directory: its logs outlive stop.
	c.keepLogs = err != nil
	return c, err
}

func (c *isoCluster) spawn(name, cpu string, args ...string) (*isoNode, error) {
	n := &isoNode{name: name, args: append([]string{"-c", cpu}, args...)}
	if err := c.start(n); err != nil {
		return nil, err
	}
	c.nodes = append(c.nodes, n)
	return n, nil
}

// start runs n's process (again, after a kill: its log is appended to).
func (c *isoCluster) start(n *isoNode) error {
	var err error
	if n.log, err = os.OpenFile(filepath.Join(c.dir, n.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return err
	}
	n.cmd = exec.Command("taskset", n.args...)
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	n.cmd.Dir = c.dir
	return n.cmd.Start()
}

// kill9 ends n's process with SIGKILL, as a crash would.
func kill9(n *isoNode) {
	if n == nil || n.cmd == nil || n.cmd.Process == nil || n.cmd.ProcessState != nil {
		return
	}
	n.cmd.Process.Kill()
	n.cmd.Wait()
	n.log.Close()
}

func (c *isoCluster) startSluice(o *opts, fsync string) error {
	p, err := freePorts(3*2 + 3*4 + 2*4)
	if err != nil {
		return err
	}
	next := func() int { x := p[0]; p = p[1:]; return x }
	var metaListen, metaPeers []string
	metaAdmin := make([]int, 3)
	for i := 0; i < 3; i++ {
		mp := next()
		metaAdmin[i] = next()
		metaListen = append(metaListen, fmt.Sprintf("%q", fmt.Sprintf("127.0.0.1:%d", mp)))
		metaPeers = append(metaPeers, fmt.Sprintf("%q", fmt.Sprintf("%d=127.0.0.1:%d", i+1, mp)))
	}
	write := func(name, yaml string) (string, error) {
		f := filepath.Join(c.dir, name+".yaml")
		return f, os.WriteFile(f, []byte(yaml), 0o644)
	}
	serve := func(name, cpu, cfg string) (*isoNode, error) {
		return c.spawn(name, cpu, o.sluiceBin, "serve", "--config", cfg, "--log-format", "json", "--log-level", "warn")
	}
	var ready []*isoNode
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("m%d", i+1)
		f, err := write(name, fmt.Sprintf(`node.id: %d
process.roles: [meta]
data.dir: %s
admin.addr: 127.0.0.1:%d
meta.id: %d
meta.listen: %s
meta.peers: [%s]
listeners: []
%s`, 101+i, filepath.Join(c.dir, name), metaAdmin[i], i+1, strings.Trim(metaListen[i], `"`), strings.Join(metaPeers, ", "), c.metaExtra))
		if err != nil {
			return err
		}
		n, err := serve(name, o.brokerCPU, f)
		if err != nil {
			return err
		}
		n.admin = fmt.Sprintf("127.0.0.1:%d", metaAdmin[i])
		ready = append(ready, n)
	}
	for _, n := range ready {
		if err := waitReady(n, 60*time.Second); err != nil {
			return fmt.Errorf("metastore %s: %v (logs in %s)", n.admin, err, c.dir)
		}
	}
	var seeds []string
	ready = nil
	for i := 0; i < 5; i++ {
		role, name, id, view, cpu := "write", fmt.Sprintf("w%d", i+1), i+1, "write", o.brokerCPU
		if i >= 3 {
			role, name, id, view, cpu = "read", fmt.Sprintf("r%d", i-2), i+1, "read", o.readCPU
		}
		admin, repl, own, mixed := next(), next(), next(), next()
		f, err := write(name, fmt.Sprintf(`node.id: %d
process.roles: [%s]
data.dir: %s
admin.addr: 127.0.0.1:%d
meta.addrs: [%s]
replica.listen: 127.0.0.1:%d
listeners:
  - name: %s
    view: %s
    address: 127.0.0.1:%d
  - name: MIXED
    view: mixed
    address: 127.0.0.1:%d
default.replication.factor: 3
min.insync.replicas: 2
log.fsync: %s
%s`, id, role, filepath.Join(c.dir, name), admin, strings.Join(metaListen, ", "), repl,
			strings.ToUpper(view), view, own, mixed, fsync, c.extra))
		if err != nil {
			return err
		}
		n, err := serve(name, cpu, f)
		if err != nil {
			return err
		}
		n.admin = fmt.Sprintf("127.0.0.1:%d", admin)
		ready = append(ready, n)
		if role == "write" {
			n.mixed = fmt.Sprintf("127.0.0.1:%d", mixed)
			seeds = append(seeds, n.mixed)
		} else {
			n.read = fmt.Sprintf("127.0.0.1:%d", own)
		}
	}
	for _, n := range ready {
		if err := waitReady(n, 90*time.Second); err != nil {
			return fmt.Errorf("broker %s: %v (logs in %s)", n.admin, err, c.dir)
		}
	}
	c.seeds = strings.Join(seeds, ",")
	return nil
}

// waitReady waits until n's admin endpoint answers /readyz, for at most d.
// A process that has exited is reported at once with the last line of its
// log (a listener's port taken by another process between freePorts and
// the bind, say), instead of being waited for until d runs out.
func waitReady(n *isoNode, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get("http://" + n.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if exited(n) {
			return fmt.Errorf("exited: %s", lastLogLine(n))
		}
		if time.Now().After(deadline) {
			return errors.New("not ready in time")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// exited reports whether n's process has ended. Nothing reaps it before
// kill9 or stop, so an ended process is a zombie: /proc shows state Z.
func exited(n *isoNode) bool {
	if n.cmd == nil || n.cmd.Process == nil {
		return false
	}
	if n.cmd.ProcessState != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// lastLogLine is the last non-empty line n's process wrote to its log.
func lastLogLine(n *isoNode) string {
	b, err := os.ReadFile(n.log.Name())
	if err != nil {
		return err.Error()
	}
	return lastLine(string(b))
}

func (c *isoCluster) startKafka(o *opts, fsync string) error {
	p, err := freePorts(6)
	if err != nil {
		return err
	}
	var voters []string
	for i := 0; i < 3; i++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, p[3+i]))
	}
	lf := filepath.Join(c.dir, "log4j2.properties")
	if err := os.WriteFile(lf, []byte(log4j2), 0o644); err != nil {
		return err
	}
	logProp := "-Dlog4j2.configurationFile=" + lf
	cp := filepath.Join(o.kafkaLibs, "*")
	id := clusterID()
	var pfs, addrs []string
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("k%d", i+1)
		addr := fmt.Sprintf("127.0.0.1:%d", p[i])
		props := fmt.Sprintf(`process.roles=broker,controller
node.id=%d
controller.quorum.voters=%s
listeners=PLAINTEXT://%s,CONTROLLER://127.0.0.1:%d
advertised.listeners=PLAINTEXT://%s
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=%s
broker.rack=r%d
replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
initial.broker.registration.timeout.ms=300000
`, i+1, strings.Join(voters, ","), addr, p[3+i], addr, filepath.Join(c.dir, name), i+1)
		if fsync != "never" {
			// Sluice's log.fsync=group acknowledges after fsync; Kafka's
			// equivalent is a flush after every message.
			props += "log.flush.interval.messages=1\n"
		}
		pf := filepath.Join(c.dir, name+".properties")
		if err := os.WriteFile(pf, []byte(props), 0o644); err != nil {
			return err
		}
		pfs = append(pfs, pf)
		addrs = append(addrs, addr)
	}
	// Format the three data directories at once (a JVM start each).
	errs := make(chan error, 3)
	for _, pf := range pfs {
		go func(pf string) {
			format := exec.Command("taskset", "-c", o.brokerCPU, "java", "-Xmx256m", logProp, "-cp", cp,
				"kafka.tools.StorageTool", "format", "-t", id, "-c", pf)
			if out, err := format.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("kafka-storage format: %v: %s", err, out)
				return
			}
			errs <- nil
		}(pf)
	}
	for range pfs {
		if err := <-errs; err != nil {
			return err
		}
	}
	var seeds []string
	for i, pf := range pfs {
		name, addr := fmt.Sprintf("k%d", i+1), addrs[i]
		n, err := c.spawn(name, o.brokerCPU, "java",
			"-Xmx"+o.kafkaHeap, "-Xms"+o.kafkaHeap, "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
			"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
			logProp, "-cp", cp, "kafka.Kafka", pf)
		if err != nil {
			return err
		}
		n.kafka = addr
		seeds = append(seeds, addr)
	}
	for _, a := range seeds {
		deadline := time.Now().Add(180 * time.Second)
		for {
			conn, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("kafka broker %s did not listen within 180s (logs in %s)", a, c.dir)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	c.seeds = strings.Join(seeds, ",")
	return nil
}

func stopNode(n *isoNode) {
	if n == nil || n.cmd == nil || n.cmd.Process == nil || n.cmd.ProcessState != nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		n.cmd.Process.Kill()
		<-done
	}
	n.log.Close()
}

// stop ends every process: brokers first, the metastore last.
func (c *isoCluster) stop() {
	var meta []*isoNode
	for _, n := range c.nodes {
		if strings.HasPrefix(n.name, "m") {
			meta = append(meta, n)
			continue
		}
		stopNode(n)
	}
	for _, n := range meta {
		stopNode(n)
	}
	if !c.keepLogs {
		os.RemoveAll(c.dir)
		return
	}
	ents, _ := os.ReadDir(c.dir)
	for _, e := range ents {
		if e.IsDir() {
			os.RemoveAll(filepath.Join(c.dir, e.Name()))
		}
	}
	logf("%s cluster: logs kept in %s", c.kind, c.dir)
}

// ---------------------------------------------------------------- report

func renderIsolation(o *opts, runs, scale []isoRun, sat map[string][]float64, groups []int, rate float64,
	date, loadStart, loadEnd string, elapsed time.Duration) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## Producers under heavy readers, and read scale-out (issue 23)\n\n")
	p("Measured by `%s` on %s (Sluice %s, Kafka 4.4.0), %d round(s), %s per run (%s warm-up left out); load average %s at the start, %s at the end",
		o.command, date, o.version, o.pairs, o.duration, o.warmup, loadStart, loadEnd)
	if l, _ := strconv.ParseFloat(strings.Fields(loadStart + " 0")[0], 64); l > float64(2*nproc()) {
		p(" — **a loaded machine** (other work was running), so these figures show that the harness works, not what either broker can do")
	}
	p(".\n\n")
	p("Workload: 4 idempotent producers, acks=all, 1 KiB records, a topic of 8 partitions with replication factor 3, at a fixed %.0f records/s", rate)
	if o.isoRate > 0 {
		p(" (-iso-rate)")
	} else {
		k, v := lowestSaturation(sat)
		p(" (half the lowest saturation of the systems compared, %s's %.0f, so that every system runs below its saturation)", k, v)
	}
	p("; one tailing consumer measures end-to-end latency (these five clients are the writer side). *tail-N* adds N tailing consumers (each reading every partition); *replay-N* adds N consumer groups (one member each) that start at the end of the warm-up and read the topic from the start (these readers are the reader side), its history written beforehand with ")
	if o.isoPrefill > 0 {
		p("%d records", o.isoPrefill)
	} else {
		p("as many records as the run produces")
	}
	p(". Each fresh cluster first runs the *alone* workload once, unmeasured (on its own topic): a cluster's first run pays for its start. A round measures *alone* first and again last, the reader rows between, in reverse order in even rounds, so that no row gains from its place in a cluster's life and *p99 vs alone* compares medians over the same span")
	p(". Saturation (same topic shape, 4 producers on the writer side's CPU, no consumers, records/s; measured before the rounds on a fresh cluster of each system, which the measured runs do not reuse):")
	for _, k := range []string{"sluice", "kafka"} {
		if v := sat[k]; len(v) > 0 {
			p(" %s %s;", k, joinNums(v))
		}
	}
	p(" fsync: Sluice log.fsync=%s", o.isoFsync)
	if o.isoFsync != "never" {
		p(", Kafka log.flush.interval.messages=1")
	} else {
		p(", Kafka default (no flush)")
	}
	p(".\n\n")
	p("Systems: **sluice** is the split cluster (3 metastore, 3 write and 2 read brokers, separate processes); clients are seeded on the write brokers' mixed listeners, so producers reach the raft leaders and consumers are sent to the read brokers. **kafka** is 3 brokers in KRaft combined mode, readers on the partition leaders; **kafka-follower** is the same cluster (broker.rack r1..r3, RackAwareReplicaSelector) with client.rack=r3, so every reader fetches from broker 3's replicas (KIP-392).\n\n")
	p("%s", isoLayoutText(o))

	// Medians over rounds per (system, label).
	type key struct{ sys, label string }
	byKey := map[key][]isoRun{}
	var order []key
	for _, r := range runs {
		if r.Label == "saturation" || strings.HasPrefix(r.Label, "scale-") {
			continue
		}
		k := key{r.System, r.Label}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	med := func(rs []isoRun, f func(isoRun) float64) float64 {
		var v []float64
		for _, r := range rs {
			if r.Err == "" {
				v = append(v, f(r))
			}
		}
		return median(v)
	}
	p("| System | Readers | Produced rec/s | Ack p50 ms | Ack p99 ms | Ack p99.9 ms | p99 vs alone | Tail e2e p50 ms | Tail e2e p99 ms | Tailing read MB/s | Replay read MB/s | Broker CPU (cores) | Generator CPU (cores) | Runs ok |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		rs := byKey[k]
		ok := 0
		cpu, gcpu := map[string][]float64{}, map[string][]float64{}
		for _, r := range rs {
			if r.Err == "" {
				ok++
				for n, v := range r.CPU {
					cpu[n] = append(cpu[n], v)
				}
				for n, v := range r.GenCPU {
					gcpu[n] = append(gcpu[n], v)
				}
			}
		}
		mc, mg := map[string]float64{}, map[string]float64{}
		for n, v := range cpu {
			mc[n] = median(v)
		}
		for n, v := range gcpu {
			mg[n] = median(v)
		}
		gens := fmtCPU(mg)
		if gens == "" {
			gens = "—"
		}
		p99 := med(rs, func(r isoRun) float64 { return r.Gen.Produce.Ack.P99 })
		alone := med(byKey[key{k.sys, "alone"}], func(r isoRun) float64 { return r.Gen.Produce.Ack.P99 })
		vs := "—"
		if alone > 0 && k.label != "alone" && ok > 0 {
			vs = fmt.Sprintf("%+.0f %%", (p99/alone-1)*100)
		}
		if ok == 0 {
			p("| %s | %s | failed: %s ||||||||||| 0/%d |\n", k.sys, k.label, strings.ReplaceAll(rs[0].Err, "|", "/"), len(rs))
			continue
		}
		produced := med(rs, func(r isoRun) float64 { return r.Gen.Produce.RecordsPerS })
		behind := ""
		if produced < 0.95*rate {
			behind = " (behind)"
		}
		p("| %s | %s | %.0f%s | %.1f | %.1f | %.1f | %s | %.1f | %.1f | %.1f | %.1f | %s | %s | %d/%d |\n", k.sys, k.label,
			produced, behind,
			med(rs, func(r isoRun) float64 { return r.Gen.Produce.Ack.P50 }), p99,
			med(rs, func(r isoRun) float64 { return r.Gen.Produce.Ack.P999 }), vs,
			med(rs, func(r isoRun) float64 { return r.Gen.Consume.E2E.P50 }),
			med(rs, func(r isoRun) float64 { return r.Gen.Consume.E2E.P99 }),
			med(rs, func(r isoRun) float64 { return r.tailMBPerS() }),
			med(rs, func(r isoRun) float64 { return r.Backlog }), fmtCPU(mc), gens, ok, len(rs))
	}
	p("\nBroker names: w1–w3 write brokers, r1–r2 read brokers, m1–m3 metastore, k1–k3 Kafka brokers. *(behind)*: the producers fell short of the fixed rate by more than 5 %% in the measured window (the broker, or the machine, could not keep up), so that row's latencies are not at the fixed rate. Tailing read MB/s counts every tailing consumer of both generator processes (the writer side's latency probe included); replay MB/s the replaying groups over the measured window (a group that has caught up reads at the produce rate). Produced records/s, ack and end-to-end latency are the writer side's. Generator CPU: CPU-seconds per wall second of the writer-side and the reader-side process; a generator near 1.0 was using a whole core, so it was short of CPU and its figures include its own queueing.\n\n")
	if len(scale) > 0 {
		p("**Read scale-out (Sluice).** %d records of 1 KiB written once, then read from the start by %d direct consumers (each every partition) of a reader-side generator alone (CPU %s), through the mixed listeners, nothing writing meanwhile; MB/s from the readers' start until each had read the whole backlog, per round:\n\n", o.isoScaleRecords, o.isoScaleReaders, o.readGenCPU)
		p("| Read brokers | Read MB/s | Broker CPU (cores) |\n|---|---|---|\n")
		var alone1 []isoRun
		for _, r := range scale {
			if r.Label == "alone-1r" {
				alone1 = append(alone1, r)
				continue
			}
			n := strings.TrimPrefix(r.Label, "scale-")
			if r.Err != "" {
				p("| %s | failed: %s | |\n", n, strings.ReplaceAll(r.Err, "|", "/"))
				continue
			}
			capped := ""
			written := r.Written
			if written == 0 { // a -raw file of an earlier version
				written = o.isoScaleRecords
			}
			if written < o.isoScaleRecords {
				n += fmt.Sprintf(" (%d records written of %d: the write hit its %s bound)", written, o.isoScaleRecords, isoFillBound)
			}
			if r.CaughtUpS > 0 {
				capped = fmt.Sprintf(" (every reader read the whole backlog in %.1f s)", r.CaughtUpS)
			} else if total := float64(written*1024*int64(o.isoScaleReaders)) / 1e6; r.Backlog*r.Gen.WindowS >= 0.9*total {
				capped = " (readers finished within the window: a lower bound; raise -iso-scale-records)"
			} else {
				capped = fmt.Sprintf(" (the readers had not read the whole backlog within %s: MB/s over the run)", isoScaleBound)
			}
			p("| %s | %.1f%s | %s |\n", n, r.Backlog, capped, fmtCPU(r.CPU))
		}
		p("\n")
		for _, r := range alone1 {
			if r.Err != "" {
				p("The producers alone with one read broker (one learner fewer) failed: %s\n\n", r.Err)
				continue
			}
			p("The producers alone again, after read-2 left (one learner fewer per partition): %.0f records/s, ack p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms; broker CPU %s. The write brokers' CPU against the *alone* row above is the cost of one read broker's learner stream (docs/capacity.md).\n\n",
				r.Gen.Produce.RecordsPerS, r.Gen.Produce.Ack.P50, r.Gen.Produce.Ack.P99, r.Gen.Produce.Ack.P999, fmtCPU(r.CPU))
		}
	}
	if elapsed > 0 {
		p("The run took %s. ", elapsed.Round(time.Second))
	}
	p("Reproduce: `make bench-isolation` (BENCH_ISOLATION_ARGS, e.g. `-pairs 3 -duration 30s -warmup 5s`; the defaults run N = 1, 4, 8 and every system).\n")
	return b.String()
}

// isoLayoutText states the CPU layout of the section's runs, what it
// models and what it cannot show.
func isoLayoutText(o *opts) string {
	return fmt.Sprintf("CPU layout (taskset CPU lists): the generator runs as two processes at once, a *writer side* (the producers and the one tailing consumer that measures end-to-end latency) and a *reader side* (the tail-N and replay-N readers). "+
		"CPU %s holds Sluice's write brokers and metastore, all three Kafka brokers, and (CPU %s) the writer-side generator of both systems; "+
		"CPU %s holds Sluice's read brokers and (CPU %s) the reader-side generator of both systems, which for Kafka is alone there: Kafka has no read brokers, so its readers are served by brokers on CPU %s (kafka-follower's by broker 3, there too). "+
		"The layout models write machines (write brokers with their producer clients) next to read machines (read brokers with their reader clients): the readers' work, serving and consuming, lands on the read side unless the broker has to serve it from the write side (Kafka). "+
		"It cannot show separate machines: each side is one core shared by its brokers and its clients (the writer-side generator takes CPU the write brokers would have to themselves; the read brokers and their readers share one core, which bounds read MB/s); the network is loopback; all brokers share one disk and one page cache, so a read broker's page-cache misses and its disk reads land on the writers' disk. "+
		"A replay run's history is written before both processes start (a writer-side run of its own) and is not measured. "+
		"Per-broker CPU (CPU-seconds per wall second over the two processes' run, from /proc) is the figure that carries over; docs/capacity.md extrapolates from it.\n\n",
		o.brokerCPU, o.writeGenCPU, o.readCPU, o.readGenCPU, o.brokerCPU)
}

func joinNums(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(s, ", ")
}

func nproc() int { return runtime.NumCPU() }

// lowestSaturation is the system with the lowest median saturation, and
// that median.
func lowestSaturation(sat map[string][]float64) (string, float64) {
	kind, lowest := "none", 0.0
	for _, k := range slices.Sorted(maps.Keys(sat)) {
		if v := sat[k]; len(v) > 0 {
			if m := median(v); kind == "none" || m < lowest {
				kind, lowest = k, m
			}
		}
	}
	return kind, lowest
}

// isolationFromRaw renders the section again from the -raw file of an
// earlier -isolation run (-iso-from-raw), without running anything.
func isolationFromRaw(o *opts, groups []int) error {
	b, err := os.ReadFile(o.isoFromRaw)
	if err != nil {
		return err
	}
	st, _ := os.Stat(o.isoFromRaw)
	var runs, scale []isoRun
	sat := map[string][]float64{}
	rate := 0.0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var r isoRun
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			return fmt.Errorf("%s: %v", o.isoFromRaw, err)
		}
		switch {
		case r.Label == "saturation":
			sat[r.System] = append(sat[r.System], r.Gen.Produce.RecordsPerS)
		case strings.HasPrefix(r.Label, "scale-") || r.Label == "alone-1r":
			scale = append(scale, r)
			continue
		default:
			if rate == 0 {
				rate = r.Rate
			}
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return fmt.Errorf("%s: no runs", o.isoFromRaw)
	}
	end := time.Now()
	if st != nil {
		end = st.ModTime()
	}
	text := renderIsolation(o, runs, scale, sat, groups, rate, end.UTC().Format("2006-01-02 15:04 UTC"),
		runs[0].Load, runs[len(runs)-1].Load, 0)
	return replaceSection(o.out, isolationSection, text)
}
