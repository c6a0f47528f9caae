package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/partition"
)

func marshalV2(cc *raftpb.ConfChangeV2) ([]byte, error) { return proto.Marshal(cc) }

// fuzzHosts is three hosts on a MemNetwork sharing three raft groups; the
// fuzz target delivers forged messages to host 1.
type fuzzHosts struct {
	hosts map[NodeID]*Host
	keys  []Key
	seq   int
	// members: a member's connection delivered forged messages since the
	// hosts were built.
	members bool
}

func newFuzzHosts(tb testing.TB, root string) *fuzzHosts {
	net := NewMemNetwork(1)
	fh := &fuzzHosts{hosts: map[NodeID]*Host{}}
	for i := range 3 {
		fh.keys = append(fh.keys, Key{TopicID: [16]byte{0xf, byte(i)}, Index: int32(i)})
	}
	members := Members{Voters: []NodeID{1, 2, 3}}
	for _, n := range members.Voters {
		h, err := NewHost(HostConfig{
			Node: n, Dir: filepath.Join(root, fmt.Sprint("node", n)), Transport: net.Transport(n), Logger: testLogger(tb).Level(zerolog.Disabled),
			TickInterval: 10 * time.Millisecond, ElectionTicks: 30, HeartbeatTicks: 2, Workers: 2,
		})
		if err != nil {
			tb.Fatal(err)
		}
		fh.hosts[n] = h
		for i, k := range fh.keys {
			if _, err := h.Open(fmt.Sprint("f", i), k, members, ReplicaOptions{Log: smallLogConfig()}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return fh
}

func (fh *fuzzHosts) close() {
	for _, h := range fh.hosts {
		h.Close()
	}
}

// failures lists the replicas that failed, on any host.
func (fh *fuzzHosts) failures() []error {
	var out []error
	for n, h := range fh.hosts {
		for _, r := range h.Replicas() {
			if err := r.Failed(); err != nil {
				out = append(out, fmt.Errorf("node %d group %d: %w", n, r.Key().Index, err))
			}
		}
	}
	return out
}

// commitEach writes one batch to every group through whichever replica
// leads it, retrying leadership changes, and waits for its commit.
func (fh *fuzzHosts) commitEach(within time.Duration) error {
	for _, k := range fh.keys {
		fh.seq++
		deadline := time.Now().Add(within)
		var err error
		for time.Now().Before(deadline) {
			err = errors.New("no leader")
			for _, h := range fh.hosts {
				r, _ := h.Get(k)
				if r == nil || !r.IsLeader() {
					continue
				}
				var p partition.Proposal
				p, err = r.Propose(testBatch(fmt.Sprint("v", fh.seq), 1, -1, 0, 0), AcksAll)
				if err == nil {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, err = p.Wait(ctx)
					cancel()
				}
				break
			}
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("group %d made no progress in %v: %w", k.Index, within, err)
		}
	}
	return nil
}

// forger turns fuzz bytes into raft messages close enough to the group's
// state to get past raft's own checks: terms, indexes and commits around
// the receiver's, entries and snapshots that are well formed or not.
type forger struct {
	b []byte
}

func (f *forger) byte() byte {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

// around is base moved by a small amount, or anything.
func (f *forger) around(base uint64) uint64 {
	switch c := f.byte(); c % 8 {
	case 7:
		var v [8]byte
		for i := range v {
			v[i] = f.byte()
		}
		return binary.BigEndian.Uint64(v[:])
	default:
		d := uint64(c>>3) % 8
		if c&4 != 0 && d <= base {
			return base - d
		}
		return base + d
	}
}

func (f *forger) entries(idx, term uint64) []*raftpb.Entry {
	n := int(f.byte() % 4)
	var out []*raftpb.Entry
	for i := range n {
		e := &raftpb.Entry{Index: new(f.around(idx + 1 + uint64(i))), Term: new(f.around(term))}
		switch c := f.byte(); c % 6 {
		case 0:
			e.Data = testBatch("forged", 1+int(c>>3)%3, -1, 0, 0)
		case 1:
		case 2:
			e.Data = []byte{c, f.byte(), f.byte()}
		case 3:
			e.Type = new(raftpb.EntryConfChange)
			e.Data = []byte{c, f.byte()}
		case 4:
			e.Type = new(raftpb.EntryConfChangeV2)
			cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: new(raftpb.ConfChangeType(f.byte() % 4)), NodeId: new(uint64(f.byte() % 6))}}}
			e.Data, _ = marshalV2(cc)
		default:
			e.Type = new(raftpb.EntryType(c))
		}
		out = append(out, e)
	}
	return out
}

func (f *forger) snapshot(r *Replica, idx, term uint64) *raftpb.Snapshot {
	s := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(f.around(idx)), Term: new(f.around(term)), ConfState: &raftpb.ConfState{}}}
	if f.byte()%2 == 0 {
		r.st.mu.Lock()
		s.Data = r.st.snapshotLocked().GetData()
		r.st.mu.Unlock()
	} else {
		s.Data = []byte{f.byte(), f.byte()}
	}
	cs := s.Metadata.ConfState
	for range f.byte() % 4 {
		cs.Voters = append(cs.Voters, uint64(f.byte()%5))
	}
	for range f.byte() % 3 {
		cs.Learners = append(cs.Learners, uint64(f.byte()%5))
	}
	if f.byte()%4 == 0 {
		cs.VotersOutgoing = append(cs.VotersOutgoing, uint64(f.byte()%5))
		cs.LearnersNext = append(cs.LearnersNext, uint64(f.byte()%5))
	}
	return s
}

// forge builds up to 8 messages for host 1, each from a connection of
// node 1-3 or of outsider 9, to one of the groups or an unknown one.
func (fh *fuzzHosts) forge(b []byte) (NodeID, []Envelope) {
	f := &forger{b: b}
	conn := []NodeID{2, 3, 9, 1}[f.byte()%4]
	var out []Envelope
	for range 1 + f.byte()%8 {
		g := f.byte()
		key := Key{TopicID: [16]byte{0xe}, Index: 5}
		if int(g%4) < len(fh.keys) {
			key = fh.keys[g%4]
		}
		r, _ := fh.hosts[1].Get(fh.keys[int(g%4)%len(fh.keys)])
		term := r.Term()
		last, _ := r.st.LastIndex()
		from := raftID(conn)
		if c := f.byte(); c%8 == 7 {
			from = uint64(c >> 3 % 6)
		}
		to := raftID(1)
		if c := f.byte(); c%16 == 15 {
			to = uint64(c >> 4)
		}
		m := &raftpb.Message{
			Type: new(raftpb.MessageType(f.byte() % 24)), From: new(from), To: new(to),
			Term: new(f.around(term)), Index: new(f.around(last)), LogTerm: new(f.around(term)),
			Commit: new(f.around(last)), Reject: new(f.byte()%4 == 1), RejectHint: new(f.around(last)),
		}
		m.Entries = f.entries(m.GetIndex(), m.GetTerm())
		if f.byte()%4 == 1 {
			m.Snapshot = f.snapshot(r, last, term)
		}
		out = append(out, Envelope{Group: key, Msg: m})
	}
	return conn, out
}

// FuzzHostReceive feeds forged raft messages (and raw frames) through the
// receive path of a host with three groups, as a transport delivers a
// peer's batch. Whatever arrives, no replica fails (a raft panic fails
// it) and every group goes on committing.
//
// Members' forgeries are included, and one outcome of theirs is outside
// what checks can stop: a member that forges a consistent leader of a new
// term (right index and terms, a commit within the log) makes the replica
// commit entries the group never agreed on; raft finds out later, when a
// real leader's entries conflict with them, and panics ("conflict with
// committed entry"). That needs authenticated peers (a Byzantine member is
// outside raft's model), so after an input from a member connection that
// failure, and the lost progress it brings, is accepted and the hosts are
// rebuilt. Any other failure, or any failure from an outsider, is a bug.
//
//	go test ./replica/ -run '^$' -fuzz FuzzHostReceive -fuzztime 60s
func FuzzHostReceive(f *testing.F) {
	// Per message: group, From (7: another), To (15: another), type,
	// term, index, log term, commit (each relative: 8 is +1, 7 then 8
	// bytes is absolute), reject (1), reject hint, entries, snapshot (1).
	huge := []byte{7, 0, 0, 1, 0, 0, 0, 0, 0}
	hb := append(append([]byte{0, 0, 0, byte(raftpb.MsgHeartbeat), 8, 0, 0}, huge...), 0, 0, 0, 0)
	f.Add(append([]byte{0, 0}, hb...)) // from node 2 at a new term, committing far past the log
	app := []byte{1, 0, 0, byte(raftpb.MsgApp), 8, 0, 0, 0, 0, 0, 2, 8, 0, 0, 16, 8, 1, 0}
	f.Add(append([]byte{1, 0}, app...)) // from node 3 at a new term, two entries, the second out of sequence
	ack := []byte{2, 0, 0, byte(raftpb.MsgAppResp), 0, 16, 0, 0, 0, 0, 0, 0}
	f.Add(append([]byte{0, 1}, append(ack, ack...)...)) // acknowledgements past the log
	snap := []byte{0, 0, 0, byte(raftpb.MsgSnap), 8, 0, 0, 0, 0, 0, 0, 1, 16, 0, 0, 3, 1, 2, 3, 1, 2, 0}
	f.Add(append([]byte{0, 0}, snap...))                              // a snapshot whose configuration has node 2 twice
	f.Add([]byte{2, 7, 0, 7, 0, byte(raftpb.MsgVote), 80, 80, 80})    // an outsider's vote, far in the future
	f.Add([]byte{0, 0, 0, 0, 0, byte(raftpb.MsgProp), 0, 0, 0, 0, 0}) // a proposal
	f.Add([]byte("\x00\x00\x00\x01" + "\x0f\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x02" + "\x08\x08"))
	root := f.TempDir()
	gen := 0
	fh := newFuzzHosts(f, filepath.Join(root, "0"))
	f.Cleanup(func() { fh.close() })
	f.Fuzz(func(t *testing.T, b []byte) {
		h := fh.hosts[1]
		var conn NodeID
		var msgs []Envelope
		if len(b) > 4 && binary.BigEndian.Uint32(b) == 1 {
			// A raw frame body, as a connection of node 2 sent it.
			var err error
			if msgs, err = decodeFrame(b); err != nil {
				return
			}
			conn = 2
		} else {
			conn, msgs = fh.forge(b)
		}
		h.receive(conn, msgs)
		// The divergence may surface in a later input than the forgery.
		fh.members = fh.members || conn == 2 || conn == 3
		progress := fh.commitEach(20 * time.Second)
		failed := fh.failures()
		byzantine := fh.members
		for _, err := range failed {
			byzantine = byzantine && strings.Contains(err.Error(), "conflict with committed entry")
		}
		if len(failed) > 0 && !byzantine {
			t.Fatalf("replicas failed: %v (messages %v from %d)", failed, msgs, conn)
		}
		if progress != nil && len(failed) == 0 {
			t.Fatalf("%v (messages %v from %d)", progress, msgs, conn)
		}
		if len(failed) > 0 {
			t.Logf("a member's consistent forgery diverged the log: %v; rebuilding", failed)
			fh.close()
			gen++
			fh = newFuzzHosts(t, filepath.Join(root, fmt.Sprint(gen)))
		}
	})
}
