package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/metastore"
)

// These tests run the real binary: they build it once into a temp dir.

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bin")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "sluice")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building sluice: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// skipMissing ends a test that needs something this machine lacks (root, a
// tool): a failure under CI=true, otherwise a skip appended to the file
// SLUICE_SKIP_FILE names, which `make test` lists at the end.
func skipMissing(t *testing.T, what string) {
	t.Helper()
	noteMissing(t, what)
	t.Skip(what)
}

// noteMissing records a check that a test leaves out because this machine
// lacks what it needs, as skipMissing does, and lets the test go on.
func noteMissing(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true, so this is a failure)", what)
	}
	if name := os.Getenv("SLUICE_SKIP_FILE"); name != "" {
		if f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%s: %s\n", t.Name(), what)
			f.Close()
		}
	}
	t.Log(what)
}

// freePorts returns n loopback ports free now, below the kernel's
// ephemeral range: a port picked from that range (listening on port 0)
// may be taken by any outgoing connection before the process under test
// binds it. Ports are never handed out twice in one test process.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	lo := ephemeralLow()
	for tries := 0; len(ports) < n && lo > portsFrom+1000 && tries < 100*n; tries++ {
		p := portsFrom + rand.IntN(lo-portsFrom)
		if portsGiven[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		lns = append(lns, ln)
		portsGiven[p] = true
		ports = append(ports, p)
	}
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

const portsFrom = 20000

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range (Linux;
// 32768 where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return 32768
	}
	return lo
}

type metaProc struct {
	id    int
	cfg   string
	admin string
	cmd   *exec.Cmd
	log   *os.File
}

func (p *metaProc) start(t *testing.T) {
	t.Helper()
	p.cmd = exec.Command(binPath, "serve", "--config", p.cfg)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

func (p *metaProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
		p.cmd = nil
	}
}

func metaStatus(admin string) (leader uint64, err error) {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + admin + "/meta/status")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct{ Leader uint64 }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, err
	}
	return st.Leader, nil
}

// TestMetaQuorumSurvivesLeaderKill starts three meta processes, commits
// offsets from concurrent clients, SIGKILLs the leader mid-stream and
// checks that a new leader serves within a few seconds and that every
// acknowledged commit is there, including after the old leader rejoins.
func TestMetaQuorumSurvivesLeaderKill(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("real processes; runs in full mode and in CI")
	}
	dir := t.TempDir()
	ports := freePorts(t, 6)
	peers := fmt.Sprintf(`["1=127.0.0.1:%d", "2=127.0.0.1:%d", "3=127.0.0.1:%d"]`, ports[0], ports[1], ports[2])
	var procs []*metaProc
	var addrs []string
	for i := 1; i <= 3; i++ {
		cfg := filepath.Join(dir, fmt.Sprintf("meta-%d.yaml", i))
		admin := fmt.Sprintf("127.0.0.1:%d", ports[2+i])
		body := fmt.Sprintf("node.id: %d\nprocess.roles: [meta]\ndata.dir: %s\nadmin.addr: %s\nmeta.id: %d\nmeta.listen: 127.0.0.1:%d\nmeta.peers: %s\nlisteners: []\nlog.format: json\n",
			100+i, filepath.Join(dir, fmt.Sprint("data-", i)), admin, i, ports[i-1], peers)
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		lf, err := os.Create(filepath.Join(dir, fmt.Sprintf("meta-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		p := &metaProc{id: i, cfg: cfg, admin: admin, log: lf}
		p.start(t)
		procs = append(procs, p)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", ports[i-1]))
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.kill()
		}
		if t.Failed() {
			for _, p := range procs {
				b, _ := os.ReadFile(p.log.Name())
				t.Logf("meta-%d log tail:\n%s", p.id, tail(b, 3000))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := metastore.Dial(ctx, metastore.ClientConfig{Addrs: addrs, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	leader := waitLeader(t, procs, 0)
	const writers = 4
	var mu sync.Mutex
	acked := make(map[int32]int64) // partition -> highest acknowledged offset
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for off := int64(1); ; off++ {
				select {
				case <-stop:
					return
				default:
				}
				cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
				err := cl.CommitOffsets(cctx, metastore.Fence{}, "g", []metastore.OffsetCommit{{
					TopicPartition: metastore.TopicPartition{Topic: "t", Partition: int32(w)}, Offset: off, LeaderEpoch: -1,
				}})
				ccancel()
				if err != nil {
					off-- // not acknowledged: retry the same offset
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				acked[int32(w)] = off
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(time.Second)
	killedAt := time.Now()
	procs[leader-1].kill()
	newLeader := waitLeader(t, procs, leader)
	t.Logf("killed leader %d; new leader %d after %v", leader, newLeader, time.Since(killedAt).Round(time.Millisecond))
	if d := time.Since(killedAt); d > 10*time.Second {
		t.Errorf("new leader took %v", d)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	procs[leader-1].start(t) // the old leader rejoins from its disk

	check := func() {
		got, err := cl.FetchOffsets(ctx, "g", nil)
		if err != nil {
			t.Fatal(err)
		}
		have := make(map[int32]int64)
		for _, o := range got {
			have[o.Partition] = o.Offset
		}
		mu.Lock()
		defer mu.Unlock()
		for p, off := range acked {
			if have[p] < off {
				t.Errorf("partition %d: acknowledged commit %d, stored %d", p, off, have[p])
			}
		}
	}
	check()
	waitLeader(t, procs, 0)
	check()
}

func waitLeader(t *testing.T, procs []*metaProc, not uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range procs {
			if p.cmd == nil {
				continue
			}
			if l, err := metaStatus(p.admin); err == nil && l != 0 && l != not {
				return l
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no leader")
	return 0
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
