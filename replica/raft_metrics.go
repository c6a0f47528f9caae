package replica

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// FollowerLag returns, on the leader, how many raft entries each other
// member (voter or learner) is behind the leader's last entry, by node;
// nil on a non-leader. An entry is one batch (or a raft entry of its own),
// so this counts batches, not records. For the metrics endpoint.
func (r *Replica) FollowerLag() map[NodeID]uint64 {
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	if r.closed || r.rn.BasicStatus().RaftState != raft.StateLeader {
		return nil
	}
	self := raftID(r.host.cfg.Node)
	last, _ := r.st.LastIndex()
	lag := make(map[NodeID]uint64)
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == self {
			return
		}
		if pr.Match < last {
			lag[NodeID(id-1)] = last - pr.Match
		} else {
			lag[NodeID(id-1)] = 0
		}
	})
	return lag
}

// RaftIndexes returns the replica's last raft index, the commit index it
// knows and the index it applied (answered proposals and moved the high
// watermark to), for the metrics endpoint.
func (r *Replica) RaftIndexes() (last, commit, applied uint64) {
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	if r.closed {
		return 0, 0, 0
	}
	last, _ = r.st.LastIndex()
	return last, r.rn.BasicStatus().GetCommit(), r.applied
}
