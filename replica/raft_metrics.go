package replica

import (
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"

	"github.com/sluice-broker/sluice/partition"
)

// FollowerLag returns, on the leader, how many raft entries each other
// member (voter or learner) is behind the leader's last entry, by node;
// nil on a non-leader. An entry is one batch (or a raft entry of its own),
// so this counts batches, not records. For the metrics endpoint.
func (r *Replica) FollowerLag() map[NodeID]uint64 {
	lags := r.MemberLags()
	if lags == nil {
		return nil
	}
	out := make(map[NodeID]uint64, len(lags))
	for id, l := range lags {
		out[id] = l.Entries
	}
	return out
}

// MemberLag is how far one member of a partition's raft group is behind
// its leader, as the leader sees it.
type MemberLag = partition.MemberLag

// MemberLags returns, on the leader, each other member's lag by node; nil
// on a non-leader. For the metrics endpoint and the status page.
func (r *Replica) MemberLags() map[NodeID]MemberLag {
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	if r.closed || r.rn.BasicStatus().RaftState != raft.StateLeader {
		return nil
	}
	self := raftID(r.host.cfg.Node)
	last, _ := r.st.LastIndex()
	end := r.st.endOffsetOf(last)
	now := time.Now()
	lags := make(map[NodeID]MemberLag)
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == self {
			return
		}
		var l MemberLag
		if pr.Match < last {
			l.Entries = last - pr.Match
			l.Offsets = max(end-r.st.endOffsetOf(pr.Match), 0)
			l.Time = now.Sub(r.caughtUpLocked(id, pr.Match, last))
		}
		lags[NodeID(id-1)] = l
	})
	return lags
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
