package replica

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// TestTCPQueuedFrameBytes: peers that pass the hello (each a registered
// broker's id, from its address) and then send all but the last byte of
// a large frame hold at most the replication port's budget between them,
// not the sum of their frames; a peer's heartbeat is still delivered at
// once meanwhile, and the stalled frames time out and give their room
// back. Without a budget the same attack grows the heap by most of the
// frames' sum, so the bound is what is measured.
func TestTCPQueuedFrameBytes(t *testing.T) {
	const conns, frame = 12, 4 << 20
	const realPeer = NodeID(100)
	run := func(t *testing.T, budget int64, bodyTimeout time.Duration) (growth func() int64, a, peer *TCPTransport, delivered <-chan time.Time) {
		old := frameBodyTimeout
		frameBodyTimeout = bodyTimeout
		t.Cleanup(func() { frameBodyTimeout = old })
		var peerAddr atomic.Value
		peerAddr.Store("")
		a, err := NewTCPTransport(TCPConfig{Self: 1, Listen: "127.0.0.1:0", Logger: testLogger(t), QueuedBytes: budget,
			Resolve: func(id NodeID) string {
				switch {
				case id == realPeer:
					return peerAddr.Load().(string)
				case id >= 2 && id < 2+conns:
					return "127.0.0.1:1" // registered, at this address
				}
				return ""
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		got := make(chan time.Time, 16)
		a.Handle(func(from NodeID, msgs []Envelope) {
			if from == realPeer {
				select {
				case got <- time.Now():
				default:
				}
			}
		})
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var wg sync.WaitGroup
		for i := range conns {
			c, err := net.DialTimeout("tcp", a.Addr(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				f := binary.BigEndian.AppendUint32(nil, tcpMagic)
				f = binary.BigEndian.AppendUint16(f, 1)
				f = binary.BigEndian.AppendUint32(f, uint32(2+i))
				f = binary.BigEndian.AppendUint32(f, frame)
				f = append(f, make([]byte, frame-1)...) // all of the body but its last byte
				c.SetWriteDeadline(time.Now().Add(3 * time.Second))
				c.Write(f) // a connection not read stops taking bytes: its write times out
			}()
		}
		wg.Wait()
		b, err := NewTCPTransport(TCPConfig{Self: realPeer, Listen: "127.0.0.1:0", Logger: testLogger(t), Resolve: func(NodeID) string { return a.Addr() }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		peerAddr.Store(b.Addr())
		return func() int64 {
			runtime.GC()
			var during runtime.MemStats
			runtime.ReadMemStats(&during)
			return int64(during.HeapAlloc) - int64(before.HeapAlloc)
		}, a, b, got
	}

	t.Run("unbounded", func(t *testing.T) {
		growth, _, _, _ := run(t, -1, time.Minute)
		var g int64
		checkFor(t, 20*time.Second, func() error {
			if g = growth(); g < conns*frame/2 {
				return fmt.Errorf("the attack grew the heap by %d MiB only without a budget: it does not measure the bound", g>>20)
			}
			return nil
		})
		t.Logf("heap growth without a budget: %d MiB", g>>20)
	})

	t.Run("bounded", func(t *testing.T) {
		const limit = 8 << 20
		growthNow, a, peer, delivered := run(t, limit, 3*time.Second)
		time.Sleep(time.Second) // time for the port to read whatever it would
		growth := growthNow()
		t.Logf("heap growth with an %d MiB budget: %d MiB; budget peak %d MiB, %d frames waited", limit>>20, growth>>20, a.budget.Peak()>>20, a.budget.Waits())
		if growth > limit+4<<20 {
			t.Fatalf("heap grew by %d MiB under a %d MiB budget", growth>>20, limit>>20)
		}
		if p := a.budget.Peak(); p > limit {
			t.Fatalf("budget peak %d, over its limit %d", p, limit)
		}
		if w := a.budget.Waits(); w < conns-2 {
			t.Fatalf("%d frames waited for room, want at least %d", w, conns-2)
		}
		if used := a.budget.Used(); used < frame {
			t.Fatalf("the attack no longer holds the budget (%d bytes): the peer was not tested under it", used)
		}
		// A registered peer's heartbeat is delivered while the stalled
		// frames hold the budget.
		start := time.Now()
		peer.Send(1, []Envelope{{Group: Key{Index: 1}, Msg: &raftpb.Message{Type: new(raftpb.MsgHeartbeat), To: new(uint64(1)), From: new(uint64(realPeer)), Term: new(uint64(1))}}})
		select {
		case at := <-delivered:
			if d := at.Sub(start); d > time.Second {
				t.Fatalf("a peer's heartbeat took %v under the attack", d)
			} else {
				t.Logf("a peer's heartbeat delivered in %v", d.Round(time.Millisecond))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a peer's heartbeat was not delivered under the attack")
		}
		// The stalled frames' bodies time out and give their room
		// back; each next one then times out in turn.
		checkFor(t, 15*time.Second, func() error {
			if r := a.Refused(); r["frame_timeout"] < 1 {
				return fmt.Errorf("refused %v", r)
			}
			return nil
		})
	})
}
