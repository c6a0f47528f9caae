package compat

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKill9LosesNoAckedRecord runs several idempotent acks=all kgo producers
// against a 4-partition topic, SIGKILLs the broker mid-stream, restarts it on
// the same data dir, lets the producers carry on for a while (three times:
// SIGKILL, SIGTERM under load, SIGKILL again), then reads
// everything back. Every acknowledged record (before or after the kill) must
// be there exactly once, at the offset it was acknowledged with; each
// producer's acknowledged records keep their order within a partition.
// Unacknowledged records may or may not be there.
func TestKill9LosesNoAckedRecord(t *testing.T) {
	t.Parallel()
	const (
		topic             = "durable"
		partitions        = 4
		producers         = 4
		maxPerProd        = 200_000 // bound on the records one producer sends
		ackedBeforeKill   = 20_000
		ackedAfterRestart = 10_000
	)
	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	createTopic(cctx, t, adm, topic, partitions, nil)
	ccancel()

	type ack struct {
		seq       int
		partition int32
		offset    int64
		err       error
	}
	var (
		mu      sync.Mutex
		results = make([][]ack, producers) // per producer, in callback order
		sent    atomic.Int64
		acked   atomic.Int64
		failed  atomic.Int64
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	// How the broker is stopped mid-stream, in order: a crash, a clean stop
	// under load (SIGTERM must still exit 0 and lose nothing acknowledged),
	// and a crash of a log that has been through both.
	stops := []string{"SIGKILL", "SIGTERM", "SIGKILL"}
	// abort fails whatever is still buffered if the broker never recovers;
	// it is not cancelled on the normal path, so no record is failed by us.
	abortCtx, abort := context.WithCancel(context.Background())
	defer abort()
	value := func(p, seq int) string { return fmt.Sprintf("producer-%d-seq-%08d", p, seq) }

	clients := make([]*kgo.Client, producers)
	for p := 0; p < producers; p++ {
		clients[p] = newClient(t, b.KafkaAddr) // default producer: idempotent, acks=all
		wg.Add(1)
		go func(p int, cl *kgo.Client) {
			defer wg.Done()
			for seq := 0; seq < maxPerProd && !stop.Load() && abortCtx.Err() == nil; seq++ {
				r := &kgo.Record{
					Topic: topic,
					Key:   fmt.Appendf(nil, "key-%d-%08d", p, seq),
					Value: []byte(value(p, seq)),
				}
				sent.Add(1)
				cl.Produce(abortCtx, r, func(r *kgo.Record, err error) {
					if err == nil {
						acked.Add(1)
					} else {
						failed.Add(1)
					}
					mu.Lock()
					results[p] = append(results[p], ack{seq, r.Partition, r.Offset, err})
					mu.Unlock()
				})
			}
		}(p, clients[p])
	}

	waitAcked := func(target int64, within time.Duration) bool {
		deadline := time.Now().Add(within)
		for acked.Load() < target {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(5 * time.Millisecond)
		}
		return true
	}

	if !waitAcked(ackedBeforeKill, 60*time.Second) {
		stop.Store(true)
		abort()
		wg.Wait()
		t.Fatalf("only %d records acknowledged (%d failed) in 60s before the kill", acked.Load(), failed.Load())
	}
	for cycle := 1; cycle <= len(stops); cycle++ {
		how := stops[cycle-1]
		if how == "SIGKILL" {
			b.Kill()
		} else if err := b.Stop(); err != nil { // under load: must still exit cleanly
			t.Errorf("stop #%d: %v", cycle, err)
		}
		atKill := acked.Load()
		t.Logf("stop #%d: %s with %d records acknowledged and %d handed to the clients but not yet answered",
			cycle, how, atKill, sent.Load()-atKill-failed.Load())
		time.Sleep(300 * time.Millisecond)
		b.Restart()
		if !waitAcked(atKill+ackedAfterRestart, 60*time.Second) {
			t.Errorf("stop #%d: producers made little progress after the restart: %d acknowledged in all (%d at the kill), %d failed",
				cycle, acked.Load(), atKill, failed.Load())
			break
		}
	}
	stop.Store(true)

	// Wait for the produce loops and for every record to be answered.
	loopsDone := make(chan struct{})
	go func() { wg.Wait(); close(loopsDone) }()
	select {
	case <-loopsDone:
	case <-time.After(30 * time.Second):
		t.Errorf("produce loops still blocked 30s after stopping; aborting buffered records")
		abort()
		<-loopsDone
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	for p, cl := range clients {
		if err := cl.Flush(fctx); err != nil {
			t.Errorf("producer %d: flush: %v; closing it, which fails what is still buffered", p, err)
			abort()
		}
	}
	fcancel()
	for _, cl := range clients {
		cl.Close() // answers anything left with an error
	}
	t.Logf("acknowledged %d, failed %d", acked.Load(), failed.Load())

	// Collect the acknowledged records and check what the acks themselves say.
	type pos struct {
		partition int32
		offset    int64
	}
	ackedAt := map[string]pos{}
	byPos := map[pos]string{}
	errCounts := map[string]int{}
	mu.Lock()
	for p, rs := range results {
		sort.Slice(rs, func(i, j int) bool { return rs[i].seq < rs[j].seq })
		last := map[int32]int64{}
		for _, a := range rs {
			if a.err != nil {
				errCounts[a.err.Error()]++
				continue
			}
			v := value(p, a.seq)
			at := pos{a.partition, a.offset}
			if prev, ok := byPos[at]; ok {
				t.Errorf("two records acknowledged at partition %d offset %d: %s and %s", at.partition, at.offset, prev, v)
			}
			byPos[at] = v
			ackedAt[v] = at
			if l, ok := last[a.partition]; ok && a.offset <= l {
				t.Errorf("producer %d: seq %d acknowledged at %d/%d, not after its previous record in that partition (offset %d)",
					p, a.seq, a.partition, a.offset, l)
			}
			last[a.partition] = a.offset
		}
	}
	mu.Unlock()
	if len(errCounts) > 0 {
		t.Logf("produce errors (records not acknowledged, allowed): %v", errCounts)
	}

	// Read everything back.
	lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
	ends := endOffsets(lctx, t, adm, topic)
	lcancel()
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer rcancel()
	got := consumeAll(rctx, t, b.KafkaAddr, topic, ends)

	count := map[string]int{}
	foundAt := map[string][]pos{}
	total := 0
	for p, rs := range got {
		prev := int64(-1)
		for _, r := range rs {
			total++
			if r.Offset <= prev {
				t.Errorf("partition %d: offset %d read after %d", p, r.Offset, prev)
			}
			prev = r.Offset
			v := string(r.Value)
			count[v]++
			foundAt[v] = append(foundAt[v], pos{p, r.Offset})
		}
	}
	lost, dups, moved, unackedDups := 0, 0, 0, 0
	report := func(format string, args ...any) {
		if lost+dups+moved <= 20 {
			t.Errorf(format, args...)
		}
	}
	for v, at := range ackedAt {
		switch c := count[v]; {
		case c == 0:
			lost++
			report("acknowledged record %s (partition %d offset %d) is missing", v, at.partition, at.offset)
		case c > 1:
			dups++
			report("acknowledged record %s (acknowledged at %d/%d) is in the log %d times, at %v", v, at.partition, at.offset, c, foundAt[v])
		case foundAt[v][0] != at:
			moved++
			report("acknowledged record %s: acknowledged at %d/%d, read at %d/%d", v, at.partition, at.offset, foundAt[v][0].partition, foundAt[v][0].offset)
		}
	}
	for v, c := range count {
		if _, ok := ackedAt[v]; !ok && c > 1 {
			unackedDups++
		}
	}
	t.Logf("read %d records; %d acknowledged: %d lost, %d duplicated, %d at another offset; %d unacknowledged records duplicated",
		total, len(ackedAt), lost, dups, moved, unackedDups)
	if lost+dups+moved > 0 {
		t.Errorf("durability violated: %d lost, %d duplicated, %d moved of %d acknowledged records", lost, dups, moved, len(ackedAt))
	}
}
