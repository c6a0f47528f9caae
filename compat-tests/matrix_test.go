package compat

// The client × scenario matrix (docs/compat.md, `make compat`). Clients that
// are not Go libraries (Python, JavaScript, confluent-kafka-go behind cgo)
// run as one external process per scenario group; each process prints one
// "RESULT <scenario> pass|fail|na <detail>" line per scenario. The test
// checks what the broker stored where it can, fails on every fail line and
// on every expected scenario that printed nothing, and records each cell:
// as a "MATRIX client scenario result" log line and, when
// SLUICE_COMPAT_MATRIX_DIR is set, as a JSON line in that directory, which
// compat-tests/cmd/compatmatrix renders.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// EnvMatrixDir names the directory the matrix cells are written to.
const EnvMatrixDir = "SLUICE_COMPAT_MATRIX_DIR"

// Scenario names, in the order of the matrix rows.
var (
	basicScenarios = []string{
		"bootstrap-metadata", "produce-acks0", "produce-acks1", "produce-acksall", "produce-idempotent",
		"keys-nulls-headers-timestamps", "near-max-message-bytes", "error-record-too-large",
		"consume-earliest", "consume-latest", "consume-timestamp", "error-unknown-topic",
	}
	adminScenarios = []string{
		"admin-create", "admin-describe-configs", "admin-alter-configs", "admin-create-partitions",
		"admin-delete", "error-bad-config",
	}
	groupScenarios = []string{"group-commit-resume", "group-rebalance"}
	// txnScenarios run in the basic group's process of the clients that
	// have a transactional producer (prepareTxn, checkTxn); txn-offsets
	// and txn-fencing where the client can also send offsets with a
	// transaction (all of them but kcat).
	txnScenarios = []string{"txn-commit-abort", "txn-offsets", "txn-fencing"}
	codecNames   = []string{"none", "gzip", "snappy", "lz4", "zstd"}
)

const (
	codecRecords = 50
	tsBase       = int64(1_700_000_000_000)
)

type matrixCell struct {
	Kind     string `json:"kind"` // "cell" or "xread"
	Client   string `json:"client"`
	Scenario string `json:"scenario"`
	Result   string `json:"result"` // pass, fail, na
	Detail   string `json:"detail,omitempty"`
	Writer   string `json:"writer,omitempty"`
	Codec    string `json:"codec,omitempty"`
	Test     string `json:"test"`
}

var matrixMu sync.Mutex

func writeMatrix(c matrixCell) {
	dir := os.Getenv(EnvMatrixDir)
	if dir == "" {
		return
	}
	b, _ := json.Marshal(c)
	matrixMu.Lock()
	defer matrixMu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, "cells.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "matrix: %v\n", err)
		return
	}
	defer f.Close()
	f.Write(append(b, '\n'))
}

// recordMatrix records one cell; a fail also fails the test.
func recordMatrix(t *testing.T, client, scenario, result, detail string) {
	t.Helper()
	t.Logf("MATRIX %s %s %s %s", client, scenario, result, detail)
	writeMatrix(matrixCell{Kind: "cell", Client: client, Scenario: scenario, Result: result, Detail: detail, Test: t.Name()})
	if result == "fail" {
		t.Errorf("%s: %s failed: %s", client, scenario, detail)
	}
}

// recordMissing records every expected scenario as fail with why: used
// when a whole group could not run (the toolchain is missing, the process
// died), so that no cell of the matrix is left empty.
func recordMissing(t *testing.T, client string, scenarios []string, why string) {
	t.Helper()
	for _, s := range scenarios {
		recordMatrix(t, client, s, "fail", why)
	}
}

type scenarioResult struct{ result, detail string }

// runScenarios runs one external scenario group and returns its RESULT
// lines by scenario. Nothing is recorded here: the caller checks the broker
// side and then calls recordResults.
func runScenarios(t *testing.T, timeout time.Duration, dir string, name string, args ...string) (map[string]scenarioResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %v in %v\nstdout:\n%s", name, strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond), out.String())
	res := map[string]scenarioResult{}
	version := ""
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "VERSION "); ok {
			version = v
		}
		rest, ok := strings.CutPrefix(line, "RESULT ")
		if !ok {
			continue
		}
		// The scenario may contain one space ("read <topic>").
		var scen, r, detail string
		if s, ok := strings.CutPrefix(rest, "read "); ok {
			f := strings.SplitN(s, " ", 3)
			scen, r = "read "+f[0], f[1]
			if len(f) > 2 {
				detail = f[2]
			}
		} else {
			f := strings.SplitN(rest, " ", 3)
			if len(f) < 2 {
				continue
			}
			scen, r = f[0], f[1]
			if len(f) > 2 {
				detail = f[2]
			}
		}
		res[scen] = scenarioResult{r, strings.TrimSpace(detail)}
	}
	if err != nil || ctx.Err() != nil {
		t.Logf("%s exited with %v (ctx %v); stderr (tail):\n%s", name, err, ctx.Err(), tail(errb.String(), 8<<10))
	} else if errb.Len() > 0 {
		t.Logf("stderr (tail):\n%s", tail(errb.String(), 4<<10))
	}
	if version != "" {
		res["\x00version"] = scenarioResult{"", version}
	}
	if len(res) == 0 {
		res["\x00error"] = scenarioResult{"fail", fmt.Sprintf("%s exited with %v and no results; stderr: %s", name, err, tail(errb.String(), 300))}
	}
	return res, errb.String()
}

// recordResults records every expected scenario: its RESULT line, or fail
// when the process printed none for it. override, when it returns a
// non-empty detail for a scenario the client passed, turns it into a fail
// (the broker-side check disagreed).
func recordResults(t *testing.T, client string, expected []string, res map[string]scenarioResult, override func(string) string) {
	t.Helper()
	if v, ok := res["\x00version"]; ok {
		t.Logf("%s: %s", client, v.detail)
		writeMatrix(matrixCell{Kind: "version", Client: client, Detail: v.detail, Test: t.Name()})
	}
	for _, s := range expected {
		r, ok := res[s]
		switch {
		case !ok:
			why := "the client process printed no result for it"
			if e, ok := res["\x00error"]; ok {
				why = e.detail
			}
			recordMatrix(t, client, s, "fail", why)
		case r.result == "pass" && override != nil && override(s) != "":
			recordMatrix(t, client, s, "fail", "client passed, broker-side check failed: "+override(s))
		default:
			recordMatrix(t, client, s, r.result, r.detail)
		}
	}
}

// prepareBasic creates the topics of the basic group for prefix p, and the
// 10 records of p-cons (values c-<i>, timestamps tsBase+i*1000).
func prepareBasic(t *testing.T, addr, p string) { prepareBasicWith(t, addr, p, nil) }

// basicTopicSuffixes are the topics prepareBasic creates, p-<suffix>.
var basicTopicSuffixes = []string{"meta", "acks0", "acks1", "acksall", "idem", "fields", "cons", "big"}

// prepareBasicWith is prepareBasic with configs set on every topic it
// creates (the shared-mode rows: replication.mode=shared).
func prepareBasicWith(t *testing.T, addr, p string, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := newAdmin(t, addr)
	with := func(extra map[string]*string) map[string]*string {
		if len(configs) == 0 && len(extra) == 0 {
			return nil
		}
		m := map[string]*string{}
		for k, v := range configs {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	createTopic(ctx, t, adm, p+"-meta", 3, with(nil))
	for _, s := range []string{"acks0", "acks1", "acksall", "idem", "fields", "cons"} {
		createTopic(ctx, t, adm, p+"-"+s, 1, with(nil))
	}
	mmb := "100000"
	createTopic(ctx, t, adm, p+"-big", 1, with(map[string]*string{"max.message.bytes": &mmb}))
	cl := newClient(t, addr)
	var rs []*kgo.Record
	for i := 0; i < 10; i++ {
		rs = append(rs, &kgo.Record{Topic: p + "-cons", Value: []byte(fmt.Sprintf("c-%d", i)), Timestamp: time.UnixMilli(tsBase + int64(i)*1000)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s-cons: %v", p, err)
	}
}

// checkBasic checks on the broker what the produce scenarios wrote: 100
// records per acks topic with the values the client sent, and producer ids
// on the idempotent topic's batches.
func checkBasic(t *testing.T, addr, p string) func(string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := newAdmin(t, addr)
	problems := map[string]string{}
	for scen, topic := range map[string]string{"produce-acks0": "acks0", "produce-acks1": "acks1", "produce-acksall": "acksall", "produce-idempotent": "idem"} {
		topic = p + "-" + topic
		ends := endOffsets(ctx, t, adm, topic)
		if ends[0] != 100 {
			problems[scen] = fmt.Sprintf("%s holds %d records, want 100", topic, ends[0])
			continue
		}
		got := consumeAll(ctx, t, addr, topic, ends)[0]
		for i, r := range got {
			if string(r.Value) != fmt.Sprintf("%s-%d", topic, i) {
				problems[scen] = fmt.Sprintf("%s offset %d: value %q", topic, r.Offset, r.Value)
				break
			}
			if scen == "produce-idempotent" && r.ProducerID < 0 {
				problems[scen] = fmt.Sprintf("%s offset %d: batch without a producer id: not idempotent", topic, r.Offset)
				break
			}
		}
	}
	return func(s string) string { return problems[s] }
}

// prepareTxn creates the topics of the transaction scenarios, which
// every client runs the same way:
//
// txn-commit-abort, on p-txn (1 partition): the client writes c-0..c-4
// in a committed transaction, a-0..a-4 in an aborted one and c-5..c-9 in
// a committed one, and reads c-0..c-9 back with a read_committed
// consumer.
//
// txn-offsets (consume, transform, produce), from p-txo-in (1 partition,
// holding i-0..i-9, written here) to p-txo-out (1 partition): a consumer
// of group p-txo-g (assigned partition 0, not subscribed) reads
// i-0..i-9; a producer with transactional id p-txo-tid writes o-0..o-4
// to p-txo-out and sends offset 5 of p-txo-in for the group with the
// transaction (the client's sendOffsetsToTransaction, or AddOffsetsToTxn
// and TxnOffsetCommit), and commits; then writes o-5..o-9 with offset 10
// and aborts. The group's committed offset is then 5, and a
// read_committed consumer of p-txo-out reads o-0..o-4.
//
// txn-fencing, on p-txf (1 partition): producer A (transactional id
// p-txf-tid) begins a transaction and writes f-a-0 (flushed, so it is in
// the log); producer B with the same transactional id initializes, which
// fences A and aborts its open transaction; A's commit then fails with
// the client's fenced error (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH
// for request versions from before KIP-588); B writes f-b-0 and commits.
// A read_committed consumer reads f-b-0 only.
func prepareTxn(t *testing.T, addr, p string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := newAdmin(t, addr)
	for _, s := range []string{"txn", "txo-in", "txo-out", "txf"} {
		createTopic(ctx, t, adm, p+"-"+s, 1, nil)
	}
	var rs []*kgo.Record
	for i := range txoInputRecords {
		rs = append(rs, &kgo.Record{Topic: p + "-txo-in", Value: []byte(fmt.Sprintf("i-%d", i))})
	}
	if err := newClient(t, addr).ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s-txo-in: %v", p, err)
	}
}

const (
	txoGroupSuffix   = "-txo-g" // txn-offsets' group
	txoCommitted     = 5        // the committed transaction's offset
	txoInputRecords  = 10       // i-0..i-9; the aborted transaction's offset
	txnSentinelValue = "sentinel"
)

// txnStep is one transaction of txn-commit-abort: its values, and
// whether it commits.
type txnStep struct {
	commit bool
	values []string
}

// txnScenario is what txn-commit-abort writes, as the Go clients run it:
// three transactions of five values, committed, aborted, committed, and
// the values a read_committed consumer must read (c-0..c-9).
func txnScenario() (steps []txnStep, want []string) {
	for i, commit := range []bool{true, false, true} {
		st := txnStep{commit: commit}
		for j := range 5 {
			v := fmt.Sprintf("c-%d", 5*(i/2)+j)
			if !commit {
				v = fmt.Sprintf("a-%d", j)
			} else {
				want = append(want, v)
			}
			st.values = append(st.values, v)
		}
		steps = append(steps, st)
	}
	return steps, want
}

// checkTxn checks on the broker what the transaction scenarios wrote,
// each when the client passed it.
// txn-commit-abort: a read_committed franz-go consumer reads exactly
// c-0..c-9, and a read_uncommitted one also the aborted a-0..a-4 between
// them (so the abort really wrote records for read_committed to drop),
// all in transactional batches. txn-offsets and txn-fencing: after a
// non-transactional sentinel record is appended to the output topic, a
// read_committed consumer reads exactly the committed values and then
// the sentinel (so nothing aborted or undecided slipped through), a
// read_uncommitted one every value written, transactional; and group
// p-txo-g's committed offset of p-txo-in partition 0 is 5, the committed
// transaction's (the aborted one sent 10).
func checkTxn(t *testing.T, addr, p string) func(string) string {
	// read reads n values of partition 0 of topic from the start.
	read := func(ctx context.Context, topic string, isolation kgo.IsolationLevel, n int) ([]string, error) {
		cl := newClient(t, addr, kgo.FetchIsolationLevel(isolation),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		defer cl.Close()
		var got []string
		for len(got) < n && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil && ctx.Err() == nil {
				return got, err
			}
			for _, r := range fs.Records() {
				if r.Attrs.IsTransactional() || string(r.Value) == txnSentinelValue {
					got = append(got, string(r.Value))
				} else {
					got = append(got, "non-transactional "+string(r.Value))
				}
			}
		}
		return got, nil
	}
	// checkOutput appends the sentinel to topic and reads it back both ways.
	checkOutput := func(ctx context.Context, topic string, committed, all []string) string {
		if err := newClient(t, addr).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(txnSentinelValue)}).FirstErr(); err != nil {
			return fmt.Sprintf("appending the sentinel to %s: %v", topic, err)
		}
		wantRC := append(slices.Clone(committed), txnSentinelValue)
		if got, err := read(ctx, topic, kgo.ReadCommitted(), len(wantRC)); err != nil || !slices.Equal(got, wantRC) {
			return fmt.Sprintf("%s read_committed read %q (%v), want %q", topic, got, err, wantRC)
		}
		wantRU := append(slices.Clone(all), txnSentinelValue)
		if got, err := read(ctx, topic, kgo.ReadUncommitted(), len(wantRU)); err != nil || !slices.Equal(got, wantRU) {
			return fmt.Sprintf("%s read_uncommitted read %q (%v), want %q", topic, got, err, wantRU)
		}
		return ""
	}
	checks := map[string]func(context.Context) string{
		"txn-commit-abort": func(ctx context.Context) string {
			var committed []string
			for i := range 10 {
				committed = append(committed, fmt.Sprintf("c-%d", i))
			}
			all := slices.Concat(committed[:5], []string{"a-0", "a-1", "a-2", "a-3", "a-4"}, committed[5:])
			topic := p + "-txn"
			if got, err := read(ctx, topic, kgo.ReadCommitted(), len(committed)); err != nil || !slices.Equal(got, committed) {
				return fmt.Sprintf("read_committed read %q (%v), want c-0..c-9", got, err)
			}
			if got, err := read(ctx, topic, kgo.ReadUncommitted(), len(all)); err != nil || !slices.Equal(got, all) {
				return fmt.Sprintf("read_uncommitted read %q (%v), want c-0..c-4, a-0..a-4, c-5..c-9", got, err)
			}
			return ""
		},
		"txn-offsets": func(ctx context.Context) string {
			var committed, all []string
			for i := range txoInputRecords {
				v := fmt.Sprintf("o-%d", i)
				if i < txoCommitted {
					committed = append(committed, v)
				}
				all = append(all, v)
			}
			if s := checkOutput(ctx, p+"-txo-out", committed, all); s != "" {
				return s
			}
			group := p + txoGroupSuffix
			offs, err := newAdmin(t, addr).FetchOffsets(ctx, group)
			if err != nil {
				return fmt.Sprintf("OffsetFetch of group %s: %v", group, err)
			}
			if o, ok := offs.Lookup(p+"-txo-in", 0); !ok || o.Err != nil || o.At != txoCommitted {
				return fmt.Sprintf("group %s: committed offset of %s-txo-in/0 is %+v (found %v), want %d (the committed transaction's, not the aborted one's %d)",
					group, p, o, ok, txoCommitted, txoInputRecords)
			}
			return ""
		},
		"txn-fencing": func(ctx context.Context) string {
			return checkOutput(ctx, p+"-txf", []string{"f-b-0"}, []string{"f-a-0", "f-b-0"})
		},
	}
	// Each check runs once, when the client passed its scenario.
	done := map[string]string{}
	return func(s string) string {
		if r, ok := done[s]; ok {
			return r
		}
		check, ok := checks[s]
		if !ok {
			return ""
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done[s] = check(ctx)
		return done[s]
	}
}

// prepareGroup creates p-grp with 4 partitions and 10 records in each.
func prepareGroup(t *testing.T, addr, p string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTopic(ctx, t, newAdmin(t, addr), p+"-grp", 4, nil)
	var rs []*kgo.Record
	for i := 0; i < 40; i++ {
		rs = append(rs, &kgo.Record{Topic: p + "-grp", Partition: int32(i % 4), Value: []byte(fmt.Sprintf("g-%d", i))})
	}
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s-grp: %v", p, err)
	}
}

// codecContent is what every writer puts in topic <prefix>-<codec>.
// Each record has one header, h=<codec> (kcat -P can only give every record
// the same headers).
func codecContent(writer, codec string) (keys, values []string) {
	for i := 0; i < codecRecords; i++ {
		keys = append(keys, fmt.Sprintf("k-%d", i))
		values = append(values, fmt.Sprintf("%s/%s/%d/%s", writer, codec, i, strings.Repeat("abcdefghij", 20)))
	}
	return
}

// codecDigest is the digest the readers print: sha256 over
// key<TAB>value<TAB>h=<codec><LF> per record.
func codecDigest(writer, codec string) string {
	keys, values := codecContent(writer, codec)
	h := sha256.New()
	for i := range keys {
		fmt.Fprintf(h, "%s\t%s\th=%s\n", keys[i], values[i], codec)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// requireToolMatrix is requireTool for matrix tests: a missing tool (or
// module) records the client's whole column as fail under CI=true, and
// as "na" with the reason otherwise, before failing or skipping.
func requireToolMatrix(t *testing.T, client string, scenarios []string, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv(harness.EnvCI) == "true" {
		recordMissing(t, client, scenarios, what+" is missing (CI=true)")
		t.Fatalf("%s: %s is missing (CI=true, so this is a failure)", client, what)
	}
	for _, s := range scenarios {
		recordMatrix(t, client, s, "na", "not run here: "+what+" is missing")
	}
	harness.SkipMissing(t, client+": "+what+" is missing")
}

func allScenarios() []string {
	var all []string
	all = append(all, basicScenarios...)
	all = append(all, adminScenarios...)
	all = append(all, groupScenarios...)
	all = append(all, txnScenarios...)
	return all
}

// runClientScenarios runs the basic (with the transaction scenario), admin
// and group groups of one external client against one broker (auto-create
// off, so an unknown topic stays unknown).
func runClientScenarios(t *testing.T, client, prefix, dir string, timeout time.Duration, argv func(group, addr, prefix string) []string) {
	b := harness.Start(t, autoCreateOff())
	t.Run("basic", func(t *testing.T) {
		prepareBasic(t, b.KafkaAddr, prefix)
		prepareTxn(t, b.KafkaAddr, prefix)
		a := argv("basic", b.KafkaAddr, prefix)
		res, _ := runScenarios(t, timeout, dir, a[0], a[1:]...)
		recordResults(t, client, basicScenarios, res, checkBasic(t, b.KafkaAddr, prefix))
		delete(res, "\x00version") // recorded with the basic scenarios
		recordResults(t, client, txnScenarios, res, checkTxn(t, b.KafkaAddr, prefix))
	})
	t.Run("admin", func(t *testing.T) {
		a := argv("admin", b.KafkaAddr, prefix)
		res, _ := runScenarios(t, timeout, dir, a[0], a[1:]...)
		recordResults(t, client, adminScenarios, res, nil)
	})
	t.Run("group", func(t *testing.T) {
		prepareGroup(t, b.KafkaAddr, prefix)
		a := argv("group", b.KafkaAddr, prefix)
		res, _ := runScenarios(t, 2*timeout, dir, a[0], a[1:]...)
		recordResults(t, client, groupScenarios, res, nil)
	})
}

// rebalanceMember is one consumer group member of the group-rebalance
// scenario, seen through its assignment.
type rebalanceMember interface {
	// assignment returns the generation the member last synced and the
	// partitions of p-grp it was assigned in it, sorted; generation -1
	// before the first.
	assignment() (int32, []int32)
	// leave closes the member, which leaves the group (LeaveGroup).
	leave() error
}

// groupRebalance runs the group-rebalance scenario on p-grp (4 partitions,
// prepareGroup) and group g: one member gets all 4 partitions; a second
// joins and, in one later generation, each holds 2 and together all 4;
// the second leaves and the first gets all 4 again in a generation after
// that. join starts a member named name; logf reports each step.
func groupRebalance(g string, logf func(string, ...any), join func(g, name string) (rebalanceMember, error)) error {
	all := []int32{0, 1, 2, 3}
	wait := func(what string, d time.Duration, ok func() bool, state func() string) error {
		start := time.Now()
		for !ok() {
			if time.Since(start) > d {
				return fmt.Errorf("%s: not within %v: %s", what, d, state())
			}
			time.Sleep(50 * time.Millisecond)
		}
		logf("%s after %v: %s", what, time.Since(start).Round(time.Millisecond), state())
		return nil
	}
	show := func(ms ...rebalanceMember) func() string {
		return func() string {
			var s []string
			for i, m := range ms {
				gen, ps := m.assignment()
				s = append(s, fmt.Sprintf("member %d generation %d holds %v", i+1, gen, ps))
			}
			return strings.Join(s, "; ")
		}
	}
	a, err := join(g, "a")
	if err != nil {
		return err
	}
	defer a.leave()
	var g1 int32
	if err := wait("the only member holds all 4 partitions", 60*time.Second, func() bool {
		gen, ps := a.assignment()
		g1 = gen
		return gen >= 0 && slices.Equal(ps, all)
	}, show(a)); err != nil {
		return err
	}
	b, err := join(g, "b")
	if err != nil {
		return err
	}
	var g2 int32
	if err := wait("after a second member joined, 2+2 partitions", 60*time.Second, func() bool {
		ga, pa := a.assignment()
		gb, pb := b.assignment()
		u := slices.Concat(pa, pb)
		slices.Sort(u)
		g2 = ga
		return ga > g1 && ga == gb && len(pa) == 2 && len(pb) == 2 && slices.Equal(u, all)
	}, show(a, b)); err != nil {
		b.leave()
		return err
	}
	if err := b.leave(); err != nil {
		return fmt.Errorf("the second member leaving: %w", err)
	}
	return wait("after the second member left, the first holds all 4 again", 60*time.Second, func() bool {
		gen, ps := a.assignment()
		return gen > g2 && slices.Equal(ps, all)
	}, show(a))
}
