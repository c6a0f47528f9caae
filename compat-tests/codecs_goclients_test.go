package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
)

// sarama and segmentio/kafka-go in the cross-client codec matrix
// (codecs_matrix_test.go), in-process like franz-go.

func saramaCodecClient() codecClient {
	codec := map[string]sarama.CompressionCodec{"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
		"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD}
	config := func() *sarama.Config {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.ClientID = "sluice-compat-sarama"
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Flush.Frequency = 50 * time.Millisecond
		cfg.Producer.Flush.Messages = codecRecords
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		return cfg
	}
	return codecClient{
		name:  "sarama",
		ready: func(*testing.T) (bool, string) { return true, "" },
		write: func(t *testing.T, addr, prefix string) map[string]scenarioResult {
			out := map[string]scenarioResult{}
			for _, c := range codecNames {
				cfg := config()
				cfg.Producer.Compression = codec[c]
				p, err := sarama.NewSyncProducer([]string{addr}, cfg)
				if err != nil {
					out["write-"+c] = scenarioResult{"fail", err.Error()}
					continue
				}
				keys, values := codecContent("sarama", c)
				var msgs []*sarama.ProducerMessage
				for i := range keys {
					msgs = append(msgs, &sarama.ProducerMessage{Topic: prefix + "-" + c, Partition: 0,
						Key: sarama.StringEncoder(keys[i]), Value: sarama.StringEncoder(values[i]),
						Headers: []sarama.RecordHeader{{Key: []byte("h"), Value: []byte(c)}}})
				}
				if err := p.SendMessages(msgs); err != nil {
					out["write-"+c] = scenarioResult{"fail", err.Error()}
				} else {
					out["write-"+c] = scenarioResult{"pass", ""}
				}
				p.Close()
			}
			return out
		},
		read: func(t *testing.T, addr string, topics []string) map[string]scenarioResult {
			out := map[string]scenarioResult{}
			cons, err := sarama.NewConsumer([]string{addr}, config())
			if err != nil {
				out["\x00error"] = scenarioResult{"fail", err.Error()}
				return out
			}
			defer cons.Close()
			for _, tp := range topics {
				out["read "+tp] = func() scenarioResult {
					pc, err := cons.ConsumePartition(tp, 0, sarama.OffsetOldest)
					if err != nil {
						return scenarioResult{"fail", err.Error()}
					}
					defer pc.Close()
					var recs [][3]string
					timeout := time.After(20 * time.Second)
					for len(recs) < codecRecords {
						select {
						case m := <-pc.Messages():
							var hs []string
							for _, h := range m.Headers {
								hs = append(hs, string(h.Key)+"="+string(h.Value))
							}
							recs = append(recs, [3]string{string(m.Key), string(m.Value), strings.Join(hs, ",")})
						case e := <-pc.Errors():
							return scenarioResult{"fail", e.Error()}
						case <-timeout:
							return scenarioResult{"fail", fmt.Sprintf("read %d of %d in 20 s", len(recs), codecRecords)}
						}
					}
					return scenarioResult{"pass", digestLines(recs)}
				}()
			}
			return out
		},
	}
}

func kafkaGoCodecClient() codecClient {
	codec := map[string]kafkago.Compression{"gzip": kafkago.Gzip, "snappy": kafkago.Snappy, "lz4": kafkago.Lz4, "zstd": kafkago.Zstd}
	return codecClient{
		name:  "kafka-go",
		ready: func(*testing.T) (bool, string) { return true, "" },
		write: func(t *testing.T, addr, prefix string) map[string]scenarioResult {
			out := map[string]scenarioResult{}
			for _, c := range codecNames {
				w := &kafkago.Writer{Addr: kafkago.TCP(addr), Topic: prefix + "-" + c, Compression: codec[c],
					RequiredAcks: kafkago.RequireAll, BatchSize: codecRecords, BatchTimeout: 50 * time.Millisecond,
					Balancer: &kafkago.LeastBytes{}}
				keys, values := codecContent("kafka-go", c)
				var msgs []kafkago.Message
				for i := range keys {
					msgs = append(msgs, kafkago.Message{Key: []byte(keys[i]), Value: []byte(values[i]),
						Headers: []kafkago.Header{{Key: "h", Value: []byte(c)}}})
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := w.WriteMessages(ctx, msgs...); err != nil {
					out["write-"+c] = scenarioResult{"fail", err.Error()}
				} else {
					out["write-"+c] = scenarioResult{"pass", ""}
				}
				cancel()
				w.Close()
			}
			return out
		},
		read: func(t *testing.T, addr string, topics []string) map[string]scenarioResult {
			out := map[string]scenarioResult{}
			for _, tp := range topics {
				out["read "+tp] = func() scenarioResult {
					r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{addr}, Topic: tp, Partition: 0,
						MaxWait: 200 * time.Millisecond, MaxBytes: 10 << 20})
					defer r.Close()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					var recs [][3]string
					for len(recs) < codecRecords {
						m, err := r.ReadMessage(ctx)
						if err != nil {
							return scenarioResult{"fail", fmt.Sprintf("after %d of %d: %v", len(recs), codecRecords, err)}
						}
						var hs []string
						for _, h := range m.Headers {
							hs = append(hs, h.Key+"="+string(h.Value))
						}
						recs = append(recs, [3]string{string(m.Key), string(m.Value), strings.Join(hs, ",")})
					}
					return scenarioResult{"pass", digestLines(recs)}
				}()
			}
			return out
		},
	}
}
