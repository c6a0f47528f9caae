package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-broker/sluice/log"
)

// A full disk is the one storage failure a replica comes back from without
// a restart. A write that finds the file system full stops the replica as
// any storage failure does (failLocked: it steps and sends nothing more,
// KAFKA_STORAGE_ERROR to clients), because raft's Ready in hand can be
// neither finished nor handed back. What it leaves on disk is what a
// kill -9 at that instant leaves, which Open recovers from: the log cut
// its partial batch back (log/nospace.go), raft.index and raft.confs end
// at their last whole record, raft.state keeps its last good slot, and
// nothing was acknowledged to a peer that is not durable (step 2 waits
// for step 1). So the host's recovery loop closes the stopped replica and,
// once space is freed, opens it again from its files, in place: the same
// key, members and options, as a restart of the broker would. Until then
// the replica stays in the host's table, failed. A failed fsync is never
// recovered this way, whatever its errno: after one the page cache's
// state is unknown (log/doc.go), so only a restart may reopen that log.

// Reopen attempts: from noSpaceRetry after the failure, every
// noSpaceRetry/4 the host looks at the file system's free space (statfs,
// once per directory and round) and reopens the replica as soon as there
// is room. Only an open that fails with room there backs off, at doubling
// intervals up to noSpaceRetryMax. (Backing off while the disk was still
// full, as before, left a replica stopped for up to the backoff after
// space returned: 6-11 s after a write broker's disk was full for 5-9 s.)
var (
	noSpaceRetry    = time.Second
	noSpaceRetryMax = 10 * time.Second
)

// isNoSpace reports whether err stopped a replica because a write found
// the file system (or the user's quota) full: the log's ErrNoSpace, or a
// write or file creation of raft's own files failing with ENOSPC or
// EDQUOT. Not a failed fsync, nor anything the log already took as fatal.
func isNoSpace(err error) bool {
	if errors.Is(err, log.ErrFatal) {
		return false
	}
	if errors.Is(err, log.ErrNoSpace) {
		return true
	}
	var pe *os.PathError
	if !errors.As(err, &pe) || (pe.Op != "write" && pe.Op != "open") {
		return false
	}
	return errors.Is(pe.Err, syscall.ENOSPC) || errors.Is(pe.Err, syscall.EDQUOT)
}

// recoverLoop reopens, from their files, the replicas a full disk stopped
// (see above), each at its own backoff.
func (h *Host) recoverLoop() {
	defer h.wg.Done()
	t := time.NewTicker(noSpaceRetry / 4)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		h.mu.RLock()
		list := h.list
		h.mu.RUnlock()
		now := time.Now()
		free := map[string]int64{} // usable bytes per logs directory, this round
		for _, r := range list {
			at := r.noSpaceAt.Load()
			if at == 0 || now.UnixNano() < at {
				continue
			}
			d := filepath.Dir(r.dir)
			f, ok := free[d]
			if !ok {
				f = usableBytes(r.dir)
				free[d] = f
			}
			if f >= 0 && f < 2*proposeReserve {
				continue // still full: look again next round, no backoff
			}
			if !h.reopen(r) {
				r.noSpaceWait = min(2*max(r.noSpaceWait, noSpaceRetry), noSpaceRetryMax)
				r.noSpaceAt.Store(now.Add(r.noSpaceWait).UnixNano())
			}
		}
	}
}

// reopen closes old, a replica a full disk stopped, and opens it again
// from its files in its place. It reports false when the open failed (the
// disk is still full; old stays in the table, failed) or old is no longer
// the host's replica of its key.
func (h *Host) reopen(old *Replica) bool {
	h.removeMu.Lock()
	defer h.removeMu.Unlock()
	h.mu.RLock()
	cur, closed := h.reps[old.key], h.closed
	h.mu.RUnlock()
	if closed || cur != old {
		return true // removed: nothing to retry
	}
	// Not while the file system is still about full: the replica would
	// stop again at its first entry (followerSpaceLocked).
	if free := usableBytes(old.dir); free >= 0 && free < 2*proposeReserve {
		return false
	}
	_ = old.close() // it already failed; what it says adds nothing
	r, err := h.openReplica(old.topic, old.key, old.openMembers, *old.opts.Load(), old.openJoin)
	if err != nil {
		old.lg.Debug().Err(err).Msg("reopening the replica a full disk stopped: not yet")
		return false
	}
	h.mu.Lock()
	if h.closed || h.reps[old.key] != old {
		h.mu.Unlock()
		_ = r.close()
		return true
	}
	h.swapLocked(old, r)
	h.mu.Unlock()
	h.failed.Add(-1)
	r.lg.Info().Int64("log_end_offset", r.log.LogEndOffset()).Msg("space available again: replica reopened from its files")
	h.sched.enqueue(r)
	return true
}

// fullHandOffEvery is the least time between two attempts of a leader
// with a full disk to hand its leadership away.
const fullHandOffEvery = time.Second

// handOffFull hands the leadership of a leader that refused a batch for
// lack of space (checkSpace) to a voter in its ISR, the first that raft
// accepts as a target, so that the partition takes writes again on a
// broker with room instead of answering KAFKA_STORAGE_ERROR until this
// disk is freed, as Kafka moves leadership off a failed log directory.
// The round that sends the target raft's MsgTimeoutNow then stops this
// replica as a full disk does (fullHandedOffLocked), so that it does not
// stay behind as a follower in sync that the preferred-leader rebalance
// (or ElectLeaders) would hand leadership straight back to. Tried at most
// once per fullHandOffEvery; with no voter in sync (or all as full) the
// leader stays and keeps refusing.
func (r *Replica) handOffFull() {
	now := time.Now().UnixNano()
	last := r.fullHandOff.Load()
	if now-last < int64(fullHandOffEvery) || !r.fullHandOff.CompareAndSwap(last, now) {
		return
	}
	isr := r.InSyncReplicas()
	if len(isr) < 2 {
		return
	}
	r.st.mu.Lock()
	voters := r.st.cs.GetVoters()
	r.st.mu.Unlock()
	for _, n := range isr[1:] {
		if !slices.Contains(voters, raftID(n)) {
			continue
		}
		// Before the request: the round that sends MsgTimeoutNow may
		// run before TransferLeadership returns.
		r.fullTransferTo.Store(raftID(n))
		if err := r.TransferLeadership(n); err == nil {
			r.lg.Warn().Int32("to", int32(n)).Msg("disk too full for new batches: handing leadership to an in-sync voter")
			return
		}
		r.fullTransferTo.Store(0)
	}
}

// fullHandedOffLocked, at the end of a round that sent peers, returns a
// no-space error, which stops the replica until space returns (above),
// when the round sent MsgTimeoutNow to the voter handOffFull chose and
// the file system still has less free than a stopped replica is reopened
// at (2*proposeReserve). The target then campaigns and wins with the
// other voters; this replica, stopped, answers nobody, so the new leader
// never hears from it (raft's RecentActive stays false and
// TransferLeadership refuses it) and the preferred-leader rebalance does
// not hand leadership back to a broker that would only refuse batches
// and hand it away again: while a client's metadata lagged each move, no
// batch of the partition was taken, and producers timed out. Without
// the stop, a full leader that handed off stayed a follower in sync
// whenever no entry reached it below proposeReserve (followerSpaceLocked)
// before the rebalance ran.
func (r *Replica) fullHandedOffLocked(peers []*raftpb.Message) error {
	to := r.fullTransferTo.Load()
	if to == 0 {
		return nil
	}
	for _, m := range peers {
		if m.GetType() != raftpb.MsgTimeoutNow || m.GetTo() != to {
			continue
		}
		r.fullTransferTo.Store(0)
		free := usableBytes(r.dir)
		if free < 0 || free >= 2*proposeReserve {
			return nil // room again: it follows as usual
		}
		return fmt.Errorf("%w: %d bytes free in %s after handing leadership to node %d; stopped until %d are free", log.ErrNoSpace, free, r.dir, nodeOf(to), 2*proposeReserve)
	}
	return nil
}

// followerSpaceLocked stops a follower (or learner) that is handed
// entries while its file system has less than proposeReserve free, as a
// write that found the disk full would (a no-space failure: the replica
// is reopened once space returns, above), instead of filling the disk to
// its last byte. A broker whose disk is about full thus leaves the ISR of
// the partitions it follows, so the preferred-leader rebalance does not
// hand leadership back to it, and its leaders refuse batches and hand
// their leadership away (handOffFull): the partitions keep taking writes
// on the brokers with room.
func (r *Replica) followerSpaceLocked(m *raftpb.Message) error {
	if len(m.GetEntries()) == 0 || r.rn.BasicStatus().RaftState == raft.StateLeader {
		return nil
	}
	if free := usableBytes(r.dir); free >= 0 && free < proposeReserve {
		return fmt.Errorf("%w: %d bytes free in %s, less than the %d a follower keeps free", log.ErrNoSpace, free, r.dir, proposeReserve)
	}
	return nil
}

// swapLocked puts r, a reopened replica, in old's place in the table and
// in the tick loop's list, which it copies: the tick loop ranges over the
// old array without the lock. h.mu is held.
func (h *Host) swapLocked(old, r *Replica) {
	h.reps[old.key] = r
	list := make([]*Replica, len(h.list))
	for i, x := range h.list {
		if x == old {
			x = r
		}
		list[i] = x
	}
	h.list = list
}

// offlineNotice is the message a replica that stops (failLocked: a full
// disk, a failed write or sync, a raft panic) sends every other member of
// its group, as Kafka's broker reports a failed log directory to the
// controller, which takes its replicas out of the ISR at once. raft's
// MsgUnreachable is a local message type raft never sends between nodes;
// between hosts it carries this notice and is never stepped: the
// receiver records when the sender stopped (Replica.stopped). A leader
// leaves such a member out of its ISR (and refuses it as a transfer
// target) until it hears from it again, instead of after
// replica.lag.time.max.ms; a replica reopened once space returns is heard
// from at its first answer and rejoins as any follower that caught up.
// The notice travels on the peer's ordered stream after everything the
// replica sent before stopping. A broker that does not know it refuses it
// (RefusedType) and keeps the lag rule.
const offlineNotice = raftpb.MsgUnreachable

// tellStoppedLocked sends the offline notice to every other member of the
// group (raftMu held; the replica is stopping, not for its host's close).
func (r *Replica) tellStoppedLocked() {
	term := r.term.Load()
	if term == 0 || r.host.ctx.Err() != nil {
		return // a term-0 message is refused; a closing host says nothing
	}
	self := raftID(r.host.cfg.Node)
	// TryLock: a raft panic may have left the storage's lock held (the
	// notice is then not sent, and the lag rule applies).
	if !r.st.mu.TryLock() {
		return
	}
	cs := r.st.cs
	members := slices.Concat(cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext())
	r.st.mu.Unlock()
	slices.Sort(members)
	var msgs []*raftpb.Message
	for _, id := range slices.Compact(members) {
		if id != self {
			msgs = append(msgs, &raftpb.Message{Type: new(offlineNotice), From: new(self), To: new(id), Term: new(term)})
		}
	}
	r.host.send(r, msgs)
}

// stoppedPeerLocked says whether member id told this replica its replica
// stopped and has not been heard from since (raftMu held).
func (r *Replica) stoppedPeerLocked(id uint64) bool {
	at, ok := r.stopped[id]
	return ok && !r.lastHeard[id].After(at)
}
