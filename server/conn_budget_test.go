package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
)

func TestRequestBudget(t *testing.T) {
	var b requestBudget
	ctx := context.Background()
	if n, err := b.acquire(ctx, 10, 0); n != 0 || err != nil {
		t.Fatalf("unbounded: %d, %v", n, err)
	}
	// Admitted while any room is left, even past the bound.
	n1, _ := b.acquire(ctx, 80, 100)
	n2, _ := b.acquire(ctx, 80, 100)
	if n1 != 80 || n2 != 80 {
		t.Fatalf("held %d, %d", n1, n2)
	}
	got := make(chan int64)
	go func() {
		n, _ := b.acquire(ctx, 5, 100)
		got <- n
	}()
	select {
	case <-got:
		t.Fatal("admitted with the budget full")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(n1)
	select {
	case n := <-got:
		b.release(n)
	case <-time.After(5 * time.Second):
		t.Fatal("not admitted after a release")
	}
	cctx, cancel := context.WithCancel(ctx)
	b.acquire(ctx, 100, 100)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := b.acquire(cctx, 1, 100); err == nil {
		t.Fatal("a cancelled wait succeeded")
	}
}

// With a budget far below one request, every request must still be served,
// one at a time: a request that never gave its bytes back (an error path,
// acks=0, a second stage) would stop the broker reading altogether.
func TestQueuedMaxRequestBytesServesEverything(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) {
		c.LogFsync = "group"
		c.QueuedMaxRequestBytes = 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.LeaderAck(), kgo.NoAck()} {
		opts := []kgo.Opt{kgo.DefaultProduceTopic("budget"), kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(acks)}
		if acks != kgo.AllISRAcks() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl := b.client(t, opts...)
		for i := 0; i < 300; i++ {
			cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b.requestBytesIdle(t)
}

// requestBytesIdle waits until no request holds budget bytes.
func (b *testBroker) requestBytesIdle(t *testing.T) {
	t.Helper()
	// A closed client's long-poll fetch (franz-go waits up to 5 s) holds
	// its bytes until it is answered: allow for that and a loaded machine.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.srv.requestBytes.mu.Lock()
		used := b.srv.requestBytes.used
		b.srv.requestBytes.mu.Unlock()
		if used == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d request bytes still held with nothing in flight", used)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Frames that each hold part of a full budget and need more must not wait
// for each other forever: one (the first to ask) goes past the bound, the
// others wait until its frame ends.
func TestRequestBudgetOneFramePastTheBound(t *testing.T) {
	var b requestBudget
	ctx := context.Background()
	a, c := &conn{}, &conn{}
	b.acquire(ctx, 60, 100) // a's first window
	b.acquire(ctx, 60, 100) // c's first window: the budget is now full
	if n, _ := b.grow(ctx, 50, 100, a); n != 50 {
		t.Fatalf("a's frame did not go past the bound: %d", n)
	}
	got := make(chan int64)
	go func() {
		n, _ := b.grow(ctx, 50, 100, c)
		got <- n
	}()
	select {
	case <-got:
		t.Fatal("a second frame went past the bound")
	case <-time.After(50 * time.Millisecond):
	}
	if n, _ := b.grow(ctx, 50, 100, a); n != 50 {
		t.Fatal("the frame past the bound was stopped")
	}
	b.endFrame(a)
	select {
	case n := <-got:
		if n != 50 {
			t.Fatalf("c got %d", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("c still waits after a's frame ended")
	}
	// A first window never uses the way past the bound.
	b.endFrame(c)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.acquire(cctx, 1, 100); err == nil {
		t.Fatal("a new frame was admitted with the budget full")
	}
}

// Large frames still arriving hold at most seven eighths of the bound and
// each at most its connection's cap; past either, one frame at a time goes
// on past the bound, and what it takes there does not keep small frames
// out: the last eighth stays theirs.
func TestRequestBudgetLargeShareAndCap(t *testing.T) {
	var b requestBudget
	ctx := context.Background()
	const limit, perConn = 800, 200 // large frames' share: 700
	a, c, d := &conn{}, &conn{}, &conn{}
	mustTake := func(what string, n int64, err error) {
		t.Helper()
		if err != nil || n == 0 {
			t.Fatalf("%s: %d, %v", what, n, err)
		}
	}
	n, err := b.window(ctx, 200, 0, limit, perConn, a)
	mustTake("a's first window", n, err)
	n, err = b.window(ctx, 200, 0, limit, perConn, c)
	mustTake("c's first window", n, err)
	// a at its cap goes on past the bound; so does nobody else.
	n, err = b.window(ctx, 100, 200, limit, perConn, a)
	mustTake("a past its cap", n, err)
	if over, past := b.pastBound(); over != a || past != 100 {
		t.Fatalf("past the bound: %p holding %d, want a holding 100", over, past)
	}
	blocked := func(what string, take func(ctx context.Context) (int64, error)) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		if n, err := take(cctx); err == nil {
			b.release(n)
			t.Fatalf("%s admitted", what)
		}
	}
	blocked("c past its cap while a is past the bound", func(ctx context.Context) (int64, error) {
		return b.window(ctx, 100, 200, limit, perConn, c)
	})
	// Within the share: 400 held within the bound, room for 300 more.
	n, err = b.window(ctx, 200, 0, limit, perConn, d)
	mustTake("d's first window", n, err)
	blocked("a window past the large frames' share", func(ctx context.Context) (int64, error) {
		return b.window(ctx, 200, 0, limit, perConn, &conn{})
	})
	// Small frames fill the rest, past what a holds past the bound.
	for i := range 2 {
		n, err = b.acquire(ctx, 100, limit)
		mustTake(fmt.Sprintf("small frame %d", i), n, err)
	}
	if used, _ := b.full(); used != 800 {
		t.Fatalf("%d held within the bound, want 800", used)
	}
	blocked("a small frame with the bound full", func(ctx context.Context) (int64, error) {
		return b.acquire(ctx, 1, limit)
	})
	// a's frame ends: what it took past the bound now counts within it.
	b.endFrame(a)
	if used, _ := b.full(); used != 900 {
		t.Fatalf("%d held within the bound after a's frame ended, want 900", used)
	}
	n, err = b.window(ctx, 100, 200, limit, perConn, c)
	mustTake("c past its cap once a's frame ended", n, err)
}

// A frame's rate is averaged over about its last second: 50 MiB sent in
// its first 100 ms stop counting about a second after, while a frame
// arriving steadily at 2 KiB/s is never found slower than 1 KiB/s.
func TestRateSamples(t *testing.T) {
	ms := int64(time.Millisecond)
	var burst, steady rateSamples
	burst.reset(0, 0)
	steady.reset(0, 0)
	slowAt := int64(-1)
	for now := int64(0); now <= 5000*ms; now += 125 * ms {
		p := int64(50 << 20)
		if now < 100*ms {
			p = now * (50 << 20) / (100 * ms)
		}
		p += now / (400 * ms) // then a byte every 400 ms
		if rate, ok := burst.add(now, p); ok && rate < 1024 && slowAt < 0 {
			slowAt = now
		}
		if rate, ok := steady.add(now, now*2048/int64(time.Second)); ok && rate < 1024 {
			t.Fatalf("a frame at 2 KiB/s measured %v B/s at %v", rate, time.Duration(now))
		}
	}
	if slowAt < 0 || slowAt > 1500*ms {
		t.Fatalf("burst then trickle found slow at %v, want within about a second of the burst", time.Duration(slowAt))
	}
	t.Logf("burst then trickle found slow at %v", time.Duration(slowAt))
}

// A client that sends a huge size prefix and then stops holds one window of
// queued.max.request.bytes, not the size it announced; other clients go on
// (here with a budget that the announced size alone would fill), and the
// stalled connection is closed after socket.request.timeout.ms with its
// bytes given back.
func TestStalledFrameHoldsOneWindow(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) {
		c.QueuedMaxRequestBytes = 4 << 20
		c.SocketRequestTimeoutMs = 500
	})
	// 3 frames too large to take their memory up front, and 10 small
	// enough (an eighth of the budget at most) that the first 9 or so do.
	var stalled []net.Conn
	sent := time.Now() // before any stalled frame began
	for i := 0; i < 13; i++ {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		size := uint32(90 << 20)
		if i >= 3 {
			size = 400 << 10
		}
		var msg [8]byte
		binary.BigEndian.PutUint32(msg[:], size)
		copy(msg[4:], "abcd")
		if _, err := nc.Write(msg[:]); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, nc)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.heldBytes() != 13*firstWindow {
		if time.Now().After(deadline) {
			t.Fatalf("13 stalled frames hold %d bytes, want %d", b.heldBytes(), 13*firstWindow)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := b.client(t, kgo.DefaultProduceTopic("stalled"), kgo.AllowAutoTopicCreation())
	start := time.Now()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 512<<10)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a produce took %v beside the stalled frames", d)
	}
	for _, nc := range stalled {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("stalled connection: read %v, want it closed", err)
		}
	}
	// Measured from before the frames began: the wait for them to be
	// held, above, may take a good part of the timeout on a busy machine.
	if d := time.Since(sent); d < 450*time.Millisecond {
		t.Errorf("stalled connections closed %v after their frames began, before the 500 ms timeout", d)
	}
	b.requestBytesIdle(t)
}

// Two clients that send most of a frame each and stop fill
// queued.max.request.bytes between them (one within its cap and past the
// bound, the other at its cap, waiting for its turn past it); once a
// large request waits for room too and the frames have received nothing
// for queued.max.request.stall.ms, the broker closes them, largest first,
// and the request is answered at once rather than after
// socket.request.timeout.ms. A client whose frame
// keeps arriving, slowly but faster than
// queued.min.request.bytes.per.second, is left alone.
func TestStalledFramesEvicted(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) {
		c.QueuedMaxRequestBytes = 4 << 20
		c.QueuedMaxRequestStallMs = 300
		c.SocketRequestTimeoutMs = 20000 // the stall, not this, must free the room
		c.MessageMaxBytes = 8 << 20
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := b.client(t, kgo.DefaultProduceTopic("evict"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchMaxBytes(8<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dial := func(size uint32) net.Conn {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		var msg [4]byte
		binary.BigEndian.PutUint32(msg[:], size)
		if _, err := nc.Write(msg[:]); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	// A slow client: 256 bytes of its frame every 50 ms (5 KiB/s, above
	// queued.min.request.bytes.per.second).
	slow := dial(1 << 20)
	slowDone := make(chan struct{})
	var slowErr error
	go func() {
		defer close(slowDone)
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := slow.Write(bytes.Repeat([]byte{byte(i)}, 256)); err != nil {
				slowErr = err
				return
			}
		}
	}()
	// Two near-budget frames, 3.5 MiB of each sent, then nothing. The
	// second may wait for room with part of its bytes unread (the kernel
	// buffers the rest): the write goes on in the background.
	var stalled []net.Conn
	for range 2 {
		nc := dial(4 << 20)
		stalled = append(stalled, nc)
		go nc.Write(make([]byte, 3584<<10))
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.heldBytes() < 4<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("stalled frames hold %d bytes, want the whole budget", b.heldBytes())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A 2 MiB produce is more than a connection's cap (1 MiB): it waits
	// for its turn past the bound, which the first stalled frame holds.
	// Closing it may be enough: the other then gets the turn, reads what
	// the kernel holds of it and stalls again, and is closed in turn only
	// if another waits for the turn. Two produces in a row are each
	// answered soon either way.
	for i := range 2 {
		start := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 2<<20)}).FirstErr(); err != nil {
			t.Fatalf("produce %d beside the stalled frames: %v", i, err)
		}
		d := time.Since(start)
		t.Logf("produce %d answered in %v", i, d)
		if d > 2*time.Second {
			t.Errorf("produce %d took %v beside the stalled frames", i, d)
		}
	}
	closed := 0
	for _, nc := range stalled {
		nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := nc.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	n := counterValue(b.srv.metrics.connsDropped.WithLabelValues("stalled_frame"))
	if closed == 0 || n < float64(closed) || n > 2 {
		t.Errorf("%d stalled connections closed, sluice_connections_dropped_total{reason=stalled_frame} = %v; want at least 1, and counted", closed, n)
	}
	cancel()
	<-slowDone
	if slowErr != nil {
		t.Errorf("the slow client's connection was closed: %v", slowErr)
	}
	slow.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := slow.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("slow connection: read %v, want it open", err)
	}
}

// Two clients that each send half of a frame twice queued.max.request.bytes
// and then trickle a byte every 400 ms (the attack, scaled to an
// 8 MiB budget) make progress, so queued.max.request.stall.ms never closes
// them. Each holds at most queued.max.request.bytes.per.connection (a
// quarter) within the budget, and the last eighth of it is kept for small
// frames, so a fresh client's produce and fetch are answered within a
// second; and a large request that has to wait for room gets it once the
// trickling frames, slower than queued.min.request.bytes.per.second, are
// closed: their bytes are given back and they are counted.
func TestTricklingFramesEvicted(t *testing.T) {
	const budget = 8 << 20
	b := startBroker(t, func(c *configs.Config) {
		c.QueuedMaxRequestBytes = budget
		c.SocketRequestTimeoutMs = 60000 // the rate, not this, must free the room
		c.MessageMaxBytes = 8 << 20
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	warm := b.client(t, kgo.DefaultProduceTopic("trickle"), kgo.AllowAutoTopicCreation())
	if err := warm.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	warm.Close()
	var trickling []net.Conn
	trickleDone := make(chan struct{})
	defer func() { <-trickleDone }()
	defer cancel()
	for range 2 {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		trickling = append(trickling, nc)
	}
	go func() {
		defer close(trickleDone)
		var wg sync.WaitGroup
		for _, nc := range trickling {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var size [4]byte
				binary.BigEndian.PutUint32(size[:], 2*budget)
				if _, err := nc.Write(append(size[:], make([]byte, budget)...)); err != nil {
					return
				}
				for {
					select {
					case <-ctx.Done():
						return
					case <-time.After(400 * time.Millisecond):
					}
					if _, err := nc.Write([]byte{1}); err != nil {
						return // closed by the broker
					}
				}
			}()
		}
		wg.Wait()
	}()
	// The frames hold the budget's large share once their bytes are in.
	deadline := time.Now().Add(10 * time.Second)
	for b.heldBytes() < budget/2 {
		if time.Now().After(deadline) {
			t.Fatalf("trickling frames hold %d bytes, want at least half the budget", b.heldBytes())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A fresh client: its small requests are admitted at once.
	start := time.Now()
	cl := b.client(t, kgo.DefaultProduceTopic("trickle"), kgo.ConsumeTopics("trickle"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("served")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 2; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch beside the trickling frames: %v", err)
		}
		got += len(fs.Records())
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a fresh client's produce and fetch took %v beside the trickling frames", d)
	} else {
		t.Logf("a fresh client's produce and fetch took %v", d)
	}
	// A 3 MiB produce needs more than its connection's cap: it waits for
	// the frame past the bound, a trickling one, to be closed. Two in a
	// row: the first may get past the bound before the second trickling
	// frame does, which then goes on alone until the second waits.
	big := b.client(t, kgo.DefaultProduceTopic("trickle"), kgo.ProducerBatchMaxBytes(8<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 2 {
		start = time.Now()
		if err := big.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 3<<20)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		t.Logf("3 MiB produce %d took %v", i, time.Since(start))
	}
	for i, nc := range trickling {
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("trickling connection %d: read %v, want it closed", i, err)
		}
	}
	// A trickling frame receives a byte every 400 ms, so the stall time
	// (500 ms) cannot close it, unless the machine delays the writes.
	slow := counterValue(b.srv.metrics.connsDropped.WithLabelValues("slow_frame"))
	stalled := counterValue(b.srv.metrics.connsDropped.WithLabelValues("stalled_frame"))
	if slow < 1 || slow+stalled != 2 {
		t.Errorf(`sluice_connections_dropped_total{reason="slow_frame"} = %v, {reason="stalled_frame"} = %v; want the 2 trickling frames counted, at least one as slow`, slow, stalled)
	}
	if n := counterValue(b.srv.metrics.connsDropped.WithLabelValues("request_timeout")); n != 0 {
		t.Errorf("%v connections closed by socket.request.timeout.ms", n)
	}
	cl.Close()
	big.Close()
	b.requestBytesIdle(t)
}

// A large frame that arrives in pieces is read whole, through the windows
// and the buffer growth, and counts its whole size until it is handled.
func TestLargeFrameInPieces(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) { c.QueuedMaxRequestBytes, c.MessageMaxBytes = 1<<20, 8<<20 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Uncompressed, so that the frame is as large as the record.
	cl := b.client(t, kgo.DefaultProduceTopic("pieces"), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchMaxBytes(16<<20), kgo.MaxBufferedBytes(64<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := make([]byte, 5<<20+12345)
	for i := range val {
		val[i] = byte(i * 7)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rd := b.client(t, kgo.ConsumeTopics("pieces"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(32<<20), kgo.FetchMaxPartitionBytes(32<<20))
	fs := rd.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) != 1 || !bytes.Equal(recs[0].Value, val) {
		t.Fatalf("read back %d records", len(recs))
	}
	rd.Close() // its next long-poll fetch holds its bytes until answered
	b.requestBytesIdle(t)
}

// A connection that sends nothing is closed after connections.max.idle.ms;
// one with a request being handled (a long-poll fetch) is not.
func TestIdleConnectionsClosed(t *testing.T) {
	b := startBroker(t, func(c *configs.Config) { c.ConnectionsMaxIdleMs = 300 })
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("idle connection: read %v, want it closed", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 2*time.Second {
		t.Errorf("idle connection closed after %v, want about 300ms", d)
	}
	// A fetch waiting 1.5 s for records on an empty partition is pending,
	// not idle: it is answered, not dropped.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := b.client(t, kgo.DefaultProduceTopic("idle"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 1500, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "idle"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = 1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	start = time.Now()
	if _, err := fc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 7)); err != nil {
		t.Fatal(err)
	}
	fc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(fc, size[:]); err != nil {
		t.Fatalf("long-poll fetch not answered: %v", err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("fetch answered after %v, before its wait", d)
	}
}

func (b *testBroker) heldBytes() int64 {
	b.srv.requestBytes.mu.Lock()
	defer b.srv.requestBytes.mu.Unlock()
	return b.srv.requestBytes.used
}

// A large frame takes a buffer of its whole size up front only while it is
// at most an eighth of the bound and such frames still arriving stay
// under it; past that, its buffer grows as its bytes arrive.
func TestRequestBudgetPromise(t *testing.T) {
	var b requestBudget
	if !b.promise(1<<40, 0) || !b.promise(1<<40, -1) {
		t.Fatal("unbounded budget refused a promise")
	}
	if b.promise(101, 800) {
		t.Fatal("promised a frame over an eighth of the bound")
	}
	for i := 0; i < 8; i++ {
		if !b.promise(100, 800) {
			t.Fatalf("promise %d refused under the bound", i)
		}
	}
	if b.promise(1, 800) {
		t.Fatal("promised past the bound")
	}
	b.unpromise(100, 800)
	if !b.promise(100, 800) {
		t.Fatal("refused after a promised frame was read")
	}
}

// A client that pipelines requests and never reads its socket holds at
// most queued.max.response.bytes of answers (plus the one that crossed it)
// in the broker: its next request is not read meanwhile, while other
// clients are served. Unbounded (-1), the same client makes the broker
// hold the answers of every request it could read (maxInFlight of them),
// which shows the test measures what the bound changes.
func TestNonReadingClientHoldsBoundedResponses(t *testing.T) {
	const respLimit = 64 << 10
	// Metadata naming 200 unknown topics of 200-byte names: about 44 KB
	// each way, so the bound is crossed by the second answer in memory.
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for i := range 200 {
		rt := kmsg.NewMetadataRequestTopic()
		name := fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 196))
		rt.Topic = &name
		req.Topics = append(req.Topics, rt)
	}
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
	for _, tc := range []struct {
		name  string
		limit int64
	}{{"bounded", respLimit}, {"unbounded", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, func(c *configs.Config) {
				c.QueuedMaxResponseBytes = tc.limit
				c.AutoCreateTopics = false
			})
			nc, err := net.DialTCP("tcp", nil, mustResolve(t, b.addr))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetReadBuffer(4 << 10) // the kernel keeps few answers for it
			// Write 400 requests (17 MB) and read nothing; the writes
			// block once the broker stops reading.
			go func() {
				for range 400 {
					if _, err := nc.Write(frame); err != nil {
						return
					}
				}
			}()
			// Wait until the broker stops taking requests from it: the
			// count of Metadata requests read stays put for a while.
			var c *conn
			var read, peak int64
			for stable, deadline := 0, time.Now().Add(20*time.Second); stable < 10; {
				if time.Now().After(deadline) {
					t.Fatalf("the broker kept reading the non-reading client: %d requests", read)
				}
				time.Sleep(50 * time.Millisecond)
				c = b.onlyConn(t)
				n := int64(counterValue(c.listener.metrics.api(3).requests))
				if n == read && n > 0 {
					stable++
				} else {
					stable, read = 0, n
				}
				peak = max(peak, c.unsent.Load())
			}
			// Another client is served meanwhile.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			if _, err := kadm.NewClient(b.client(t)).BrokerMetadata(ctx); err != nil {
				t.Fatal(err)
			}
			served := time.Since(start)
			peak = max(peak, c.unsent.Load())
			one := int64(len(frame)) * 11 / 10 // an answer is about its request's size
			t.Logf("%s: %d requests read, %d bytes of answers held, another client served in %v", tc.name, read, peak, served)
			if tc.limit > 0 {
				if peak > tc.limit+one {
					t.Errorf("held %d bytes of answers, want at most %d + one answer (%d)", peak, tc.limit, one)
				}
				if w := counterValue(b.srv.metrics.responseWaits); w < 1 {
					t.Errorf("sluice_connection_response_waits_total = %v, want it counted", w)
				}
			} else if peak < 10*respLimit {
				t.Errorf("unbounded: held only %d bytes of answers; the test no longer makes answers pile up", peak)
			}
			if served > 2*time.Second {
				t.Errorf("another client was served after %v", served)
			}
		})
	}
}

func mustResolve(t *testing.T, addr string) *net.TCPAddr {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// onlyConn is the one Kafka connection the broker has open.
func (b *testBroker) onlyConn(t *testing.T) *conn {
	b.srv.mu.Lock()
	defer b.srv.mu.Unlock()
	if len(b.srv.conns) != 1 {
		t.Fatalf("%d connections open, want 1", len(b.srv.conns))
	}
	for c := range b.srv.conns {
		return c
	}
	return nil
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
