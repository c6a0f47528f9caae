package replica

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/log"
)

// TestRaftProduceThroughput measures acks=all produce through raft: three
// hosts in this process over the TCP transport on loopback, each with a
// group-commit Flusher, real fsyncs, 16 partitions led in turn by the three
// hosts, 64 producers each writing 1 KiB batches (10 records) one at a time.
// It logs batches/s and latency percentiles; it asserts nothing about time.
// The raft-wal run uses the log's broker-wide write-ahead log.
//
//	go test ./replica/ -run TestRaftProduceThroughput -v -count=1
func TestRaftProduceThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	for _, mode := range []Mode{ModeRaft, ModeSemiSync, ModeAsync} {
		t.Run(mode.String(), func(t *testing.T) { produceThroughput(t, mode, false) })
	}
	t.Run("raft-wal", func(t *testing.T) { produceThroughput(t, ModeRaft, true) })
}

func produceThroughput(t *testing.T, mode Mode, wal bool) {
	const (
		parts     = 16
		producers = 64
		window    = 3 * time.Second
	)
	root := t.TempDir()
	nodes := []NodeID{1, 2, 3}
	var addrs sync.Map
	var hosts []*Host
	for _, n := range nodes {
		tr, err := NewTCPTransport(TCPConfig{Self: n, Listen: "127.0.0.1:0", Logger: testLogger(t), Resolve: func(id NodeID) string {
			a, _ := addrs.Load(id)
			s, _ := a.(string)
			return s
		}})
		if err != nil {
			t.Fatal(err)
		}
		addrs.Store(n, tr.Addr())
		fc := log.FlusherConfig{Policy: log.FlushGroup}
		if wal {
			fc.Dir = filepath.Join(root, fmt.Sprint("wal", n))
		}
		f, err := log.OpenFlusher(fc)
		if err != nil {
			t.Fatal(err)
		}
		f.Start()
		t.Cleanup(func() { f.Close() })
		h, err := NewHost(HostConfig{Node: n, Dir: filepath.Join(root, fmt.Sprint(n)), Transport: tr, Flusher: f, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	defer func() {
		for _, h := range hosts {
			h.Close()
		}
	}()
	keys := make([]Key, parts)
	for p := range parts {
		keys[p] = Key{TopicID: [16]byte{5}, Index: int32(p)}
		m := Members{Voters: []NodeID{nodes[p%3], nodes[(p+1)%3], nodes[(p+2)%3]}}
		for _, h := range hosts {
			if _, err := h.Open("tp", keys[p], m, ReplicaOptions{Mode: mode, Log: log.DefaultConfig()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	leaderOf := func(p int) *Replica {
		for _, h := range hosts {
			if r, ok := h.Get(keys[p]); ok && r.IsLeader() {
				return r
			}
		}
		return nil
	}
	checkFor(t, 30*time.Second, func() error {
		for p := range parts {
			if leaderOf(p) == nil {
				return fmt.Errorf("partition %d has no leader", p)
			}
		}
		return nil
	})
	batch := testBatch(fmt.Sprintf("%0100d", 0), 10, -1, 0, 0)
	var n atomic.Int64
	lat := make([][]time.Duration, producers)
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r := leaderOf(i % parts)
				if r == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				t0 := time.Now()
				p, err := r.Propose(append([]byte(nil), batch...), AcksAll)
				if err == nil {
					_, err = p.Wait(context.Background())
				}
				if err != nil {
					if !errors.Is(err, ErrNotLeader) {
						t.Error(err)
						return
					}
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) == 0 {
		t.Fatal("nothing produced")
	}
	pct := func(q float64) time.Duration { return all[int(q*float64(len(all)-1))] }
	t.Logf("mode %s (wal %v): %d acks=all batches of %d bytes in %v: %.0f batches/s, %.2f MB/s; latency p50 %v p99 %v max %v",
		mode, wal, n.Load(), len(batch), el.Round(time.Millisecond), float64(n.Load())/el.Seconds(),
		float64(n.Load())*float64(len(batch))/el.Seconds()/1e6, pct(0.5).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), all[len(all)-1].Round(10*time.Microsecond))
}
