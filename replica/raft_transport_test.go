package replica

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

func sampleFrame(t testing.TB) []byte {
	msgs := []Envelope{
		{Group: Key{TopicID: [16]byte{1}, Index: 3}, Msg: &raftpb.Message{Type: new(raftpb.MsgHeartbeat), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(5)), Commit: new(uint64(9))}},
		{Group: Key{TopicID: [16]byte{2}, Index: 0}, Msg: &raftpb.Message{Type: new(raftpb.MsgApp), To: new(uint64(3)), From: new(uint64(1)), Term: new(uint64(5)),
			Entries: []*raftpb.Entry{{Term: new(uint64(5)), Index: new(uint64(10)), Type: new(raftpb.EntryNormal), Data: testBatch("x", 2, -1, 0, 0)}}}},
	}
	f, err := encodeFrame(nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFrameRoundTrip(t *testing.T) {
	f := sampleFrame(t)
	if int(binary.BigEndian.Uint32(f)) != len(f)-4 {
		t.Fatalf("frame length %d, have %d bytes", binary.BigEndian.Uint32(f), len(f)-4)
	}
	msgs, err := decodeFrame(f[4:])
	if err != nil || len(msgs) != 2 || msgs[1].Msg.GetEntries()[0].GetIndex() != 10 || msgs[0].Group.Index != 3 {
		t.Fatalf("decoded %v, %v", msgs, err)
	}
	f2, _ := encodeFrame(nil, msgs)
	if !bytes.Equal(f, f2) {
		t.Fatal("re-encoding differs")
	}
}

// FuzzDecodeFrame: a peer's bytes never panic the decoder, and whatever
// decodes re-encodes to a frame that decodes the same.
//
//	go test ./replica/ -run '^$' -fuzz FuzzDecodeFrame -fuzztime 30s
func FuzzDecodeFrame(f *testing.F) {
	f.Add(sampleFrame(f)[4:])
	f.Add([]byte{0, 0, 0, 1})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := decodeFrame(b)
		if err != nil {
			return
		}
		again, err := encodeFrame(nil, msgs)
		if err != nil {
			return
		}
		msgs2, err := decodeFrame(again[4:])
		if err != nil || len(msgs2) != len(msgs) {
			t.Fatalf("re-decode: %d vs %d, %v", len(msgs2), len(msgs), err)
		}
	})
}

// A connection that sends garbage is closed; the transport goes on serving
// real peers.
func TestTCPTransportRejectsGarbage(t *testing.T) {
	got := make(chan []Envelope, 1)
	var bAddr atomic.Value
	bAddr.Store("")
	a, err := NewTCPTransport(TCPConfig{Self: 1, Listen: "127.0.0.1:0", Logger: testLogger(t), Resolve: func(id NodeID) string {
		if id == 2 {
			return bAddr.Load().(string)
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Handle(func(from NodeID, msgs []Envelope) {
		if from == 2 {
			got <- msgs
		}
	})
	for _, junk := range [][]byte{
		[]byte("GET / HTTP/1.1\r\n\r\n"),
		append([]byte{0x53, 0x4c, 0x52, 0x54, 0, 1, 0, 0, 0, 9}, 0xff, 0xff, 0xff, 0xff), // a 4 GiB frame
		append([]byte{0x53, 0x4c, 0x52, 0x54, 0, 1, 0, 0, 0, 9}, 0, 0, 0, 8, 0, 0, 0, 9, 1, 2, 3, 4),
	} {
		c, err := net.Dial("tcp", a.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(junk)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("garbage connection got an answer")
		}
		c.Close()
	}
	b, err := NewTCPTransport(TCPConfig{Self: 2, Listen: "127.0.0.1:0", Logger: testLogger(t), Resolve: func(NodeID) string { return a.Addr() }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bAddr.Store(b.Addr())
	b.Send(1, []Envelope{{Group: Key{Index: 1}, Msg: &raftpb.Message{Type: new(raftpb.MsgHeartbeat), To: new(uint64(2)), From: new(uint64(3))}}})
	select {
	case msgs := <-got:
		if len(msgs) != 1 || msgs[0].Group.Index != 1 {
			t.Fatalf("got %v", msgs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("real peer's message not delivered")
	}
	// The HTTP request and the two unknown node 9s, counted by reason.
	if r := a.Refused(); r["handshake"] != 1 || r["unknown_node"] != 2 {
		t.Fatalf("refused %v", r)
	}
}
