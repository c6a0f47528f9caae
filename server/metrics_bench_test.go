package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRequestMetrics is what each request costs the metrics: the
// view's pre-resolved API series (count and latency) against looking the
// labels up per request, as the server did before.
func BenchmarkRequestMetrics(b *testing.B) {
	m := NewMetrics(nil)
	vm := m.view("mixed")
	b.Run("resolved", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			am := vm.api(1)
			am.requests.Inc()
			am.latency.Observe(time.Duration(i).Seconds())
		}
	})
	b.Run("by-label", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			m.requests.WithLabelValues(apiName(1), "mixed").Inc()
			m.latency.WithLabelValues(apiName(1), "mixed").Observe(time.Duration(i).Seconds())
		}
	})
}

// BenchmarkScrape is one /metrics gather of a broker hosting 1000
// partitions with a record each.
func BenchmarkScrape(b *testing.B) {
	const parts = 1000
	tb := startBroker(b, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.DefaultProduceTopic("scrape"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, "scrape"); err != nil {
		b.Fatal(err)
	}
	var recs []*kgo.Record
	for p := int32(0); p < parts; p++ {
		recs = append(recs, &kgo.Record{Partition: p, Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	reg := tb.srv.metrics.reg.(*prometheus.Registry)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
