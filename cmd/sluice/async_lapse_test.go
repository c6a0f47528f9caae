package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterAsyncMasterLapseNotReplaced: every async master's lease
// lapses while the master stays alive and its learners keep hearing from
// it (the three meta nodes are paused, SIGSTOP, for two leases: on
// resuming, the metastore expires every broker). No master may be
// replaced (docs/replication-modes.md): a master still heard over
// replication is only cut off from the metastore or slow, and replacing it
// would cut what it acknowledged that its learners did not hold yet. So no
// broker promotes or cuts anything, every partition keeps its master, and
// every acknowledged record is read back once, in order, from the read
// broker.
func TestClusterAsyncMasterLapseNotReplaced(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	const topic, parts = "lapse", 3
	c, ctx, prod, adm := startAsyncTopic(t, topic, parts, 3, 3*time.Minute, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	masters := electedLeaders(t, adm, topic, parts)

	load := startAckedLoad(ctx, prod, "l")
	lapses := func() float64 {
		n := 0.0
		for _, w := range c.writers {
			n += metricValue(t, w.admin, "sluice_lease_lapses_total")
		}
		return n
	}
	// Pause the metastore past two leases until the brokers' leases
	// lapsed (a new meta leader would grant a fresh lease instead).
	for try := 1; lapses() == 0; try++ {
		if try > 3 {
			t.Fatalf("no broker lease lapsed after %d pauses of the metastore", try-1)
		}
		time.Sleep(2 * time.Second)
		for _, m := range c.meta {
			if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(6 * time.Second)
		for _, m := range c.meta {
			if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); lapses() == 0 && time.Now().Before(deadline); {
			time.Sleep(250 * time.Millisecond)
		}
	}
	t.Logf("broker leases lapsed %v times", lapses())
	// Writes go on once the masters registered again.
	before := load.count()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		n := load.count()
		if n > before+1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no writes acknowledged within 30 s of the metastore resuming (%d acknowledged)", n)
		}
	}
	time.Sleep(3 * time.Second)
	load.halt()
	if err := prod.Flush(ctx); err != nil {
		t.Logf("flush: %v", err)
	}

	for _, w := range c.writers {
		b, _ := os.ReadFile(w.logf.Name())
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "promoted to master") || strings.Contains(line, "claimed its place") || strings.Contains(line, "records were cut") ||
				strings.Contains(line, "truncating to the new master") {
				t.Errorf("%s: a master that was still heard was replaced: %s", w.name, line)
			}
		}
	}
	if now := electedLeaders(t, adm, topic, parts); !maps.Equal(now, masters) {
		t.Errorf("masters before the lapse %v, after %v", masters, now)
	}

	found := readAckedOnce(ctx, t, c.readAddrs, topic, load.records())
	t.Logf("all %d acknowledged records read once; every master kept its place through the lapse", found)
}

// readAckedOnce reads topic from the read brokers from the start and checks
// that every acknowledged record is read exactly once, at the partition and
// offset it was acknowledged at, with offsets rising per partition; it
// returns how many acknowledged records it read.
func readAckedOnce(ctx context.Context, t *testing.T, readAddrs []string, topic string, acked []ackedRecord) int {
	t.Helper()
	cons, err := kgo.NewClient(kgo.SeedBrokers(readAddrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	want := make(map[string]ackedRecord, len(acked))
	for _, a := range acked {
		want[a.value] = a
	}
	seen := map[string]bool{}
	last := map[int32]int64{}
	found := 0
	for deadline := time.Now().Add(30 * time.Second); found < len(want) && time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if seen[v] {
				t.Errorf("%s read twice", v)
			}
			seen[v] = true
			if o, ok := last[r.Partition]; ok && r.Offset <= o {
				t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, o)
			}
			last[r.Partition] = r.Offset
			if a, ok := want[v]; ok {
				found++
				if a.partition != r.Partition || a.offset != r.Offset {
					t.Errorf("%s acknowledged at %d/%d, read at %d/%d", v, a.partition, a.offset, r.Partition, r.Offset)
				}
			}
		})
	}
	if found != len(want) {
		lost := 0
		for v, a := range want {
			if !seen[v] {
				if lost < 10 {
					t.Errorf("%s acknowledged at %d/%d is lost", v, a.partition, a.offset)
				}
				lost++
			}
		}
		t.Fatalf("read %d of %d acknowledged records; %d lost", found, len(want), lost)
	}
	return found
}

// waitAsyncMasters waits until every partition of topic has moved to the
// async configuration with its master recorded (the writers' logs say so).
func waitAsyncMasters(t *testing.T, c *testCluster, topic string, parts int) {
	t.Helper()
	recorded := func() int {
		n := 0
		for _, w := range c.writers {
			b, _ := os.ReadFile(w.logf.Name())
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "async master recorded") && strings.Contains(line, `"topic":"`+topic+`"`) && !strings.Contains(line, `"master":-1`) {
					n++
				}
			}
		}
		return n
	}
	for deadline := time.Now().Add(60 * time.Second); recorded() < parts; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d partitions recorded an async master within 60 s", recorded(), parts)
		}
	}
}

// ackedLoad produces records prefix%07d through prod, 50 at a time with a
// pause, until halted, and keeps every acknowledgement.
type ackedLoad struct {
	mu      sync.Mutex
	acked   []ackedRecord
	ackedAt map[int32]time.Time // the last acknowledgement per partition
	stop    chan struct{}
	done    chan struct{}
}

func startAckedLoad(ctx context.Context, prod *kgo.Client, prefix string) *ackedLoad {
	l := &ackedLoad{ackedAt: map[int32]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s%07d", prefix, i))}, func(r *kgo.Record, err error) {
				if err != nil {
					return
				}
				l.mu.Lock()
				l.acked = append(l.acked, ackedRecord{r.Partition, r.Offset, string(r.Value)})
				l.ackedAt[r.Partition] = time.Now()
				l.mu.Unlock()
			})
			if i%50 == 49 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	return l
}

// halt stops producing (records already handed to the client may still
// be acknowledged: flush the client before reading records).
func (l *ackedLoad) halt() {
	close(l.stop)
	<-l.done
}

func (l *ackedLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// records is a copy of the acknowledgements so far.
func (l *ackedLoad) records() []ackedRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acked)
}

// ackedSince counts the partitions among parts that acknowledged a record
// after t.
func (l *ackedLoad) ackedSince(t time.Time, parts int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for p := int32(0); p < int32(parts); p++ {
		if l.ackedAt[p].After(t) {
			n++
		}
	}
	return n
}

// TestClusterAsyncStaleReplicaNotPromoted: a write replica that was down
// while its master went on acknowledging must not become the master when
// it is the first back after the whole write side went down: the master
// took it out of its ISR a lease after it stopped hearing it, and only a
// replica in that ISR may claim the master's place (Kafka's clean
// election). Before that rule it claimed at once (nobody else was alive to
// claim), was promoted, and every other replica, the read broker too,
// truncated to its log: every record acknowledged while it was down lost.
// The partition waits for its master instead, and nothing is lost.
func TestClusterAsyncStaleReplicaNotPromoted(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	const topic = "stale"
	c, ctx, prod, adm := startAsyncTopic(t, topic, 1, 3, 3*time.Minute)
	master := electedLeaders(t, adm, topic, 1)[0]
	stale := int32(1 + int(master)%len(c.writers))

	load := startAckedLoad(ctx, prod, "s")
	for deadline := time.Now().Add(30 * time.Second); load.count() < 500; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d records acknowledged in 30 s", load.count())
		}
	}
	c.writers[stale-1].kill()
	before := load.count()
	// Writes go on past a lease: the master stops hearing the replica
	// and reports it out of the ISR.
	time.Sleep(8 * time.Second)
	load.halt()
	if err := prod.Flush(ctx); err != nil {
		t.Logf("flush: %v", err)
	}
	if n := load.count(); n < before+500 {
		t.Fatalf("%d records acknowledged while broker %d was down, want 500 or more", n-before, stale)
	}
	// The whole write side goes down; the stale replica comes back first
	// and alone, for a lease and a claim wait and more.
	for _, w := range c.writers {
		w.kill()
	}
	c.writers[stale-1].start(t)
	waitReady(t, c.writers[stale-1].admin, 60*time.Second)
	time.Sleep(10 * time.Second)
	b, _ := os.ReadFile(c.writers[stale-1].logf.Name())
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "promoted to master") || strings.Contains(line, "claimed its place") {
			t.Errorf("broker %d, out of the ISR, took the master's place: %s", stale, line)
		}
	}
	for _, w := range c.writers {
		if w.cmd == nil {
			w.start(t)
		}
	}
	for _, w := range c.writers {
		waitReady(t, w.admin, 60*time.Second)
	}
	found := readAckedOnce(ctx, t, c.readAddrs, topic, load.records())
	if now := electedLeaders(t, adm, topic, 1)[0]; now != master {
		t.Errorf("master %d before, %d after", master, now)
	}
	t.Logf("broker %d, back first after being down for %d acknowledged records, stayed a replica; all %d acknowledged records read once", stale, load.count()-before, found)
}

// startAsyncTopic starts the async-mode cluster (one read broker) with a
// 3 s broker lease, and a producer client (opts added) for topic, created
// with parts partitions of replication factor rf once enough write brokers
// are registered, with a recorded master for each partition. ctx ends after
// d; the client closes at the test's end.
func startAsyncTopic(t *testing.T, topic string, parts int32, rf int16, d time.Duration, opts ...kgo.Opt) (*testCluster, context.Context, *kgo.Client, *kadm.Client) {
	t.Helper()
	session := "broker.session.timeout.ms: 3000\n"
	c := startTestClusterLayout(t, "async", 1, clusterLayout{extra: session, metaExtra: func(int) string { return session }})
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	prod, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProduceRequestTimeout(5 * time.Second), kgo.MaxBufferedRecords(2000), kgo.MetadataMinAge(250 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	adm := kadm.NewClient(prod)
	// With a 3 s lease on a loaded machine a broker may be between a
	// lapse and its new registration: too few brokers for rf replicas.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		_, err := adm.CreateTopic(ctx, parts, rf, nil, topic)
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.InvalidReplicationFactor) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	waitAsyncMasters(t, c, topic, int(parts))
	return c, ctx, prod, adm
}
