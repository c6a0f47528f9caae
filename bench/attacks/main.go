// Command attacks runs each attack of the broker hardening work (issue 13)
// against a fresh `sluice dev` process and prints a table: the broker's
// peak RSS during the attack (VmHWM, and its growth over the RSS before
// the attack), whether a client that connected before the attack and a
// client that connects after it began were served within 1 s of its
// start (for an attack that builds up, such as trickle-frames, every
// answer within 1 s), and the slowest answer either got. `make attacks` builds the
// binary and runs it; it is not part of `make test`.
//
//	go run ./bench/attacks -bin bin/sluice [-hold 5s] [-only name,name]
//
// The probes are franz-go's wire codec (kmsg) over plain sockets: every
// 100 ms the kept client sends a Metadata request on its connection and a
// new client dials, sends one and reads the answer.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	bin  = flag.String("bin", "bin/sluice", "the sluice binary")
	hold = flag.Duration("hold", 5*time.Second, "how long each attack runs")
	only = flag.String("only", "", "comma-separated attack names to run (default: all)")
)

type broker struct {
	cmd   *exec.Cmd
	dir   string
	kafka string
	repl  string
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs `sluice dev` on free ports in a new data directory and waits
// until it answers Metadata.
func start(extra ...string) (*broker, error) {
	dir, err := os.MkdirTemp("", "sluice-attacks-")
	if err != nil {
		return nil, err
	}
	b := &broker{dir: dir, kafka: freePort()}
	args := []string{"dev", "--data-dir", dir, "--kafka-addr", b.kafka, "--admin-addr", freePort()}
	args = append(args, extra...)
	b.cmd = exec.Command(*bin, args...)
	logf, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		return nil, err
	}
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	if err := b.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := metadataOnce(b.kafka, 2*time.Second); err == nil {
			return b, nil
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("broker did not serve within 30 s (log in %s)", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *broker) stop() {
	b.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		b.cmd.Process.Kill()
		<-done
	}
	if os.Getenv("ATTACKS_KEEP") == "" {
		os.RemoveAll(b.dir)
	}
}

// status reads a field of /proc/PID/status in KiB.
func (b *broker) status(field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// --- the wire: requests framed with kmsg ---

func frame(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("attacks")).AppendRequest(nil, req, corr)
}

func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(r, body)
	return body, err
}

func metadataReq() kmsg.Request {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(1)
	return req
}

// metadataOnce dials, asks for Metadata and reads the answer.
func metadataOnce(addr string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(start.Add(timeout))
	if _, err := c.Write(frame(metadataReq(), 1)); err != nil {
		return 0, err
	}
	if _, err := readFrame(c); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// --- probes ---

type probe struct {
	mu      sync.Mutex
	start   time.Time
	firstOK map[string]time.Duration // by probe kind: first answer to a request sent after start
	slowest map[string]time.Duration
	failed  map[string]int
}

func (p *probe) record(kind string, sent time.Time, d time.Duration, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failed[kind]++
		return
	}
	if _, ok := p.firstOK[kind]; !ok && !sent.Before(p.start) {
		p.firstOK[kind] = sent.Add(d).Sub(p.start)
	}
	p.slowest[kind] = max(p.slowest[kind], d)
}

// run probes addr every 100 ms until ctx ends: "kept" on a connection
// opened before the attack, "new" on a fresh connection each time.
func (p *probe) run(ctx context.Context, addr string, kept net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		br := bufio.NewReader(kept)
		for corr := int32(1); ctx.Err() == nil; corr++ {
			sent := time.Now()
			kept.SetDeadline(sent.Add(10 * time.Second))
			_, err := kept.Write(frame(metadataReq(), corr))
			if err == nil {
				_, err = readFrame(br)
			}
			p.record("kept", sent, time.Since(sent), err)
			if err != nil {
				return
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			sent := time.Now()
			d, err := metadataOnce(addr, 10*time.Second)
			p.record("new", sent, d, err)
			sleep(ctx, 100*time.Millisecond)
		}
	}()
	wg.Wait()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// --- attacks ---

// An attack starts against b and returns a note (what the broker
// answered) through note; it runs until ctx ends and cleans up before
// returning.
type attack struct {
	name  string
	what  string
	extra []string // broker flags
	run   func(ctx context.Context, b *broker, note func(string))
	// prep, if set, runs before the attack's clock starts (building a
	// bomb costs the attacker seconds of CPU, which is not the broker's).
	prep func() error
	// setup, if set, runs against the started broker before the clock
	// starts (a topic to produce to).
	setup func(b *broker) error
	// steady: every answer, not only the first, must come within 1 s
	// (an attack that takes a while to build up, as a trickle does).
	steady bool
}

func dialMany(addr string, n int) []net.Conn {
	var out []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			break
		}
		out = append(out, c)
	}
	return out
}

func closeAll(cs []net.Conn) {
	for _, c := range cs {
		c.Close()
	}
}

var attacks = []attack{
	stalled("stalled-frames", "two frames announcing 100 MiB, 64 KiB of each sent, then stalled", 64<<10, 0),
	stalled("stalled-frames-full", "two frames announcing 100 MiB, 99 MiB of each sent, then stalled", 99<<20, 0),
	steady(stalled("trickle-frames", "two frames announcing 100 MiB, 50 MiB of each sent, then a byte every 400 ms", 50<<20, 400*time.Millisecond)),
	{name: "idle-connections", what: "5000 connections opened and left idle", run: func(ctx context.Context, b *broker, note func(string)) {
		cs := dialMany(b.kafka, 5000)
		note(fmt.Sprintf("%d opened", len(cs)))
		<-ctx.Done()
		closeAll(cs)
	}},
	{name: "descriptors", what: "broker's RLIMIT_NOFILE at its open count + 20, then 200 connections", run: func(ctx context.Context, b *broker, note func(string)) {
		pid := b.cmd.Process.Pid
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		var old [2]uint64
		if err := prlimit(pid, nil, &old); err != nil {
			note(err.Error())
			return
		}
		if err := prlimit(pid, &[2]uint64{uint64(len(fds) + 20), uint64(len(fds) + 20)}, nil); err != nil {
			note(err.Error())
			return
		}
		cs := dialMany(b.kafka, 200)
		note(fmt.Sprintf("limit %d, %d dialled", len(fds)+20, len(cs)))
		// Out of descriptors for a while, then they come back: a new
		// client must be served again at once.
		sleep(ctx, *hold/2)
		closeAll(cs)
		<-ctx.Done()
		prlimit(pid, &old, nil)
	}},
	bomb("gzip", 1), bomb("snappy", 2), bomb("lz4", 3), bomb("zstd", 4),
	{name: "create-2^31-1", what: "CreateTopics asking 2147483647 partitions, in a loop", run: func(ctx context.Context, b *broker, note func(string)) {
		codes := map[int16]int{}
		c, err := net.Dial("tcp", b.kafka)
		if err != nil {
			note(err.Error())
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for corr := int32(1); ctx.Err() == nil; corr++ {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.SetVersion(5)
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("huge-%d", corr), 1<<31-1, 1
			req.Topics = append(req.Topics, rt)
			req.TimeoutMillis = 5000
			if _, err := c.Write(frame(req, corr)); err != nil {
				note(err.Error())
				return
			}
			body, err := readFrame(br)
			if err != nil {
				note(err.Error())
				return
			}
			resp := kmsg.NewPtrCreateTopicsResponse()
			resp.SetVersion(5)
			if err := resp.ReadFrom(body[5:]); err == nil && len(resp.Topics) == 1 {
				codes[resp.Topics[0].ErrorCode]++
			}
		}
		note(fmt.Sprintf("answers by error code %v", codes))
	}},
	{name: "hostile-decode", what: "256 KiB frames of every API at its newest version, bodies of 0x00, 0x01, 0xff, 4 connections", run: func(ctx context.Context, b *broker, note func(string)) {
		var frames [][]byte
		for key := int16(0); key <= kmsg.MaxKey; key++ {
			req := kmsg.RequestForKey(key)
			if req == nil {
				continue
			}
			req.SetVersion(req.MaxVersion())
			hdr := frame(req, 1)
			// Keep the header (through the client id and, when
			// flexible, its tag byte); replace the body.
			hl := 4 + 2 + 2 + 4 + 2 + len("attacks")
			if req.IsFlexible() {
				hl++
			}
			for _, fill := range []byte{0x00, 0x01, 0xff} {
				f := append([]byte(nil), hdr[:hl]...)
				f = append(f, bytes.Repeat([]byte{fill}, 256<<10)...)
				binary.BigEndian.PutUint32(f, uint32(len(f)-4))
				frames = append(frames, f)
			}
		}
		var sent atomic.Int64
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; ctx.Err() == nil; i += 4 {
					c, err := net.Dial("tcp", b.kafka)
					if err != nil {
						continue
					}
					c.SetDeadline(time.Now().Add(2 * time.Second))
					if _, err := c.Write(frames[i%len(frames)]); err == nil {
						sent.Add(1)
					}
					// Until the broker closes it, or briefly when it
					// answered (a body that decodes).
					c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
					io.Copy(io.Discard, c)
					c.Close()
				}
			}()
		}
		wg.Wait()
		note(fmt.Sprintf("%d frames of %d kinds sent", sent.Load(), len(frames)))
	}},
	{name: "forged-raft", what: "hellos claiming this broker, an unknown node, garbage, on replica.listen (one-voter raft groups)", extra: []string{"--set", "replica.listen=" + freePort()}, run: func(ctx context.Context, b *broker, note func(string)) {
		repl := ""
		for i, a := range b.cmd.Args {
			if strings.HasPrefix(a, "replica.listen=") && i > 0 {
				repl = strings.TrimPrefix(a, "replica.listen=")
			}
		}
		n := 0
		for i := 0; ctx.Err() == nil; i++ {
			c, err := net.DialTimeout("tcp", repl, time.Second)
			if err != nil {
				note(err.Error())
				return
			}
			var hello []byte
			switch i % 3 {
			case 0: // claims to be the broker itself (node 1)
				hello = binary.BigEndian.AppendUint32([]byte("SLRT\x00\x01"), 1)
			case 1: // a node that is not registered
				hello = binary.BigEndian.AppendUint32([]byte("SLRT\x00\x01"), 7)
			case 2:
				hello = bytes.Repeat([]byte{0xff}, 64)
			}
			// A forged raft frame after the hello.
			hello = append(hello, 0, 0, 0, 16)
			hello = append(hello, bytes.Repeat([]byte{1}, 16)...)
			c.SetDeadline(time.Now().Add(2 * time.Second))
			c.Write(hello)
			io.Copy(io.Discard, c)
			c.Close()
			n++
		}
		note(fmt.Sprintf("%d forged connections", n))
	}},
	{name: "non-reading", what: "20 clients pipelining Metadata (200 topics named) and never reading", run: func(ctx context.Context, b *broker, note func(string)) {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		for i := range 200 {
			rt := kmsg.NewMetadataRequestTopic()
			name := fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 196))
			rt.Topic = &name
			req.Topics = append(req.Topics, rt)
		}
		f := frame(req, 1)
		var sent atomic.Int64
		var cs []net.Conn
		for range 20 {
			c, err := net.DialTCP("tcp", nil, mustTCP(b.kafka))
			if err != nil {
				continue
			}
			c.SetReadBuffer(4 << 10)
			cs = append(cs, c)
			go func() {
				for ctx.Err() == nil {
					if _, err := c.Write(f); err != nil {
						return
					}
					sent.Add(1)
				}
			}()
		}
		<-ctx.Done()
		closeAll(cs)
		note(fmt.Sprintf("%d requests written (%d MiB)", sent.Load(), sent.Load()*int64(len(f))>>20))
	}},
}

// stalled sends two frames announcing 100 MiB, each with send bytes of
// its body, and stalls them until the attack ends, or (trickle > 0) then
// sends a byte of each every trickle.
func stalled(name, what string, send int, trickle time.Duration) attack {
	return attack{name: name, what: what, run: func(ctx context.Context, b *broker, note func(string)) {
		var sent atomic.Int64
		var cs []net.Conn
		for range 2 {
			c, err := net.Dial("tcp", b.kafka)
			if err != nil {
				note(err.Error())
				return
			}
			cs = append(cs, c)
			go func() {
				var hdr [4]byte
				binary.BigEndian.PutUint32(hdr[:], 100<<20)
				if _, err := c.Write(hdr[:]); err != nil {
					return
				}
				chunk := make([]byte, min(send, 1<<20))
				copy(chunk, frame(metadataReq(), 1)[4:])
				for left := send; left > 0; left -= len(chunk) {
					if _, err := c.Write(chunk[:min(left, len(chunk))]); err != nil {
						return
					}
					sent.Add(int64(min(left, len(chunk))))
				}
				for trickle > 0 && ctx.Err() == nil {
					sleep(ctx, trickle)
					if _, err := c.Write([]byte{0}); err != nil {
						return
					}
					sent.Add(1)
				}
			}()
		}
		<-ctx.Done()
		closed := 0
		for _, c := range cs {
			// Closed by the broker: a read ends at once.
			c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
				closed++
			}
		}
		closeAll(cs)
		note(fmt.Sprintf("%d KiB sent in all; %d of 2 closed by the broker", sent.Load()>>10, closed))
	}}
}

func steady(a attack) attack {
	a.steady = true
	return a
}

func mustTCP(addr string) *net.TCPAddr {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		panic(err)
	}
	return a
}

func prlimit(pid int, set, old *[2]uint64) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_NOFILE,
		uintptr(unsafe.Pointer(set)), uintptr(unsafe.Pointer(old)), 0, 0); e != 0 {
		return fmt.Errorf("prlimit(%d): %v", pid, e)
	}
	return nil
}

// bomb is a Produce of one batch whose one record, 256 MiB of zeros,
// compresses with codec (Kafka's attribute) to little.
func bomb(name string, codec int16) attack {
	var batch []byte
	// Snappy's format caps its ratio near 21:1: a batch inflating to
	// 16 MiB is already about 780 KiB, under max.message.bytes.
	// lz4's at 256 MiB is about 1 MiB: 128 MiB keeps it under.
	size, what := 256<<20, "256 MiB"
	switch name {
	case "snappy":
		size, what = 16<<20, "16 MiB"
	case "lz4":
		size, what = 128<<20, "128 MiB"
	}
	prep := func() (err error) {
		batch, err = bombBatch(name, codec, size)
		return err
	}
	return attack{name: "bomb-" + name, what: "Produce of one " + name + " batch inflating to " + what + ", in a loop", prep: prep, setup: createBombTopic, run: func(ctx context.Context, b *broker, note func(string)) {
		codes := map[int16]int{}
		defer func() { note(fmt.Sprintf("batch of %d KiB; answers by error code %v", len(batch)>>10, codes)) }()
		for corr := int32(1); ctx.Err() == nil; corr++ {
			c, err := net.Dial("tcp", b.kafka)
			if err != nil {
				return
			}
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(9)
			req.Acks, req.TimeoutMillis = 1, 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "bomb"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.Write(frame(req, corr)); err != nil {
				codes[-102]++ // the write failed
				c.Close()
				continue
			}
			body, err := readFrame(c)
			c.Close()
			if err != nil {
				codes[-100]++ // closed
				continue
			}
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(9)
			if err := resp.ReadFrom(body[5:]); err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
				rp := resp.Topics[0].Partitions[0]
				if codes[rp.ErrorCode]++; codes[rp.ErrorCode] == 1 && rp.ErrorMessage != nil {
					note(fmt.Sprintf("error %d: %q", rp.ErrorCode, *rp.ErrorMessage))
				}
			} else {
				codes[-101]++ // an answer that does not parse
			}
		}
	}}
}

// createBombTopic creates the topic the bombs are sent to, retrying while
// the fresh broker is not registered yet.
func createBombTopic(b *broker) error {
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = createTopicOnce(b); err == nil {
			return nil
		}
	}
	return err
}

func createTopicOnce(b *broker) error {
	c, err := net.Dial("tcp", b.kafka)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(5)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "bomb", 1, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	if _, err := c.Write(frame(req, 1)); err != nil {
		return err
	}
	body, err := readFrame(c)
	if err != nil {
		return err
	}
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.SetVersion(5)
	if err := resp.ReadFrom(body[5:]); err != nil {
		return err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return fmt.Errorf("creating topic bomb: error code %d", resp.Topics[0].ErrorCode)
	}
	return nil
}

func bombBatch(name string, codec int16, n int) ([]byte, error) {
	// One record: attributes, timestamp delta, offset delta, key -1,
	// value of n zero bytes, no headers.
	var rec []byte
	rec = append(rec, 0)
	rec = binary.AppendVarint(rec, 0)
	rec = binary.AppendVarint(rec, 0)
	rec = binary.AppendVarint(rec, -1)
	rec = binary.AppendVarint(rec, int64(n))
	body := append(rec, make([]byte, n)...)
	body = binary.AppendVarint(body, 0)
	records := binary.AppendVarint(nil, int64(len(body)))
	records = append(records, body...)
	var comp []byte
	switch name {
	case "gzip":
		var buf bytes.Buffer
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		w.Write(records)
		w.Close()
		comp = buf.Bytes()
	case "snappy":
		comp = s2.EncodeSnappy(nil, records)
	case "lz4":
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		w.Write(records)
		w.Close()
		comp = buf.Bytes()
	case "zstd":
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			return nil, err
		}
		comp = enc.EncodeAll(records, nil)
	}
	rb := kmsg.RecordBatch{
		FirstOffset: 0, Magic: 2, Attributes: codec, LastOffsetDelta: 0,
		FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli(),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: comp,
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(raw[17:], crc)
	return raw, nil
}

func main() {
	flag.Parse()
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	lim.Cur = lim.Max
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)

	fmt.Printf("| attack | what | broker peak RSS (VmHWM) | RSS before | kept client: first answer / slowest | new client: first answer / slowest / failed | served within 1 s | broker's answers |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|\n")
	failed := false
	for _, a := range attacks {
		if len(want) > 0 && !want[a.name] {
			continue
		}
		row, ok := runAttack(a)
		fmt.Println(row)
		failed = failed || !ok
	}
	if failed {
		os.Exit(1)
	}
}

func runAttack(a attack) (string, bool) {
	if a.prep != nil {
		if err := a.prep(); err != nil {
			return fmt.Sprintf("| %s | %s | %v |||||", a.name, a.what, err), false
		}
		runtime.GC()
	}
	b, err := start(a.extra...)
	if err != nil {
		return fmt.Sprintf("| %s | %s | broker did not start: %v |||||", a.name, a.what, err), false
	}
	defer b.stop()
	kept, err := net.Dial("tcp", b.kafka)
	if err != nil {
		return fmt.Sprintf("| %s | %s | %v |||||", a.name, a.what, err), false
	}
	defer kept.Close()
	// A client speaks as soon as it connects: the kept client's first
	// request goes now, before the attack, so the broker never takes it
	// for a silent connection (out of descriptors it closes those:
	// server/fdshed.go). Measured from the attack's start, a kept
	// connection that had said nothing for the settle time was closed
	// in one run of `descriptors` ("never").
	kept.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = kept.Write(frame(metadataReq(), 0))
	if err == nil {
		_, err = readFrame(bufio.NewReader(kept))
	}
	if err != nil {
		return fmt.Sprintf("| %s | %s | kept client's first request: %v |||||", a.name, a.what, err), false
	}
	if a.setup != nil {
		if err := a.setup(b); err != nil {
			return fmt.Sprintf("| %s | %s | setup: %v |||||", a.name, a.what, err), false
		}
	}
	time.Sleep(500 * time.Millisecond) // settle after start
	before := b.status("VmRSS")
	p := &probe{start: time.Now(), firstOK: map[string]time.Duration{}, slowest: map[string]time.Duration{}, failed: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), *hold)
	defer cancel()
	var notes []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); notes = append(notes, s); mu.Unlock() }
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a.run(ctx, b, note) }()
	go func() { defer wg.Done(); p.run(ctx, b.kafka, kept) }()
	wg.Wait()
	alive := b.cmd.ProcessState == nil && b.cmd.Process.Signal(syscall.Signal(0)) == nil
	peak := b.status("VmHWM")
	fmtD := func(kind string) string {
		d, ok := p.firstOK[kind]
		if !ok {
			return "never"
		}
		return d.Round(time.Millisecond).String()
	}
	served := true
	for _, k := range []string{"kept", "new"} {
		d, ok := p.firstOK[k]
		served = served && ok && d <= time.Second
		if a.steady {
			served = served && p.slowest[k] <= time.Second
		}
	}
	verdict := "yes"
	if !served {
		verdict = "NO"
	}
	if !alive {
		verdict = "NO (broker died)"
	}
	row := fmt.Sprintf("| %s | %s | %d MiB | %d MiB | %s / %v | %s / %v / %d | %s | %s |", a.name, a.what,
		peak>>10, before>>10, fmtD("kept"), p.slowest["kept"].Round(time.Millisecond), fmtD("new"),
		p.slowest["new"].Round(time.Millisecond), p.failed["new"], verdict, strings.Join(notes, "; "))
	return row, served && alive && !errors.Is(ctx.Err(), context.Canceled)
}
