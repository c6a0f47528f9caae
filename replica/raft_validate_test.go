package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// TestRaftRefusesForgedMessages: messages no honest peer sends reach the
// receive path of a follower and of the leader (as a transport delivers
// them, with the node the connection belongs to). Each is refused and
// counted under its reason before raft sees it; no replica fails, the
// outsider's higher term does not reach the group, and the group goes on
// committing.
func TestRaftRefusesForgedMessages(t *testing.T) {
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft}, slowElections)
	for i := range 3 {
		c.produce(testBatch(fmt.Sprint("a", i), 2, -1, 0, 0), AcksAll)
	}
	c.converged(6, 10*time.Second)
	ln, lr := c.leader()
	var f NodeID
	for n := range c.running() {
		if n != ln {
			f = n
			break
		}
	}
	fh, lh, fr := c.hosts[f], c.hosts[ln], c.rep(f)
	term := lr.Term()
	last, _ := fr.st.LastIndex()
	const outsider NodeID = 9
	msg := func(typ raftpb.MessageType, from, to NodeID, term uint64) *raftpb.Message {
		return &raftpb.Message{Type: new(typ), From: new(raftID(from)), To: new(raftID(to)), Term: new(term)}
	}
	hb := msg(raftpb.MsgHeartbeat, ln, f, term)
	hb.Commit = new(last + 1000)
	gap := msg(raftpb.MsgApp, ln, f, term)
	gap.Index, gap.LogTerm = new(last), new(term)
	gap.Entries = []*raftpb.Entry{{Index: new(last + 2), Term: new(term)}} // skips last+1
	notBatch := msg(raftpb.MsgApp, ln, f, term)
	notBatch.Index, notBatch.LogTerm = new(last), new(term)
	notBatch.Entries = []*raftpb.Entry{{Index: new(last + 1), Term: new(term), Data: []byte("not a record batch")}}
	snap := msg(raftpb.MsgSnap, ln, f, term)
	snap.Snapshot = &raftpb.Snapshot{Data: []byte("junk"), Metadata: &raftpb.SnapshotMetadata{Index: new(last + 10), Term: new(term),
		ConfState: &raftpb.ConfState{Voters: raftIDs([]NodeID{1, 2, 3})}}}
	fr.st.mu.Lock()
	snapData := fr.st.snapshotLocked().GetData()
	fr.st.mu.Unlock()
	badConf := msg(raftpb.MsgSnap, ln, f, term)
	badConf.Snapshot = &raftpb.Snapshot{Data: snapData, Metadata: &raftpb.SnapshotMetadata{Index: new(last + 10), Term: new(term),
		ConfState: &raftpb.ConfState{Voters: raftIDs([]NodeID{1, 2, 3}), Learners: raftIDs([]NodeID{2})}}} // 2 both voter and learner: raft panics restoring it
	stranger := msg(raftpb.MsgApp, outsider, f, term+5)
	stranger.Index, stranger.LogTerm = new(last), new(term)
	strangerVote := msg(raftpb.MsgVote, outsider, f, term+5)
	strangerVote.Index, strangerVote.LogTerm = new(last+100), new(term+5)
	otherLeader := msg(raftpb.MsgHeartbeat, 6-ln-f, f, term) // the third voter, as a second leader of the term
	timeoutNow := msg(raftpb.MsgTimeoutNow, 6-ln-f, f, term)
	ack := msg(raftpb.MsgAppResp, f, ln, term)
	ack.Index = new(last + 1000)
	prop := msg(raftpb.MsgProp, ln, f, 0)
	prop.Entries = []*raftpb.Entry{{Data: testBatch("forged", 1, -1, 0, 0)}}

	toF := func(from NodeID, g Key, m *raftpb.Message) { fh.receive(from, []Envelope{{Group: g, Msg: m}}) }
	toF(ln, c.key, hb)
	toF(ln, c.key, gap)
	toF(ln, c.key, notBatch)
	toF(ln, c.key, snap)
	toF(ln, c.key, badConf)
	toF(outsider, c.key, stranger)
	toF(outsider, c.key, strangerVote)
	toF(6-ln-f, c.key, otherLeader)
	toF(6-ln-f, c.key, timeoutNow)
	toF(outsider, c.key, msg(raftpb.MsgHeartbeat, ln, f, term)) // From is not the connection's node
	toF(ln, c.key, msg(raftpb.MsgHeartbeat, ln, f, 0))          // term 0: raft would take it for a local message
	toF(ln, c.key, msg(raftpb.MsgHeartbeat, ln, 7, term))       // for another node
	toF(ln, c.key, prop)
	toF(ln, c.key, msg(raftpb.MsgHup, ln, f, term))
	toF(ln, Key{TopicID: [16]byte{9, 9}, Index: 1}, msg(raftpb.MsgHeartbeat, ln, f, term))
	lh.receive(f, []Envelope{{Group: c.key, Msg: ack}})

	want := map[Refusal]int64{
		RefusedCommit: 1, RefusedEntries: 2, RefusedSnapshot: 2, RefusedNotMember: 2, RefusedNotLeader: 2,
		RefusedFrom: 1, RefusedTerm: 1, RefusedTo: 1, RefusedType: 2, RefusedGroup: 1,
	}
	checkFor(t, 10*time.Second, func() error {
		got := fh.Refused()
		for why, n := range want {
			// Real traffic may add "group" refusals (a message for a
			// group this host has not opened yet, as at every start);
			// the forged one must be among them.
			if g := got[why.String()]; g != n && (why != RefusedGroup || g < n) {
				return fmt.Errorf("follower refused %v, want %v", got, want)
			}
		}
		if n := lh.Refused()[RefusedAckPastLog.String()]; n != 1 {
			return fmt.Errorf("leader refused %v", lh.Refused())
		}
		return nil
	})
	if fr.Term() >= term+5 {
		t.Fatalf("the outsider's term %d reached the follower (term %d)", term+5, fr.Term())
	}
	for n, r := range c.running() {
		if err := r.Failed(); err != nil {
			t.Fatalf("node %d failed: %v", n, err)
		}
	}
	res := c.produce(testBatch("after", 2, -1, 0, 0), AcksAll)
	c.converged(res.LastOffset+1, 10*time.Second)
	if fh.FailedReplicas() != 0 || lh.FailedReplicas() != 0 {
		t.Fatal("a replica counted as failed")
	}
}

// TestRaftPanicTakesOnlyItsGroupOffline: raft panics inside one group's
// round on a broker (a heartbeat committing past the log stepped straight
// into raft, past the checks). That replica fails and is counted; its
// writes fail with ErrReplicaFailed; the other group on the same broker
// goes on committing, and so does the failed group on its other members.
func TestRaftPanicTakesOnlyItsGroupOffline(t *testing.T) {
	var reported atomic.Pointer[error]
	c := newTestCluster(t, []NodeID{1, 2, 3}, nil, ReplicaOptions{Mode: ModeRaft}, slowElections, func(cfg *HostConfig) {
		cfg.OnFailed = func(_ Key, err error) { reported.Store(&err) }
	})
	other := Key{TopicID: [16]byte{4, 5, 6}, Index: 0}
	members := Members{Voters: []NodeID{1, 2, 3}}
	for _, n := range []NodeID{1, 2, 3} {
		if _, err := c.hosts[n].Open("other", other, members, c.opts); err != nil {
			t.Fatal(err)
		}
	}
	produceOther := func(value string) int64 {
		t.Helper()
		var end int64
		checkFor(t, 20*time.Second, func() error {
			for _, n := range []NodeID{1, 2, 3} {
				r, _ := c.hosts[n].Get(other)
				if !r.IsLeader() {
					continue
				}
				p, err := r.Propose(testBatch(value, 1, -1, 0, 0), AcksAll)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				res, err := p.Wait(ctx)
				end = res.LastOffset + 1
				return err
			}
			return errors.New("no leader of the other group")
		})
		return end
	}
	produceOther("before")
	c.produce(testBatch("before", 1, -1, 0, 0), AcksAll)

	ln, lr := c.leader()
	f := NodeID(1)
	if ln == f {
		f = 2
	}
	fr := c.rep(f)
	term := lr.Term()
	fr.raftMu.Lock()
	fr.stepHook = func(m *raftpb.Message) {
		hb := &raftpb.Message{Type: new(raftpb.MsgHeartbeat), From: new(raftID(ln)), To: new(raftID(f)), Term: new(term + 1), Commit: new(uint64(1) << 40)}
		_ = fr.rn.Step(hb) // raft: "tocommit(...) is out of range [lastIndex(...)]"
	}
	fr.raftMu.Unlock()

	checkFor(t, 10*time.Second, func() error {
		if fr.Failed() == nil {
			return errors.New("replica not failed yet")
		}
		return nil
	})
	if err := fr.Failed(); !errors.Is(err, ErrReplicaFailed) {
		t.Fatalf("Failed() = %v", err)
	}
	if p := reported.Load(); p == nil || !errors.Is(*p, ErrReplicaFailed) {
		t.Fatalf("OnFailed not told: %v", p)
	}
	if n := c.hosts[f].FailedReplicas(); n != 1 {
		t.Fatalf("FailedReplicas() = %d", n)
	}
	if _, err := fr.Propose(testBatch("x", 1, -1, 0, 0), AcksAll); !errors.Is(err, ErrReplicaFailed) {
		t.Fatalf("Propose on the failed replica: %v", err)
	}
	if fr.Leader() != -1 || fr.IsLeader() {
		t.Fatalf("failed replica names leader %d", fr.Leader())
	}
	if err := fr.TransferLeadership(ln); !errors.Is(err, ErrReplicaFailed) {
		t.Fatalf("TransferLeadership on the failed replica: %v", err)
	}

	// The other group on the same broker commits, and this broker's
	// replica of it follows.
	end := produceOther("after")
	ro, _ := c.hosts[f].Get(other)
	checkFor(t, 10*time.Second, func() error {
		if hw := ro.HighWatermark(); hw < end {
			return fmt.Errorf("broker %d's replica of the other group at %d, want %d", f, hw, end)
		}
		return nil
	})
	// The failed group goes on with its two other voters.
	for range 3 {
		c.produce(testBatch("after", 1, -1, 0, 0), AcksAll)
	}
	// Removing it (a deleted topic) leaves nothing counted.
	if err := c.hosts[f].Remove(c.key, false); err != nil {
		t.Fatal(err)
	}
	if n := c.hosts[f].FailedReplicas(); n != 0 {
		t.Fatalf("FailedReplicas() after Remove = %d", n)
	}
}

// TestTCPTransportChecksPeers: the replication port keeps a connection
// only from a registered broker at its registered address (any loopback
// address for one registered at a loopback address), and a second
// connection of one broker replaces the first.
func TestTCPTransportChecksPeers(t *testing.T) {
	var peerAddr atomic.Value
	peerAddr.Store("")
	a, err := NewTCPTransport(TCPConfig{Self: 1, Listen: "127.0.0.1:0", Logger: testLogger(t), Resolve: func(id NodeID) string {
		switch id {
		case 1:
			return "127.0.0.1:1"
		case 2:
			return "192.0.2.1:1" // registered elsewhere than the test dials from
		case 3:
			return peerAddr.Load().(string)
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got := make(chan NodeID, 16)
	a.Handle(func(from NodeID, msgs []Envelope) { got <- from })
	hello := func(node int32) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", a.Addr())
		if err != nil {
			t.Fatal(err)
		}
		b := []byte{0x53, 0x4c, 0x52, 0x54, 0, 1}
		b = binary.BigEndian.AppendUint32(b, uint32(node))
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		return c
	}
	closed := func(c net.Conn) error {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		if errors.Is(err, io.EOF) {
			return nil
		}
		return fmt.Errorf("connection not closed: %v", err)
	}
	for _, node := range []int32{1, 2, 4, -1} { // itself, wrong address, unregistered, negative
		c := hello(node)
		if err := closed(c); err != nil {
			t.Fatalf("node %d: %v", node, err)
		}
		c.Close()
	}
	peerAddr.Store("127.0.0.2:1") // loopback: the test's 127.0.0.1 is the same host
	first := hello(3)
	time.Sleep(100 * time.Millisecond) // adopted before the second arrives
	second := hello(3)
	defer second.Close()
	if err := closed(first); err != nil {
		t.Fatalf("first connection of node 3: %v", err)
	}
	first.Close()
	frame, err := encodeFrame(nil, []Envelope{{Group: Key{Index: 1}, Msg: &raftpb.Message{Type: new(raftpb.MsgHeartbeat), To: new(uint64(2)), From: new(uint64(4)), Term: new(uint64(1))}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Write(frame); err != nil {
		t.Fatal(err)
	}
	select {
	case from := <-got:
		if from != 3 {
			t.Fatalf("delivered from %d", from)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second connection's frame was not delivered")
	}
	r := a.Refused()
	if r["unknown_node"] != 3 || r["address"] != 1 {
		t.Fatalf("refused %v", r)
	}
}

// TestTCPTransportBoundsHandshakes: connections that never send their
// hello are closed after helloTimeout, and past maxHandshaking of them a
// new connection is closed at once; both are counted.
func TestTCPTransportBoundsHandshakes(t *testing.T) {
	defer func(d time.Duration) { helloTimeout = d }(helloTimeout)
	helloTimeout = 2 * time.Second
	a, err := NewTCPTransport(TCPConfig{Self: 1, Listen: "127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range maxHandshaking {
		c, err := net.Dial("tcp", a.Addr())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	checkFor(t, 5*time.Second, func() error {
		if n := a.ln.Handshaking(); n != maxHandshaking {
			return fmt.Errorf("%d connections in their hello", n)
		}
		return nil
	})
	start := time.Now()
	extra, err := net.Dial("tcp", a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("connection past the bound: %v", err)
	}
	if d := time.Since(start); d >= helloTimeout {
		t.Fatalf("connection past the bound closed after %v, not at once", d)
	}
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("silent connection: %v", err)
		}
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("silent connections closed after %v", d)
	}
	checkFor(t, 5*time.Second, func() error {
		if r := a.Refused(); r["busy"] != 1 || r["handshake"] != maxHandshaking {
			return fmt.Errorf("refused %v", r)
		}
		return nil
	})
}
