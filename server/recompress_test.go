package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/protocol"
	"github.com/sluice-broker/sluice/replica"
)

// TestProduceRecompress: a topic's compression.type decides the codec its
// batches are stored with whatever the producer used (producer keeps the
// producer's), the broker-wide compression.type is the default, and a
// consumer reads the records unchanged.
func TestProduceRecompress(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) { c.CompressionType = "lz4" })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.client(t))
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	wantCodec := map[string]int8{"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
	for _, ct := range []string{"uncompressed", "gzip", "snappy", "lz4", "zstd", "producer", "(broker default)"} {
		topic := "rc-" + ct
		var cfg map[string]*string
		if ct == "(broker default)" {
			topic = "rc-default"
		} else {
			cfg = map[string]*string{"compression.type": &ct}
		}
		if _, err := adm.CreateTopic(ctx, 1, 1, cfg, topic); err != nil {
			t.Fatal(err)
		}
		for name, codec := range codecs {
			cl := b.client(t, kgo.ProducerBatchCompression(codec))
			for i := range 50 {
				r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%s %s %d %0100d", ct, name, i, i))}
				cl.Produce(ctx, r, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			cl.Close()
		}
		tp, _ := b.srv.catalog.TopicByName(topic)
		p, ok := b.srv.raft.Get(replica.Key{TopicID: tp.ID, Index: 0})
		if !ok {
			t.Fatalf("%s: partition not open", topic)
		}
		rr, err := p.Read(0, 10<<20)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int8]bool{}
		for data := rr.Data; len(data) > 0; {
			bt, err := protocol.ParseBatch(data[:protocol.BatchLengthAt+4+int(protocol.Batch(data).Length())])
			if err != nil {
				t.Fatalf("%s: stored batch: %v", topic, err)
			}
			seen[bt.Compression()] = true
			data = data[len(bt):]
		}
		switch want, named := wantCodec[ct]; {
		case named && (len(seen) != 1 || !seen[want]):
			t.Errorf("%s: stored codecs %v, want only %d", topic, seen, want)
		case ct == "producer" && len(seen) != 5:
			t.Errorf("%s: stored codecs %v, want the producers' five", topic, seen)
		case ct == "(broker default)" && (len(seen) != 1 || !seen[3]):
			t.Errorf("%s: stored codecs %v, want lz4 (the broker's compression.type)", topic, seen)
		}
		// Every record reads back unchanged.
		cc := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := map[string]bool{}
		for len(got) < 250 && ctx.Err() == nil {
			cc.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
		}
		for name := range codecs {
			for i := range 50 {
				if v := fmt.Sprintf("%s %s %d %0100d", ct, name, i, i); !got[v] {
					t.Fatalf("%s: record %q not read back", topic, v)
				}
			}
		}
	}
}
