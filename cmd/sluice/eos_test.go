package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterExactlyOncePipeline runs franz-go's GroupTransactSession
// (consume, transform, produce, the consumed offsets committed in the
// transaction) on the split cluster (raft partitions, 3 write brokers, 2
// read brokers) and checks that it stays exactly-once across
//
//  1. a rebalance: a second member joins mid-stream, then the first
//     leaves;
//  2. kill -9 of the write broker that coordinates the remaining member's
//     transactional id (FindCoordinator key type 1), in PrepareCommit
//     when the test catches it there, then its restart; then kill -9 and
//     restart of the read broker that coordinates the group;
//  3. kill -9 of a partition leader of the output topic, then its restart.
//
// A session is one kgo client, which must reach the group coordinator (a
// read broker) and the transaction coordinator and partition leaders
// (write brokers) at once; kgo only talks to coordinators its metadata
// lists, so the pipeline's client is seeded with the write brokers'
// listeners of the mixed view. There its Produce goes to the raft leaders
// on the write brokers, and its Fetch is sent on to the read brokers
// (preferred read replica); the test checks both from the client's hooks.
// The input is produced through the write view first, and the output is
// read with read_committed from the read view: every input record must be
// there exactly once, none missing, and each key's records in input
// order. A member whose session fails (End's errors are final) closes it
// and opens a new one with the same transactional id, as an application
// would; that fences and aborts whatever the old one left open.
func TestClusterExactlyOncePipeline(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	c := startTestClusterLayout(t, "raft", 2, clusterLayout{mixed: true})
	const in, out, group, parts, n, keys = "eos-in", "eos-out", "eos-group", 3, 3000, 24
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Second)
	defer cancel()
	fillTopic(ctx, t, c.writeAddrs, in, parts, 0, "")
	fillTopic(ctx, t, c.writeAddrs, out, parts, 0, "")

	// The input: value the record's sequence number, key one of 24, so
	// each key's records are in one input partition in sequence order.
	type pos struct {
		part int32
		off  int64
	}
	inputs := make([]pos, n)
	inEnds := map[int32]int64{}
	var inMu sync.Mutex
	src, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...), kgo.DefaultProduceTopic(in))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("k%02d", i%keys)), Value: []byte(fmt.Sprintf("%05d", i))}
		src.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("producing input %s: %v", r.Value, err)
				return
			}
			inMu.Lock()
			inputs[i] = pos{r.Partition, r.Offset}
			inEnds[r.Partition] = max(inEnds[r.Partition], r.Offset+1)
			inMu.Unlock()
		})
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	src.Close()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("input: %d records, partition ends %v", n, inEnds)

	// Where the pipeline's client fetched and produced, by node.
	var routeMu sync.Mutex
	fetchedFrom, producedTo, outWrites := map[int32]int{}, map[int32]int{}, map[int32]int{}
	hooks := []kgo.Hook{
		fetchFrom(func(node int32, records int) {
			routeMu.Lock()
			fetchedFrom[node] += records
			routeMu.Unlock()
		}),
		batchWritten(func(meta kgo.BrokerMetadata, _ string, partition int32, m kgo.ProduceBatchMetrics) {
			routeMu.Lock()
			producedTo[meta.NodeID] += m.NumRecords
			outWrites[partition] += m.NumRecords
			routeMu.Unlock()
		}),
	}

	// progress counts the records of committed transactions; budget
	// holds the members back, so that each fault lands mid-stream
	// rather than after the input ran out.
	var progress, budget, aborted, planned, restarts atomic.Int64
	budget.Store(800)
	var stopping atomic.Bool
	logf := func(format string, args ...any) {
		if !stopping.Load() {
			t.Logf(format, args...)
		}
	}
	type member struct {
		name       string
		stop, done chan struct{}
		committed  atomic.Int64
		txns       atomic.Int64
		tries      atomic.Int64
	}
	// session runs one GroupTransactSession until m is stopped (true)
	// or the session fails (false).
	session := func(m *member) bool {
		sess, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(c.mixedAddrs[:3]...), kgo.ClientID("eos-"+m.name),
			kgo.TransactionalID("eos-"+m.name), kgo.TransactionTimeout(20*time.Second),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DefaultProduceTopic(out), kgo.FetchMaxWait(300*time.Millisecond),
			kgo.WithHooks(hooks...),
		)
		if err != nil {
			t.Errorf("%s: NewGroupTransactSession: %v", m.name, err)
			return true
		}
		defer sess.Close()
		for {
			for progress.Load() >= budget.Load() {
				select {
				case <-m.stop:
					return true
				case <-time.After(50 * time.Millisecond):
				}
			}
			select {
			case <-m.stop:
				return true
			default:
			}
			if ctx.Err() != nil {
				return true
			}
			if err := sess.Begin(); err != nil {
				logf("%s: Begin: %v", m.name, err)
				return false
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := sess.PollRecords(pctx, 25)
			pcancel()
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					logf("%s: fetch %s/%d: %v", m.name, topic, p, err)
				}
			})
			got := 0
			fs.EachRecord(func(r *kgo.Record) {
				got++
				// The transform keeps the key and notes where the
				// record was read.
				sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: fmt.Appendf(nil, "%s|%d|%d", r.Value, r.Partition, r.Offset)}, nil)
			})
			// Every 7th transaction with records is aborted on purpose,
			// after its records are written, as an application that
			// failed midway would: they are in the output's log and
			// must never be read with read_committed, and the session
			// rewinds to the committed offsets and reads them again.
			end := kgo.TryCommit
			if got > 0 && m.tries.Add(1)%7 == 0 {
				if err := sess.Client().Flush(ctx); err != nil {
					logf("%s: Flush: %v", m.name, err)
				}
				end = kgo.TryAbort
				planned.Add(1)
			}
			committed, err := sess.End(ctx, end)
			if err != nil {
				logf("%s: End (%d records): %v; opening a new session", m.name, got, err)
				return false
			}
			switch {
			case committed && got > 0:
				m.committed.Add(int64(got))
				m.txns.Add(1)
				progress.Add(int64(got))
			case !committed && got > 0 && end == kgo.TryCommit:
				aborted.Add(1)
				logf("%s: transaction of %d records aborted (rebalance or failed write); they are read again", m.name, got)
			}
		}
	}
	var members []*member
	start := func(name string) *member {
		m := &member{name: name, stop: make(chan struct{}), done: make(chan struct{})}
		members = append(members, m)
		go func() {
			defer close(m.done)
			for !session(m) {
				restarts.Add(1)
			}
		}()
		return m
	}
	stop := func(m *member) {
		select {
		case <-m.stop:
		default:
			close(m.stop)
		}
		<-m.done
	}
	defer func() {
		// On a failure midway: End gives up on a cancelled context.
		stopping.Store(true)
		cancel()
		for _, m := range members {
			stop(m)
		}
	}()

	pipelineStart := time.Now()
	const pipelineLimit = 120 * time.Second
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if time.Since(pipelineStart) > pipelineLimit || ctx.Err() != nil {
				t.Fatalf("%s: not reached %v into the pipeline; %d records committed, %d transactions aborted, %d sessions reopened",
					what, time.Since(pipelineStart).Round(time.Second), progress.Load(), aborted.Load(), restarts.Load())
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%v: %s (%d records committed)", time.Since(pipelineStart).Round(100*time.Millisecond), what, progress.Load())
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.writeAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)

	// 1. A rebalance: b joins while a is working, then a leaves.
	a := start("a")
	waitFor("a alone", func() bool { return progress.Load() >= 400 })
	budget.Store(1400)
	b := start("b")
	waitFor("b joined and committed", func() bool { return b.txns.Load() > 0 && progress.Load() >= 900 })
	budget.Store(1800)
	stop(a)
	t.Logf("a left after %d records in %d transactions", a.committed.Load(), a.txns.Load())
	bBefore := b.committed.Load()
	waitFor("b alone", func() bool { return b.committed.Load() >= bBefore+200 })

	// 2. kill -9 the write broker coordinating b's transactional id.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorType = "eos-b", 1
	fr, err := fc.RequestWith(ctx, admin)
	if err != nil || fr.ErrorCode != 0 || fr.NodeID < 1 || fr.NodeID > 3 {
		t.Fatalf("FindCoordinator eos-b: %v %+v", err, fr)
	}
	coord := fr.NodeID
	// Killed in PrepareCommit if caught there within 15 s (the decision
	// is written, the markers and the offsets are the next owner's to
	// finish), else in whatever state it was last seen.
	budget.Store(2300)
	state := "?"
	for dl := time.Now().Add(15 * time.Second); time.Now().Before(dl); {
		if ds, err := adm.DescribeTransactions(ctx, "eos-b"); err == nil && ds["eos-b"].Err == nil {
			state = ds["eos-b"].State
			if state == "PrepareCommit" {
				break
			}
		}
	}
	at := progress.Load()
	c.writers[coord-1].kill()
	t.Logf("killed write broker %d, the coordinator of eos-b (transaction %s just before)", coord, state)
	waitFor("b goes on without its coordinator", func() bool { return progress.Load() >= at+300 })
	c.writers[coord-1].start(t)
	waitReady(t, c.writers[coord-1].admin, 60*time.Second)
	waitFor("coordinator restarted", func() bool { return true })

	// And kill -9 the read broker coordinating the group, which holds
	// the transactions' offsets pending until their commit.
	gfc := kmsg.NewPtrFindCoordinatorRequest()
	gfc.CoordinatorKey, gfc.CoordinatorType = group, 0
	gfr, err := gfc.RequestWith(ctx, admin)
	if err != nil || gfr.ErrorCode != 0 || gfr.NodeID < 4 {
		t.Fatalf("FindCoordinator group: %v %+v", err, gfr)
	}
	at = progress.Load()
	c.readers[gfr.NodeID-4].kill()
	t.Logf("killed read broker %d, the coordinator of %s", gfr.NodeID, group)
	waitFor("b goes on without its group coordinator", func() bool { return progress.Load() >= at+300 })
	c.readers[gfr.NodeID-4].start(t)
	waitReady(t, c.readers[gfr.NodeID-4].admin, 60*time.Second)

	// 3. kill -9 the leader of an output partition: one that is not
	// eos-b's coordinator (which may be the restarted broker again), so
	// that this is a fault of its own.
	if fr, err = fc.RequestWith(ctx, admin); err != nil || fr.ErrorCode != 0 {
		t.Fatalf("FindCoordinator eos-b: %v %+v", err, fr)
	}
	leaders := waitLeaders(t, adm, out, parts)
	// The victim: an output partition another broker leads whose input
	// still holds the most records. A key goes to the same partition of
	// both topics, so an output partition whose input partition was read
	// to its end takes no more writes, and the wait below could not end.
	victim, most := int32(0), int64(-1)
	inMu.Lock()
	routeMu.Lock()
	for p := range int32(parts) {
		if left := inEnds[p] - int64(outWrites[p]); leaders[p] != fr.NodeID && left > most {
			victim, most = p, left
		}
	}
	routeMu.Unlock()
	inMu.Unlock()
	leader := leaders[victim]
	if leader == fr.NodeID {
		t.Logf("write broker %d leads every output partition and coordinates eos-b", leader)
	}
	budget.Store(2950)
	at = progress.Load()
	routeMu.Lock()
	written := outWrites[victim]
	routeMu.Unlock()
	c.writers[leader-1].kill()
	t.Logf("killed write broker %d, leader of %s/%d (leaders %v; eos-b's coordinator %d)", leader, out, victim, leaders, fr.NodeID)
	waitFor("b goes on without the output leader, the partition at a new one", func() bool {
		routeMu.Lock()
		defer routeMu.Unlock()
		return progress.Load() >= at+300 && outWrites[victim] > written
	})
	c.writers[leader-1].start(t)
	waitReady(t, c.writers[leader-1].admin, 60*time.Second)
	budget.Store(1 << 62)

	// Done when the group's committed offsets are the input's ends.
	reader, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var offs map[int32]int64
	waitFor("every input offset committed", func() bool {
		octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := kadm.NewClient(reader).FetchOffsets(octx, group)
		ocancel()
		if err != nil {
			return false
		}
		offs = map[int32]int64{}
		resp.Each(func(o kadm.OffsetResponse) {
			if o.Topic == in && o.Err == nil {
				offs[o.Partition] = o.At
			}
		})
		return fmt.Sprint(offs) == fmt.Sprint(inEnds)
	})
	stopping.Store(true)
	stop(b)
	t.Logf("pipeline: %d records committed by a (%d) and b (%d), %d transactions aborted on purpose and %d otherwise, %d sessions reopened, in %v",
		progress.Load(), a.committed.Load(), b.committed.Load(), planned.Load(), aborted.Load(), restarts.Load(), time.Since(pipelineStart).Round(100*time.Millisecond))
	if planned.Load() == 0 {
		t.Errorf("no transaction was aborted on purpose")
	}

	routeMu.Lock()
	t.Logf("pipeline fetched records from %v, produced records to %v (by node)", fetchedFrom, producedTo)
	for node := range fetchedFrom {
		if node <= 3 {
			t.Errorf("the pipeline fetched %d records from write broker %d; want the read brokers only", fetchedFrom[node], node)
		}
	}
	for node := range producedTo {
		if node > 3 {
			t.Errorf("the pipeline produced %d records to read broker %d; want the write brokers only", producedTo[node], node)
		}
	}
	routeMu.Unlock()

	// The check: read_committed from the read view.
	type outRec struct {
		seq  int
		key  string
		in   pos
		part int32
		off  int64
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.readAddrs...), kgo.ConsumeTopics(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var recs []outRec
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	for quiet := 0; quiet < 3 && rctx.Err() == nil; {
		pctx, pcancel := context.WithTimeout(rctx, time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		got := 0
		fs.EachRecord(func(r *kgo.Record) {
			got++
			f := strings.Split(string(r.Value), "|")
			var o outRec
			var e1, e2, e3 error
			if len(f) == 3 {
				o.seq, e1 = strconv.Atoi(f[0])
				var p int
				p, e2 = strconv.Atoi(f[1])
				o.in.part = int32(p)
				o.in.off, e3 = strconv.ParseInt(f[2], 10, 64)
			}
			if len(f) != 3 || e1 != nil || e2 != nil || e3 != nil || o.seq < 0 || o.seq >= n {
				t.Errorf("output %d/%d: value %q is no transformed input record", r.Partition, r.Offset, r.Value)
				return
			}
			o.key, o.part, o.off = string(r.Key), r.Partition, r.Offset
			recs = append(recs, o)
		})
		if got == 0 && len(recs) >= n {
			quiet++
		}
	}

	seen := make([][]outRec, n)
	for _, o := range recs {
		seen[o.seq] = append(seen[o.seq], o)
		if want := fmt.Sprintf("k%02d", o.seq%keys); o.key != want || o.in != inputs[o.seq] {
			t.Errorf("output %d/%d: input %05d as key %s read at %v; it is key %s at %v", o.part, o.off, o.seq, o.key, o.in, want, inputs[o.seq])
		}
	}
	var missing []string
	var dups []string
	for seq, s := range seen {
		switch {
		case len(s) == 0:
			missing = append(missing, fmt.Sprintf("%05d (input %d/%d)", seq, inputs[seq].part, inputs[seq].off))
		case len(s) > 1:
			var at []string
			for _, o := range s {
				at = append(at, fmt.Sprintf("%d/%d", o.part, o.off))
			}
			dups = append(dups, fmt.Sprintf("%05d at %s", seq, strings.Join(at, ", ")))
		}
	}
	show := func(l []string) string {
		if len(l) > 40 {
			return strings.Join(l[:40], "; ") + fmt.Sprintf("; and %d more", len(l)-40)
		}
		return strings.Join(l, "; ")
	}
	if len(missing) > 0 {
		t.Errorf("%d input records missing from the committed output: %s", len(missing), show(missing))
	}
	if len(dups) > 0 {
		t.Errorf("%d input records in the committed output more than once: %s", len(dups), show(dups))
	}
	// Each key's records in input order: by output partition and offset,
	// each key's sequence numbers rise.
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].part != recs[j].part {
			return recs[i].part < recs[j].part
		}
		return recs[i].off < recs[j].off
	})
	last := map[string]outRec{}
	var disorder []string
	for _, o := range recs {
		if p, ok := last[o.key]; ok && o.seq <= p.seq {
			disorder = append(disorder, fmt.Sprintf("key %s: %05d at %d/%d after %05d at %d/%d", o.key, o.seq, o.part, o.off, p.seq, p.part, p.off))
		}
		last[o.key] = o
	}
	if len(disorder) > 0 {
		t.Errorf("%d output records out of their key's input order: %s", len(disorder), show(disorder))
	}
	t.Logf("committed output: %d records, %d missing, %d duplicated, %d out of order", len(recs), len(missing), len(dups), len(disorder))
}
