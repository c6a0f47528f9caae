package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionsSurviveRestart: a transaction open in the partition
// log while the broker stops (SIGKILL: rebuilt from the log; SIGTERM:
// from the clean-shutdown snapshot) still holds the last stable offset
// back after the restart, an aborted one's records stay hidden from
// read_committed, and the open one, committed after the restart by the
// same producer (its state is in the metastore), becomes visible.
func TestTransactionsSurviveRestart(t *testing.T) {
	t.Parallel()
	t.Run("SIGKILL", func(t *testing.T) { testTxnRestart(t, true) })
	t.Run("SIGTERM", func(t *testing.T) { testTxnRestart(t, false) })
}

func testTxnRestart(t *testing.T, kill bool) {
	const topic = "txn-restart"
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createTopic(ctx, t, newAdmin(t, b.KafkaAddr), topic, 1, nil)
	cl := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic(topic), kgo.TransactionalID("restart-txn"),
		kgo.TransactionTimeout(60*time.Second), kgo.RetryTimeout(60*time.Second))
	write := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("%s%d", prefix, i))).FirstErr(); err != nil {
				t.Fatalf("produce %s%d: %v", prefix, i, err)
			}
		}
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	write("aborted", 3) // offsets 0-2, marker 3
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	write("open", 3) // offsets 4-6
	if kill {
		b.Kill()
	} else if err := b.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	b.Restart()
	check := func(when string, wantStable int64) {
		t.Helper()
		adm := newClient(t, b.KafkaAddr)
		var hw, lso int64
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			hw, lso = listEnd(ctx, t, adm, topic, 0), listEnd(ctx, t, adm, topic, 1)
			if lso == wantStable {
				return
			}
		}
		t.Errorf("%s: last stable offset %d (high watermark %d), want %d", when, lso, hw, wantStable)
	}
	check("after the restart, with a transaction open from offset 4", 4)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the restart: %v", err)
	}
	check("after the commit", 8)
	got := readOutput(ctx, t, b.KafkaAddr, topic, kgo.ReadCommitted(), 3)
	if strings.Join(got, ",") != "open0,open1,open2" {
		t.Errorf("read_committed after the restart: %v, want [open0 open1 open2]", got)
	}
}
