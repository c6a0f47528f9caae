package metastore

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/internal/peerlink"
)

// openTCPCluster opens a three-member group over the real TCP transport
// on loopback and waits for its leader.
func openTCPCluster(t *testing.T) map[uint64]*Node {
	t.Helper()
	addrs := freeAddrs(t, 3)
	var peerList []string
	for i, a := range addrs {
		peerList = append(peerList, fmt.Sprintf("%d=%s", i+1, a))
	}
	nodes := map[uint64]*Node{}
	for id := uint64(1); id <= 3; id++ {
		cfg := testConfig(t, id, t.TempDir())
		cfg.Listen = addrs[id-1]
		cfg.PeerList = peerList
		n, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes[id] = n
		t.Cleanup(func() { n.Close() })
	}
	ctx := ctxT(t)
	for _, n := range nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// raftFrame encodes msgs as the TCP transport frames a raft batch.
func raftFrame(t testing.TB, msgs ...*pb.Message) []byte {
	t.Helper()
	var items []peerlink.Item
	for _, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, peerlink.Item{B: b})
	}
	f, err := encodeRaftItems(nil, items)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// forge dials addr and writes b.
func forge(t *testing.T, addr string, b []byte) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByPeer: the acceptor closed c (it refused what c sent).
func closedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection not closed by the acceptor: %v", err)
	}
}

func waitRefused(t *testing.T, n *Node, want map[string]int64) {
	t.Helper()
	checkFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		got := n.Refused()
		for k, v := range want {
			if got[k] < v {
				return fmt.Errorf("node %d refused %v, want at least %v", n.ID(), got, want)
			}
		}
		return nil
	})
}

// TestTCPRefusesForgedRaft sends, over the real TCP transport from a
// member's address, raft messages that would end the process (raft
// panics on a heartbeat committing past the log and on a leader's
// acknowledgement past its log; the apply loop stops on an entry it
// cannot decode) or take over the group, and frames too large for the
// connection: each is refused and counted, and the group keeps
// committing.
func TestTCPRefusesForgedRaft(t *testing.T) {
	nodes := openTCPCluster(t)
	lead := nodes[1].Leader()
	var victim, other uint64
	for id := range nodes {
		if id != lead {
			if victim == 0 {
				victim = id
			} else {
				other = id
			}
		}
	}
	v, l := nodes[victim], nodes[lead]
	st := v.Status()
	term := st.Term
	msg := func(typ pb.MessageType, from, to, term uint64) *pb.Message {
		return &pb.Message{Type: new(typ), From: new(from), To: new(to), Term: new(term)}
	}
	hb := msg(pb.MsgHeartbeat, lead, victim, term)
	hb.Commit = new(uint64(1) << 40)
	nowhere := msg(pb.MsgHeartbeat, lead, victim, term+100) // a term nobody reached
	nowhere.Commit = new(uint64(1) << 40)
	gap := msg(pb.MsgApp, lead, victim, term)
	gap.Index, gap.LogTerm = new(st.Commit), new(term)
	gap.Entries = []*pb.Entry{{Index: new(st.Commit + 2), Term: new(term)}}
	junk := msg(pb.MsgApp, lead, victim, term)
	junk.Index, junk.LogTerm, junk.Commit = new(st.Commit), new(term), new(st.Commit+1)
	junk.Entries = []*pb.Entry{{Index: new(st.Commit + 1), Term: new(term), Data: []byte("x")}}
	snap := msg(pb.MsgSnap, lead, victim, term)
	snap.Snapshot = &pb.Snapshot{Data: []byte("not a bbolt file"), Metadata: &pb.SnapshotMetadata{
		Index: new(uint64(1) << 30), Term: new(term), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
	local := msg(pb.MsgHup, lead, victim, term)
	elsewhere := msg(pb.MsgHeartbeat, lead, other, term)
	noTerm := msg(pb.MsgHeartbeat, lead, victim, 0)
	// A follower forwards a read-index request to its leader, and raft
	// panics sending one that has a term.
	readTerm := msg(pb.MsgReadIndex, lead, victim, term)
	// The last: another member's message on the leader's connection
	// closes it.
	impostor := msg(pb.MsgHeartbeat, other, victim, term)
	c := forge(t, v.Addr(), raftFrame(t, hb))
	for _, m := range []*pb.Message{nowhere, gap, junk, snap, local, elsewhere, noTerm, readTerm, impostor} {
		if _, err := c.Write(raftFrame(t, m)); err != nil {
			t.Fatal(err)
		}
	}
	closedByPeer(t, c)
	// A member that is not the term's leader sends a leader's message.
	notLeader := msg(pb.MsgHeartbeat, other, victim, term)
	forge(t, v.Addr(), raftFrame(t, notLeader))
	// To the leader: an acknowledgement past its log, a proposal the
	// apply loop cannot decode.
	ack := msg(pb.MsgAppResp, victim, lead, term)
	ack.Index = new(uint64(1) << 40)
	prop := &pb.Message{Type: new(pb.MsgProp), From: new(victim), To: new(lead), Entries: []*pb.Entry{{Data: []byte("x")}}}
	forge(t, l.Addr(), raftFrame(t, ack, prop))
	// A stranger; frames too large for an unknown connection (the
	// declared length only: nothing is allocated for it); a frame of no
	// known kind.
	closedByPeer(t, forge(t, v.Addr(), raftFrame(t, msg(pb.MsgHeartbeat, 77, victim, term))))
	closedByPeer(t, forge(t, v.Addr(), append([]byte{0x0c, 0, 0, 0, frameRaft}, make([]byte, 64)...)))
	closedByPeer(t, forge(t, v.Addr(), []byte{0x40, 0, 0, 0, frameRequest, 0, 0, 0, 1}))
	closedByPeer(t, forge(t, v.Addr(), []byte{0, 0, 0, 2, 9, 9}))

	waitRefused(t, v, map[string]int64{
		"commit_past_log": 2, "entries": 2, "snapshot": 1, "type": 1, "to": 1, "term": 2,
		"identity": 1, "not_leader": 1, "unknown_node": 1, "frame": 3,
	})
	waitRefused(t, l, map[string]int64{"ack_past_log": 1, "entries": 1})
	t.Logf("refused by node %d: %v; by the leader: %v", victim, v.Refused(), l.Refused())

	// The group still commits, and the victim applies.
	ctx := ctxT(t)
	if _, err := l.Client().CreateTopic(ctx, TopicSpec{Name: "after-forgery", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if _, ok := v.Client().TopicByName("after-forgery"); !ok {
			return fmt.Errorf("node %d did not apply the write after the forgeries", victim)
		}
		return nil
	})
	if got := v.Status(); got.Term != term || got.Leader != lead {
		t.Fatalf("term %d leader %d after the forgeries, was %d and %d", got.Term, got.Leader, term, lead)
	}
}

// FuzzMetaReceive drives the receive path of a real three-member group
// (the in-memory hub between them) with arbitrary raft batches: the bytes
// are decoded as the TCP transport decodes a raft frame, each message is
// addressed from a member to a member (or not, by the selector byte),
// optionally in the receiver's current term, and handed to the member as
// the transport hands it. No input may panic a member (raft's fatal
// errors exit the process, failing the fuzz run), and the group must
// commit a write after each.
func FuzzMetaReceive(f *testing.F) {
	c := newTestCluster(f, 3, nil)
	add := func(sel byte, msgs ...*pb.Message) {
		f.Add(sel, raftFrame(f, msgs...)[5:])
	}
	commit := new(uint64(1) << 40)
	add(0x20, &pb.Message{Type: new(pb.MsgHeartbeat), Commit: commit})
	add(0x00, &pb.Message{Type: new(pb.MsgHeartbeat), Term: new(uint64(1000)), Commit: commit})
	add(0x28, &pb.Message{Type: new(pb.MsgAppResp), Index: commit})
	add(0x20, &pb.Message{Type: new(pb.MsgApp), Index: new(uint64(3)), LogTerm: new(uint64(2)), Commit: new(uint64(4)),
		Entries: []*pb.Entry{{Index: new(uint64(4)), Term: new(uint64(2)), Data: []byte{1, 2, 3}}}})
	add(0x08, &pb.Message{Type: new(pb.MsgProp), Entries: []*pb.Entry{{Data: []byte("x")}, {Type: new(pb.EntryConfChange), Data: []byte{8, 1, 16, 2}}}})
	add(0x20, &pb.Message{Type: new(pb.MsgSnap), Snapshot: &pb.Snapshot{Data: []byte("x"),
		Metadata: &pb.SnapshotMetadata{Index: new(uint64(100)), Term: new(uint64(1)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{3}}}}})
	add(0x20, &pb.Message{Type: new(pb.MsgTimeoutNow)}, &pb.Message{Type: new(pb.MsgVote), Term: new(uint64(1) << 62), LogTerm: new(uint64(1) << 62), Index: commit})
	add(0x40, &pb.Message{Type: new(pb.MsgReadIndex), Entries: []*pb.Entry{{Data: []byte("ctx")}}})
	for sel := byte(0x20); sel < 0x38; sel += 8 { // each member, in its term
		add(sel, &pb.Message{Type: new(pb.MsgReadIndex), Entries: []*pb.Entry{{Data: []byte("ctx")}}})
	}
	writes := 0
	f.Fuzz(func(t *testing.T, sel byte, batch []byte) {
		msgs, err := decodeRaftBatch(batch)
		if err != nil {
			return // the transport closes the connection
		}
		to := uint64(sel>>3)%3 + 1
		n := c.node(to)
		for i, m := range msgs {
			from := (to+uint64(i))%3 + 1
			if from == to {
				from = from%3 + 1
			}
			if sel&0x80 == 0 {
				m.From = new(from)
			}
			if sel&0x40 == 0 {
				m.To = new(to)
			}
			if sel&0x20 != 0 {
				m.Term = new(n.Status().Term)
			}
			n.HandleRaft(m)
		}
		// The group still commits (an input may have started an
		// election: the write is retried until a leader takes it).
		writes++
		ctx, cancel := shortCtx(20 * time.Second)
		defer cancel()
		for {
			lead := c.node(to)
			if l := lead.Leader(); l != 0 {
				lead = c.node(l)
			}
			wctx, wcancel := shortCtx(2 * time.Second)
			err := lead.Client().CommitOffsets(wctx, Fence{}, "fuzz", []OffsetCommit{{TopicPartition: TopicPartition{"t", 0}, Offset: int64(writes)}})
			wcancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the group commits nothing after input %x %x: %v", sel, batch, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestTCPBoundsConnections: connections that send nothing count against
// the handshake bound (more are closed at once) until the first-frame
// timeout closes them; the port's connection bound closes more at once;
// connections idle after their first frame are closed; and the node
// serves a client again.
func TestTCPBoundsConnections(t *testing.T) {
	cfg := testConfig(t, 1, t.TempDir())
	tr := NewTCPTransport(1, "127.0.0.1:0", cfg.Logger)
	tr.bounds = portBounds{maxConns: 8, maxHandshaking: 3, firstFrame: 2 * time.Second, idle: 2 * time.Second,
		queuedBytes: QueuedMaxRequestBytes, frameBody: FrameBodyTimeout}
	cfg.Transport = tr
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	addr := tr.Addr()
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedWithin := func(c net.Conn, d time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		c.SetReadDeadline(start.Add(d))
		if _, err := io.Copy(io.Discard, c); err != nil { // nil at EOF
			t.Fatalf("connection not closed within %v: %v", d, err)
		}
		return time.Since(start)
	}
	var silent []net.Conn
	for range 3 {
		silent = append(silent, dial())
	}
	time.Sleep(50 * time.Millisecond)
	if d := closedWithin(dial(), 5*time.Second); d > time.Second {
		t.Fatalf("a connection over the handshake bound was closed after %v, not at once", d)
	}
	for _, c := range silent {
		closedWithin(c, 10*time.Second)
	}
	waitRefused(t, n, map[string]int64{"busy": 1, "handshake": 3})
	// The refusals are counted before the closed connections' serving
	// ends: wait until none is left, or one of them would still take a
	// place below the connection bound.
	checkFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		if n := tr.ln.Open(); n != 0 {
			return fmt.Errorf("%d connections still served", n)
		}
		return nil
	})

	// Up to the connection bound, each past its first frame (a request
	// frame that decodes: a status call).
	req := func(c net.Conn) {
		body := append(binary.BigEndian.AppendUint64(nil, 1), `{"k":"status"}`...)
		f := append(binary.BigEndian.AppendUint32(nil, uint32(1+len(body))), frameRequest)
		if _, err := c.Write(append(f, body...)); err != nil {
			t.Fatal(err)
		}
	}
	var open []net.Conn
	for range 8 {
		c := dial()
		req(c)
		open = append(open, c)
		// Past its handshake before the next is dialled: more than
		// maxHandshaking at once would be closed as busy, leaving a
		// place below the connection bound.
		checkFor(t, 5*time.Second, 5*time.Millisecond, func() error {
			if n := tr.ln.Handshaking(); n != 0 {
				return fmt.Errorf("%d connections handshaking", n)
			}
			return nil
		})
	}
	time.Sleep(100 * time.Millisecond)
	if d := closedWithin(dial(), 5*time.Second); d > time.Second {
		t.Fatalf("a connection over the connection bound was closed after %v, not at once", d)
	}
	waitRefused(t, n, map[string]int64{"busy": 2})
	// A single node has no peers: these are strangers, closed once idle
	// (a member's address would be exempt).
	for _, c := range open {
		closedWithin(c, 10*time.Second)
	}
	ctx := ctxT(t)
	checkFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		rc, err := Dial(ctx, ClientConfig{Addrs: []string{addr}})
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = rc.CreateTopic(ctx, TopicSpec{Name: "after-bounds", Partitions: 1})
		return err
	})
}
