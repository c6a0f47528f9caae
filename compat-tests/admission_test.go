package compat

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// Connection admission under attack: stalled frames, thousands of idle
// connections, and a broker out of file descriptors. In each the broker
// must keep serving a real client, close what the attack left behind on
// its own, and report its peak RSS (VmHWM) so that a regression in the
// memory an attack can pin shows up in the test log.

// TestStalledFramesDoNotStall: connections that each announce a large
// request and send 4 bytes of it must not stop other clients: a franz-go
// client's Metadata and a produce/consume round trip complete within a
// second, and the stalled connections are closed after
// socket.request.timeout.ms. Half announce 100 MiB
// (socket.request.max.bytes), half 10 MiB, a size the broker may give its
// whole buffer up front (up to an eighth of queued.max.request.bytes, ten
// such frames at a time) before its bytes arrive.
func TestStalledFramesDoNotStall(t *testing.T) {
	const stalledConns = 24
	b := startBroker(t, "--set", "socket.request.timeout.ms=2000")
	before := vmHWM(t, b)
	var stalled []net.Conn
	for i := 0; i < stalledConns; i++ {
		size := int32(100 << 20)
		if i%2 == 1 {
			size = 10 << 20
		}
		c, err := dialTimeout(b.KafkaAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(sizePrefixed(size, []byte{0, 3, 0, 1})); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, c)
	}
	sent := time.Now()
	time.Sleep(100 * time.Millisecond) // the broker has read the prefixes

	roundTrip(t, b.KafkaAddr, "stalled-frames", time.Second)

	for i, c := range stalled {
		c.SetReadDeadline(sent.Add(10 * time.Second))
		_, err := c.Read(make([]byte, 1))
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("stalled connection %d: read %v, want it closed by the broker", i, err)
		}
	}
	took := time.Since(sent)
	if took < 1500*time.Millisecond {
		t.Errorf("stalled connections closed after %v, before socket.request.timeout.ms=2000", took)
	}
	t.Logf("%d stalled frames closed after %v; broker VmHWM %d MiB before, %d MiB after",
		stalledConns, took.Round(10*time.Millisecond), before>>20, vmHWM(t, b)>>20)
	requireHealthy(t, b)
}

// TestTricklingFramesDoNotStall: two connections each announce a 100 MiB
// request (socket.request.max.bytes, all of queued.max.request.bytes),
// send about 50 MiB of it and then one byte every 400 ms. They never stall
// for queued.max.request.stall.ms, so before
// queued.max.request.bytes.per.connection and
// queued.min.request.bytes.per.second they filled the budget between them
// and every other client waited for socket.request.timeout.ms (30 s).
// Now a franz-go client's produce and fetch complete within a second
// while they trickle, a 40 MiB produce (more than a connection's cap,
// so it waits for the frame past the bound) completes within a few, and
// the trickling frames that kept it waiting are closed and counted.
func TestTricklingFramesDoNotStall(t *testing.T) {
	const (
		announced = 100 << 20
		sent      = 50 << 20
	)
	b := startBroker(t, "--set", "message.max.bytes=67108864")
	before := vmHWM(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var trickling []net.Conn
	inFull := make(chan int, 2) // a connection whose 50 MiB the broker took
	for i := range 2 {
		c, err := dialTimeout(b.KafkaAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		trickling = append(trickling, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := make([]byte, sent)
			copy(body, []byte{0, 0, 0, 9}) // Produce v9, correlation id follows
			if _, err := c.Write(sizePrefixed(announced, body)); err != nil {
				return
			}
			inFull <- i
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(400 * time.Millisecond):
				}
				if _, err := c.Write([]byte{0}); err != nil {
					return // closed by the broker
				}
			}
		}()
	}
	// One frame is read whole before the other's: by then both hold
	// their share of the budget (the other one its cap, waiting).
	select {
	case <-inFull:
	case <-time.After(30 * time.Second):
		t.Fatal("the broker did not read 50 MiB of either frame in 30 s")
	}
	time.Sleep(200 * time.Millisecond)
	attack := time.Now()

	roundTrip(t, b.KafkaAddr, "trickling-frames", time.Second)

	big := newClient(t, b.KafkaAddr, kgo.DefaultProduceTopic("trickling-frames"),
		kgo.ProducerBatchMaxBytes(64<<20), kgo.MaxBufferedBytes(128<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer pcancel()
	start := time.Now()
	if err := big.ProduceSync(pctx, &kgo.Record{Value: make([]byte, 40<<20)}).FirstErr(); err != nil {
		t.Fatalf("a 40 MiB produce beside the trickling frames: %v", err)
	}
	took := time.Since(start)
	if took > 5*time.Second {
		t.Errorf("a 40 MiB produce took %v beside the trickling frames", took)
	}
	closed := 0
	for _, c := range trickling {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			closed++
		}
	}
	slow := metricValue(t, b, `sluice_connections_dropped_total{reason="slow_frame"}`)
	if closed == 0 || slow < float64(closed) {
		t.Errorf("%d trickling connections closed, sluice_connections_dropped_total{reason=\"slow_frame\"} = %v; want at least one closed and each counted", closed, slow)
	}
	if n := metricValue(t, b, `sluice_connections_dropped_total{reason="request_timeout"}`); n != 0 {
		t.Errorf("%v connections closed by socket.request.timeout.ms: the rate, not the timeout, must close them", n)
	}
	t.Logf("a 40 MiB produce took %v; %d trickling connections closed %v after the attack began; broker VmHWM %d MiB before, %d MiB after",
		took.Round(time.Millisecond), closed, time.Since(attack).Round(10*time.Millisecond), before>>20, vmHWM(t, b)>>20)
	requireHealthy(t, b)
}

// TestThousandsOfIdleConnections: 3,000 connections that send nothing, from
// three loopback addresses, plus more than max.connections.per.ip allows.
// The excess is closed at once, a real client is still served within a
// second, and the idle connections are closed after connections.max.idle.ms.
func TestThousandsOfIdleConnections(t *testing.T) {
	const (
		perIP   = 1000
		idleMs  = 6000
		sources = 3
	)
	b := startBroker(t,
		"--set", "connections.max.idle.ms="+strconv.Itoa(idleMs),
		"--set", "max.connections.per.ip="+strconv.Itoa(perIP),
		"--set", "max.connections.per.ip.overrides=127.0.0.9:5")
	before := vmHWM(t, b)
	start := time.Now()
	var idle []net.Conn
	for s := 0; s < sources; s++ {
		src := fmt.Sprintf("127.0.0.%d", s+2)
		for i := 0; i < perIP; i++ {
			idle = append(idle, dialFrom(t, src, b.KafkaAddr))
		}
	}
	opened := time.Since(start)
	// Past the limit, a connection is accepted and closed at once.
	for i := 0; i < 10; i++ {
		expectRefused(t, dialFrom(t, "127.0.0.2", b.KafkaAddr))
	}
	for i := 0; i < 5; i++ {
		expectOpen(t, dialFrom(t, "127.0.0.9", b.KafkaAddr))
	}
	expectRefused(t, dialFrom(t, "127.0.0.9", b.KafkaAddr))
	if n := metricValue(t, b, `sluice_connections{listener="PLAINTEXT",view="mixed"}`); n < sources*perIP {
		t.Errorf("broker has %v connections open, want at least %d", n, sources*perIP)
	}
	if n := metricValue(t, b, `sluice_connections_refused_total{listener="PLAINTEXT"}`); n != 11 {
		t.Errorf("sluice_connections_refused_total = %v, want 11", n)
	}

	roundTrip(t, b.KafkaAddr, "idle-conns", time.Second)

	// Every idle connection is closed by the broker, after the idle time.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var early, open int
	for _, c := range idle {
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			c.SetReadDeadline(start.Add(opened + idleMs*time.Millisecond + 10*time.Second))
			_, err := c.Read(make([]byte, 1))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET):
				open++
			case time.Since(start) < idleMs*time.Millisecond-time.Second:
				early++
			}
		}(c)
	}
	wg.Wait()
	if open > 0 || early > 0 {
		t.Errorf("of %d idle connections, %d still open after connections.max.idle.ms plus 10 s, %d closed early", len(idle), open, early)
	}
	t.Logf("%d connections opened in %v, closed as idle after %v; broker VmHWM %d MiB before, %d MiB after",
		len(idle), opened.Round(time.Millisecond), time.Since(start).Round(10*time.Millisecond), before>>20, vmHWM(t, b)>>20)
	requireHealthy(t, b)
}

// TestMaxConnections: at max.connections the broker stops accepting, as
// Kafka's acceptor blocks: a further client's connection waits unserved
// (in the kernel's backlog) and is served as soon as another one closes.
func TestMaxConnections(t *testing.T) {
	b := startBroker(t, "--set", "max.connections=4")
	var open []*rawConn
	for i := 0; i < 4; i++ {
		c := dialRaw(t, b.KafkaAddr)
		c.apiVersions() // accepted and served
		open = append(open, c)
	}
	waiting := dialRaw(t, b.KafkaAddr) // the handshake completes in the backlog
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	waiting.send(req)
	if _, err := waiting.readFrame(time.Second); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a fifth connection past max.connections=4: %v, want no answer while four are open", err)
	}
	open[0].conn.Close()
	start := time.Now()
	if _, err := waiting.readFrame(5 * time.Second); err != nil {
		t.Fatalf("the waiting connection was not served after one closed: %v", err)
	}
	t.Logf("served %v after a connection closed", time.Since(start).Round(time.Millisecond))
	if n := metricValue(t, b, `sluice_accept_blocked_seconds_total{listener="PLAINTEXT"}`); n < 0.5 {
		t.Errorf("sluice_accept_blocked_seconds_total = %v, want the second it waited", n)
	}
}

// TestDescriptorExhaustion: with its RLIMIT_NOFILE lowered, the broker runs
// out of descriptors accepting connections. /readyz turns 503 while accepts
// fail and the failures are counted; once the connections close, the
// listener accepts again, /readyz is 200 and a real client is served.
func TestDescriptorExhaustion(t *testing.T) {
	b := startBroker(t)
	pid := b.Pid()
	// One kept-alive admin connection: a new one needs a descriptor too.
	admin := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 5 * time.Second}
	if code, _ := httpGet(t, admin, b.AdminAddr, "/readyz"); code != 200 {
		t.Fatalf("readyz %d before the test", code)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	limit := uint64(len(fds) + 20)
	setNofile(t, pid, limit)
	t.Logf("broker has %d descriptors open; RLIMIT_NOFILE set to %d", len(fds), limit)

	var conns []net.Conn
	for i := 0; i < 100; i++ {
		conns = append(conns, dialFrom(t, "127.0.0.1", b.KafkaAddr))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := httpGet(t, admin, b.AdminAddr, "/readyz")
		if code == http.StatusServiceUnavailable {
			t.Logf("readyz while out of descriptors: %d %s", code, strings.TrimSpace(body))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz still %d with the broker out of descriptors", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := metricValue(t, b, `sluice_accept_errors_total{listener="PLAINTEXT"}`); n < 1 {
		t.Errorf("sluice_accept_errors_total = %v while accepts fail", n)
	}
	for _, c := range conns {
		c.Close()
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		code, _ := httpGet(t, admin, b.AdminAddr, "/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz still %d after the connections closed", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	roundTrip(t, b.KafkaAddr, "after-emfile", 5*time.Second)
	t.Logf("broker VmHWM %d MiB", vmHWM(t, b)>>20)
	b.RequireRunning(t)
}

// TestSilentConnectionsShedOutOfDescriptors: connections that never send
// a byte hold every descriptor the broker may open (its RLIMIT_NOFILE
// lowered to what it has open plus 20, then 200 of them dialled, and
// never closed here). An accept failing for want of descriptors closes
// the oldest of them, so a new client behind them in the kernel's
// backlog is served within a second, a connection that has sent a
// request is left open, and the closes are counted.
func TestSilentConnectionsShedOutOfDescriptors(t *testing.T) {
	b := startBroker(t)
	pid := b.Pid()
	// A client that has spoken before the flood: it must not be shed.
	talker := dialFrom(t, "127.0.0.1", b.KafkaAddr)
	talk := func(corr int32) error {
		talker.SetDeadline(time.Now().Add(5 * time.Second))
		req := kmsg.NewPtrApiVersionsRequest()
		if _, err := talker.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)); err != nil {
			return err
		}
		var size [4]byte
		if _, err := io.ReadFull(talker, size[:]); err != nil {
			return err
		}
		_, err := io.CopyN(io.Discard, talker, int64(binary.BigEndian.Uint32(size[:])))
		return err
	}
	if err := talk(1); err != nil {
		t.Fatalf("ApiVersions before the flood: %v", err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	limit := uint64(len(fds) + 20)
	setNofile(t, pid, limit)
	t.Logf("broker has %d descriptors open; RLIMIT_NOFILE set to %d", len(fds), limit)
	for i := 0; i < 200; i++ {
		dialFrom(t, "127.0.0.1", b.KafkaAddr)
	}
	// The new client's connection is behind the 200 in the backlog.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := newClient(t, b.KafkaAddr).Ping(ctx); err != nil {
		t.Fatalf("metadata behind silent connections: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a new client's metadata took %v with silent connections holding the descriptors, want under 1s", took)
	} else {
		t.Logf("a new client's metadata in %v", took.Round(time.Millisecond))
	}
	if err := talk(2); err != nil {
		t.Errorf("the connection that had sent a request was closed: %v", err)
	}
	if n := metricValue(t, b, `sluice_connections_dropped_total{reason="silent"}`); n < 1 {
		t.Errorf(`sluice_connections_dropped_total{reason="silent"} = %v, want the silent connections closed`, n)
	} else {
		t.Logf("%v silent connections closed", n)
	}
	b.RequireRunning(t)
}

// roundTrip checks that a new franz-go client gets Metadata and produces
// and consumes a record on topic within limit (the topic is created on
// the way, so limit covers that too).
func roundTrip(t *testing.T, addr, topic string, limit time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("metadata: %v", err)
	}
	pinged := time.Since(start)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("served")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatalf("consume: %v", err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "served" {
		t.Fatalf("consumed %d records", len(recs))
	}
	took := time.Since(start)
	t.Logf("metadata in %v, produce/consume round trip in %v", pinged.Round(time.Millisecond), took.Round(time.Millisecond))
	if took > limit {
		t.Errorf("a client's metadata and round trip took %v, want under %v", took, limit)
	}
}

// dialFrom connects to addr from the loopback address src (Linux routes all
// of 127/8 to lo), so that one test can be several clients' addresses.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func expectRefused(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("connection from %s past its per-IP limit: read %v, want it closed at once", c.LocalAddr(), err)
	}
}

func expectOpen(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("connection from %s within its per-IP limit: read %v, want it left open", c.LocalAddr(), err)
	}
}

func httpGet(t *testing.T, c *http.Client, addr, path string) (int, string) {
	t.Helper()
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metricValue reads one sample (name with its labels, as exposed) from the
// broker's /metrics; 0 when it is absent.
func metricValue(t *testing.T, b *harness.Broker, sample string) float64 {
	t.Helper()
	_, body := httpGet(t, http.DefaultClient, b.AdminAddr, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", sample, line)
			}
			return f
		}
	}
	return 0
}

// vmHWM is the broker process's peak resident set so far, in bytes.
func vmHWM(t *testing.T, b *harness.Broker) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM: %q", line)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// setNofile sets a running process's RLIMIT_NOFILE (soft and hard) with
// prlimit(2), so that the Go runtime of the broker cannot raise it back.
func setNofile(t *testing.T, pid int, n uint64) {
	t.Helper()
	lim := syscall.Rlimit{Cur: n, Max: n}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&lim)), 0, 0, 0); e != 0 {
		t.Fatalf("prlimit(%d, RLIMIT_NOFILE): %v", pid, e)
	}
}
