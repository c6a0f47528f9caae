package metastore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// HandleRequest implements Handler: the node's internal API, used by the
// embedded client directly and by remote clients and forwarding followers
// over the transport.
//
// Writes are forwarded to the leader with Transport.Call (the caller does
// not know): the leader batches everyone's commands into few entries and
// answers after its own apply. If the leader is unknown the command is
// proposed here and raft forwards the proposal once one is elected; every
// node applies every entry, so the result still comes back locally. If the
// request could not be delivered to the leader (it died, or is cut off), the
// node waits for the next leader and forwards there (or tries the same one
// again after forwardRetry), never proposing through raft towards the
// unreachable one, where the proposal would be lost. Reads run after a
// ReadIndex barrier on this node (raft forwards
// the ReadIndex). Heartbeats and membership changes run on the leader,
// forwarded with Transport.Call.
func (n *Node) HandleRequest(ctx context.Context, req *Request) *Response {
	if _, ok := ctx.Deadline(); !ok {
		d := n.cfg.RequestTimeout
		if req.TimeoutMs > 0 && time.Duration(req.TimeoutMs)*time.Millisecond < d {
			d = time.Duration(req.TimeoutMs) * time.Millisecond
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	select {
	case <-n.stopc:
		return errResponse(ErrStopped)
	default:
	}
	switch req.Kind {
	case reqCmd:
		if req.Cmd == nil {
			return errResponse(ErrInvalidRequest)
		}
		// Forward to the leader, which batches everyone's commands into
		// few entries and answers after its own apply: one Ready cycle
		// less than waiting for this follower to learn the commit.
		for {
			lead := n.leader.Load()
			if lead == 0 || lead == n.id || req.Hops >= 3 {
				break // propose here; with no leader raft drops it and proposeBatch retries
			}
			fwd := *req
			fwd.Hops++
			resp, err := n.tr.Call(ctx, lead, &fwd)
			if err == nil {
				return resp
			}
			if !errors.Is(err, ErrUnreachable) {
				return errResponse(ErrTimeout) // delivered, answer lost
			}
			// Never delivered. Proposing here would hand the command
			// to raft, which forwards it to this same leader: if it
			// died, the proposal is lost and the caller waits out its
			// whole timeout. Wait for the next leader instead and
			// forward there, or, if the leader stays (the failure was
			// the connection's, not the leader's), try it again after
			// forwardRetry; nothing was proposed, so running out of
			// time is an unambiguous ErrNotLeader.
			if !n.waitLeaderChange(ctx, lead, forwardRetry) {
				return errResponse(ErrNotLeader)
			}
		}
		r, err := n.propose(ctx, *req.Cmd)
		if err != nil {
			return errResponse(err)
		}
		return &Response{Result: &r}
	case reqRead:
		if req.Read == nil {
			return errResponse(ErrInvalidRequest)
		}
		if err := n.linearizableRead(ctx); err != nil {
			return errResponse(err)
		}
		return n.read(req.Read)
	case reqWatch:
		resp := n.watch(ctx, req.FromRev, time.Duration(req.WaitMs)*time.Millisecond)
		if lead := n.leader.Load(); lead != 0 {
			n.membersMu.RLock()
			resp.Leader, resp.LeaderAddr = lead, n.members[lead]
			n.membersMu.RUnlock()
		}
		return resp
	case reqHeartbeat, reqAddVoter, reqRemoveVoter:
		return n.onLeader(ctx, req)
	case reqStatus:
		st := n.Status()
		return &Response{Status: &st}
	}
	return errResponse(fmt.Errorf("%w: kind %q", ErrInvalidRequest, req.Kind))
}

// onLeader runs req here if this node leads, else forwards it to the leader,
// waiting for one to be elected within ctx.
func (n *Node) onLeader(ctx context.Context, req *Request) *Response {
	for {
		lead := n.leader.Load()
		if lead == n.id {
			var err error
			switch req.Kind {
			case reqHeartbeat:
				err = n.heartbeat(ctx, req.BrokerID, req.Inc)
			case reqAddVoter:
				err = n.changeMember(ctx, pb.ConfChangeType_ConfChangeAddNode, req.NodeID, req.Addr)
			case reqRemoveVoter:
				err = n.changeMember(ctx, pb.ConfChangeType_ConfChangeRemoveNode, req.NodeID, "")
			}
			if err == ErrNotLeader && n.leader.Load() != n.id {
				continue
			}
			return errResponse(err)
		}
		if lead != 0 && req.Hops < 3 {
			fwd := *req
			fwd.Hops++
			resp, err := n.tr.Call(ctx, lead, &fwd)
			if err == nil {
				return resp
			}
		}
		select {
		case <-ctx.Done():
			return errResponse(ErrNotLeader)
		case <-n.stopc:
			return errResponse(ErrStopped)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// forwardRetry is how long a follower that could not deliver a write to
// its leader waits for another leader before trying the same one again.
const forwardRetry = 250 * time.Millisecond

// waitLeaderChange waits until this node follows a leader other than
// old (or none), or for at most d, polling as onLeader does; false when
// ctx ends or the node stops first.
func (n *Node) waitLeaderChange(ctx context.Context, old uint64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for n.leader.Load() == old && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-n.stopc:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return ctx.Err() == nil
}

func (n *Node) changeMember(ctx context.Context, t pb.ConfChangeType, id uint64, addr string) error {
	if id == 0 {
		return ErrInvalidRequest
	}
	// raft accepts one conf change at a time: a new one proposed before
	// raft saw the previous one applied (Advance) is silently replaced by
	// an empty entry. Serialize, and wait for raft's applied index to catch
	// up with ours before proposing. A new leader takes every entry in its
	// log at election for a possible conf change, so it also waits until
	// it applied an entry of its own term (the empty one it appended when
	// elected, or later): before that a change it proposes is dropped the
	// same way, and its caller would wait out the whole timeout.
	n.confMu.Lock()
	defer n.confMu.Unlock()
	for {
		st := n.rn.Status()
		if st.Applied >= n.appliedIndex() {
			if t, err := n.ms.Term(st.Applied); err == nil && t == st.GetTerm() {
				break
			}
		}
		if n.leader.Load() != n.id {
			return ErrNotLeader
		}
		select {
		case <-ctx.Done():
			return ErrTimeout
		case <-n.stopc:
			return ErrStopped
		case <-time.After(time.Millisecond):
		}
	}
	seq := n.seq.Add(1)
	mc, _ := json.Marshal(memberContext{Addr: addr, Node: n.id, Nonce: n.nonce, Seq: seq})
	cc := &pb.ConfChange{Type: t.Enum(), NodeId: proto.Uint64(id), Context: mc}
	ch := make(chan result, 1)
	n.waitMu.Lock()
	n.waiters[seq] = ch
	n.waitMu.Unlock()
	defer func() {
		n.waitMu.Lock()
		delete(n.waiters, seq)
		n.waitMu.Unlock()
	}()
	if err := n.rn.ProposeConfChange(ctx, cc); err != nil {
		return ErrNotLeader
	}
	select {
	case r := <-ch:
		return codeErr(r.Err)
	case <-ctx.Done():
		return ErrTimeout
	case <-n.stopc:
		return ErrStopped
	}
}

// AddVoter adds node id, reachable at addr (its internal listener), as a
// voter. Start that node first with Config.Join (an empty data dir and
// peers listing at least one current member); it catches up by snapshot.
// Runs on the leader (forwarded if needed); returns once applied here.
func (n *Node) AddVoter(ctx context.Context, id uint64, addr string) error {
	return codeErr(n.HandleRequest(ctx, &Request{Kind: reqAddVoter, NodeID: id, Addr: addr}).Err)
}

// RemoveVoter removes node id from the group. A removed node stops itself.
func (n *Node) RemoveVoter(ctx context.Context, id uint64) error {
	return codeErr(n.HandleRequest(ctx, &Request{Kind: reqRemoveVoter, NodeID: id}).Err)
}

// read serves a read after the barrier, from bbolt.
func (n *Node) read(r *readRequest) *Response {
	resp := &Response{}
	err := n.db.View(func(tx *bolt.Tx) error {
		resp.Rev = getU64(tx.Bucket(bucketMeta).Get(keyApplied))
		switch r.What {
		case "barrier":
		case "offsets":
			gb := tx.Bucket(bucketOffsets).Bucket([]byte(r.Group))
			if gb == nil {
				return nil
			}
			add := func(k, v []byte) {
				topic, p, ok := parseOffsetKey(k)
				if !ok {
					return
				}
				ov, err := decodeOffsetValue(v)
				if err != nil {
					panic(fmt.Sprintf("metastore: corrupt offset value: %v", err))
				}
				resp.Offsets = append(resp.Offsets, OffsetCommit{
					TopicPartition: TopicPartition{Topic: topic, Partition: p},
					Offset:         ov.Offset, LeaderEpoch: ov.LeaderEpoch, Metadata: ov.Metadata,
					CommitTime: time.UnixMilli(ov.CommitTime).UTC(),
				})
			}
			if r.TPs == nil {
				return gb.ForEach(func(k, v []byte) error { add(k, v); return nil })
			}
			for _, tp := range r.TPs {
				k := offsetKey(tp.Topic, tp.Partition)
				if v := gb.Get(k); v != nil {
					add(k, v)
				}
			}
		case "offsets_since":
			resp.GroupOffsets = offsetsSince(tx, r.Since, r.Max)
		case "group":
			if v := tx.Bucket(bucketGroups).Get([]byte(r.Group)); v != nil {
				resp.State = append([]byte{}, v...)
				resp.Found = true
			}
		case "share_owner":
			if r.TopicID == nil {
				return ErrInvalidRequest
			}
			if v := tx.Bucket(bucketShareOwners).Get(shareOwnerKey(r.Group, *r.TopicID, r.Partition)); v != nil {
				resp.State = append([]byte{}, v...)
				resp.Found = true
			}
		case "share_states":
			gb := tx.Bucket(bucketShareState).Bucket([]byte(r.Group))
			if gb == nil {
				return nil
			}
			return gb.ForEach(func(k, v []byte) error {
				if len(k) != 20 {
					return nil
				}
				var s ShareState
				copy(s.Topic[:], k[:16])
				s.Partition = int32(binary.BigEndian.Uint32(k[16:]))
				s.State = append([]byte{}, v...)
				resp.ShareStates = append(resp.ShareStates, s)
				return nil
			})
		case "groups":
			seen := map[string]bool{}
			for _, b := range [][]byte{bucketGroups, bucketOffsets, bucketShareState} {
				_ = tx.Bucket(b).ForEach(func(k, _ []byte) error {
					seen[string(k)] = true
					return nil
				})
			}
			for g := range seen {
				resp.Groups = append(resp.Groups, g)
			}
			sort.Strings(resp.Groups)
		case "txn", "txns", "txn_pending":
			return readTxns(tx, r, resp)
		case "shared_chunks":
			return readSharedChunks(tx, r, resp)
		case "shared_unreferenced":
			resp.Keys = unreferencedObjects(tx, r.Keys)
		case "topic":
			a := &applier{tx: tx}
			if t, ok := a.topicByName(r.Name); ok {
				resp.Topic, resp.Found = t, true
			}
		default:
			return ErrInvalidRequest
		}
		return nil
	})
	if err != nil {
		return errResponse(err)
	}
	return resp
}

// watch answers a watcher at fromRev: the events after it, waiting up to
// wait for one, or a full image if fromRev is behind the history (log
// compaction, snapshot install, restart).
func (n *Node) watch(ctx context.Context, fromRev uint64, wait time.Duration) *Response {
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		n.histMu.Lock()
		if fromRev < n.histFloor {
			n.histMu.Unlock()
			img := n.view.image()
			return &Response{Image: img, Rev: img.Rev}
		}
		var evs []event
		i := sort.Search(len(n.hist), func(i int) bool { return n.hist[i].Rev > fromRev })
		evs = append(evs, n.hist[i:]...)
		ch := n.histCh
		rev := n.histRev
		n.histMu.Unlock()
		if len(evs) > 0 || timer == nil {
			return &Response{Events: evs, Rev: rev}
		}
		select {
		case <-ch:
		case <-timer:
			timer = nil
		case <-ctx.Done():
			timer = nil
		case <-n.stopc:
			return errResponse(ErrStopped)
		}
	}
}

// notifyWatchersLocked wakes long-polling watchers. histMu must be held.
func (n *Node) notifyWatchersLocked() {
	close(n.histCh)
	n.histCh = make(chan struct{})
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newTopicID makes a random (version 4) UUID the way Kafka's
// Uuid.randomUuid does: never zero, never the reserved metadata topic id
// (1), and never one whose base64 form starts with '-' (the first six bits
// 62), which Kafka's tools would read as a flag.
func newTopicID() TopicID {
	for {
		var id TopicID
		_, _ = rand.Read(id[:])
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if id[0]>>2 == 62 || id == (TopicID{}) || id == (TopicID{15: 1}) {
			continue
		}
		return id
	}
}

// offsetsSince lists every group's commits stored after revision since, in
// revision order (then group, topic, partition). With max > 0 the answer
// stops after about max commits, at a revision boundary, so that a caller
// resuming from the last revision it got misses none. It scans every
// stored offset: its callers poll it at a human pace (about once a second
// per read broker).
func offsetsSince(tx *bolt.Tx, since uint64, max int) []GroupOffsetCommit {
	var out []GroupOffsetCommit
	ob := tx.Bucket(bucketOffsets)
	_ = ob.ForEach(func(g, _ []byte) error {
		gb := ob.Bucket(g)
		if gb == nil {
			return nil
		}
		return gb.ForEach(func(k, v []byte) error {
			topic, p, ok := parseOffsetKey(k)
			if !ok {
				return nil
			}
			ov, err := decodeOffsetValue(v)
			if err != nil {
				panic(fmt.Sprintf("metastore: corrupt offset value: %v", err))
			}
			if ov.Rev <= since && since > 0 {
				return nil
			}
			out = append(out, GroupOffsetCommit{Group: string(g), Rev: ov.Rev, OffsetCommit: OffsetCommit{
				TopicPartition: TopicPartition{Topic: topic, Partition: p},
				Offset:         ov.Offset, LeaderEpoch: ov.LeaderEpoch, Metadata: ov.Metadata,
				CommitTime: time.UnixMilli(ov.CommitTime).UTC(),
			}})
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		if a.Rev != b.Rev {
			return a.Rev < b.Rev
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	if max > 0 && len(out) > max {
		n := max
		for n < len(out) && out[n].Rev == out[max-1].Rev {
			n++
		}
		out = out[:n]
	}
	return out
}
