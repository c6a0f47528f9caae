package compat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTransactionsTimeoutAbort: transaction.timeout.ms on a real broker
// process, with the coordinator's sweep every 200 ms
// (transaction.abort.timed.out.transaction.cleanup.interval.ms). A
// franz-go producer with a 2 s TransactionTimeout writes five records
// and leaves its transaction open:
//
//   - the last stable offset stays at the transaction's first offset
//     while the transaction is younger than its timeout, then the broker
//     aborts it: the last stable offset reaches the high watermark (past
//     the ABORT marker), read_committed shows none of the five records,
//     read_uncommitted all of them;
//   - the producer's old epoch is over, as Kafka 4.4 answers (its
//     coordinator ends a timed-out transaction as a transaction version
//     2 abort, bumping the epoch): a batch at the old epoch is
//     INVALID_PRODUCER_EPOCH, EndTxn v4 PRODUCER_FENCED, EndTxn v5 commit
//     INVALID_TXN_STATE, EndTxn v5 abort the retry of the abort, answered
//     with the bumped epoch;
//   - franz-go's own next produce fails, it aborts, and its next
//     transaction commits.
func TestTransactionsTimeoutAbort(t *testing.T) {
	t.Parallel()
	const topic, id = "txn-timeout", "timeout-txn"
	b := startBroker(t, "--set", "auto.create.topics.enable=false",
		"--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
	addr := b.KafkaAddr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, addr)
	createTopic(ctx, t, adm, topic, 1, nil)
	cl := newClient(t, addr)

	p := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(id),
		kgo.TransactionTimeout(2*time.Second), kgo.RecordRetries(3))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, kgo.StringRecord(fmt.Sprintf("timed-out-%d", i)))
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil || ds[id].Err != nil || ds[id].State != "Ongoing" {
		t.Fatalf("DescribeTransactions %s: %v %+v", id, err, ds[id])
	}
	pid, epoch := ds[id].ProducerID, ds[id].ProducerEpoch

	// Held while younger than the timeout.
	if hw, lso := stableEnd(ctx, t, cl, topic, 0, 0), stableEnd(ctx, t, cl, topic, 0, 1); hw != 5 || lso != 0 {
		t.Fatalf("open transaction: high watermark %d, last stable offset %d; want 5 and 0", hw, lso)
	}
	time.Sleep(time.Until(start.Add(time.Second)))
	if lso := stableEnd(ctx, t, cl, topic, 0, 1); lso != 0 && time.Since(start) < 1800*time.Millisecond {
		t.Fatalf("last stable offset %d after %v, before the 2 s timeout", lso, time.Since(start))
	}
	// Released by the coordinator's abort.
	var released time.Duration
	for {
		hw, lso := stableEnd(ctx, t, cl, topic, 0, 0), stableEnd(ctx, t, cl, topic, 0, 1)
		if hw == 6 && lso == 6 {
			released = time.Since(start)
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("20 s after a 2 s transaction started: high watermark %d, last stable offset %d; want 6 and 6 (aborted)", hw, lso)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("last stable offset released %v after the transaction started (timeout 2 s, sweep every 200 ms)", released.Round(time.Millisecond))
	if released < 2*time.Second {
		t.Errorf("released after %v, before the 2 s timeout", released)
	}
	ds, err = adm.DescribeTransactions(ctx, id)
	if err != nil || ds[id].Err != nil || ds[id].State != "CompleteAbort" || ds[id].ProducerID != pid || ds[id].ProducerEpoch != epoch+1 {
		t.Fatalf("DescribeTransactions after the timeout: %v %+v, want CompleteAbort producer %d epoch %d", err, ds[id], pid, epoch+1)
	}

	// The old epoch, in hand-built frames.
	raw := dialRaw(t, addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 12, -1, 10_000, kmsg.StringPtr(id)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = txnBatch(pid, epoch, 5, "late")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	presp, err := raw.roundTrip(req, 12)
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("Produce v12 at the timed-out epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	endTxn := func(v int16, commit bool, want int16, wantEpoch int16) {
		t.Helper()
		et := kmsg.NewPtrEndTxnRequest()
		et.Version, et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = v, id, pid, epoch, commit
		resp, err := raw.roundTrip(et, v)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.EndTxnResponse)
		if r.ErrorCode != want || (v >= 5 && want == 0 && (r.ProducerID != pid || r.ProducerEpoch != wantEpoch)) {
			t.Errorf("EndTxn v%d commit=%v at the timed-out epoch: %v producer %d epoch %d; want %v (epoch %d)", v, commit,
				kerr.ErrorForCode(r.ErrorCode), r.ProducerID, r.ProducerEpoch, kerr.ErrorForCode(want), wantEpoch)
		}
	}
	endTxn(4, true, kerr.ProducerFenced.Code, -1)
	endTxn(4, false, kerr.ProducerFenced.Code, -1)
	endTxn(5, true, kerr.InvalidTxnState.Code, -1)
	endTxn(5, false, 0, epoch+1)

	// franz-go, which still thinks its transaction open.
	err = p.ProduceSync(ctx, kgo.StringRecord("late-franz")).FirstErr()
	if !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("franz-go's produce after the timeout: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	// Its abort is the retry of the coordinator's (EndTxn v5 at the old
	// epoch, answered with the bumped one), and it goes on from there.
	if err := p.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("franz-go's abort after the timeout: %v", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("next")).FirstErr(); err != nil {
		t.Fatalf("franz-go's next transaction: %v", err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("franz-go's next transaction: commit: %v", err)
	}

	if got := readOutput(ctx, t, addr, topic, kgo.ReadCommitted(), 1); fmt.Sprint(got) != "[next]" {
		t.Errorf("read_committed: %v, want only [next]", got)
	}
	want := "[next timed-out-0 timed-out-1 timed-out-2 timed-out-3 timed-out-4]"
	if got := readOutput(ctx, t, addr, topic, kgo.ReadUncommitted(), 6); fmt.Sprint(got) != want {
		t.Errorf("read_uncommitted: %v, want %s", got, want)
	}
}

// TestTransactionsTimeoutAbortJava is TestTransactionsTimeoutAbort's
// producer side with the Java client (kafka-clients 4.4, compat-tests/java
// TxnTimeout): transaction.timeout.ms=2000, five records, 4 s idle while
// the broker aborts; its next send fails, abortTransaction() succeeds
// (transaction version 2: the coordinator's abort at the bumped epoch is
// taken as done) and a new transaction commits. read_committed shows only
// that one record.
func TestTransactionsTimeoutAbortJava(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	classpath := buildJava(t)
	const topic = "txn-timeout-java"
	b := startBroker(t, "--set", "auto.create.topics.enable=false",
		"--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(ctx, t, newAdmin(t, b.KafkaAddr), topic, 1, nil)
	cmd := exec.CommandContext(ctx, "java", jvm(classpath, "dev.sluice.compat.TxnTimeout", b.KafkaAddr, topic, "java-timeout", "4000")...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	t.Logf("java TxnTimeout: %v\nstdout:\n%s", err, out.String())
	if err != nil || !strings.HasSuffix(out.String(), "RESULT OK\n") {
		t.Fatalf("java TxnTimeout failed (%v)\nstderr (tail):\n%s", err, tail(errb.String(), 8<<10))
	}
	if got := readOutput(ctx, t, b.KafkaAddr, topic, kgo.ReadCommitted(), 1); fmt.Sprint(got) != "[next]" {
		t.Errorf("read_committed: %v, want only [next]", got)
	}
	want := "[java-timed-out-0 java-timed-out-1 java-timed-out-2 java-timed-out-3 java-timed-out-4 next]"
	if got := readOutput(ctx, t, b.KafkaAddr, topic, kgo.ReadUncommitted(), 6); fmt.Sprint(got) != want {
		t.Errorf("read_uncommitted: %v, want %s", got, want)
	}
	cl := newClient(t, b.KafkaAddr)
	if hw, lso := stableEnd(ctx, t, cl, topic, 0, 0), stableEnd(ctx, t, cl, topic, 0, 1); hw != lso {
		t.Errorf("high watermark %d, last stable offset %d; want equal", hw, lso)
	}
}
