package main

// `make bench-compaction` (runner -compaction): the log cleaners of Sluice
// and Kafka on the same data. Each run starts a fresh broker, writes the
// same keyed records (sluice-bench -keys: same keys in the same order,
// same values, one partition, 16 MiB segments) into a topic with
// cleanup.policy=delete, then switches the topic to compact and waits for
// the broker's first cleaning pass of it. The pass time is the broker's
// own report (Kafka's LogCleaner "cleaned log ... MB of log processed in
// N seconds" line, Sluice's sluice_log_cleaner_last_pass_seconds); the
// bytes cleaned are the partition's inactive segments on disk before the
// clean, measured the same way for both; CPU is the broker process's
// user+system time from the switch to the end of the pass.

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	compTopic        = "bench-compact"
	compSegmentBytes = 16 << 20
)

type compRun struct {
	Broker, Codec string
	InputMB       float64 // inactive segment bytes before the clean, MiB
	OutputMB      float64 // the same segments after it, MiB
	PassS         float64 // the broker's own pass time
	KafkaMBps     float64 // Kafka's own MB/sec figure (Kafka only)
	WaitS         float64 // from the switch to compact until the pass was seen
	CPUS          float64 // broker CPU over WaitS
	ProduceS      float64
}

func (r *compRun) mbps() float64 { return r.InputMB / r.PassS }

// cpuPerGB is the CPU seconds per 10^9 bytes of input.
func (r *compRun) cpuPerGB() float64 { return r.CPUS / (r.InputMB * (1 << 20) / 1e9) }

func compaction(o *opts) error {
	if o.kafkaLibs == "" {
		return fmt.Errorf("-kafka-libs is required")
	}
	started := time.Now()
	loadStart := loadavg()
	codecs := strings.Split(o.compCodecs, ",")
	var runs []compRun
	var failures []string
	for _, codec := range codecs {
		for p := 0; p < o.pairs; p++ {
			order := []string{"sluice", "kafka"}
			if p%2 == 1 {
				order = []string{"kafka", "sluice"}
			}
			for _, kind := range order {
				logf("compaction codec %s pair %d/%d: %s", codec, p+1, o.pairs, kind)
				r, err := compOnce(o, kind, codec)
				if err != nil {
					logf("  failed: %v", err)
					failures = append(failures, fmt.Sprintf("%s codec %s pair %d: %v", kind, codec, p+1, err))
					continue
				}
				logf("  %.1f MiB -> %.1f MiB in %.2f s (%.1f MiB/s), CPU %.2f s (%.2f CPU-s/GB), seen after %.1f s",
					r.InputMB, r.OutputMB, r.PassS, r.mbps(), r.CPUS, r.cpuPerGB(), r.WaitS)
				runs = append(runs, *r)
			}
		}
	}
	sec := compReport(o, runs, failures, loadStart, loadavg(), time.Since(started))
	fmt.Print(sec)
	return replaceSection(o.out, compactionSection, sec)
}

func compOnce(o *opts, kind, codec string) (*compRun, error) {
	b, err := startBroker(o, kind, workload{Dur: pageCache},
		fmt.Sprintf("log.segment.bytes=%d", compSegmentBytes),
		"log.cleaner.backoff.ms=200",
		"log.cleaner.threads=1",
		"log.cleaner.dedupe.buffer.size=134217728")
	defer b.stop()
	if err != nil {
		return nil, err
	}
	r := &compRun{Broker: kind, Codec: codec}
	gen := exec.Command("taskset", "-c", o.genCPU, o.genBin, "-quiet", "-brokers", b.addr, "-topic", compTopic,
		"-partitions", "1", "-consumers", "0", "-producers", "1", "-record-size", "1024",
		"-records", strconv.FormatInt(o.compRecords, 10), "-duration", "0", "-warmup", "0s",
		"-keys", strconv.FormatInt(o.compKeys, 10), "-compression", codec)
	gen.Stderr = os.Stderr
	t0 := time.Now()
	if out, err := gen.Output(); err != nil {
		return nil, fmt.Errorf("generator: %v: %s", err, lastLine(string(out)))
	}
	r.ProduceS = time.Since(t0).Seconds()
	dataDir := filepath.Join(b.dir, "data")
	// Let every write settle: the input is what is on disk when the
	// switch happens.
	time.Sleep(time.Second)
	in, _, err := inactiveSegments(dataDir)
	if err != nil {
		return nil, err
	}
	r.InputMB = float64(in) / (1 << 20)

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cpu0, err := readProc(b.pid())
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")}}, compTopic)
	if err == nil {
		for _, x := range resp {
			if x.Err != nil {
				err = fmt.Errorf("%v %s", x.Err, x.ErrMessage)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("switching to compact: %w", err)
	}
	for {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no cleaning pass within 5 minutes (log %s)", b.logFile.Name())
		}
		done, err := passDone(b, kind, r)
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.WaitS = time.Since(t1).Seconds()
	cpu1, err := readProc(b.pid())
	if err != nil {
		return nil, err
	}
	r.CPUS = cpu1.cpu - cpu0.cpu
	outB, _, err := inactiveSegments(dataDir)
	if err != nil {
		return nil, err
	}
	r.OutputMB = float64(outB) / (1 << 20)
	return r, nil
}

var kafkaCleaned = regexp.MustCompile(`cleaned log ` + compTopic + `-0 .*\s+([\d,.]+) MB of log processed in ([\d,.]+) seconds \(([\d,.]+) MB/sec\)`)

// passDone reports whether the broker finished its first cleaning pass of
// the topic, and fills in its pass time.
func passDone(b *broker, kind string, r *compRun) (bool, error) {
	switch kind {
	case "kafka":
		log, err := os.ReadFile(b.logFile.Name())
		if err != nil {
			return false, err
		}
		m := kafkaCleaned.FindSubmatch(log)
		if m == nil {
			return false, nil
		}
		num := func(s []byte) float64 {
			v, _ := strconv.ParseFloat(strings.ReplaceAll(string(s), ",", ""), 64)
			return v
		}
		r.PassS, r.KafkaMBps = num(m[2]), num(m[3])
		return true, nil
	default:
		resp, err := http.Get("http://" + b.admin + "/metrics")
		if err != nil {
			return false, err
		}
		text, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return false, err
		}
		if metric(text, "sluice_log_cleaner_segments_total") == 0 {
			return false, nil
		}
		r.PassS = metric(text, "sluice_log_cleaner_last_pass_seconds")
		return true, nil
	}
}

// segmentFiles lists the .log files of the topic's partition directory
// under dir by base offset (both brokers name segments by base offset).
func segmentFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".log") && strings.Contains(path, compTopic) {
			files = append(files, path)
		}
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return filepath.Base(files[i]) < filepath.Base(files[j]) })
	return files, err
}

// inactiveSegments is the size of every segment but the last (the active
// one) and the number of files.
func inactiveSegments(dir string) (int64, int, error) {
	files, err := segmentFiles(dir)
	if err != nil || len(files) < 2 {
		return 0, 0, fmt.Errorf("fewer than 2 segments of %s under %s (%v)", compTopic, dir, err)
	}
	var n int64
	for _, f := range files[:len(files)-1] {
		fi, err := os.Stat(f)
		if err != nil {
			return 0, 0, err
		}
		n += fi.Size()
	}
	return n, len(files) - 1, nil
}

func compReport(o *opts, runs []compRun, failures []string, loadStart, loadEnd string, elapsed time.Duration) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## Log compaction: Sluice's cleaner and Kafka's\n\n")
	p("Generated by `make bench-compaction` (bench/runner -compaction) on %s, Sluice %s; load average %s at start, %s at end; %s in all.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), o.version, loadStart, loadEnd, elapsed.Round(time.Second))
	p("Each run: a fresh broker (page cache durability, 16 MiB segments, log.cleaner.threads=1, 128 MiB dedupe buffer, broker on core %s), ", o.brokerCPU)
	p("%d records of 1 KiB written by one idempotent producer to one partition (sluice-bench -keys %d: the same %d keys in the same order, values half pseudo-random so they compress about 2:1), ",
		o.compRecords, o.compKeys, o.compKeys)
	p("then the topic switched from cleanup.policy=delete to compact and the broker's first cleaning pass awaited. ")
	p("Pass time is the broker's own report (Kafka's LogCleaner line `cleaned log ... MB of log processed in N seconds`, which rounds to 0.1 s; Sluice's `sluice_log_cleaner_last_pass_seconds`); ")
	p("MB are MiB of the partition's inactive segments on disk before the clean, measured alike for both; CPU is the broker process's user+system time from the switch to the end of the pass ")
	p("(idle work included), per 10^9 bytes of that input. Pairs alternate (A B, B A, ...); the ratio column is the median of the per-pair ratios. ")
	p("On a loaded machine a pass's time includes waiting for its core (compare the CPU s column of each run); CPU-s/GB does not, and is the steadier figure.\n\n")
	p("| codec | figure | Sluice | Kafka | Sluice/Kafka | pair ratios |\n|---|---|---:|---:|---:|---:|\n")
	codecs := strings.Split(o.compCodecs, ",")
	for _, codec := range codecs {
		var ps [][2]*compRun
		var cur [2]*compRun
		for i := range runs {
			r := &runs[i]
			if r.Codec != codec {
				continue
			}
			if r.Broker == "sluice" {
				cur[0] = r
			} else {
				cur[1] = r
			}
			if cur[0] != nil && cur[1] != nil {
				ps = append(ps, cur)
				cur = [2]*compRun{}
			}
		}
		if len(ps) == 0 {
			continue
		}
		row := func(name string, get func(*compRun) float64, format string) {
			var s, k, rs []float64
			for _, pr := range ps {
				s = append(s, get(pr[0]))
				k = append(k, get(pr[1]))
				if get(pr[1]) != 0 {
					rs = append(rs, get(pr[0])/get(pr[1]))
				}
			}
			sort.Float64s(rs)
			rng := "-"
			if len(rs) > 0 {
				rng = fmt.Sprintf("%.2f-%.2f", rs[0], rs[len(rs)-1])
			}
			p("| %s | %s | "+format+" | "+format+" | %.2fx | %s |\n", codec, name, median(s), median(k), median(rs), rng)
		}
		row("input cleaned (MiB)", func(r *compRun) float64 { return r.InputMB }, "%.1f")
		row("output (MiB)", func(r *compRun) float64 { return r.OutputMB }, "%.1f")
		row("pass time, broker's report (s)", func(r *compRun) float64 { return r.PassS }, "%.2f")
		row("cleaned (MiB/s)", (*compRun).mbps, "%.1f")
		row("CPU per GB cleaned (CPU-s/GB)", (*compRun).cpuPerGB, "%.2f")
		row("switch to pass seen (s)", func(r *compRun) float64 { return r.WaitS }, "%.2f")
	}
	p("\nKafka's own MB/sec figures (its bytes read in the rewrite over the whole pass):")
	for _, r := range runs {
		if r.Broker == "kafka" {
			p(" %s %.1f;", r.Codec, r.KafkaMBps)
		}
	}
	p("\n\n| codec | broker | input MiB | output MiB | pass s | MiB/s | CPU s | CPU-s/GB | produce s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range runs {
		p("| %s | %s | %.1f | %.1f | %.2f | %.1f | %.2f | %.2f | %.1f |\n", r.Codec, r.Broker, r.InputMB, r.OutputMB, r.PassS, r.mbps(), r.CPUS, r.cpuPerGB(), r.ProduceS)
	}
	for _, f := range failures {
		p("\nFailed run: %s\n", f)
	}
	p("\nReproduce: `make bench-compaction` (BENCH_COMPACTION_ARGS, e.g. `-pairs 5 -compaction-records 524288`).\n")
	return b.String()
}
