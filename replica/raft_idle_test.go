package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestRaftIdleCPU measures what idle partitions cost: three hosts (three
// write brokers) in this process, connected by the TCP transport, each with
// a replica of every partition, all leaders elected and nothing produced.
// It logs the process CPU time over a few seconds; it asserts nothing about
// time. SLUICE_IDLE_PARTITIONS overrides the partition count (1000; 200
// under the race detector).
//
//	go test ./replica/ -run TestRaftIdleCPU -v -count=1
func TestRaftIdleCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: opens thousands of logs")
	}
	parts := 1000
	if raceEnabled {
		// The figure means nothing under the race detector, which also
		// slows elections of 3,000 replicas past the wait below on a
		// loaded machine; the test still opens and elects hundreds.
		parts = 200
	}
	if s := os.Getenv("SLUICE_IDLE_PARTITIONS"); s != "" {
		parts, _ = strconv.Atoi(s)
	}
	// Each replica holds about eight files open (segment, indexes, raft
	// files): three replicas a partition must fit the descriptor limit.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur > 512 {
		if fit := int(lim.Cur-512) / (3 * 8); fit < parts {
			t.Logf("%d partitions instead of %d: the descriptor limit is %d", fit, parts, lim.Cur)
			parts = fit
		}
	}
	nodes := []NodeID{1, 2, 3}
	root := t.TempDir()
	addrs := sync.Map{}
	var hosts []*Host
	for _, n := range nodes {
		tr, err := NewTCPTransport(TCPConfig{
			Self: n, Listen: "127.0.0.1:0", Logger: testLogger(t),
			Resolve: func(id NodeID) string {
				a, _ := addrs.Load(id)
				s, _ := a.(string)
				return s
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		addrs.Store(n, tr.Addr())
		h, err := NewHost(HostConfig{Node: n, Dir: filepath.Join(root, fmt.Sprint("node", n)), Transport: tr, Logger: testLogger(t)})
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
	opened := time.Now()
	opts := ReplicaOptions{Mode: ModeRaft, Log: smallLogConfig()}
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				key := Key{TopicID: [16]byte{9}, Index: int32(p)}
				// Rotate the voter order so the first voters, which
				// campaign, spread the leaders.
				m := Members{Voters: []NodeID{nodes[p%3], nodes[(p+1)%3], nodes[(p+2)%3]}}
				for _, h := range hosts {
					if _, err := h.Open("idle", key, m, opts); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	for p := range parts {
		work <- p
	}
	close(work)
	wg.Wait()
	t.Logf("opened %d partitions x 3 replicas in %v", parts, time.Since(opened))
	checkFor(t, 120*time.Second, func() error {
		leaders := 0
		for _, h := range hosts {
			for _, r := range h.Replicas() {
				if r.IsLeader() {
					leaders++
				}
			}
		}
		if leaders != parts {
			return fmt.Errorf("%d of %d partitions have a leader", leaders, parts)
		}
		return nil
	})
	perHost := make([]int, len(hosts))
	for i, h := range hosts {
		for _, r := range h.Replicas() {
			if r.IsLeader() {
				perHost[i]++
			}
		}
	}
	t.Logf("all %d leaders elected %v after opening; leaders per host %v", parts, time.Since(opened), perHost)
	time.Sleep(2 * time.Second) // let elections' aftermath settle
	const window = 5 * time.Second
	if path := os.Getenv("SLUICE_IDLE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	terms := func() (sum uint64) {
		for _, h := range hosts {
			for _, r := range h.Replicas() {
				sum += r.Term()
			}
		}
		return sum
	}
	t0 := terms()
	c0, w0 := cpuTime(), time.Now()
	time.Sleep(window)
	cpu, wall := cpuTime()-c0, time.Since(w0)
	if d := terms() - t0; d > 0 {
		t.Logf("%d term increments during the window (elections: the machine is too loaded for the timeouts)", d)
	}
	frac := float64(cpu) / float64(wall)
	t.Logf("idle: %d partitions x 3 replicas on 3 hosts in one process: %v CPU in %v wall = %.1f%% of one core in total, %.1f%% per host (tick %v, heartbeat every %d ticks)",
		parts, cpu.Round(time.Millisecond), wall.Round(time.Millisecond), 100*frac, 100*frac/3, 200*time.Millisecond, 2)
}
