package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// codecs are Kafka's record-batch compression types (attributes bits 0-2).
var codecs = []struct {
	name  string
	id    uint8
	codec kgo.CompressionCodec
}{
	{"gzip", 1, kgo.GzipCompression()},
	{"snappy", 2, kgo.SnappyCompression()},
	{"lz4", 3, kgo.Lz4Compression()},
	{"zstd", 4, kgo.ZstdCompression()},
}

// compressible returns a value that every codec shrinks, so that no client
// falls back to sending it uncompressed.
func compressible(prefix string, i int) string {
	return fmt.Sprintf("%s-%06d-%s", prefix, i, strings.Repeat("sluice compat payload ", 20))
}

// TestFranzGoCompression produces batches with each codec and reads them
// back: the broker must store the compressed batches as sent (the records
// come back with the same compression attribute) and the records intact.
func TestFranzGoCompression(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	const n = 2000
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "compressed-" + c.name
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			createTopic(ctx, t, adm, topic, 1, nil)
			cl := newClient(t, b.KafkaAddr, kgo.ProducerBatchCompression(c.codec), kgo.DefaultProduceTopic(topic))
			rs := make([]*kgo.Record, n)
			for i := range rs {
				rs[i] = &kgo.Record{Key: fmt.Appendf(nil, "%s-%d", c.name, i), Value: []byte(compressible(c.name, i))}
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("produce with %s: %v", c.name, err)
			}
			got := consumeAll(ctx, t, b.KafkaAddr, topic, endOffsets(ctx, t, adm, topic))[0]
			if len(got) != n {
				t.Fatalf("%s: read %d records, want %d", c.name, len(got), n)
			}
			for i, r := range got {
				if string(r.Key) != string(rs[i].Key) || string(r.Value) != string(rs[i].Value) || r.Offset != int64(i) {
					t.Fatalf("%s: record at offset %d is %q, want %q at offset %d", c.name, r.Offset, r.Key, rs[i].Key, i)
				}
				if got := r.Attrs.CompressionType(); got != c.id {
					t.Fatalf("%s: record %d comes back in a batch with compression type %d, want %d (the broker must keep batches as produced)", c.name, i, got, c.id)
				}
			}
		})
	}
}
