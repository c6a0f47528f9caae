package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSharedClusterTransactions: Kafka transactions on a shared topic, on
// real processes (3 meta, 3 write, 1 read broker on a shared directory).
// A franz-go transactional producer commits, aborts and commits again
// across both partitions; read_committed consumers on the write view and
// on the read broker read every committed record and none of the aborted
// ones, while a read_uncommitted consumer reads the aborted ones too (so
// they were written). With a transaction left open, ListOffsets
// read_committed (the last stable offset) stays below the high watermark
// on both views, and reaches it once the transaction commits.
func TestSharedClusterTransactions(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterLayout(t, "shared", 1, clusterLayout{
		extra: fmt.Sprintf("shared.storage.type: dir\nshared.storage.dir: %s\nshared.upload.linger.ms: 20\n", t.TempDir())})
	const topic, perTxn = "stxn", 100
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID("stxn-producer"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	adm := kadm.NewClient(prod)
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil || len(rcs) != 1 {
		t.Fatalf("describe %s: %v %v", topic, rcs, err)
	}
	mode := ""
	for _, cf := range rcs[0].Configs {
		if cf.Key == "replication.mode" {
			mode = cf.MaybeValue()
		}
	}
	if mode != "shared" {
		t.Fatalf("%s has replication.mode %q, want shared", topic, mode)
	}
	txn := func(tag string, finish bool, end kgo.TransactionEndTry) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		for i := range perTxn {
			rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "%s-%03d", tag, i)})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if finish {
			if err := prod.EndTransaction(ctx, end); err != nil {
				t.Fatal(err)
			}
		}
	}
	txn("c1", true, kgo.TryCommit)
	txn("a1", true, kgo.TryAbort)
	txn("c2", true, kgo.TryCommit)

	read := func(addrs []string, iso kgo.IsolationLevel, want int) map[string]bool {
		t.Helper()
		return readDistinct(ctx, t, addrs, topic, want, 30*time.Second, kgo.FetchIsolationLevel(iso))
	}
	count := func(seen map[string]bool, prefix string) int {
		n := 0
		for v := range seen {
			if strings.HasPrefix(v, prefix) {
				n++
			}
		}
		return n
	}
	views := map[string][]string{"write view": c.writeAddrs, "read broker": c.readAddrs}
	for name, addrs := range views {
		seen := read(addrs, kgo.ReadCommitted(), 2*perTxn)
		if c1, c2, a1 := count(seen, "c1-"), count(seen, "c2-"), count(seen, "a1-"); c1 != perTxn || c2 != perTxn || a1 != 0 {
			t.Fatalf("%s, read_committed: %d of %d records of the first committed transaction, %d of the second, %d aborted ones", name, c1, perTxn, c2, a1)
		}
		t.Logf("%s, read_committed: every committed record, no aborted one", name)
	}
	if seen := read(c.readAddrs, kgo.ReadUncommitted(), 3*perTxn); count(seen, "a1-") != perTxn {
		t.Fatalf("read broker, read_uncommitted: %d of the %d aborted records", count(seen, "a1-"), perTxn)
	}

	// An open transaction holds the last stable offset back on both views.
	txn("c3", false, kgo.TryCommit)
	stable := func(addrs []string) (lso, hw map[int32]int64) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		a := kadm.NewClient(cl)
		lso, hw = map[int32]int64{}, map[int32]int64{}
		lc, err := a.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		le, err := a.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		lc.Each(func(o kadm.ListedOffset) { lso[o.Partition] = o.Offset })
		le.Each(func(o kadm.ListedOffset) { hw[o.Partition] = o.Offset })
		return lso, hw
	}
	waitStable := func(name string, addrs []string, open bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			lso, hw := stable(addrs)
			ok := len(lso) == 2 && len(hw) == 2
			for p := range hw {
				if open && !(lso[p] < hw[p]) || !open && lso[p] != hw[p] {
					ok = false
				}
			}
			if ok {
				t.Logf("%s, transaction open %v: last stable offsets %v, high watermarks %v", name, open, lso, hw)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s, transaction open %v: last stable offsets %v, high watermarks %v", name, open, lso, hw)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for name, addrs := range views {
		waitStable(name, addrs, true)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	for name, addrs := range views {
		waitStable(name, addrs, false)
	}
	if seen := read(c.readAddrs, kgo.ReadCommitted(), 3*perTxn); count(seen, "c3-") != perTxn || count(seen, "a1-") != 0 {
		t.Fatalf("read broker, read_committed after the third commit: %d of %d, %d aborted", count(seen, "c3-"), perTxn, count(seen, "a1-"))
	}
}
