package compat

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestFranzGoMatrix records the franz-go cells no other franz-go test
// exercises as the matrix states them. near-max-message-bytes: a
// 99,000-byte record to a topic with max.message.bytes=100000, produced
// with kgo's defaults (idempotent, acks=all), is stored at offset 0 and
// read back byte for byte. txn-commit-abort: kgo's transactional producer
// commits c-0..c-4, aborts a-0..a-4 and commits c-5..c-9, and a
// read_committed consumer reads exactly c-0..c-9 (the transaction tests,
// txn_*_test.go, go further). The other franz-go cells come from the
// tests listed in compat-tests/cmd/compatmatrix.
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
	recordResults(t, "franz-go", txnScenarios, r.res, checkTxn(t, b.KafkaAddr, "fg"))
}
