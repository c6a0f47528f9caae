package compat

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// requireTool skips when a tool is missing, and fails when CI=true.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	return harness.RequireTool(t, name)
}

// startBroker starts one `sluice dev` node for this test.
func startBroker(t *testing.T, extraArgs ...string) *harness.Broker {
	t.Helper()
	return harness.Start(t, harness.Options{ExtraArgs: extraArgs})
}

// newClient returns a kgo client with default settings plus opts; it is
// closed when the test ends.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("sluice-compat-go")}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client on a new kgo client. kadm answers ListTopics
// and finds partitions through kgo's metadata cache, so after changing
// topics use a new admin client (or freshTopics) to see the broker's view.
func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, addr))
}

// createTopic creates a topic (replication factor 1) and fails the test if the
// broker does not report success.
func createTopic(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err != nil {
		t.Fatalf("CreateTopics %q: request failed: %v", topic, err)
	}
	if resp.Err != nil {
		t.Fatalf("CreateTopics %q: %v (%s)", topic, resp.Err, resp.ErrMessage)
	}
}

// freshTopics sends a Metadata request for topics (all topics when none are
// given) straight to the broker, bypassing kgo's metadata cache.
func freshTopics(ctx context.Context, t *testing.T, addr string, topics ...string) map[string]kmsg.MetadataResponseTopic {
	t.Helper()
	cl := newClient(t, addr)
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	if len(topics) == 0 {
		req.Topics = nil
	}
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("Metadata: %v", err)
	}
	out := map[string]kmsg.MetadataResponseTopic{}
	for _, tp := range resp.Topics {
		if tp.Topic != nil {
			out[*tp.Topic] = tp
		}
	}
	return out
}

// endOffsets returns the high watermark of each partition of topic.
func endOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListOffsets(latest) %q: %v", topic, err)
	}
	if err := lo.Error(); err != nil {
		t.Fatalf("ListOffsets(latest) %q: %v", topic, err)
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) == 0 {
		t.Fatalf("ListOffsets(latest) %q: no partitions in the answer", topic)
	}
	return out
}

// consumeAll reads every partition of topic from offset 0 until each reaches
// ends[p] (without a group), and returns the records by partition.
func consumeAll(ctx context.Context, t *testing.T, addr, topic string, ends map[int32]int64) map[int32][]*kgo.Record {
	t.Helper()
	start := map[int32]kgo.Offset{}
	remaining := 0
	for p, e := range ends {
		if e > 0 {
			start[p] = kgo.NewOffset().AtStart()
			remaining++
		}
	}
	out := map[int32][]*kgo.Record{}
	if remaining == 0 {
		return out
	}
	cl := newClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	defer cl.Close()
	done := map[int32]bool{}
	var fetchErrs []string
	for remaining > 0 {
		if ctx.Err() != nil {
			var got []string
			for p, e := range ends {
				got = append(got, fmt.Sprintf("p%d: %d of %d", p, len(out[p]), e))
			}
			sort.Strings(got)
			t.Fatalf("consuming %q: gave up (%v) with %s; fetch errors: %s", topic, ctx.Err(),
				strings.Join(got, ", "), strings.Join(lastN(fetchErrs, 10), "; "))
		}
		fs := cl.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) {
			if ctx.Err() == nil {
				fetchErrs = append(fetchErrs, fmt.Sprintf("%s/%d: %v", tp, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			if !done[r.Partition] && r.Offset+1 >= ends[r.Partition] {
				done[r.Partition] = true
				remaining--
			}
		})
	}
	return out
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// sameHeaders compares two header lists exactly (order, keys, values).
func sameHeaders(a, b []kgo.RecordHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || string(a[i].Value) != string(b[i].Value) {
			return false
		}
	}
	return true
}

func fmtHeaders(hs []kgo.RecordHeader) string {
	var parts []string
	for _, h := range hs {
		parts = append(parts, h.Key+"="+string(h.Value))
	}
	return "[" + strings.Join(parts, ",") + "]"
}
