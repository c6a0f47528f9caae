package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestFranzGoMatrixNearMax is the franz-go cell of near-max-message-bytes,
// the one matrix scenario no other franz-go test exercises: a 99,000-byte
// record to a topic with max.message.bytes=100000, produced with kgo's
// defaults (idempotent, acks=all), is stored at offset 0 and read back
// byte for byte. The other franz-go cells come from the tests listed in
// compat-tests/cmd/compatmatrix.
func TestFranzGoMatrixNearMax(t *testing.T) {
	t.Parallel()
	b := harness.Start(t, autoCreateOff())
	const topic = "fg-big"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mmb := "100000"
	createTopic(ctx, t, newAdmin(t, b.KafkaAddr), topic, 1, map[string]*string{"max.message.bytes": &mmb})
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
}
