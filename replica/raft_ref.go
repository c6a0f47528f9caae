package replica

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
)

// A group whose only member is its leader (one voter, no learners: a single
// node's partitions under replica.one.voter, or a cluster's replication
// factor 1 without read brokers) sends no entry to anyone, yet etcd raft
// copies every proposed entry (raft.appendEntry clones it) and holds the
// copy until it is durable and applied: the batch twice in memory, and
// the copies' garbage sizing the heap. Such a group proposes instead a
// reference: an entry whose data is refTag and a sequence number naming the
// batch, which stays in the Proposal (the request's frame). Step 1 writes
// the batch the reference names to the log, as it would the entry's data,
// and lets the frame go (Proposal.BatchReleased) as soon as the log has
// it, as the plain log does. Raft's own copy is then 16 bytes.
//
// A reference lives only in raft's memory and in the entry cache of this
// replica; the log, raft.index and everything read back after a restart
// hold the batch. Entries serves a cached reference only while the group is
// solo (raftStorage.solo), which is cleared before a configuration change
// is proposed or applied, so raft reads the batches from the log for the
// appends it sends to a new member; Host.send refuses to send one.
// References are proposed only while the group is solo and no
// configuration change is pending, and an entry a reference names is
// stable before the change that adds a member can commit, so raft's
// unstable log holds none once there is anyone to send it to.
var refTag = []byte("SLRF")

const refSize = 16 // refTag | zero u32 | sequence u64

func isRef(data []byte) bool {
	return len(data) == refSize && bytes.HasPrefix(data, refTag)
}

func refData(seq uint64) []byte {
	b := make([]byte, refSize)
	copy(b, refTag)
	binary.BigEndian.PutUint64(b[8:], seq)
	return b
}

// soloLocked: this replica is the group's leader and only member, with no
// configuration change under way, so a proposal may be a reference.
func (r *Replica) soloLocked() bool {
	if r.confPending {
		return false
	}
	r.st.mu.Lock()
	cs := r.st.cs
	solo := len(cs.GetVoters()) == 1 && cs.GetVoters()[0] == raftID(r.host.cfg.Node) &&
		len(cs.GetVotersOutgoing()) == 0 && len(cs.GetLearners()) == 0 && len(cs.GetLearnersNext()) == 0
	r.st.solo = solo
	r.st.mu.Unlock()
	r.soloHint.Store(solo)
	return solo
}

// endSoloLocked stops references before a configuration change: none is
// proposed or served from the cache any more.
func (r *Replica) endSoloLocked() {
	r.st.mu.Lock()
	r.st.solo = false
	r.st.mu.Unlock()
	r.soloHint.Store(false)
}

// proposeRefLocked proposes p's batch by reference.
func (r *Replica) proposeRefLocked(p *Proposal) error {
	r.refSeq++
	if err := r.rn.Propose(refData(r.refSeq)); err != nil {
		return err
	}
	if r.refs == nil {
		r.refs = map[uint64]*Proposal{}
	}
	r.refs[r.refSeq] = p
	return nil
}

// refBatch is the batch a reference names (raftStorage.append's resolver).
func (r *Replica) refBatch(data []byte) ([]byte, error) {
	p := r.refs[binary.BigEndian.Uint64(data[8:])]
	if p == nil || p.batch == nil {
		return nil, fmt.Errorf("replica: raft entry names batch %d, which is not pending", binary.BigEndian.Uint64(data[8:]))
	}
	return p.batch, nil
}

// releaseRefsLocked lets go of the batches of the references in ents,
// which the log now holds.
func (r *Replica) releaseRefsLocked(ents []*raftpb.Entry) {
	if len(r.refs) == 0 {
		return
	}
	for _, e := range ents {
		if !isRef(e.GetData()) {
			continue
		}
		seq := binary.BigEndian.Uint64(e.GetData()[8:])
		if p := r.refs[seq]; p != nil {
			delete(r.refs, seq)
			p.batch = nil
			p.releaseBatch()
		}
	}
}

// dropRefsLocked forgets every pending reference (the replica stopped).
func (r *Replica) dropRefsLocked() {
	for seq, p := range r.refs {
		delete(r.refs, seq)
		p.releaseBatch()
	}
}

// hasRef reports whether a message carries a reference.
func hasRef(m *raftpb.Message) bool {
	for _, e := range m.GetEntries() {
		if isRef(e.GetData()) {
			return true
		}
	}
	return false
}
