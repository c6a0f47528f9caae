package metastore

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var benchLeaderOnly = os.Getenv("BENCH_LEADER_ONLY") != ""

// BenchmarkCommitOffsets3Node measures offset commits through a 3-node
// in-process quorum (hub transport, real bbolt files with fsync). Each
// operation is one CommitOffsets of one partition from one of `conc`
// concurrent committers spread over the three nodes' embedded clients;
// followers forward to the leader, which groups concurrent commits into
// one proposal. BENCH_LEADER_ONLY=1 puts every committer on the leader;
// BENCH_STATS=1 logs per-node Ready statistics.
//
//	go test -run '^$' -bench 'CommitOffsets3Node$' -benchtime 20000x ./metastore/
func BenchmarkCommitOffsets3Node(b *testing.B) {
	for _, conc := range []int{1, 64, 256, 512} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			c := newTestCluster(b, 3, func(cfg *Config) {
				cfg.TickInterval = 50 * time.Millisecond
			})
			lead := c.waitLeader()
			var clients []*Client
			for _, id := range c.ids() {
				if benchLeaderOnly && id != lead {
					continue
				}
				clients = append(clients, c.node(id).Client())
			}
			runCommitBench(b, conc, clients)
			if os.Getenv("BENCH_STATS") != "" {
				for _, id := range c.ids() {
					st := c.node(id).Stats()
					b.Logf("node %d leader=%v readies=%d avg ready %v avg tx %v entries=%d cmds=%d",
						id, id == lead, st.Readies, st.ReadyTime/time.Duration(max(st.Readies, 1)),
						st.TxTime/time.Duration(max(st.Readies, 1)), st.EntriesApplied, st.CmdsApplied)
				}
			}
		})
	}
}

// BenchmarkCommitOffsets3NodeTCP is the same workload over the TCP
// transport, from remote clients (Dial) connected one to each node: the
// path a broker without the meta role takes.
//
//	go test -run '^$' -bench CommitOffsets3NodeTCP -benchtime 20000x ./metastore/
func BenchmarkCommitOffsets3NodeTCP(b *testing.B) {
	for _, conc := range []int{64, 256} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			addrs := freeAddrs(b, 3)
			var peerList []string
			for i, a := range addrs {
				peerList = append(peerList, fmt.Sprintf("%d=%s", i+1, a))
			}
			var nodes []*Node
			for id := uint64(1); id <= 3; id++ {
				cfg := testConfig(b, id, b.TempDir())
				cfg.TickInterval = 50 * time.Millisecond
				cfg.Listen = addrs[id-1]
				cfg.PeerList = peerList
				n, err := Open(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer n.Close()
				nodes = append(nodes, n)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var clients []*Client
			for i, n := range nodes {
				if err := n.WaitReady(ctx); err != nil {
					b.Fatal(err)
				}
				c, err := Dial(ctx, ClientConfig{Addrs: []string{addrs[i]}})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				clients = append(clients, c)
			}
			runCommitBench(b, conc, clients)
		})
	}
}

// runCommitBench drives b.N single-partition commits from conc goroutines
// spread over clients and reports throughput and latency percentiles.
func runCommitBench(b *testing.B, conc int, clients []*Client) {
	lat := make([]time.Duration, b.N)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cl := clients[w%len(clients)]
			group := fmt.Sprintf("group-%d", w%100)
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := cl.CommitOffsets(ctx, Fence{}, group, []OffsetCommit{{TopicPartition: TopicPartition{"bench", int32(w)}, Offset: i}})
				cancel()
				if err != nil {
					failed.Add(1)
				}
				lat[i] = time.Since(t0)
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d commits failed", failed.Load())
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(b.N)/el.Seconds(), "commits/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
