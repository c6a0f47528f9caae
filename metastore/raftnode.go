package metastore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// run is the Ready loop. It follows the contract of etcd raft's doc.go
// (steps 1-4) the way etcd's raftNode.start does, with one simplification:
// steps 1 and 3 share one bbolt transaction.
//
//	2 (leader only)  send Messages before persisting (raft thesis 10.2.1):
//	                 the leader counts its own entries only after Advance.
//	1                persist Snapshot (install its image), Entries (dropping
//	                 any persisted entry at or after the first new index)
//	                 and HardState ...
//	3                ... and, in the same transaction, apply
//	                 CommittedEntries and write meta/applied (cindex), so a
//	                 crash never applies an entry twice nor skips one.
//	                 Commit = one fsync-ed bbolt transaction; a failure is
//	                 fatal, except a page write that found the disk full
//	                 (see persistReady), which is retried.
//	                 Then mirror into raft's MemoryStorage, and call
//	                 ApplyConfChange for each conf change entry in order.
//	2 (follower)     send Messages only now, after the HardState and all
//	                 entries are durable.
//	                 Publish events to the view and history, hand results to
//	                 waiters, pass ReadStates to the read loop, maybe take a
//	                 snapshot and compact the log.
//	4                Advance.
func (n *Node) run() {
	defer n.wg.Done()
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	for {
		// Loaded before waiting for a Ready (guard.go): a peer message
		// that may cut raft's log stepped since then may not be in it.
		cuts := n.guard.cuts.Load()
		select {
		case <-ticker.C:
			n.rn.Tick()
		case rd := <-n.rn.Ready():
			n.guard.readyReceived(&rd, cuts)
			t0 := time.Now()
			if !n.handleReady(rd) {
				return // stopped while the disk was full: nothing persisted
			}
			if last, err := n.ms.LastIndex(); err == nil {
				n.guard.raise(last, cuts) // the stored log is raft's as of rd
			}
			n.rn.Advance()
			n.stats.readies.Add(1)
			n.stats.readyNanos.Add(int64(time.Since(t0)))
		case <-n.stopc:
			return
		}
	}
}

func (n *Node) handleReady(rd raft.Ready) bool {
	if rd.SoftState != nil {
		wasLeader := n.isLeader
		n.isLeader = rd.SoftState.RaftState == raft.StateLeader
		n.leader.Store(rd.SoftState.Lead)
		if n.isLeader && !wasLeader {
			n.becameLeader()
		} else if !n.isLeader && wasLeader {
			n.leases.reset()
		}
	}
	if rd.HardState != nil {
		n.term.Store(rd.HardState.GetTerm())
	}
	if n.isLeader {
		n.send(rd.Messages) // step 2, leader: in parallel with its own write
	} else {
		// A follower forwards proposals and read-index requests at once:
		// they promise nothing about its log, so they need not wait for
		// the write (everything else waits, step 2).
		var early, late []*pb.Message
		for _, m := range rd.Messages {
			if t := m.GetType(); t == pb.MsgProp || t == pb.MsgReadIndex {
				early = append(early, m)
			} else {
				late = append(late, m)
			}
		}
		n.send(early)
		rd.Messages = late
	}

	var (
		snap     = rd.Snapshot
		hasSnap  = !raft.IsEmptySnap(snap)
		results  []deliverable
		evs      []event
		ccs      []pendingConfChange
		applied  = n.appliedIndex()
		newApply = applied
	)
	txStart := time.Now()
	err := n.persistReady(func(tx *bolt.Tx) error {
		results, evs, ccs, newApply = nil, nil, nil, applied
		if hasSnap {
			a, err := n.installSnapshot(tx, snap)
			if err != nil {
				return err
			}
			newApply = a
		}
		if err := appendEntries(tx, rd.Entries); err != nil {
			return err
		}
		if rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
			if err := saveHardState(tx, rd.HardState); err != nil {
				return err
			}
		}
		if len(rd.CommittedEntries) > 0 {
			var err error
			results, evs, ccs, newApply, err = n.applyEntries(tx, rd.CommittedEntries, newApply)
			if err != nil {
				return err
			}
		}
		if newApply != applied {
			return tx.Bucket(bucketMeta).Put(keyApplied, u64(newApply))
		}
		return nil
	})
	if errors.Is(err, errStopped) {
		return false
	}
	if err != nil {
		// Persistence failures are fatal (etcd: "failed to save Raft hard
		// state and entries").
		n.lg.Fatal().Err(err).Msg("metastore: failed to persist raft state or apply entries")
	}
	n.stats.txNanos.Add(int64(time.Since(txStart)))
	n.stats.entriesApplied.Add(int64(len(rd.CommittedEntries)))

	// Mirror into raft's storage: only now is it durable.
	if hasSnap {
		meta := proto.Clone(snap.GetMetadata()).(*pb.SnapshotMetadata)
		if err := n.ms.ApplySnapshot(&pb.Snapshot{Metadata: meta}); err != nil {
			n.lg.Panic().Err(err).Msg("metastore: apply snapshot to memory storage")
		}
		n.snapIndex = meta.GetIndex()
		n.confState = proto.Clone(meta.GetConfState()).(*pb.ConfState)
		var img *image
		_ = n.db.View(func(tx *bolt.Tx) error {
			img = loadImage(tx)
			if v := tx.Bucket(bucketMeta).Get(keyMembers); v != nil {
				m := map[uint64]string{}
				mustUnmarshal(v, &m)
				n.setMembers(m)
			}
			return nil
		})
		n.view.loadImage(img)
		n.histMu.Lock()
		n.hist = nil
		n.histWeight = 0
		n.histFloor = img.Rev
		n.histRev = img.Rev
		n.notifyWatchersLocked()
		n.histMu.Unlock()
		n.lg.Info().Uint64("index", n.snapIndex).Uint64("applied", img.Rev).Msg("installed snapshot")
	}
	if len(rd.Entries) > 0 {
		if err := n.ms.Append(rd.Entries); err != nil {
			n.lg.Panic().Err(err).Msg("metastore: append to memory storage")
		}
	}
	if rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
		if err := n.ms.SetHardState(rd.HardState); err != nil {
			n.lg.Panic().Err(err).Msg("metastore: set hard state")
		}
	}
	for _, cc := range ccs {
		n.confState = n.rn.ApplyConfChange(cc.cc)
		if cc.apply != nil {
			cc.apply()
		}
	}
	if n.removedSelf {
		n.stopIfRemoved(newApply)
	}
	if !n.isLeader {
		n.send(rd.Messages) // step 2, follower: after the write
	}

	if newApply > applied {
		// View first: a watcher that sees rev R in the history finds the
		// node's own cache at R or later.
		n.view.apply(evs, newApply)
		n.histMu.Lock()
		n.hist = append(n.hist, evs...)
		for i := range evs {
			n.histWeight += evs[i].weight()
		}
		over := max(len(n.hist)-n.histMax, 0)
		for w := n.histWeight; over < len(n.hist) && w > histMaxWeight; over++ {
			w -= n.hist[over].weight()
		}
		if over > 0 {
			for i := range n.hist[:over] {
				n.histWeight -= n.hist[i].weight()
			}
			n.histFloor = n.hist[over-1].Rev
			n.hist = append([]event(nil), n.hist[over:]...)
		}
		n.histRev = newApply
		if len(evs) > 0 {
			n.notifyWatchersLocked()
		}
		n.histMu.Unlock()
	}
	n.setApplied(newApply)
	for _, d := range results {
		n.deliver(d.seq, d.r)
	}
	for _, rs := range rd.ReadStates {
		select {
		case n.readStatec <- rs:
		default:
		}
	}
	// A snapshot must carry the current configuration: a voter added after
	// the last snapshot ignores one whose ConfState lacks it. So a conf
	// change forces a new (metadata-only) snapshot.
	n.maybeSnapshot(newApply, len(ccs) > 0)
	return true
}

// errStopped: the node stopped while persistReady waited for space.
var errStopped = errors.New("metastore: stopped")

// noSpaceRetry is how often persistReady tries a transaction again on a
// full disk.
const noSpaceRetry = time.Second

// persistReady runs the Ready loop's transaction. A transaction that
// failed because a page write found the disk full is run again every
// noSpaceRetry until it commits (or the node stops) instead of being
// fatal: bbolt writes the meta page, which alone makes a transaction
// visible, only after every other page was written and synced, and rolls
// back its in-memory state (freelist) on failure, so the file on disk and
// the open database are still the last commit's; the Ready is neither
// acknowledged (Advance) nor, on a follower, answered until it persists.
// Meanwhile metadata writes and linearizable reads wait (their callers
// time out) and the rest of the broker keeps serving from its cache. fn
// must reset whatever it computes, as it may run more than once. Any
// other error, a failed fsync above all, is returned.
func (n *Node) persistReady(fn func(tx *bolt.Tx) error) error {
	for logged := false; ; logged = true {
		err := n.db.Update(fn)
		if err == nil {
			// bbolt fdatasynced the commit itself; tell a power-loss
			// recorder (tests only) that the file is durable here.
			fsutil.Synced(n.db.Path())
		}
		if !pageWriteNoSpace(err) {
			if err == nil && logged {
				n.lg.Info().Msg("metastore: space available again; raft state persisted")
			}
			return err
		}
		if !logged {
			n.lg.Error().Err(err).Msg("metastore: disk full; raft state not persisted, retrying until space is freed")
		}
		select {
		case <-n.stopc:
			return errStopped
		case <-time.After(noSpaceRetry):
		}
	}
}

// pageWriteNoSpace says err is a bbolt page write (pwrite, an
// *os.PathError "write") that failed with ENOSPC or EDQUOT. bbolt returns
// its fdatasync errors as bare errnos, so a failed sync never matches.
func pageWriteNoSpace(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && pe.Op == "write" &&
		(errors.Is(pe.Err, syscall.ENOSPC) || errors.Is(pe.Err, syscall.EDQUOT))
}

type deliverable struct {
	seq uint64
	r   result
}

type pendingConfChange struct {
	cc    pb.ConfChangeI
	apply func() // runs after ApplyConfChange (transport peers, stop on removal)
}

// applyEntries applies committed entries above `applied` inside tx and
// returns the results for our own waiters, the view events, the conf changes
// to hand to raft and the new applied index. Conf change entries at or below
// `applied` are still returned: raft's configuration is rebuilt by replaying
// them after a restart (Config.Applied is the snapshot index).
func (n *Node) applyEntries(tx *bolt.Tx, ents []*pb.Entry, applied uint64) ([]deliverable, []event, []pendingConfChange, uint64, error) {
	var (
		out []deliverable
		evs []event
		ccs []pendingConfChange
	)
	for _, e := range ents {
		idx := e.GetIndex()
		skip := idx <= applied
		switch e.GetType() {
		case pb.EntryNormal:
			if skip {
				continue
			}
			b, err := decodeBatch(e.GetData())
			if err != nil {
				return nil, nil, nil, 0, fmt.Errorf("entry %d: %w", idx, err)
			}
			if b != nil {
				a := &applier{tx: tx, index: idx, leaseMs: n.cfg.LeaseDuration.Milliseconds()}
				mine := b.Node == n.id && b.Nonce == n.nonce
				n.stats.cmdsApplied.Add(int64(len(b.Cmds)))
				for i := range b.Cmds {
					r := a.apply(&b.Cmds[i])
					if mine {
						out = append(out, deliverable{seq: b.Cmds[i].Seq, r: r})
					}
				}
				evs = append(evs, a.events...)
			}
		case pb.EntryConfChange:
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return nil, nil, nil, 0, fmt.Errorf("conf change %d: %w", idx, err)
			}
			pc, d := n.applyConfChange(tx, &cc, idx, skip)
			ccs = append(ccs, pc)
			if d != nil {
				out = append(out, *d)
			}
		case pb.EntryConfChangeV2:
			var cc pb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return nil, nil, nil, 0, fmt.Errorf("conf change %d: %w", idx, err)
			}
			ccs = append(ccs, pendingConfChange{cc: &cc})
		}
		if idx > applied {
			applied = idx
		}
	}
	return out, evs, ccs, applied, nil
}

// applyConfChange records the member change in meta/members (unless the
// entry was applied before) and computes the proposer's result.
func (n *Node) applyConfChange(tx *bolt.Tx, cc *pb.ConfChange, idx uint64, skip bool) (pendingConfChange, *deliverable) {
	var mc memberContext
	if len(cc.GetContext()) > 0 {
		_ = json.Unmarshal(cc.GetContext(), &mc)
	}
	m := tx.Bucket(bucketMeta)
	members := map[uint64]string{}
	if v := m.Get(keyMembers); v != nil {
		mustUnmarshal(v, &members)
	}
	id := cc.GetNodeId()
	var rerr error
	switch cc.GetType() {
	case pb.ConfChangeType_ConfChangeAddNode, pb.ConfChangeType_ConfChangeAddLearnerNode:
		if _, ok := members[id]; ok && mc.Seq != 0 {
			rerr = ErrMemberExists
		}
		members[id] = mc.Addr
	case pb.ConfChangeType_ConfChangeRemoveNode:
		if _, ok := members[id]; !ok {
			rerr = ErrUnknownMember
		}
		delete(members, id)
	}
	// A duplicate add or an unknown remove is a no-op for raft too, so the
	// change is never cancelled (zeroing NodeId): replaying it after a
	// restart, against newer state, must reach the same configuration.
	if rerr == nil && !skip {
		if err := m.Put(keyMembers, mustJSON(members)); err != nil {
			panic(fmt.Sprintf("metastore: members: %v", err))
		}
	}
	var d *deliverable
	if mc.Node == n.id && mc.Nonce == n.nonce && mc.Seq != 0 {
		d = &deliverable{seq: mc.Seq, r: result{Err: errCode(rerr), Rev: idx}}
	}
	pc := pendingConfChange{cc: cc}
	if rerr == nil {
		pc.apply = func() {
			switch cc.GetType() {
			case pb.ConfChangeType_ConfChangeRemoveNode:
				n.membersMu.Lock()
				delete(n.members, id)
				n.membersMu.Unlock()
				if id == n.id {
					// Stopped once everything committed is applied
					// (stopIfRemoved): a member added back under its
					// old id with an empty directory replays its own
					// earlier removal before the entry that re-adds it.
					n.removedSelf = true
				} else {
					n.tr.RemovePeer(id)
				}
			default:
				n.membersMu.Lock()
				n.members[id] = mc.Addr
				n.membersMu.Unlock()
				if id != n.id {
					n.tr.AddPeer(id, mc.Addr)
				}
			}
		}
	}
	return pc, d
}

// stopIfRemoved stops the node when it is not a member once it has applied
// every entry it knows committed. A removal of this node followed, in
// entries already committed, by its addition back is no removal.
func (n *Node) stopIfRemoved(applied uint64) {
	n.membersMu.Lock()
	_, member := n.members[n.id]
	n.membersMu.Unlock()
	switch {
	case member:
		n.removedSelf = false
	case applied >= n.rn.Status().GetCommit():
		n.removedSelf = false
		n.lg.Warn().Msg("this node was removed from the metastore group; stopping")
		go n.Close()
	}
}

func (n *Node) setMembers(m map[uint64]string) {
	n.membersMu.Lock()
	old := n.members
	n.members = m
	n.membersMu.Unlock()
	for id := range old {
		if _, ok := m[id]; !ok && id != n.id {
			n.tr.RemovePeer(id)
		}
	}
	for id, a := range m {
		if id != n.id {
			n.tr.AddPeer(id, a)
		}
	}
}

// send hands messages to the transport. A MsgSnap carries only metadata in
// raft's storage; its image (a consistent copy of the bbolt file, Tx.WriteTo)
// is made here, off the Ready loop, at the current applied index, which is
// at or after the snapshot's index: the follower's apply skips entries the
// image already contains (cindex), so a newer image is safe.
func (n *Node) send(msgs []*pb.Message) {
	if len(msgs) == 0 {
		return
	}
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.GetType() == pb.MsgSnap {
			m := proto.Clone(m).(*pb.Message)
			n.wg.Add(1)
			go n.sendSnapshot(m)
			continue
		}
		out = append(out, m)
	}
	if len(out) > 0 {
		n.tr.Send(out)
	}
}

func (n *Node) sendSnapshot(m *pb.Message) {
	defer n.wg.Done()
	var buf bytes.Buffer
	err := n.db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(&buf)
		return err
	})
	if err != nil {
		n.lg.Error().Err(err).Msg("snapshot image")
		n.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		return
	}
	m.Snapshot.Data = buf.Bytes()
	n.lg.Info().Uint64("peer", m.GetTo()).Uint64("index", m.GetSnapshot().GetMetadata().GetIndex()).
		Int("bytes", buf.Len()).Msg("sending snapshot")
	n.tr.Send([]*pb.Message{m})
}

// installSnapshot replaces every state bucket with the image's, inside the
// Ready loop's transaction, so the install is atomic with the snapshot
// metadata and the log reset. It returns the image's applied index.
func (n *Node) installSnapshot(tx *bolt.Tx, snap *pb.Snapshot) (uint64, error) {
	meta := snap.GetMetadata()
	var applied uint64
	err := viewImage(filepath.Join(n.cfg.DataDir, "snapshot.recv"), snap.GetData(), func(stx *bolt.Tx) error {
		var err error
		if applied, err = imageApplied(stx, meta.GetIndex()); err != nil {
			return err
		}
		return replaceState(tx, stx)
	})
	if err != nil {
		return 0, err
	}
	if err := saveSnapshotMeta(tx, meta, ^uint64(0)); err != nil {
		return 0, err
	}
	return applied, nil
}

// viewImage writes a snapshot's image (a bbolt file) to path, opens it
// read-only and runs fn in a read transaction of it; the file is removed
// after. The install and the guard's check of a peer's image
// (checkImage) read images with it.
func viewImage(path string, data []byte, fn func(stx *bolt.Tx) error) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write snapshot image: %w", err)
	}
	defer os.Remove(path)
	src, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("open snapshot image: %w", err)
	}
	defer src.Close()
	return src.View(fn)
}

// imageApplied is the applied index of image stx, refused when the image
// has no meta bucket or applied index, or is behind index (the snapshot's):
// it could not stand for the snapshot.
func imageApplied(stx *bolt.Tx, index uint64) (uint64, error) {
	mb := stx.Bucket(bucketMeta)
	if mb == nil {
		return 0, errors.New("snapshot image without its meta bucket")
	}
	v := mb.Get(keyApplied)
	if len(v) != 8 {
		return 0, errors.New("snapshot image without its applied index")
	}
	applied := getU64(v)
	if applied < index {
		return 0, fmt.Errorf("snapshot image applied %d is behind its index %d", applied, index)
	}
	return applied, nil
}

// replaceState replaces every state bucket of tx with the copy of image
// stx's (empty where the image has none: one from a version before the
// bucket existed) and rebuilds the shared reference counts an image from
// a version without them lacks. A snapshot's install and a backup's
// restore (a backup is such an image) copy the state with it.
func replaceState(tx, stx *bolt.Tx) error {
	for _, name := range stateBuckets {
		if tx.Bucket(name) != nil {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		dst, err := tx.CreateBucket(name)
		if err != nil {
			return err
		}
		if sb := stx.Bucket(name); sb != nil {
			if err := copyBucket(dst, sb); err != nil {
				return err
			}
		}
	}
	if stx.Bucket(bucketSharedRefs) == nil {
		return rebuildSharedRefs(tx)
	}
	return nil
}

func copyBucket(dst, src *bolt.Bucket) error {
	return src.ForEach(func(k, v []byte) error {
		if v == nil {
			sub := src.Bucket(k)
			d, err := dst.CreateBucket(k)
			if err != nil {
				return err
			}
			return copyBucket(d, sub)
		}
		return dst.Put(append([]byte(nil), k...), append([]byte(nil), v...))
	})
}

// maybeSnapshot takes a raft snapshot (metadata only: the image is the bbolt
// file, made when one is sent) every SnapshotEntries applied entries and
// compacts the log, keeping CompactionKeep entries for slow followers.
func (n *Node) maybeSnapshot(applied uint64, force bool) {
	if applied <= n.snapIndex || (!force && applied-n.snapIndex < n.cfg.SnapshotEntries) {
		return
	}
	snap, err := n.ms.CreateSnapshot(applied, n.confState, nil)
	if err != nil {
		if err == raft.ErrSnapOutOfDate {
			return
		}
		n.lg.Panic().Err(err).Msg("create snapshot")
	}
	compactTo := uint64(0)
	if applied > n.cfg.CompactionKeep {
		compactTo = applied - n.cfg.CompactionKeep
	}
	if first, _ := n.ms.FirstIndex(); compactTo < first {
		compactTo = 0
	}
	if err := n.db.Update(func(tx *bolt.Tx) error {
		return saveSnapshotMeta(tx, snap.GetMetadata(), compactTo)
	}); err != nil {
		n.lg.Fatal().Err(err).Msg("metastore: failed to save snapshot metadata")
	}
	fsutil.Synced(n.db.Path())
	if compactTo > 0 {
		if err := n.ms.Compact(compactTo); err != nil && err != raft.ErrCompacted {
			n.lg.Panic().Err(err).Msg("compact log")
		}
	}
	n.snapIndex = applied
	n.lg.Debug().Uint64("index", applied).Uint64("compacted_to", compactTo).Msg("snapshot")
}
