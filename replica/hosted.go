package replica

import (
	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/partition"
)

// The Kafka front end reaches the partitions through package partition's
// interfaces; these adapters give it a Host and a Manager as them. A
// *Replica is a partition.Replica and a *Partition a partition.LocalLog
// as they are.
var (
	_ partition.Replica  = (*Replica)(nil)
	_ partition.LocalLog = (*Partition)(nil)
)

// Hosted returns h as the partition.Host a server serves from.
func (h *Host) Hosted() partition.Host { return hosted{h} }

type hosted struct{ h *Host }

func (v hosted) Get(k Key) (partition.Replica, bool) {
	if r, ok := v.h.Get(k); ok {
		return r, true
	}
	return nil, false
}

func (v hosted) Open(topic string, k Key, initial Members, o ReplicaOptions) (partition.Replica, error) {
	r, err := v.h.Open(topic, k, initial, o)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (v hosted) OpenJoining(topic string, k Key, initial Members, o ReplicaOptions) (partition.Replica, error) {
	r, err := v.h.OpenJoining(topic, k, initial, o)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (v hosted) Replicas() []partition.Replica {
	v.h.mu.RLock()
	defer v.h.mu.RUnlock()
	out := make([]partition.Replica, len(v.h.list))
	for i, r := range v.h.list {
		out[i] = r
	}
	return out
}

func (v hosted) Remove(k Key, deleteData bool) error { return v.h.Remove(k, deleteData) }

func (v hosted) RemoveStale(live func(id [16]byte, index int32) bool) error {
	return v.h.RemoveStale(live)
}

func (v hosted) Dir() string { return v.h.Dir() }

func (v hosted) Promote(k Key, t Takeover) error { return v.h.Promote(k, t) }

func (v hosted) Follow(topic string, k Key, m Members, o ReplicaOptions, master NodeID, t Takeover) (partition.Replica, int64, error) {
	r, cut, err := v.h.Follow(topic, k, m, o, master, t)
	if err != nil {
		return nil, cut, err
	}
	return r, cut, nil
}

func (v hosted) FollowJoining(topic string, k Key, m Members, o ReplicaOptions, master NodeID, t Takeover) (partition.Replica, int64, error) {
	r, cut, err := v.h.FollowJoining(topic, k, m, o, master, t)
	if err != nil {
		return nil, cut, err
	}
	return r, cut, nil
}

// Local returns m as the partition.LocalLogs a server keeps its
// __consumer_offsets view in.
func (m *Manager) Local() partition.LocalLogs { return local{m} }

type local struct{ m *Manager }

func (v local) Open(topic string, k Key, cfg log.Config) (partition.LocalLog, error) {
	p, err := v.m.Open(topic, k, cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (v local) Remove(k Key) error { return v.m.Remove(k) }
func (v local) Dir() string        { return v.m.Dir() }

// CleanTargets lists the host's replicas for the log cleaner, which skips
// those of topics that are not compacted. A replica is cleaned only below
// its high watermark (committed entries, never truncated) and keeps every
// batch, emptied or not, because its batches are its raft entries: a
// replica that is sent them from the log gets the cleaned batches, the
// same survivors.
func (h *Host) CleanTargets() []log.CleanTarget {
	rs := h.Replicas()
	out := make([]log.CleanTarget, 0, len(rs))
	for _, r := range rs {
		out = append(out, log.CleanTarget{Log: r.Log(), Limit: r.HighWatermark, RetainEmpty: true})
	}
	return out
}

// CleanTargets lists the open plain partitions for the log cleaner, each
// cleaned below its high watermark.
func (m *Manager) CleanTargets() []log.CleanTarget {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]log.CleanTarget, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, log.CleanTarget{Log: p.Log(), Limit: p.HighWatermark})
	}
	return out
}
