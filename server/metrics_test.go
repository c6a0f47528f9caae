package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/coordinator"
	"github.com/sluice-broker/sluice/metastore"
)

// scrape gathers the server's registry into name -> series.
func scrape(t *testing.T, s *Server) map[string][]*dto.Metric {
	t.Helper()
	mfs, err := s.metrics.reg.(*prometheus.Registry).Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]*dto.Metric)
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetMetric()
	}
	return out
}

// series returns the series of name whose labels include want.
func series(got map[string][]*dto.Metric, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range got[name] {
		ok := true
		for k, v := range want {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// sum adds the values (gauge, counter or histogram count) of the series of
// name whose labels include want.
func sum(got map[string][]*dto.Metric, name string, want map[string]string) float64 {
	var v float64
	for _, m := range series(got, name, want) {
		switch {
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v
}

// TestMetricsPartitionsGroupsAndDeletion produces and consumes through a
// real broker with a group coordinator and checks the scrape-time series:
// offsets, log size, leadership, per-API latency by view, records in, a
// group's members and lag; then deletes the topic and checks that none of
// its series are left.
func TestMetricsPartitionsGroupsAndDeletion(t *testing.T) {
	b := startBrokerWith(t, nil, func(o *Options, meta *metastore.Node) {
		g, err := coordinator.New(coordinator.Config{BrokerID: o.Config.NodeID, Store: meta.Client(), Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		o.Groups = g
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic, group = "obs", "obs-group"
	adm := kadm.NewClient(b.client(t))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl := b.client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(strings.Repeat("x", 100))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cons := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < 10; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 10: %v", n, err)
		}
		n += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	// Five more records the group has not read: lag 5 in all.
	if err := cl.ProduceSync(ctx, recs[:5]...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	got := scrape(t, b.srv)
	tl := map[string]string{"topic": topic}
	checks := []struct {
		name string
		want map[string]string
		v    float64
	}{
		{"sluice_produced_records_total", tl, 15},
		{"sluice_partition_log_end_offset", tl, 15},
		{"sluice_partition_high_watermark", tl, 15},
		{"sluice_partition_log_start_offset", tl, 0},
		{"sluice_partition_leader", tl, 2},
		{"sluice_partition_log_segments", tl, 2},
		{"sluice_partitions", nil, 2},
		{"sluice_leader_partitions", nil, 2},
		{"sluice_under_replicated_partitions", nil, 0},
		{"sluice_offline_partitions", nil, 0},
		{"sluice_groups", nil, 1},
		{"sluice_group_members", map[string]string{"group": group}, 1},
		{"sluice_group_state", map[string]string{"group": group, "state": "Stable"}, 1},
		{"sluice_group_committed_offset", map[string]string{"group": group, "topic": topic}, 10},
		{"sluice_group_lag", map[string]string{"group": group, "topic": topic}, 5},
	}
	for _, c := range checks {
		if len(series(got, c.name, c.want)) == 0 {
			t.Errorf("%s%v: no series", c.name, c.want)
			continue
		}
		if v := sum(got, c.name, c.want); v != c.v {
			t.Errorf("%s%v = %v, want %v", c.name, c.want, v, c.v)
		}
	}
	if v := sum(got, "sluice_partition_log_size_bytes", tl); v < 15*100 {
		t.Errorf("log size %v bytes, want at least the 1500 value bytes", v)
	}
	if v := sum(got, "sluice_produced_bytes_total", tl); v < 15*100 {
		t.Errorf("produced bytes %v, want at least 1500", v)
	}
	if v := sum(got, "sluice_fetched_bytes_total", tl); v < 10*100 {
		t.Errorf("fetched bytes %v, want at least 1000", v)
	}
	if v := sum(got, "sluice_request_seconds", map[string]string{"api": "Produce", "view": "mixed"}); v < 2 {
		t.Errorf("Produce latency observations %v, want at least 2", v)
	}
	if v := sum(got, "sluice_requests_total", map[string]string{"api": "Produce", "view": "mixed"}); v < 2 {
		t.Errorf("Produce requests %v, want at least 2", v)
	}
	if v := sum(got, "sluice_group_rebalances_total", nil); v < 1 {
		t.Errorf("rebalances %v, want at least 1", v)
	}

	cons.Close()
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	got = scrape(t, b.srv)
	for name, ms := range got {
		for _, m := range ms {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "topic" && lp.GetValue() == topic {
					t.Errorf("deleted topic still has %s%v", name, m.GetLabel())
				}
			}
		}
	}
}
