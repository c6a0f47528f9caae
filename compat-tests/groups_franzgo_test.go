package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tpo is one record's place.
type tpo struct {
	p int32
	o int64
}

// groupMember is one kgo group consumer that commits synchronously after
// processing each poll and only then lets a rebalance proceed
// (BlockRebalanceOnPoll), so a partition never moves with processed but
// uncommitted records.
type groupMember struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	assigned map[int32]time.Time // partitions ever assigned, when last
}

type processedLog struct {
	mu    sync.Mutex
	seen  map[tpo]int
	byWho map[tpo]string
	count int
}

func (l *processedLog) add(who string, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := tpo{r.Partition, r.Offset}
	l.seen[k]++
	l.byWho[k] += who + " "
	l.count++
}

func (l *processedLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

func startGroupMember(t *testing.T, addr, group, topic, name string, log *processedLog, extra ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{name: name, done: make(chan struct{}), assigned: map[int32]time.Time{}}
	m.cl = newClient(t, addr, append([]kgo.Opt{
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.SessionTimeout(10 * time.Second),
		kgo.RebalanceTimeout(20 * time.Second),
		kgo.FetchMaxWait(300 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			for _, p := range a[topic] {
				m.assigned[p] = time.Now()
			}
			m.mu.Unlock()
		}),
	}, extra...)...)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := m.cl.PollRecords(ctx, 50)
			if ctx.Err() != nil {
				m.cl.AllowRebalance()
				return
			}
			fs.EachError(func(tp string, p int32, err error) { t.Logf("%s: fetch %s/%d: %v", name, tp, p, err) })
			rs := fs.Records()
			for _, r := range rs {
				log.add(name, r)
			}
			if len(rs) > 0 {
				if err := m.cl.CommitRecords(context.Background(), rs...); err != nil {
					t.Errorf("%s: commit after processing: %v", name, err)
				}
			}
			m.cl.AllowRebalance()
			time.Sleep(20 * time.Millisecond) // let other members take part
		}
	}()
	return m
}

// stop ends the poll loop and closes the client, which leaves the group.
func (m *groupMember) stop() {
	m.cancel()
	<-m.done
	m.cl.Close()
}

func (m *groupMember) partitions() map[int32]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]bool{}
	for p := range m.assigned {
		out[p] = true
	}
	return out
}

// assignedAfter reports whether p was assigned to m after t.
func (m *groupMember) assignedAfter(p int32, t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.assigned[p]
	return ok && at.After(t)
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGroupFranzGoRebalanceExactlyOnce runs three kgo group consumers on a
// six-partition topic, stops one and starts another while records keep
// coming, and checks that every record is processed exactly once across the
// rebalances, that partitions moved, that kadm's lag is zero with the
// commits at the end offsets, and that after the consumers stop and the
// broker restarts a new consumer resumes exactly at the committed offsets.
//
// It runs with the classic protocol (client-side cooperative-sticky) and with
// KIP-848 (kgo.ServerSideBalancer: the broker's uniform assignor).
func TestGroupFranzGoRebalanceExactlyOnce(t *testing.T) {
	t.Parallel()
	t.Run("classic", func(t *testing.T) { testFranzGoRebalance(t, "grp-franz", nil) })
	t.Run("consumer", func(t *testing.T) { testFranzGoRebalance(t, "grp-franz848", []kgo.Opt{kgo.ServerSideBalancer()}) })
}

func testFranzGoRebalance(t *testing.T, topic string, extra []kgo.Opt) {
	group := topic + "-g"
	const parts = 6
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, topic, parts, nil)
	produceN(ctx, t, b.KafkaAddr, topic, "a", 600)

	log := &processedLog{seen: map[tpo]int{}, byWho: map[tpo]string{}}
	m1 := startGroupMember(t, b.KafkaAddr, group, topic, "m1", log, extra...)
	m2 := startGroupMember(t, b.KafkaAddr, group, topic, "m2", log, extra...)
	m3 := startGroupMember(t, b.KafkaAddr, group, topic, "m3", log, extra...)
	waitFor(t, time.Minute, "every member to own partitions", func() bool {
		return len(m1.partitions()) > 0 && len(m2.partitions()) > 0 && len(m3.partitions()) > 0
	})
	waitFor(t, time.Minute, "the first 600 records", func() bool { return log.total() >= 600 })
	// The group runs the protocol asked for: ConsumerGroupDescribe knows
	// only KIP-848 groups, DescribeGroups only classic ones.
	dcg, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		t.Fatalf("DescribeConsumerGroups: %v", err)
	}
	if is848 := dcg[group].Err == nil; is848 != (len(extra) > 0) {
		t.Fatalf("group is a KIP-848 group: %v (describe error %v), want %v", is848, dcg[group].Err, len(extra) > 0)
	}
	if len(extra) > 0 && len(dcg[group].Members) != 3 {
		t.Errorf("ConsumerGroupDescribe lists %d members, want 3", len(dcg[group].Members))
	}

	// m1 leaves, m4 joins, while more records arrive.
	m1.stop()
	left := time.Now()
	produceN(ctx, t, b.KafkaAddr, topic, "b", 600)
	m4 := startGroupMember(t, b.KafkaAddr, group, topic, "m4", log, extra...)
	produceN(ctx, t, b.KafkaAddr, topic, "c", 600)
	waitFor(t, 2*time.Minute, "all 1800 records", func() bool { return log.total() >= 1800 })
	waitFor(t, time.Minute, "m4 to own partitions", func() bool { return len(m4.partitions()) > 0 })

	ends := endOffsets(ctx, t, adm, topic)
	var want int64
	for _, e := range ends {
		want += e
	}
	// Commits happen before the next poll; let the members finish.
	waitFor(t, time.Minute, "lag 0", func() bool {
		_, lag := groupLag(ctx, t, adm, group, topic)
		return lag == 0
	})
	m2.stop()
	m3.stop()
	m4.stop()

	log.mu.Lock()
	for k, n := range log.seen {
		if n != 1 {
			t.Errorf("partition %d offset %d processed %d times (by %s)", k.p, k.o, n, log.byWho[k])
		}
	}
	if int64(len(log.seen)) != want {
		t.Errorf("processed %d distinct records, produced %d", len(log.seen), want)
	}
	log.mu.Unlock()
	moved := false
	for p := range m1.partitions() {
		if m2.assignedAfter(p, left) || m3.assignedAfter(p, left) || m4.assignedAfter(p, left) {
			moved = true
		}
	}
	if !moved {
		t.Errorf("no partition of the member that left moved to another member: m1 %v m2 %v m3 %v m4 %v",
			m1.partitions(), m2.partitions(), m3.partitions(), m4.partitions())
	}
	committed, lag := groupLag(ctx, t, adm, group, topic)
	for p, e := range ends {
		if committed[p] != e {
			t.Errorf("partition %d: committed %d, end offset %d", p, committed[p], e)
		}
	}
	if lag != 0 {
		t.Errorf("kadm lag %d after everything was processed, want 0", lag)
	}

	// Stop, produce more, restart the broker: a new member resumes at
	// the committed offsets (rebuilt from the metastore).
	produceN(ctx, t, b.KafkaAddr, topic, "d", 60)
	if err := b.Stop(); err != nil {
		t.Fatalf("stopping broker: %v", err)
	}
	b.Restart()
	adm = newAdmin(t, b.KafkaAddr)
	committed2, lag2 := groupLag(ctx, t, adm, group, topic)
	if fmt.Sprint(committed2) != fmt.Sprint(committed) {
		t.Errorf("after restart the committed offsets are %v, before %v", committed2, committed)
	}
	if lag2 != 60 {
		t.Errorf("after restart kadm lag %d, want 60", lag2)
	}
	first := map[int32]int64{}
	var mu sync.Mutex
	n := 0
	cl := newClient(t, b.KafkaAddr, append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(300 * time.Millisecond)}, extra...)...)
	for n < 60 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
			n++
		})
	}
	if n != 60 {
		t.Fatalf("after restart read %d records, want 60", n)
	}
	for p, o := range first {
		if o != committed[p] {
			t.Errorf("after restart partition %d resumed at %d, committed %d", p, o, committed[p])
		}
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit after restart: %v", err)
	}
	_, lag3 := groupLag(ctx, t, adm, group, topic)
	if lag3 != 0 {
		t.Errorf("lag after consuming the rest: %d", lag3)
	}
}
