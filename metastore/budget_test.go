package metastore

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestTCPQueuedRequestBytes: twelve connections each announce a 4 MiB
// request frame on the metastore port and send all of it but its last
// byte, then stall. With an 8 MiB port budget one frame is read at a time
// (the others' connections are not read: their bytes wait in the
// kernel), the live heap grows by about one frame, not twelve, and a
// client's small call is answered meanwhile; the stalled frame is closed
// after the body timeout and the next one gets its turn. The same attack
// on an unbounded port (budget off) grows the heap by about all twelve,
// which shows the attack measures what it claims.
func TestTCPQueuedRequestBytes(t *testing.T) {
	const conns, frame = 12, 4 << 20
	// run starts a node whose port has the given budget, runs the attack
	// and returns a function measuring the live heap's growth since.
	run := func(t *testing.T, budget int64) (growth func() int64, tr *TCPTransport, n *Node) {
		cfg := testConfig(t, 1, t.TempDir())
		tr = NewTCPTransport(1, "127.0.0.1:0", cfg.Logger)
		tr.bounds.queuedBytes = budget
		tr.bounds.frameBody = 2 * time.Second
		cfg.Transport = tr
		var err error
		if n, err = Open(cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var wg sync.WaitGroup
		for range conns {
			c, err := net.DialTimeout("tcp", tr.Addr(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				f := append(binary.BigEndian.AppendUint32(nil, uint32(frame)), frameRequest)
				f = append(f, make([]byte, frame-2)...) // all of the body but its last byte
				c.SetWriteDeadline(time.Now().Add(3 * time.Second))
				c.Write(f) // a connection not read stops taking bytes: its write times out
			}()
		}
		wg.Wait()
		return func() int64 {
			runtime.GC()
			var during runtime.MemStats
			runtime.ReadMemStats(&during)
			return int64(during.HeapAlloc) - int64(before.HeapAlloc)
		}, tr, n
	}

	t.Run("unbounded", func(t *testing.T) {
		growth, _, _ := run(t, 0)
		// The node reads what the kernel holds as fast as it is
		// scheduled: on a loaded machine that takes a while.
		var g int64
		checkFor(t, 20*time.Second, 100*time.Millisecond, func() error {
			if g = growth(); g < conns*frame/2 {
				return fmt.Errorf("the attack grew the heap by %d MiB only without a budget: it does not measure the bound", g>>20)
			}
			return nil
		})
		t.Logf("heap growth without a budget: %d MiB", g>>20)
	})

	t.Run("bounded", func(t *testing.T) {
		const limit = 8 << 20
		growthNow, tr, n := run(t, limit)
		// Time for the node to read whatever it would.
		time.Sleep(time.Second)
		growth := growthNow()
		t.Logf("heap growth with an %d MiB budget: %d MiB; budget peak %d MiB, %d frames waited", limit>>20, growth>>20, tr.budget.Peak()>>20, tr.budget.Waits())
		if growth > limit+4<<20 {
			t.Fatalf("heap grew by %d MiB under a %d MiB budget", growth>>20, limit>>20)
		}
		if p := tr.budget.Peak(); p > limit {
			t.Fatalf("budget peak %d, over its limit %d", p, limit)
		}
		if w := tr.budget.Waits(); w < conns-2 {
			t.Fatalf("%d frames waited for room, want at least %d", w, conns-2)
		}
		// A small call is answered while the large frames hold the
		// budget: a broker's client creating a topic.
		ctx := ctxT(t)
		start := time.Now()
		rc, err := Dial(ctx, ClientConfig{Addrs: []string{tr.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if _, err := rc.CreateTopic(ctx, TopicSpec{Name: "small-client", Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a small call took %v under the attack", d)
		}
		if used := tr.budget.Used(); used < frame {
			t.Fatalf("the attack no longer holds the budget (%d bytes): the small call was not tested under it", used)
		}
		// The stalled frame's body times out (2 s here) and frees its
		// room for the next one; each then times out in turn.
		checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			if r := n.Refused(); r["frame_timeout"] < 1 {
				return fmt.Errorf("refused %v", r)
			}
			return nil
		})
	})
}
