package peerlink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestReadFrame(t *testing.T) {
	frame := func(body string) []byte { return append(AppendHeader(nil, len(body)), body...) }
	for _, tc := range []struct {
		name  string
		in    []byte
		limit int
		want  string
		err   error
	}{
		{"body", frame("hello"), 16, "hello", nil},
		{"empty body", frame(""), 16, "", nil},
		{"at the limit", frame("0123456789"), 10, "0123456789", nil},
		{"past the limit", frame("0123456789a"), 10, "", ErrFrameTooLarge},
		{"huge length, nothing allocated", []byte{0xff, 0xff, 0xff, 0xff}, 1 << 20, "", ErrFrameTooLarge},
		{"short header", []byte{0, 0}, 16, "", io.ErrUnexpectedEOF},
		{"nothing", nil, 16, "", io.EOF},
		{"short body", frame("hello")[:7], 16, "", io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadFrame(bytes.NewReader(tc.in), nil, tc.limit)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err == nil && string(got) != tc.want {
				t.Fatalf("body %q, want %q", got, tc.want)
			}
		})
	}
	// The buffer is reused when it is large enough.
	buf := make([]byte, 0, 64)
	got, err := ReadFrame(bytes.NewReader(frame("abc")), buf, 64)
	if err != nil || &got[0] != &buf[:1][0] {
		t.Fatalf("buffer not reused: %v", err)
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 800 * time.Millisecond}
	for round, ceil := range []time.Duration{100, 200, 400, 800, 800, 800} {
		ceil *= time.Millisecond
		d := b.Next()
		if d < ceil/2 || d > ceil {
			t.Fatalf("wait %d: %v, want within [%v, %v]", round, d, ceil/2, ceil)
		}
	}
	b.Reset()
	if d := b.Next(); d > 100*time.Millisecond {
		t.Fatalf("after Reset: %v", d)
	}
	// Jitter: many draws at one step are not all equal.
	seen := map[time.Duration]bool{}
	for range 50 {
		var j Backoff
		seen[j.Next()] = true
	}
	if len(seen) < 10 {
		t.Fatalf("%d distinct first waits of 50: no jitter", len(seen))
	}
}

// echoServer accepts through a Listener and appends every frame it reads
// to got.
type echoServer struct {
	l      *Listener
	mu     sync.Mutex
	frames [][]byte
}

func startServer(t *testing.T, addr string) *echoServer {
	t.Helper()
	l, err := Listen(addr, ListenConfig{MaxHandshaking: 4, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{l: l}
	l.Serve(func(a *Accepted) {
		a.Ready()
		for {
			b, err := ReadFrame(a, nil, 1<<20)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.frames = append(s.frames, b)
			s.mu.Unlock()
		}
	})
	return s
}

func (s *echoServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.frames {
		n += bytes.Count(f, []byte{'|'})
	}
	return n
}

func waitFor(t *testing.T, d time.Duration, cond func() error) {
	t.Helper()
	var err error
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if err = cond(); err == nil {
			return
		}
	}
	t.Fatal(err)
}

// TestStream: items queued while the peer is up arrive, coalesced into
// fewer writes than items; while it is down they are dropped and counted
// and Down is told; once it is back the stream redials and delivers.
func TestStream(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0")
	addr := srv.l.Addr().String()
	var downs atomic.Int64
	var acked atomic.Int64
	s := NewStream(StreamConfig{
		QueueLen: 10000,
		Dial:     func(ctx context.Context) (net.Conn, error) { return Dial(ctx, addr, nil, time.Second) },
		Encode: func(dst []byte, items []Item) ([]byte, error) {
			n := 0
			for _, it := range items {
				n += len(it.B)
			}
			dst = AppendHeader(dst, n)
			for _, it := range items {
				dst = append(dst, it.B...)
			}
			return dst, nil
		},
		Down:    func(error) { downs.Add(1) },
		Backoff: Backoff{Min: 20 * time.Millisecond, Max: 100 * time.Millisecond},
	})
	defer s.Close()
	const n = 5000
	for i := range n {
		s.Send(Item{N: 1, B: fmt.Appendf(nil, "%d|", i), Done: func(ok bool) {
			if ok {
				acked.Add(1)
			}
		}})
	}
	waitFor(t, 10*time.Second, func() error {
		if c := srv.count(); c != n {
			return fmt.Errorf("%d of %d items arrived", c, n)
		}
		return nil
	})
	srv.mu.Lock()
	writes := len(srv.frames)
	srv.mu.Unlock()
	if writes >= n {
		t.Fatalf("%d frames for %d items: nothing coalesced", writes, n)
	}
	// Done runs once the write that carried the item returned, which may
	// be after the peer has read it.
	waitFor(t, 10*time.Second, func() error {
		if a := acked.Load(); a != n {
			return fmt.Errorf("Done(true) for %d of %d", a, n)
		}
		return nil
	})
	t.Logf("%d items in %d frames", n, writes)

	// Peer down: what is sent is dropped and counted.
	srv.l.Close()
	waitFor(t, 10*time.Second, func() error {
		s.Send(Item{N: 1, B: []byte("lost|")})
		if downs.Load() == 0 || s.Dropped.Load() == 0 {
			return fmt.Errorf("downs %d, dropped %d", downs.Load(), s.Dropped.Load())
		}
		return nil
	})

	// Back on the same address: the stream redials.
	var srv2 *echoServer
	waitFor(t, 5*time.Second, func() error {
		l, err := Listen(addr, ListenConfig{Logger: zerolog.Nop()})
		if err != nil {
			return err
		}
		l.Close()
		srv2 = startServer(t, addr)
		return nil
	})
	defer srv2.l.Close()
	waitFor(t, 10*time.Second, func() error {
		s.Send(Item{N: 1, B: []byte("again|")})
		if srv2.count() == 0 {
			return errors.New("nothing arrived after the peer came back")
		}
		return nil
	})
}

// TestWriter: frames written by many goroutines arrive whole.
func TestWriter(t *testing.T) {
	a, b := net.Pipe()
	w := NewWriter(a, 16, 5*time.Second, nil)
	defer w.Close()
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				body := fmt.Appendf(nil, "w%d-%d", g, i)
				if err := w.Write(append(AppendHeader(nil, len(body)), body...)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seen := map[string]bool{}
	for len(seen) < writers*each {
		f, err := ReadFrame(b, nil, 64)
		if err != nil {
			t.Fatal(err)
		}
		seen[string(f)] = true
	}
	wg.Wait()
	b.Close()
	waitFor(t, 5*time.Second, func() error {
		if err := w.Write([]byte{0, 0, 0, 0}); !errors.Is(err, ErrClosed) {
			return fmt.Errorf("write after the peer closed: %v", err)
		}
		return nil
	})
}

// TestListenerSurvivesEMFILE: with the process out of file descriptors
// Accept fails; the listener counts it, backs off and accepts again once
// descriptors are free, and the connection that waited in the backlog
// meanwhile is served.
func TestListenerSurvivesEMFILE(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0")
	defer srv.l.Close()
	addr := srv.l.Addr().String()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip("getrlimit:", err)
	}
	lim := old
	lim.Cur = 64
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip("setrlimit:", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
		}
	}
	defer restore()
	var held []*os.File
	release := func() {
		for _, f := range held {
			f.Close()
		}
		held = nil
	}
	defer release()
	// Take every descriptor left, then free exactly one: the dial below
	// takes it, so the connection waits in the listen backlog while the
	// listener's Accept finds no descriptor (whoever wins a race for the
	// last descriptor does not matter: there is only one, and the dial
	// has it before the connection exists).
	for range 200 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
	}
	if len(held) == 0 {
		t.Fatal("no descriptor to hold under the lowered limit")
	}
	held[len(held)-1].Close()
	held = held[:len(held)-1]
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(append(AppendHeader(nil, 3), "ok|"...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		if srv.l.AcceptErrors.Load() == 0 {
			return errors.New("no accept error while out of descriptors")
		}
		return nil
	})
	if srv.count() != 0 {
		t.Fatal("a connection was served while the listener had no descriptor")
	}
	release()
	restore()
	// Still listening: the waiting connection is accepted and served.
	waitFor(t, 10*time.Second, func() error {
		if srv.count() == 0 {
			return errors.New("the listener stopped serving after EMFILE")
		}
		return nil
	})
	t.Logf("accept errors: %d", srv.l.AcceptErrors.Load())
}

// TestReadFrameGrowsAsBytesArrive: a frame declaring far more than it
// sends costs what arrived, not the declared length; a whole large body
// still reads back intact.
func TestReadFrameGrowsAsBytesArrive(t *testing.T) {
	const declared = 200 << 20
	in := append(AppendHeader(nil, declared), make([]byte, 1000)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(bytes.NewReader(in), nil, 256<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error %v, want unexpected EOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 { // far below the declared length; room for other goroutines
		t.Fatalf("a %d-byte declared frame with 1000 bytes sent allocated %d bytes", declared, got)
	}
	body := make([]byte, 3<<20+7)
	for i := range body {
		body[i] = byte(i * 7)
	}
	got, err := ReadFrame(bytes.NewReader(append(AppendHeader(nil, len(body)), body...)), nil, 4<<20)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("large body: %v, equal %v", err, bytes.Equal(got, body))
	}
}
