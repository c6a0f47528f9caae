package compat

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKcatMatrix runs the basic scenarios, txn-commit-abort and
// txn-fencing of the matrix with kcat 1.7.1 (librdkafka 2.0.2), one kcat
// process per step. kcat has no admin commands; its groups are covered by
// groups_kcat_test.go.
func TestKcatMatrix(t *testing.T) { testKcatMatrix(t, false) }

// TestSharedMatrixKcat runs the basic scenarios of TestKcatMatrix on
// shared-mode topics (shared_matrix_test.go).
func TestSharedMatrixKcat(t *testing.T) { testKcatMatrix(t, true) }

func testKcatMatrix(t *testing.T, shared bool) {
	t.Parallel()
	const client = "kcat"
	_, err := exec.LookPath("kcat")
	// txn-offsets is not expressible with kcat (compatmatrix).
	kcatTxn := []string{"txn-commit-abort", "txn-fencing"}
	if shared {
		requireToolMatrix(t, client, sharedRows(), err == nil, "kcat")
	} else {
		requireToolMatrix(t, client, slices.Concat(basicScenarios, kcatTxn), err == nil, "kcat")
	}
	b, p, sharedDir := matrixBroker(t, shared, "kc")
	addr := b.KafkaAddr
	if !shared {
		prepareTxn(t, addr, p)
	}
	run := func(stdin string, args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "kcat", append([]string{"-b", addr}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		t.Logf("kcat %s: %v\nstdout (tail): %s\nstderr (tail): %s", strings.Join(args, " "), err, tail(out.String(), 600), tail(errb.String(), 600))
		return out.String(), errb.String(), err
	}
	// produce runs kcat -P args on stdin: an error also when it logged
	// one (kcat -P exits 0 after delivery errors).
	produce := func(stdin string, args ...string) error {
		_, stderr, err := run(stdin, args...)
		if err == nil && strings.Contains(stderr, "ERROR") {
			err = fmt.Errorf("%s", tail(stderr, 300))
		}
		return err
	}
	r := &toolRun{res: map[string]scenarioResult{}}
	r.do("bootstrap-metadata", func() error {
		out, _, err := run("", "-L", "-t", p+"-meta")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "1 brokers:") || !strings.Contains(out, `topic "`+p+`-meta" with 3 partitions`) {
			return fmt.Errorf("kcat -L: %s", tail(out, 300))
		}
		return nil
	})
	acks := func(topic string, props ...string) func() error {
		return func() error {
			var in strings.Builder
			for i := 0; i < 100; i++ {
				fmt.Fprintf(&in, "k%d\t%s-%d\n", i, topic, i)
			}
			args := []string{"-P", "-t", topic, "-K", "\t"}
			for _, pr := range props {
				args = append(args, "-X", pr)
			}
			return produce(in.String(), args...)
		}
	}
	r.do("produce-acks0", acks(p+"-acks0", "acks=0"))
	r.do("produce-acks1", acks(p+"-acks1", "acks=1"))
	r.do("produce-acksall", acks(p+"-acksall", "acks=all"))
	r.do("produce-idempotent", acks(p+"-idem", "enable.idempotence=true"))

	r.do("keys-nulls-headers-timestamps", func() error {
		// kcat -P gives every record of one run the same headers and has no
		// per-record timestamp: one run per record, -Z turns an empty key or
		// value into null; timestamps are read (%T), stamped by librdkafka.
		t0 := time.Now().UnixMilli()
		for _, step := range [][]string{
			{"k1\tv1\n", "-H", "h1=a", "-H", "h2=b"},
			{"k2\t\n", "-Z"},
			{"\tv3\n", "-Z", "-H", "h3="},
		} {
			if _, stderr, err := run(step[0], append([]string{"-P", "-t", p + "-fields", "-K", "\t"}, step[1:]...)...); err != nil || strings.Contains(stderr, "ERROR") {
				return fmt.Errorf("produce: %v %s", err, tail(stderr, 300))
			}
		}
		out, _, err := run("", "-C", "-q", "-t", p+"-fields", "-p", "0", "-o", "beginning", "-e",
			"-f", "%o|%k|%S|%s|%h|%T\n")
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		want := []string{"0|k1|2|v1|h1=a,h2=b|", "1|k2|-1|||", "2||2|v3|h3=|"}
		if len(lines) != 3 {
			return fmt.Errorf("read %q", lines)
		}
		for i, l := range lines {
			cut := strings.LastIndex(l, "|")
			if l[:cut+1] != want[i] {
				return fmt.Errorf("line %d: %q, want %q<timestamp> (a null value has size -1)", i, l, want[i])
			}
			var ts int64
			fmt.Sscan(l[cut+1:], &ts)
			if ts < t0-60_000 || ts > time.Now().UnixMilli() {
				return fmt.Errorf("line %d: timestamp %d not from this run", i, ts)
			}
		}
		return nil
	})
	r.do("near-max-message-bytes", func() error {
		v := strings.Repeat("n", 99_000)
		if _, stderr, err := run("near\t"+v+"\n", "-P", "-t", p+"-big", "-K", "\t"); err != nil || strings.Contains(stderr, "ERROR") {
			return fmt.Errorf("produce: %v %s", err, tail(stderr, 300))
		}
		out, _, err := run("", "-C", "-q", "-t", p+"-big", "-p", "0", "-o", "beginning", "-e", "-f", "%k\t%s\n")
		if err != nil {
			return err
		}
		if out != "near\t"+v+"\n" {
			return fmt.Errorf("read %d bytes", len(out))
		}
		return nil
	})
	r.do("error-record-too-large", func() error {
		_, stderr, _ := run("over\t"+strings.Repeat("o", 101_000)+"\n", "-P", "-t", p+"-big", "-K", "\t")
		if !strings.Contains(stderr, "Broker: Message size too large") {
			return fmt.Errorf("no MESSAGE_TOO_LARGE (\"Broker: Message size too large\"): %s", tail(stderr, 300))
		}
		return nil
	})
	consumeVals := func(args ...string) ([]string, error) {
		out, _, err := run("", append([]string{"-C", "-q", "-t", p + "-cons", "-p", "0", "-f", "%o %s\n"}, args...)...)
		return strings.Split(strings.TrimSuffix(out, "\n"), "\n"), err
	}
	r.do("consume-earliest", func() error {
		got, err := consumeVals("-o", "beginning", "-e")
		if err != nil {
			return err
		}
		if len(got) != 10 || got[0] != "0 c-0" || got[9] != "9 c-9" {
			return fmt.Errorf("read %q", got)
		}
		return nil
	})
	r.do("consume-latest", func() error {
		// -o end -c 1: the first record written after kcat started. Write
		// one a second until it prints one.
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		type res struct {
			got []string
			err error
		}
		done := make(chan res, 1)
		go func() {
			got, err := consumeVals("-o", "end", "-c", "1")
			done <- res{got, err}
		}()
		for i := 0; ; i++ {
			select {
			case r := <-done:
				if r.err != nil {
					return r.err
				}
				if len(r.got) != 1 || !strings.Contains(r.got[0], " after-latest-") || strings.HasPrefix(r.got[0], "0 ") {
					return fmt.Errorf("read %q, want one after-latest record", r.got)
				}
				return nil
			case <-time.After(time.Second):
			case <-ctx.Done():
				return fmt.Errorf("kcat printed nothing")
			}
			produceN(ctx, t, addr, p+"-cons", fmt.Sprintf("after-latest-%d", i), 1)
		}
	})
	r.do("consume-timestamp", func() error {
		got, err := consumeVals("-o", fmt.Sprintf("s@%d", tsBase+4500), "-c", "3")
		if err != nil {
			return err
		}
		if len(got) != 3 || got[0] != "5 c-5" || got[2] != "7 c-7" {
			return fmt.Errorf("read %q", got)
		}
		return nil
	})
	r.do("error-unknown-topic", func() error {
		out, _, _ := run("", "-L", "-t", p+"-no-such-topic")
		if !strings.Contains(out, "Broker: Unknown topic or partition") {
			return fmt.Errorf("kcat -L for a missing topic: %s", tail(out, 300))
		}
		return nil
	})
	if shared {
		recordSharedResults(t, client, r.res, checkShared(t, addr, p, sharedDir))
		return
	}
	recordResults(t, client, basicScenarios, r.res, checkBasic(t, addr, p))

	// txn-commit-abort: kcat -P with transactional.id sends everything it
	// reads in one transaction, committed when its input ends; one it is
	// interrupted in (SIGINT) is left open, and the next kcat with the
	// same transactional.id aborts it (its InitProducerId fences the
	// interrupted producer, as in Kafka). The run is interrupted once the
	// broker holds its five records (the high watermark says so), so they
	// are in the log when the ABORT marker follows them.
	// waitEnd waits until partition 0 of topic has end offset want at
	// isolation (0: read_uncommitted, 1: read_committed).
	waitEnd := func(ctx context.Context, cl *kgo.Client, topic, what string, isolation int8, want int64) error {
		for listEnd(ctx, t, cl, topic, isolation) != want {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: end offset (isolation %d) not %d in time", what, isolation, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	}
	// openTxn starts kcat txnArgs (-P with a transactional.id) and writes
	// records, one a line, to its input, which stays open: the
	// transaction stays open too. kcat reads its input in large blocks: a
	// line without an end after the records fills the block, so they are
	// sent now, and it is never sent itself (the input ends, or the
	// process is interrupted, first).
	openTxn := func(ctx context.Context, txnArgs []string, records string) (*exec.Cmd, io.WriteCloser, *bytes.Buffer, error) {
		cmd := exec.CommandContext(ctx, "kcat", append([]string{"-b", addr}, txnArgs...)...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, nil, nil, err
		}
		errb := &bytes.Buffer{}
		cmd.Stderr = errb
		if err := cmd.Start(); err != nil {
			return nil, nil, nil, err
		}
		fmt.Fprint(stdin, records+strings.Repeat("x", 256<<10))
		return cmd, stdin, errb, nil
	}
	// readCommitted is partition 0 of topic read from the beginning with
	// isolation.level=read_committed.
	readCommitted := func(topic string) ([]string, error) {
		out, stderr, err := run("", "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-X", "isolation.level=read_committed", "-f", "%s\n")
		if err != nil {
			return nil, fmt.Errorf("kcat -C: %w (%s)", err, tail(stderr, 300))
		}
		return strings.Fields(out), nil
	}
	r = &toolRun{res: map[string]scenarioResult{}}
	r.do("txn-commit-abort", func() error {
		topic := p + "-txn"
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		txnArgs := []string{"-P", "-t", topic, "-p", "0", "-X", "transactional.id=" + topic + "-tid"}
		commit := func(from int) error {
			var in strings.Builder
			for i := from; i < from+5; i++ {
				fmt.Fprintf(&in, "c-%d\n", i)
			}
			return produce(in.String(), txnArgs...)
		}
		if err := commit(0); err != nil {
			return fmt.Errorf("committed transaction: %w", err)
		}
		cl := newClient(t, addr)
		// 5 records and the COMMIT marker: offsets 0-5.
		if err := waitEnd(ctx, cl, topic, "after the commit", 1, 6); err != nil {
			return err
		}
		// The five are sent now; the interrupt comes before the input
		// ends.
		cmd, stdin, errb, err := openTxn(ctx, txnArgs, "a-0\na-1\na-2\na-3\na-4\n")
		if err != nil {
			return err
		}
		if err := waitEnd(ctx, cl, topic, "the aborted transaction's records", 0, 11); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return err
		}
		// kcat notes the interrupt once its read of the input returns
		// (at the end of the input) and exits without ending the
		// transaction.
		cmd.Process.Signal(os.Interrupt)
		stdin.Close()
		werr := cmd.Wait()
		t.Logf("kcat %s, interrupted: %v\nstderr (tail): %s", strings.Join(txnArgs, " "), werr, tail(errb.String(), 600))
		// The next producer of the transactional id aborts the
		// interrupted transaction (InitProducerId over an ongoing one:
		// its ABORT marker at 11), then commits c-5..c-9 at 12-16.
		if err := commit(5); err != nil {
			return fmt.Errorf("second committed transaction: %w", err)
		}
		if err := waitEnd(ctx, cl, topic, "after the second commit", 1, 18); err != nil {
			return err
		}
		got, err := readCommitted(topic)
		if err != nil {
			return err
		}
		var want []string
		for i := range 10 {
			want = append(want, fmt.Sprintf("c-%d", i))
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("read_committed read %q, want c-0..c-9", got)
		}
		return nil
	})
	// txn-fencing (prepareTxn): kcat A (-P with transactional.id
	// p-txf-tid) sends f-a-0 and keeps its transaction open (its input
	// is still open); once the broker holds the record, kcat B with the
	// same transactional.id writes f-b-0 and commits: its InitProducerId
	// fences A and aborts A's transaction. A's input then ends; its rest
	// goes out as one more record with A's old epoch, which the broker
	// refuses with INVALID_PRODUCER_EPOCH, as Kafka does, and librdkafka
	// turns that into its fatal fenced error ("fenced by a newer
	// instance"): A exits non-zero without committing. kcat -C
	// read_committed reads f-b-0 only (and the broker check finds no
	// record of A's but f-a-0).
	r.do("txn-fencing", func() error {
		topic := p + "-txf"
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		txnArgs := []string{"-P", "-t", topic, "-p", "0", "-X", "transactional.id=" + p + "-txf-tid"}
		cl := newClient(t, addr)
		a, stdin, errb, err := openTxn(ctx, txnArgs, "f-a-0\n")
		if err != nil {
			return err
		}
		if err := waitEnd(ctx, cl, topic, "A's record", 0, 1); err != nil {
			a.Process.Kill()
			a.Wait()
			return err
		}
		if err := produce("f-b-0\n", txnArgs...); err != nil {
			a.Process.Kill()
			a.Wait()
			return fmt.Errorf("B: %w", err)
		}
		stdin.Close()
		werr := a.Wait()
		t.Logf("kcat A %s after B: %v\nstderr (tail): %s", strings.Join(txnArgs, " "), werr, tail(errb.String(), 600))
		if werr == nil || !strings.Contains(errb.String(), "fenced by a newer instance") {
			return fmt.Errorf("A after B initialized: exit %v, stderr %q; want a failure with the fenced error", werr, tail(errb.String(), 300))
		}
		got, err := readCommitted(topic)
		if err != nil {
			return err
		}
		if !slices.Equal(got, []string{"f-b-0"}) {
			return fmt.Errorf("read_committed read %q, want f-b-0", got)
		}
		return nil
	})
	recordResults(t, client, kcatTxn, r.res, checkTxn(t, addr, p))
}
