package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterISR: on a 3 write + 2 read cluster, every partition is fully
// replicated (ISR equal to the replicas, nothing offline) in the write,
// read and mixed views; a consumer on the mixed view fetches from the read
// brokers (KIP-392); after kill -9 of a write broker its replicas leave
// the ISR and are listed offline in the write and mixed views within
// replica.lag.time.max.ms plus its lease, while the read view stays
// healthy; and once it restarts and catches up every view is healthy
// again. Costs about 40 s (8 processes).
func TestClusterISR(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	const lag = 3 * time.Second
	c := startTestClusterLayout(t, "raft", 2, clusterLayout{
		mixed: true,
		extra: fmt.Sprintf("replica.lag.time.max.ms: %d\n", lag.Milliseconds()),
	})
	const topic, parts, n = "isr", 6, 300
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fillTopic(ctx, t, c.writeAddrs, topic, parts, n, "i%04d")

	views := map[string][]string{"write": c.writeAddrs, "read": c.readAddrs, "mixed": c.mixedAddrs[:3]}
	admins := map[string]*kadm.Client{}
	for name, addrs := range views {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		admins[name] = kadm.NewClient(cl)
	}
	writers, readers := []int32{1, 2, 3}, []int32{4, 5}
	// check returns nil once every partition of every view is as want
	// says for (view, partition).
	check := func(want func(view string, p kadm.PartitionDetail) error) error {
		for name, adm := range admins {
			mctx, mcancel := context.WithTimeout(ctx, 3*time.Second)
			md, err := adm.Metadata(mctx, topic)
			mcancel()
			if err != nil {
				return fmt.Errorf("%s view: %w", name, err)
			}
			ps := md.Topics[topic].Partitions
			if len(ps) != parts {
				return fmt.Errorf("%s view: %d partitions", name, len(ps))
			}
			for _, p := range ps.Sorted() {
				if err := want(name, p); err != nil {
					return fmt.Errorf("%s view, partition %d (leader %d replicas %v isr %v offline %v): %w",
						name, p.Partition, p.Leader, p.Replicas, p.ISR, p.OfflineReplicas, err)
				}
			}
		}
		return nil
	}
	wait := func(what string, within time.Duration, want func(view string, p kadm.PartitionDetail) error) time.Duration {
		t.Helper()
		start := time.Now()
		var last error
		for time.Since(start) < within {
			if last = check(want); last == nil {
				return time.Since(start)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("%s: not within %v: %v", what, within, last)
		return 0
	}
	// members is what each view lists as a partition's replicas.
	members := func(view string, p kadm.PartitionDetail) error {
		var kinds []int32
		switch view {
		case "write":
			kinds = writers
		case "read":
			kinds = readers
		default:
			kinds = append(slices.Clone(writers), readers...)
		}
		if !sameIDs(p.Replicas, kinds) {
			return fmt.Errorf("replicas are not %v", kinds)
		}
		if p.Err != nil || !slices.Contains(p.Replicas, p.Leader) {
			return fmt.Errorf("no leader among the replicas (%v)", p.Err)
		}
		return nil
	}
	healthy := func(view string, p kadm.PartitionDetail) error {
		if err := members(view, p); err != nil {
			return err
		}
		if !sameIDs(p.ISR, p.Replicas) || len(p.OfflineReplicas) != 0 {
			return fmt.Errorf("under-replicated or offline")
		}
		return nil
	}
	wait("healthy", 30*time.Second, healthy)
	clusterStatus(t, c.mixedAddrs[0], fmt.Sprintf("%d partitions: 0 under-replicated, 0 with offline replicas, 0 without a leader", parts))

	// A consumer on the mixed view is sent to the read brokers.
	var mu sync.Mutex
	from := map[int32]int{}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.mixedAddrs[:3]...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.WithHooks(fetchFrom(func(node int32, records int) {
			mu.Lock()
			from[node] += records
			mu.Unlock()
		})))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for deadline := time.Now().Add(20 * time.Second); len(seen) < n && time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		cons.PollRecords(pctx, 500).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		pcancel()
	}
	cons.Close()
	mu.Lock()
	t.Logf("mixed-view consumer: records fetched per broker %v", from)
	if len(seen) != n || from[4]+from[5] != n {
		t.Fatalf("mixed view: read %d of %d records, %v per broker; want all from the read brokers 4 and 5", len(seen), n, from)
	}
	mu.Unlock()

	// kill -9 of write broker 3.
	c.writers[2].kill()
	took := wait("broker 3 offline", 30*time.Second, func(view string, p kadm.PartitionDetail) error {
		if err := members(view, p); err != nil {
			return err
		}
		if view == "read" {
			return healthy(view, p)
		}
		if slices.Contains(p.ISR, 3) || !slices.Equal(p.OfflineReplicas, []int32{3}) {
			return fmt.Errorf("broker 3 still in sync or not offline")
		}
		if !sameIDs(append(slices.Clone(p.ISR), 3), p.Replicas) {
			return fmt.Errorf("a live replica is out of the ISR")
		}
		return nil
	})
	t.Logf("broker 3 out of the ISR and offline in every view %v after kill -9 (replica.lag.time.max.ms %v, lease 10s)", took.Round(100*time.Millisecond), lag)
	clusterStatus(t, c.mixedAddrs[0], fmt.Sprintf("%d partitions: %d under-replicated, %d with offline replicas, 0 without a leader", parts, parts, parts),
		"offline replicas [3]", "not in sync: [3]")

	c.writers[2].start(t)
	waitReady(t, c.writers[2].admin, 60*time.Second)
	took = wait("broker 3 back", 60*time.Second, healthy)
	t.Logf("fully replicated again %v after broker 3 was ready", took.Round(100*time.Millisecond))
}

// fetchFrom is a kgo hook that reports how many records each fetch from
// a broker returned.
type fetchFrom func(node int32, records int)

func (f fetchFrom) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	f(meta.NodeID, m.NumRecords)
}

// clusterStatus runs `sluice cluster status` against addr and checks that
// its output has every line of want.
func clusterStatus(t *testing.T, addr string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binPath, "cluster", "status", "--bootstrap-server", addr).CombinedOutput()
	if err != nil {
		t.Fatalf("sluice cluster status: %v\n%s", err, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Fatalf("sluice cluster status lacks %q:\n%s", w, out)
		}
	}
	t.Logf("sluice cluster status:\n%s", out)
}
