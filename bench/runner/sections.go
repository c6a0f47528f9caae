package main

// Sections of BENCHMARKS.md that are measured and regenerated on their own
// (-section NAME), between markers, so that a run of one section leaves the
// rest of the report as it is and a full run keeps the sections:
//
//	tls  W1 over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512), both brokers
//	     started with the three listeners and the same certificate
//	txn  W1 with transactional producers (100 records per transaction),
//	     and a consumer reading transactional data read_committed and
//	     read_uncommitted
//	share  8 share-group consumers (KIP-932) draining a prefilled topic of
//	       1 partition and of 8 partitions (-share-records records)
//
// A section runs in rounds: every round runs each of its workloads as a
// Sluice/Kafka pair (the order of the workloads rotating from round to
// round, and within a pair alternating), so a workload's ratio to the
// section's baseline (W1 over PLAINTEXT, W1 without transactions, the
// read_uncommitted consumer) is taken within one round, on the same
// broker, minutes apart at most.

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
)

// The SCRAM-SHA-512 user of the SASL_SSL listener, on both brokers.
const benchUser, benchPassword = "bench", "bench-secret"

// secureProtos are the listeners a secure broker has besides PLAINTEXT.
var secureProtos = []string{"SSL", "SASL_SSL"}

// kafkaCipher is the TLS 1.3 cipher suite Kafka is limited to, Sluice's.
const kafkaCipher = "TLS_AES_128_GCM_SHA256"

// shareConsumers is how many share-group consumers drain the topic in the
// share section.
const shareConsumers = 8

// txnRate is the fixed produce rate of the consumer workloads of the txn
// section (records/s over its 4 transactional producers).
const txnRate = "5000"

type section struct {
	name, title string
	workloads   []workload
	render      func(b *strings.Builder, s section, r sectionRun)
}

func sections() []section {
	w1 := []string{"-partitions", "8", "-record-size", "1024", "-producers", "4", "-consumers", "0"}
	txc := func(iso string) []string {
		return []string{"-partitions", "8", "-record-size", "1024", "-producers", "4", "-consumers", "1",
			"-txn-records", "100", "-rate", txnRate, "-isolation", iso}
	}
	share := func(parts string) []string {
		return []string{"-partitions", parts, "-record-size", "1024", "-share-consumers", strconv.Itoa(shareConsumers)}
	}
	var tls []workload
	for _, p := range append([]string{"PLAINTEXT"}, secureProtos...) {
		tls = append(tls, workload{Name: "W1/" + p, Dur: durable, Proto: p, Args: w1,
			Desc: "W1 (1 KiB, acks=all, 8 partitions, 4 producers, max throughput) over " + p})
	}
	return []section{
		{name: "tls", title: "W1 over TLS (issue 14)", workloads: tls, render: renderTLS},
		{name: "share", title: "Share groups: 8 consumers draining a queue (issue 21)", render: renderShare, workloads: []workload{
			{Name: "S-1p", Dur: durable, Share: true, Args: share("1"),
				Desc: "8 share consumers in one share group drain a prefilled topic of 1 partition, accepting every record"},
			{Name: "S-8p", Dur: durable, Share: true, Args: share("8"),
				Desc: "the same on a topic of 8 partitions"},
		}},
		{name: "txn", title: "Transactions (issue 15)", render: renderTxn, workloads: []workload{
			{Name: "W1", Dur: durable, Args: w1, Desc: "W1 as above: idempotent producers, no transactions"},
			{Name: "W1-txn", Dur: durable, Args: append(append([]string{}, w1...), "-txn-records", "100"),
				Desc: "W1 with transactional producers (one transactional id each): begin, 100 records, flush, commit"},
			{Name: "TX-read_uncommitted", Dur: durable, Latcy: true, Args: txc("read_uncommitted"),
				Desc: "4 transactional producers at " + txnRate + " records/s in all (100 per transaction), 1 consumer read_uncommitted"},
			{Name: "TX-read_committed", Dur: durable, Latcy: true, Args: txc("read_committed"),
				Desc: "the same, the consumer read_committed"},
		}},
	}
}

func sectionNames() string {
	var n []string
	for _, s := range sections() {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}

// sectionRun holds a section's results: per workload, one pair per round
// (nil where a run failed twice).
type sectionRun struct {
	o                  *opts
	res                map[string][]*pair
	loadStart, loadEnd string
	date               string
	elapsed            time.Duration
	failures           []string
}

func runSection(o *opts) error {
	var s section
	for _, x := range sections() {
		if x.name == o.section {
			s = x
		}
	}
	if s.name == "" {
		return fmt.Errorf("unknown section %q (have %s)", o.section, sectionNames())
	}
	for _, w := range s.workloads {
		if w.Proto != "" && o.certs == "" {
			dir, err := os.MkdirTemp(o.tmp, "sluice-bench-certs-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			if err := prepareCerts(dir); err != nil {
				return err
			}
			o.certs = dir
		}
	}
	var raw *os.File
	if o.rawOut != "" {
		var err error
		if raw, err = os.Create(o.rawOut); err != nil {
			return err
		}
		defer raw.Close()
	}
	r := sectionRun{o: o, res: map[string][]*pair{}, loadStart: loadavg(), date: time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	started := time.Now()
	logf("section %s: %d rounds of %d workloads; load average %s", s.name, o.pairs, len(s.workloads), r.loadStart)
	for round := 0; round < o.pairs; round++ {
		for i := range s.workloads {
			w := s.workloads[(i+round)%len(s.workloads)]
			order := []string{"sluice", "kafka"}
			if (i+round)%2 == 1 {
				order = []string{"kafka", "sluice"}
			}
			pr := &pair{}
			for _, kind := range order {
				logf("%s round %d/%d: %s", w.Name, round+1, o.pairs, kind)
				res, err := runOnce(o, w, kind)
				if err != nil {
					logf("  failed: %v; retrying once", err)
					if res, err = runOnce(o, w, kind); err != nil {
						logf("  failed again, pair dropped: %v", err)
						r.failures = append(r.failures, strings.Join(strings.Fields(fmt.Sprintf("%s round %d, %s: %v", w.Name, round+1, kind, err)), " "))
						pr = nil
						break
					}
				}
				if w.Share {
					sh := res.Gen.Share
					logf("  drained %d records at %.0f rec/s (%.1f MB/s) in %.2f s, first record after %.2f s, ShareFetch p50 %.1f p99 %.1f ms, per consumer %v, broker CPU %.2f s/GB, peak RSS %.0f MiB, load %s",
						sh.Records, sh.RecordsPerS, sh.MBPerS, sh.DrainS, sh.FirstRecordS, sh.Fetch.P50, sh.Fetch.P99, sh.PerConsumer, res.CPUPerGB, res.PeakRSSMiB, res.Load)
				} else {
					logf("  %.0f rec/s, ack p50 %.1f p99 %.1f ms, e2e p99 %.1f ms, txn p99 %.1f ms, broker CPU %.2f s/GB, load %s",
						res.Gen.Produce.RecordsPerS, res.Gen.Produce.Ack.P50, res.Gen.Produce.Ack.P99, res.Gen.Consume.E2E.P99,
						res.Gen.Txn.Latency.P99, res.CPUPerGB, res.Load)
				}
				if raw != nil {
					b, _ := json.Marshal(res)
					raw.Write(append(b, '\n'))
				}
				if kind == "sluice" {
					pr.S = res
				} else {
					pr.K = res
				}
			}
			r.res[w.Name] = append(r.res[w.Name], pr)
		}
	}
	r.loadEnd = loadavg()
	r.elapsed = time.Since(started)
	var b strings.Builder
	s.render(&b, s, r)
	if err := replaceSection(o.out, s.name, b.String()); err != nil {
		return err
	}
	logf("section %s written into %s in %s", s.name, o.out, r.elapsed.Round(time.Second))
	return nil
}

// prepareCerts writes a CA and a server certificate for 127.0.0.1 (the
// generator of `sluice dev --secure`), which both brokers serve, and the
// generator's client properties for each protocol.
func prepareCerts(dir string) error {
	f, err := tlsconfig.GenerateDev(dir, []string{"127.0.0.1", "localhost"})
	if err != nil {
		return err
	}
	files := map[string]string{
		"PLAINTEXT.properties": "security.protocol=PLAINTEXT\n",
		"SSL.properties":       fmt.Sprintf("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n", f.CA),
		"SASL_SSL.properties": fmt.Sprintf("security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\nsasl.mechanism=SCRAM-SHA-512\n"+
			"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"%s\" password=\"%s\";\n", f.CA, benchUser, benchPassword),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// allocSecure picks the SSL and SASL_SSL listeners' ports.
func (b *broker) allocSecure() error {
	b.secure = map[string]string{}
	for _, p := range secureProtos {
		port, err := freePort()
		if err != nil {
			return err
		}
		b.secure[p] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	return nil
}

// secureSluice is the listener flags of a Sluice broker with PLAINTEXT,
// SSL and SASL_SSL listeners; the SCRAM user comes from
// SLUICE_BOOTSTRAP_USER. No authorizer, as on the Kafka side.
func (b *broker) secureSluice(o *opts) ([]string, error) {
	if err := b.allocSecure(); err != nil {
		return nil, err
	}
	return []string{
		"--listeners", fmt.Sprintf("PLAINTEXT://%s,SSL://%s,SASL_SSL://%s", b.addr, b.secure["SSL"], b.secure["SASL_SSL"]),
		"--set", "ssl.keystore.location=" + filepath.Join(o.certs, "server.pem"),
		"--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
	}, nil
}

// secureKafka is the server.properties lines of a Kafka broker with the
// same certificate (a PEM key store given inline: Kafka takes a PEM file
// only with an encrypted key) and SCRAM-SHA-512 on SASL_SSL, and the
// format tool's arguments that create the SCRAM user.
func (b *broker) secureKafka(o *opts) (string, []string, error) {
	if err := b.allocSecure(); err != nil {
		return "", nil, err
	}
	data, err := os.ReadFile(filepath.Join(o.certs, "server.pem"))
	if err != nil {
		return "", nil, err
	}
	var key, chain []byte
	for rest := data; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			chain = append(chain, pem.EncodeToMemory(blk)...)
		} else {
			key = pem.EncodeToMemory(blk)
		}
	}
	if key == nil || chain == nil {
		return "", nil, fmt.Errorf("%s: no key or no certificate", filepath.Join(o.certs, "server.pem"))
	}
	// A properties value on one line: \n stands for the line breaks.
	oneLine := func(b []byte) string { return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", `\n`) }
	// The cipher Sluice's TLS 1.3 chooses (Go prefers AES-128-GCM where the
	// CPU has AES instructions); Kafka's own first choice, AES-256-GCM,
	// costs more per byte.
	props := "ssl.keystore.type=PEM\n" +
		"ssl.cipher.suites=" + kafkaCipher + "\n" +
		"ssl.keystore.key=" + oneLine(key) + "\n" +
		"ssl.keystore.certificate.chain=" + oneLine(chain) + "\n" +
		"sasl.enabled.mechanisms=SCRAM-SHA-512\n" +
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
	format := []string{"--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", benchUser, benchPassword)}
	return props, format, nil
}

// ---------------------------------------------------------------- report

const sectionBegin, sectionEnd = "<!-- section %s: generated by bench/runner; do not edit by hand -->", "<!-- end of section %s -->"

// compactionSection is the section -compaction (make bench-compaction)
// writes; it has no workloads of its own.
const compactionSection = "compaction"

// keptSections are the names of every section a whole report keeps.
func keptSections() []string {
	names := []string{compactionSection, isolationSection}
	for _, s := range sections() {
		names = append(names, s.name)
	}
	return names
}

// replaceSection puts text, between its markers, into the report at path:
// in place of the section's last version, or else before "## Reproduce".
func replaceSection(path, name, text string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	block := fmt.Sprintf(sectionBegin, name) + "\n\n" + strings.TrimSpace(text) + "\n\n" + fmt.Sprintf(sectionEnd, name) + "\n"
	doc := string(old)
	if i, j, ok := findSection(doc, name); ok {
		doc = doc[:i] + block + doc[j:]
	} else {
		doc = insertSection(doc, block)
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// findSection is where the block of section name starts and ends in doc
// (its end marker and line break included).
func findSection(doc, name string) (int, int, bool) {
	begin, end := fmt.Sprintf(sectionBegin, name), fmt.Sprintf(sectionEnd, name)
	i := strings.Index(doc, begin)
	if i < 0 {
		return 0, 0, false
	}
	j := strings.Index(doc[i:], end)
	if j < 0 {
		return 0, 0, false
	}
	j += i + len(end)
	if j < len(doc) && doc[j] == '\n' {
		j++
	}
	return i, j, true
}

func insertSection(doc, block string) string {
	if i := strings.Index(doc, "\n## Reproduce\n"); i >= 0 {
		return doc[:i+1] + block + "\n" + doc[i+1:]
	}
	if doc != "" && !strings.HasSuffix(doc, "\n\n") {
		doc = strings.TrimRight(doc, "\n") + "\n\n"
	}
	return doc + block
}

// keepSections carries the sections of the report at path over into rep,
// the newly generated whole report.
func keepSections(path, rep string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return rep
	}
	for _, name := range keptSections() {
		if i, j, ok := findSection(string(old), name); ok {
			rep = insertSection(rep, string(old[i:j]))
		}
	}
	return rep
}

// secFig is one figure of a section table.
type secFig struct {
	name, unit string
	get        func(*runResult) float64
}

var (
	figRecords = secFig{"produce throughput", "records/s", func(r *runResult) float64 { return r.Gen.Produce.RecordsPerS }}
	figMB      = secFig{"produce throughput", "MB/s", func(r *runResult) float64 { return r.Gen.Produce.MBPerS }}
	figAck50   = secFig{"produce ack p50", "ms", func(r *runResult) float64 { return r.Gen.Produce.Ack.P50 }}
	figAck99   = secFig{"produce ack p99", "ms", func(r *runResult) float64 { return r.Gen.Produce.Ack.P99 }}
	figCPUGB   = secFig{"broker CPU per GB ingested", "CPU-s/GB", func(r *runResult) float64 { return r.CPUPerGB }}
	figCPU     = secFig{"broker CPU, share of its core", "%", func(r *runResult) float64 { return 100 * r.CPUSec / r.WallS }}
	figRSS     = secFig{"broker peak RSS", "MiB", func(r *runResult) float64 { return r.PeakRSSMiB }}
	figGen     = secFig{"generator core busy", "%", func(r *runResult) float64 { return 100 * r.GenCPUUtil }}
	figTxnS    = secFig{"transactions committed", "/s", func(r *runResult) float64 { return r.Gen.Txn.PerS }}
	figTxn50   = secFig{"transaction p50 (first send to commit)", "ms", func(r *runResult) float64 { return r.Gen.Txn.Latency.P50 }}
	figTxn99   = secFig{"transaction p99 (first send to commit)", "ms", func(r *runResult) float64 { return r.Gen.Txn.Latency.P99 }}
	figEnd50   = secFig{"EndTxn (commit) p50", "ms", func(r *runResult) float64 { return r.Gen.Txn.Commit.P50 }}
	figEnd99   = secFig{"EndTxn (commit) p99", "ms", func(r *runResult) float64 { return r.Gen.Txn.Commit.P99 }}
	figE2E50   = secFig{"end-to-end p50", "ms", func(r *runResult) float64 { return r.Gen.Consume.E2E.P50 }}
	figE2E99   = secFig{"end-to-end p99", "ms", func(r *runResult) float64 { return r.Gen.Consume.E2E.P99 }}
	figE2E999  = secFig{"end-to-end p99.9", "ms", func(r *runResult) float64 { return r.Gen.Consume.E2E.P999 }}
	figRate    = secFig{"target rate achieved", "%", func(r *runResult) float64 { return 100 * r.Gen.Produce.RecordsPerS / mustFloat(txnRate) }}
	figDelay   = secFig{"send delay behind schedule p99", "ms", func(r *runResult) float64 { return r.Gen.Produce.SendDelay.P99 }}
	figConsume = secFig{"consumed", "records/s", func(r *runResult) float64 { return r.Gen.Consume.RecordsPerS }}
)

func mustFloat(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	return v
}

// complete are the rounds in which both this workload's pair and the
// baseline's pair ran.
func complete(r sectionRun, w, base string) (ps, bs []*pair) {
	for i, p := range r.res[w] {
		if p == nil || p.S == nil || p.K == nil {
			continue
		}
		var bp *pair
		if base != "" && i < len(r.res[base]) {
			bp = r.res[base][i]
		}
		ps = append(ps, p)
		bs = append(bs, bp)
	}
	return ps, bs
}

// sectionTable writes one row per workload and figure: the medians of
// Sluice and Kafka, the median of the per-pair ratios and their range, and
// each broker's median ratio to its own baseline run of the same round.
func sectionTable(b *strings.Builder, r sectionRun, ws []string, base, baseLabel string, figs []secFig) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("| workload | figure | Sluice | Kafka | Sluice/Kafka | pair ratios | Sluice / its %s | Kafka / its %s |\n", baseLabel, baseLabel)
	p("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range ws {
		ps, bs := complete(r, w, base)
		if len(ps) == 0 {
			continue
		}
		var flat []pair
		for _, x := range ps {
			flat = append(flat, *x)
		}
		for _, f := range figs {
			a := aggregate(flat, f.get)
			if a.S == 0 && a.K == 0 {
				continue // not a figure of this workload (transactions of W1)
			}
			rng := "n/a"
			if !math.IsNaN(a.Rmin) {
				rng = fmt.Sprintf("%.2f-%.2f", a.Rmin, a.Rmax)
			}
			own := func(side func(*pair) *runResult) string {
				if w == base {
					return "1"
				}
				var v []float64
				for i, x := range ps {
					if bs[i] == nil || side(bs[i]) == nil {
						continue
					}
					if d := f.get(side(bs[i])); d != 0 {
						v = append(v, f.get(side(x))/d)
					}
				}
				return ratio(median(v))
			}
			p("| %s | %s (%s) | %s | %s | %s | %s | %s | %s |\n", w, f.name, f.unit, fmtNum(a.S), fmtNum(a.K), ratio(a.R), rng,
				own(func(x *pair) *runResult { return x.S }), own(func(x *pair) *runResult { return x.K }))
		}
	}
}

// everyRun lists each run with the load average at its start.
func everyRun(b *strings.Builder, r sectionRun, ws []string, txn bool) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("| workload | round | broker | load avg at start | records/s | ack p50 ms | ack p99 ms | ")
	if txn {
		p("txn p99 ms | e2e p99 ms | ")
	}
	p("CPU-s/GB | peak RSS MiB | gen core |\n|---|---:|---|---|---:|---:|---:|")
	if txn {
		p("---:|---:|")
	}
	p("---:|---:|---:|\n")
	for _, w := range ws {
		for i, pr := range r.res[w] {
			if pr == nil {
				continue
			}
			for _, x := range []*runResult{pr.S, pr.K} {
				if x == nil {
					continue
				}
				p("| %s | %d | %s | %s | %s | %s | %s | ", w, i+1, x.Broker, x.Load, fmtNum(x.Gen.Produce.RecordsPerS),
					fmtNum(x.Gen.Produce.Ack.P50), fmtNum(x.Gen.Produce.Ack.P99))
				if txn {
					p("%s | %s | ", fmtNum(x.Gen.Txn.Latency.P99), fmtNum(x.Gen.Consume.E2E.P99))
				}
				p("%s | %s | %.0f %% |\n", fmtNum(x.CPUPerGB), fmtNum(x.PeakRSSMiB), 100*x.GenCPUUtil)
			}
		}
	}
}

func sectionHeader(b *strings.Builder, s section, r sectionRun) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	o := r.o
	p("## %s\n\n", s.title)
	p("Measured by `make bench BENCH_ARGS='-section %s'` on %s (%s; Sluice %s, Kafka 4.4.0); this section alone is regenerated by that command, the rest of the file by `make bench`. ",
		s.name, r.date, firstLine(sh("java", "-version")), o.version)
	p("%d rounds of %d pairs, %s per run of which %s warm-up, %s in all; the workloads' order rotates every round and each pair alternates which broker runs first. ",
		o.pairs, len(s.workloads), o.duration, o.warmup, r.elapsed.Round(time.Second))
	p("Medians over the rounds; a ratio to a baseline is taken within each round (runs minutes apart at most), then its median. ")
	p("Fresh broker and data directory per run, broker on core %s and generator on core %s, fsync durability as in W1 (Sluice log.fsync=group, Kafka flush.messages=1).\n\n", o.brokerCPU, o.genCPU)
	p("Load average (1/5/15 min): %s at the start, %s at the end (each run's is in the table at the end of the section); the machine is shared, so absolute figures move with it and ratios hold better.\n\n", r.loadStart, r.loadEnd)
	if len(r.failures) > 0 {
		p("Runs that failed twice, their pairs left out: %s.\n\n", strings.Join(r.failures, "; "))
	}
	p("| workload | shape |\n|---|---|\n")
	for _, w := range s.workloads {
		p("| %s | %s |\n", w.Name, w.Desc)
	}
	p("\n")
}

func wlNames(ws []workload) []string {
	var n []string
	for _, w := range ws {
		n = append(n, w.Name)
	}
	return n
}

func renderTLS(b *strings.Builder, s section, r sectionRun) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	sectionHeader(b, s, r)
	// What the producers' TLS connections negotiated, per broker.
	neg := map[string]map[string]bool{"sluice": {}, "kafka": {}}
	for _, ps := range r.res {
		for _, pr := range ps {
			if pr == nil {
				continue
			}
			for _, x := range []*runResult{pr.S, pr.K} {
				if x != nil && x.Gen.Produce.TLS != "" {
					neg[x.Broker][x.Gen.Produce.TLS] = true
				}
			}
		}
	}
	keys := func(m map[string]bool) string {
		var k []string
		for x := range m {
			k = append(k, x)
		}
		sort.Strings(k)
		return strings.Join(k, ", ")
	}
	p("Both brokers run with three listeners, PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512, user created before start: Sluice's `SLUICE_BOOTSTRAP_USER`, Kafka's `kafka-storage format --add-scram`), ")
	p("the same ECDSA P-256 server certificate from one private CA (Kafka reads it as an inline PEM key store, `ssl.keystore.type=PEM`), no authorizer on either; ")
	p("Kafka is held to `ssl.cipher.suites=%s`, the suite Sluice's Go TLS 1.3 picks, so that both encrypt alike (left alone, Kafka picks TLS_AES_256_GCM_SHA384, more work per byte); ", kafkaCipher)
	p("the generator (franz-go, `-command-config`) is the same for both. The producers' connections negotiated %s with Sluice and %s with Kafka.\n\n", keys(neg["sluice"]), keys(neg["kafka"]))
	sectionTable(b, r, wlNames(s.workloads), "W1/PLAINTEXT", "PLAINTEXT", []secFig{figRecords, figMB, figAck50, figAck99, figCPUGB, figCPU, figRSS, figGen})
	p("\nThe last two columns are each broker's TLS cost: its SSL or SASL_SSL run over its PLAINTEXT run of the same round (throughput below 1 and CPU per GB above 1 are the cost).\n\n")
	p("Every run:\n\n")
	everyRun(b, r, wlNames(s.workloads), false)
}

func renderTxn(b *strings.Builder, s section, r sectionRun) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	sectionHeader(b, s, r)
	p("Producer side: W1 with and without transactions. Every producer is a franz-go client with a transactional id of its own, ")
	p("running one transaction at a time (BeginTransaction, 100 records, Flush, EndTransaction); the records spread over the partitions as in W1 (franz-go's default partitioner). ")
	p("The transaction latency is from the first record's send to the commit's answer; EndTxn is that call alone, after the flush. Throughput counts acknowledged records, all of them committed. ")
	p("The transactional producers retry with the Java producer's back-off (100 ms doubling to 1 s) and refresh metadata at most every 100 ms (franz-go's MetadataMinAge, 5 s by default): ")
	p("franz-go retries a CONCURRENT_TRANSACTIONS or NOT_ENOUGH_REPLICAS produce answer only after a metadata refresh, and Kafka, which answers EndTxn before its markers are written, gives the next transaction's first batches CONCURRENT_TRANSACTIONS often enough that with the default every few transactions waited about 5 s.\n\n")
	sectionTable(b, r, []string{"W1", "W1-txn"}, "W1", "W1", []secFig{figRecords, figMB, figAck50, figAck99, figTxnS, figTxn50, figTxn99, figEnd50, figEnd99, figCPUGB, figCPU, figRSS, figGen})
	p("\nConsumer side: the same transactional producers at a fixed %s records/s, one consumer tailing the topic, read_uncommitted or read_committed. ", txnRate)
	p("End-to-end latency is from a record's send to the consumer having it; read_committed cannot hand a record out before its transaction's commit marker, so its end-to-end latency includes the rest of the transaction and the commit. ")
	p("Broker CPU per GB covers the producers' and the consumer's requests.\n\n")
	sectionTable(b, r, []string{"TX-read_uncommitted", "TX-read_committed"}, "TX-read_uncommitted", "read_uncommitted",
		[]secFig{figRecords, figRate, figDelay, figConsume, figE2E50, figE2E99, figE2E999, figTxn50, figTxn99, figCPUGB, figCPU, figGen})
	p("\nEvery run:\n\n")
	everyRun(b, r, wlNames(s.workloads), true)
}

var (
	figShareRec   = secFig{"drained", "records/s", func(r *runResult) float64 { return r.Gen.Share.RecordsPerS }}
	figShareMB    = secFig{"drained", "MB/s", func(r *runResult) float64 { return r.Gen.Share.MBPerS }}
	figShareF50   = secFig{"ShareFetch round trip p50, responses with records", "ms", func(r *runResult) float64 { return r.Gen.Share.Fetch.P50 }}
	figShareF99   = secFig{"ShareFetch round trip p99, responses with records", "ms", func(r *runResult) float64 { return r.Gen.Share.Fetch.P99 }}
	figShareFirst = secFig{"consumers' start to first record", "s", func(r *runResult) float64 { return r.Gen.Share.FirstRecordS }}
	figShareCPU   = secFig{"broker CPU per GB drained", "CPU-s/GB", func(r *runResult) float64 { return r.CPUPerGB }}
	figShareRSS   = secFig{"broker peak RSS during the drain", "MiB", func(r *runResult) float64 { return r.PeakRSSMiB }}
)

func renderShare(b *strings.Builder, s section, r sectionRun) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	o := r.o
	p("## %s\n\n", s.title)
	p("Measured by `%s` on %s (%s; Sluice %s, Kafka 4.4.0); this section alone is regenerated by `make bench BENCH_ARGS='-section share'`, the rest of the file by `make bench`. ",
		o.command, r.date, firstLine(sh("java", "-version")), o.version)
	p("%d round(s) of %d pairs, %s in all; the workloads' order rotates every round and each pair alternates which broker runs first (A B, then B A). ",
		o.pairs, len(s.workloads), r.elapsed.Round(time.Second))
	p("Medians over the rounds, and the median of the per-pair ratios. ")
	p("Fresh broker and data directory per run (Sluice `sluice dev`, Kafka 4.4.0 one combined broker and controller), broker on core %s and generator on core %s, fsync durability as in W1 (Sluice log.fsync=group, Kafka flush.messages=1, which also covers Kafka's share-state topic).\n\n", o.brokerCPU, o.genCPU)
	p("Load average (1/5/15 min): %s at the start, %s at the end (each run's is in the table at the end of the section)", r.loadStart, r.loadEnd)
	if l, _ := strconv.ParseFloat(strings.Fields(r.loadStart + " 0")[0], 64); l > float64(2*nproc()) {
		p(" — **a loaded machine** (other work was running on its %d cores), so the absolute figures say little about either broker; the ratios of runs made minutes apart hold better", nproc())
	} else {
		p("; the machine is shared, so absolute figures move with it and ratios hold better")
	}
	p(".\n\n")
	if len(r.failures) > 0 {
		p("Runs that failed twice, their pairs left out: %s.\n\n", strings.Join(r.failures, "; "))
	}
	p("| workload | shape |\n|---|---|\n")
	for _, w := range s.workloads {
		p("| %s | %s |\n", w.Name, w.Desc)
	}
	p("\n")
	p("Each run: the generator creates the topic, sets the share group's `share.auto.offset.reset=earliest` (a GROUP config, IncrementalAlterConfigs, on both brokers), ")
	p("prefills %s records of 1 KiB (one idempotent producer, acks=all, unmeasured), then starts %d franz-go share consumers (`kgo.ShareGroup`, client defaults: up to 500 records per ShareFetch) ", commas(o.shareRecs), shareConsumers)
	p("that accept every record (`AckAccept`, sent with the next ShareFetch). The drain ends when every offset of the topic has been delivered and each consumer's last acknowledgements are answered (`FlushAcks`); ")
	p("throughput is the records over the time from the first record delivered to that end. A run counts only if every prefilled offset was accepted exactly once (no offset delivered twice). ")
	p("The ShareFetch round trip is franz-go's write-to-read time of a ShareFetch (BrokerE2E hook) for the responses that carried records; responses without records are long polls waiting for records the other members hold, counted in the table at the end. ")
	p("Broker CPU per GB is the broker process's CPU time from the first record delivered to the end of the drain, per GB of record values drained (the CPU time before, from the consumers' creation to the first record, joining and share-partition initialisation, is in the table at the end, as join CPU); peak RSS is sampled every 100 ms from the consumers' creation to the end. ")
	p("Both brokers keep their share-group defaults: record lock 30 s, at most 2000 records in flight per share partition (group.share.partition.max.record.locks), heartbeat every 5 s. ")
	p("Kafka 4.4 needs no setting to enable share groups: a cluster formatted at metadata version 4.4 has the share.version feature on (the runner's Kafka also sets share.coordinator.state.topic.replication.factor and min.isr to 1 for its single broker).\n\n")
	sectionTable(b, r, wlNames(s.workloads), "S-8p", "8 partitions", []secFig{figShareRec, figShareMB, figShareF50, figShareF99, figShareFirst, figShareCPU, figShareRSS})
	p("\nThe last two columns are each broker's 1-partition run over its 8-partition run of the same round.\n\n")
	p("Where the time goes: Sluice stores a share partition's state (start offset, acknowledged and archived records, delivery counts) in its metastore, a raft write committed to disk, before it answers an acknowledgement (carried by a ShareFetch or a ShareAcknowledge) that changed the state, and holds the share group's lock across that write, so the writes for all 8 consumers of a group follow one another (acquisitions are held in memory and not written). ")
	p("The *metastore writes* column of the table below is how many writes the Sluice broker made during the run (the prefill's few included) and their summed latency; set against the drain time, it shows how much of the drain was spent waiting for them. ")
	p("Kafka writes share-partition state through its share coordinator to the internal `__share_group_state` topic.\n\n")
	p("Every run:\n\n")
	p("| workload | round | broker | load avg at start | records/s | MB/s | first record s | drain s | ShareFetch p50 / p99 ms | ShareFetch with records / empty | records per consumer (min-max) | redelivered | join CPU s | CPU-s/GB | peak RSS MiB | metastore writes (n / s) | gen core |\n")
	p("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range wlNames(s.workloads) {
		for i, pr := range r.res[w] {
			if pr == nil {
				continue
			}
			for _, x := range []*runResult{pr.S, pr.K} {
				if x == nil {
					continue
				}
				sh := x.Gen.Share
				lo, hi := int64(-1), int64(0)
				for _, n := range sh.PerConsumer {
					if lo < 0 || n < lo {
						lo = n
					}
					hi = max(hi, n)
				}
				meta := "—"
				if x.MetaWrites > 0 {
					meta = fmt.Sprintf("%.0f / %.1f", x.MetaWrites, x.MetaWriteS)
				}
				p("| %s | %d | %s | %s | %s | %s | %.2f | %.2f | %s / %s | %d / %d | %s-%s | %d | %.2f | %s | %s | %s | %.0f %% |\n", w, i+1, x.Broker, x.Load,
					fmtNum(sh.RecordsPerS), fmtNum(sh.MBPerS), sh.FirstRecordS, sh.DrainS, fmtNum(sh.Fetch.P50), fmtNum(sh.Fetch.P99),
					sh.Fetch.Count, sh.FetchEmpty, commas(lo), commas(hi), sh.Redelivered, sh.BrokerJoinCPUS, fmtNum(x.CPUPerGB), fmtNum(x.PeakRSSMiB), meta, 100*x.GenCPUUtil)
			}
		}
	}
}
