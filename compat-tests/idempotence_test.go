package compat

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestIdempotentRetryDedupedAcrossRestart plays an idempotent producer by
// hand: InitProducerId, then batches with explicit sequence numbers. A
// retried batch (same producer id, epoch and sequence) must be answered with
// no error and the offset it was first written at, and not be written again
// (Kafka: UnifiedLog finds the duplicate among the last 5 batches and returns
// its offsets). The same must hold after SIGKILL and restart, when the
// producer state can only come from the log. A sequence gap is
// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
func TestIdempotentRetryDedupedAcrossRestart(t *testing.T) {
	t.Parallel()
	// A clean stop and a crash take different paths on start (a shutdown
	// snapshot of the producer state versus a scan of the log); both must
	// give the same answers.
	t.Run("SIGKILL", func(t *testing.T) { testIdempotentRetry(t, true) })
	t.Run("SIGTERM", func(t *testing.T) { testIdempotentRetry(t, false) })
}

func testIdempotentRetry(t *testing.T, kill bool) {
	const topic = "idempotent"
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(ctx, t, adm, topic, 1, nil)

	c := dialRaw(t, b.KafkaAddr)
	versions := c.apiVersions()
	pv := pickVersion(t, versions, 0, 12)
	iv := pickVersion(t, versions, 22, 5)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version = iv
	init.TransactionTimeoutMillis = 60_000
	resp, err := c.roundTrip(init, iv)
	if err != nil {
		t.Fatalf("InitProducerId v%d: %v", iv, err)
	}
	ir := resp.(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 || ir.ProducerID < 0 {
		t.Fatalf("InitProducerId v%d: error %d, producer id %d", iv, ir.ErrorCode, ir.ProducerID)
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch

	produce := func(c *rawConn, what string, seq int32, wantErr int16, wantBase int64, values ...string) {
		t.Helper()
		got := produceRaw(t, c, pv, topic, 0, idempotentBatch(pid, epoch, seq, values...))
		if got.ErrorCode != wantErr || (wantErr == 0 && got.BaseOffset != wantBase) {
			t.Errorf("%s (Produce v%d, producer %d epoch %d seq %d): error %d (%v) base offset %d; want error %d base offset %d",
				what, pv, pid, epoch, seq, got.ErrorCode, kerr.ErrorForCode(got.ErrorCode), got.BaseOffset, wantErr, wantBase)
		}
	}
	hw := func(when string, want int64) {
		t.Helper()
		if got := endOffsets(ctx, t, adm, topic)[0]; got != want {
			t.Errorf("%s: high watermark %d, want %d", when, got, want)
		}
	}

	produce(c, "first batch", 0, 0, 0, "a0", "a1", "a2")
	produce(c, "retry of the first batch", 0, 0, 0, "a0", "a1", "a2")
	hw("after a retried batch", 3)
	produce(c, "second batch", 3, 0, 3, "b0", "b1", "b2")
	produce(c, "batch after a sequence gap", 10, kerr.OutOfOrderSequenceNumber.Code, 0, "gap")
	hw("after a rejected gap", 6)

	how := "kill -9"
	if kill {
		b.Kill()
	} else {
		how = "a clean stop"
		if err := b.Stop(); err != nil {
			t.Errorf("SIGTERM: %v", err)
		}
	}
	b.Restart()
	c = dialRaw(t, b.KafkaAddr)
	produce(c, "retry of the second batch after "+how+" and restart", 3, 0, 3, "b0", "b1", "b2")
	hw("after a retry across the restart", 6)
	produce(c, "next batch after the restart", 6, 0, 6, "c0")
	hw("after the next batch", 7)

	// What is in the log: each batch once.
	got := consumeAll(ctx, t, b.KafkaAddr, topic, map[int32]int64{0: 7})[0]
	want := []string{"a0", "a1", "a2", "b0", "b1", "b2", "c0"}
	if len(got) != len(want) {
		t.Fatalf("log holds %d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if string(r.Value) != want[i] || r.ProducerID != pid {
			t.Errorf("offset %d: %q from producer %d, want %q from %d", r.Offset, r.Value, r.ProducerID, want[i], pid)
		}
	}
}
