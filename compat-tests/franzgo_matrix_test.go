package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestFranzGoMatrix records the franz-go cells no other franz-go test
// exercises as the matrix states them. near-max-message-bytes: a
// 99,000-byte record to a topic with max.message.bytes=100000, produced
// with kgo's defaults (idempotent, acks=all), is stored at offset 0 and
// read back byte for byte. txn-commit-abort: kgo's transactional producer
// commits c-0..c-4, aborts a-0..a-4 and commits c-5..c-9, and a
// read_committed consumer reads exactly c-0..c-9; txn-offsets with a
// GroupTransactSession and txn-fencing with two clients of one
// transactional id (prepareTxn; the transaction tests, txn_*_test.go, go
// further). The other franz-go cells come from the tests listed in
// compat-tests/cmd/compatmatrix.
func TestFranzGoMatrix(t *testing.T) {
	t.Parallel()
	b := harness.Start(t, autoCreateOff())
	const topic = "fg-big"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mmb := "100000"
	createTopic(ctx, t, newAdmin(t, b.KafkaAddr), topic, 1, map[string]*string{"max.message.bytes": &mmb})
	prepareTxn(t, b.KafkaAddr, "fg")
	r := &toolRun{res: map[string]scenarioResult{}}
	r.do("near-max-message-bytes", func() error {
		v := strings.Repeat("n", 99_000)
		cl := newClient(t, b.KafkaAddr)
		res, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("near"), Value: []byte(v)}).First()
		if err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		if res.Offset != 0 {
			return fmt.Errorf("stored at offset %d, want 0", res.Offset)
		}
		rd := newClient(t, b.KafkaAddr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
		defer pcancel()
		for {
			fs := rd.PollFetches(pctx)
			if err := pctx.Err(); err != nil {
				return fmt.Errorf("nothing read back in 20 s")
			}
			if err := fs.Err(); err != nil {
				return fmt.Errorf("fetch: %w", err)
			}
			if rs := fs.Records(); len(rs) > 0 {
				got := rs[0]
				if got.Offset != 0 || string(got.Key) != "near" || string(got.Value) != v {
					return fmt.Errorf("read back offset %d key %q and %d bytes", got.Offset, got.Key, len(got.Value))
				}
				return nil
			}
		}
	})
	recordResults(t, "franz-go", []string{"near-max-message-bytes"}, r.res, nil)

	r = &toolRun{res: map[string]scenarioResult{}}
	r.do("txn-commit-abort", func() error {
		const txnTopic = "fg-txn"
		cl := newClient(t, b.KafkaAddr, kgo.TransactionalID(txnTopic+"-tid"), kgo.DefaultProduceTopic(txnTopic))
		steps, want := txnScenario()
		for i, st := range steps {
			commit := st.commit
			if err := cl.BeginTransaction(); err != nil {
				return fmt.Errorf("BeginTransaction: %w", err)
			}
			var rs []*kgo.Record
			for _, v := range st.values {
				rs = append(rs, &kgo.Record{Value: []byte(v)})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				return fmt.Errorf("transaction %d: %w", i, err)
			}
			if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				return fmt.Errorf("ending transaction %d (commit %v): %w", i, commit, err)
			}
		}
		rd := newClient(t, b.KafkaAddr, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{txnTopic: {0: kgo.NewOffset().AtStart()}}))
		pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
		defer pcancel()
		var got []string
		for len(got) < len(want) && pctx.Err() == nil {
			fs := rd.PollFetches(pctx)
			for _, r := range fs.Records() {
				got = append(got, string(r.Value))
			}
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("read_committed read %q, want c-0..c-9", got)
		}
		return nil
	})
	r.do("txn-offsets", func() error { return franzGoTxnOffsets(ctx, t, b.KafkaAddr, "fg") })
	r.do("txn-fencing", func() error { return franzGoTxnFencing(ctx, t, b.KafkaAddr, "fg") })
	recordResults(t, "franz-go", txnScenarios, r.res, checkTxn(t, b.KafkaAddr, "fg"))
}

// franzGoReadCommitted reads n values of partition 0 of topic from the
// start with a read_committed consumer, within 20 s.
func franzGoReadCommitted(ctx context.Context, t *testing.T, addr, topic string, n int) []string {
	rd := newClient(t, addr, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer rd.Close()
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	defer pcancel()
	var got []string
	for len(got) < n && pctx.Err() == nil {
		for _, r := range rd.PollFetches(pctx).Records() {
			got = append(got, string(r.Value))
		}
	}
	return got
}

// franzGoTxnOffsets is txn-offsets (prepareTxn) with franz-go's way of
// sending offsets with a transaction, a GroupTransactSession: a member
// of group p-txo-g polls i-0..i-4, produces o-0..o-4 and commits (the
// session sends the polled offsets, 5, with the transaction:
// AddOffsetsToTxn, TxnOffsetCommit), then polls i-5..i-9, produces
// o-5..o-9 and aborts (the session sends offsets only with a commit, so
// offset 10 never reaches the broker). Unlike the other clients' runners
// the consumer is subscribed (the session is a group member), so
// TxnOffsetCommit carries a generation and member id.
func franzGoTxnOffsets(ctx context.Context, t *testing.T, addr, p string) error {
	in, out, group := p+"-txo-in", p+"-txo-out", p+txoGroupSuffix
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr), kgo.ClientID("sluice-compat-go"),
		kgo.TransactionalID(p+"-txo-tid"), kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(out), kgo.FetchMaxWait(300*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer sess.Close()
	for i, commit := range []bool{true, false} {
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("Begin: %w", err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
		var rs []*kgo.Record
		for len(rs) < txoCommitted && pctx.Err() == nil {
			fs := sess.PollRecords(pctx, txoCommitted-len(rs))
			rs = append(rs, fs.Records()...)
		}
		pcancel()
		if len(rs) != txoCommitted {
			return fmt.Errorf("transaction %d: polled %d input records, want %d", i, len(rs), txoCommitted)
		}
		for j, r := range rs {
			if want := fmt.Sprintf("i-%d", txoCommitted*i+j); string(r.Value) != want {
				return fmt.Errorf("transaction %d: polled %q, want %s", i, r.Value, want)
			}
			if err := sess.ProduceSync(ctx, &kgo.Record{Value: []byte("o-" + strings.TrimPrefix(string(r.Value), "i-"))}).FirstErr(); err != nil {
				return fmt.Errorf("transaction %d: produce: %w", i, err)
			}
		}
		committed, err := sess.End(ctx, kgo.TransactionEndTry(commit))
		if err != nil {
			return fmt.Errorf("ending transaction %d (commit %v): %w", i, commit, err)
		}
		if committed != commit {
			return fmt.Errorf("transaction %d: End reported committed=%v, want %v", i, committed, commit)
		}
	}
	sess.Close()
	offs, err := newAdmin(t, addr).FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Errorf("OffsetFetch: %w", err)
	}
	if o, ok := offs.Lookup(in, 0); !ok || o.Err != nil || o.At != txoCommitted {
		return fmt.Errorf("committed offset of %s/0: %+v (found %v), want %d", in, o, ok, txoCommitted)
	}
	want := []string{"o-0", "o-1", "o-2", "o-3", "o-4"}
	if got := franzGoReadCommitted(ctx, t, addr, out, len(want)); !slices.Equal(got, want) {
		return fmt.Errorf("read_committed read %q, want %q", got, want)
	}
	return nil
}

// franzGoTxnFencing is txn-fencing (prepareTxn) with two kgo clients
// of one transactional id. kgo initializes its producer id at the first
// produce, so B's InitProducerId comes with its first record; A's
// EndTransaction then fails with PRODUCER_FENCED.
func franzGoTxnFencing(ctx context.Context, t *testing.T, addr, p string) error {
	topic := p + "-txf"
	opts := []kgo.Opt{kgo.TransactionalID(p + "-txf-tid"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(30 * time.Second)}
	a := newClient(t, addr, opts...)
	if err := a.BeginTransaction(); err != nil {
		return fmt.Errorf("A BeginTransaction: %w", err)
	}
	if err := a.ProduceSync(ctx, kgo.StringRecord("f-a-0")).FirstErr(); err != nil {
		return fmt.Errorf("A produce: %w", err)
	}
	bc := newClient(t, addr, opts...)
	if err := bc.BeginTransaction(); err != nil {
		return fmt.Errorf("B BeginTransaction: %w", err)
	}
	if err := bc.ProduceSync(ctx, kgo.StringRecord("f-b-0")).FirstErr(); err != nil {
		return fmt.Errorf("B produce: %w", err)
	}
	err := a.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) {
		return fmt.Errorf("A's commit after B initialized: %v, want PRODUCER_FENCED", err)
	}
	if err := bc.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("B commit: %w", err)
	}
	if got := franzGoReadCommitted(ctx, t, addr, topic, 1); !slices.Equal(got, []string{"f-b-0"}) {
		return fmt.Errorf("read_committed read %q, want f-b-0", got)
	}
	return nil
}
