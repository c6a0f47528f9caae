package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/partition"
)

// TestRaftIntervalFsyncNoElections: with log.fsync=interval every append
// waits up to a flush interval to be durable. 100 busy partitions on 3
// voters must keep their leaders, their followers in sync and their write
// latency near the flush interval: no raft worker may hold a group while
// its fsync is pending. A pool that waits for each group's fsync in turn
// (4 workers, 100 groups) releases 4 groups per flush round: followers
// fall behind by seconds, leave the ISR, and acks=all writes wait many
// intervals. (Such a starved group does not elect: it is owed at most
// maxTicks per round, so its clock slows down with it; the terms are
// checked all the same.)
func TestRaftIntervalFsyncNoElections(t *testing.T) {
	const (
		interval = 300 * time.Millisecond
		load     = 6 * time.Second
	)
	begin := time.Now()
	partitions, every := 100, 20*time.Millisecond
	if raceEnabled {
		// The race detector's cost on a small machine: electing 300
		// replicas alone takes half a minute.
		partitions, every = 40, 50*time.Millisecond
	}
	net := NewMemNetwork(uint64(time.Now().UnixNano()))
	root := t.TempDir()
	voters := []NodeID{1, 2, 3}
	keys := make([]Key, partitions)
	for i := range keys {
		keys[i] = Key{TopicID: [16]byte{9, 9}, Index: int32(i)}
	}
	var termChanges sync.Map // Key -> []uint64 terms seen by OnLeaderChange
	hosts := map[NodeID]*Host{}
	reps := map[NodeID][]*Replica{}
	for _, n := range voters {
		f := log.NewFlusher(log.FlusherConfig{Policy: log.FlushInterval, Interval: interval, Logger: testLogger(t)})
		f.Start()
		t.Cleanup(func() { f.Close() })
		h, err := NewHost(HostConfig{
			Node:           n,
			Dir:            filepath.Join(root, fmt.Sprint("node", n)),
			Transport:      net.Transport(n),
			Flusher:        f,
			Logger:         testLogger(t),
			Workers:        4,
			TickInterval:   10 * time.Millisecond,
			ElectionTicks:  100, // 1-2s: 3-6 flush intervals
			HeartbeatTicks: 5,
			MaxFollowerLag: 2 * time.Second,
			Assigned:       func(Key, NodeID) bool { return true },
			OnLeaderChange: func(k Key, _ NodeID, term uint64) {
				v, _ := termChanges.LoadOrStore(k, &termLog{})
				v.(*termLog).add(term)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		hosts[n] = h
		for _, k := range keys {
			r, err := h.Open("t", k, Members{Voters: voters}, ReplicaOptions{Mode: ModeRaft, Log: smallLogConfig()})
			if err != nil {
				t.Fatal(err)
			}
			reps[n] = append(reps[n], r)
		}
	}
	// Every group elected and known to every member.
	leaders := make([]*Replica, partitions)
	checkFor(t, 20*time.Second, func() error {
		for i := range keys {
			var l *Replica
			for _, n := range voters {
				r := reps[n][i]
				if r.IsLeader() {
					l = r
				}
			}
			if l == nil {
				return fmt.Errorf("partition %d has no leader", i)
			}
			for _, n := range voters {
				if r := reps[n][i]; r.Leader() != l.host.cfg.Node || r.Term() != l.Term() {
					return fmt.Errorf("partition %d: node %d follows %d in term %d, leader %d in term %d", i, n, r.Leader(), r.Term(), l.host.cfg.Node, l.Term())
				}
			}
			leaders[i] = l
		}
		return nil
	})
	t.Logf("%d groups elected in %v", partitions, time.Since(begin))
	terms := make([]uint64, partitions)
	for i, l := range leaders {
		terms[i] = l.Term()
	}

	// Load: a small acks=all batch to every partition every 20ms. A
	// watcher per partition times each write's answer (they are answered
	// in order) and the leaders' ISR is sampled.
	type sent struct {
		p  partition.Proposal
		at time.Time
	}
	queues := make([]chan sent, partitions)
	var (
		wg       sync.WaitGroup
		statMu   sync.Mutex
		worst    time.Duration
		failed   int
		firstErr error
		total    int
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range queues {
		queues[i] = make(chan sent, 4096)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range queues[i] {
				_, err := s.p.Wait(ctx)
				d := time.Since(s.at)
				statMu.Lock()
				total++
				worst = max(worst, d)
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				}
				statMu.Unlock()
			}
		}()
	}
	minISR := len(voters)
	stop := time.Now().Add(load)
	for seq := 0; time.Now().Before(stop); seq++ {
		for i, l := range leaders {
			p, err := l.Propose(testBatch(fmt.Sprintf("p%d-%d", i, seq), 2, -1, 0, 0), AcksAll)
			if err != nil {
				if errors.Is(err, ErrBusy) {
					continue
				}
				t.Fatalf("partition %d: propose: %v", i, err)
			}
			queues[i] <- sent{p, time.Now()}
			if seq%10 == 0 {
				minISR = min(minISR, l.InSyncVoters())
			}
		}
		time.Sleep(every)
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()

	changed := 0
	for i := range keys {
		for _, n := range voters {
			if got := reps[n][i].Term(); got != terms[i] {
				changed++
				t.Errorf("partition %d: node %d in term %d, was %d: an election under load", i, n, got, terms[i])
				break
			}
		}
		if v, ok := termChanges.Load(keys[i]); ok {
			if ts := v.(*termLog).after(terms[i]); len(ts) > 0 {
				t.Errorf("partition %d: terms %v after %d", i, ts, terms[i])
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d writes failed, first: %v", failed, total, firstErr)
	}
	// A follower acknowledges within about a flush interval; one stuck
	// behind other groups' fsyncs falls out of the ISR (MaxFollowerLag)
	// and its writes wait for many intervals.
	if minISR < len(voters) {
		t.Errorf("a leader counted %d voters in sync under load, want %d", minISR, len(voters))
	}
	if limit := 10 * interval; worst > limit {
		t.Errorf("slowest acks=all write answered after %v, want under %v", worst, limit)
	}
	for i, l := range leaders {
		if l.HighWatermark() == 0 {
			t.Errorf("partition %d committed nothing", i)
		}
	}
	t.Logf("%d writes to %d partitions in %v: slowest answered in %v, fewest voters in sync %d, %d elections after the first", total, partitions, load, worst, minISR, changed)
}

// termLog records the terms a host reported for one group.
type termLog struct {
	mu    sync.Mutex
	terms []uint64
}

func (l *termLog) add(t uint64) {
	l.mu.Lock()
	l.terms = append(l.terms, t)
	l.mu.Unlock()
}

func (l *termLog) after(t uint64) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []uint64
	for _, x := range l.terms {
		if x > t {
			out = append(out, x)
		}
	}
	return out
}
