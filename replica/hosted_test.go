package replica

import (
	"testing"

	"github.com/sluice-broker/sluice/log"
)

// The adapters a server serves from: Hosted and Local hand out the same
// replicas and partitions as the Host and the Manager, a missing one as a
// nil interface, and CleanTargets lists what is open, raft replicas
// keeping their emptied batches (they are raft entries), plain logs not.
func TestHostedAndCleanTargets(t *testing.T) {
	fl := log.NewFlusher(log.FlusherConfig{Policy: log.FlushNever, Logger: testLogger(t)})
	fl.Start()
	t.Cleanup(func() { fl.Close() })
	h, err := NewHost(HostConfig{Node: 1, Dir: t.TempDir(), Transport: NewLocalTransport(), Flusher: fl, Logger: testLogger(t), ElectionTicks: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	v := h.Hosted()
	k := Key{TopicID: [16]byte{9}, Index: 2}
	if r, ok := v.Get(k); ok || r != nil {
		t.Fatalf("Get of a replica not open: %v, %v; want nil, false", r, ok)
	}
	r, err := v.Open("t", k, Members{Voters: []NodeID{1}}, ReplicaOptions{Mode: ModeRaft, Log: smallLogConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := v.Get(k); !ok || got != r {
		t.Fatalf("Get after Open: %v, %v; want the opened replica", got, ok)
	}
	if rs := v.Replicas(); len(rs) != 1 || rs[0] != r {
		t.Fatalf("Replicas: %v", rs)
	}
	if _, err := r.Propose(testBatch("v", 3, -1, 0, 0), AcksAll); err != nil {
		t.Fatal(err)
	}
	ts := h.CleanTargets()
	if len(ts) != 1 || ts[0].Log != r.(*Replica).Log() || !ts[0].RetainEmpty || ts[0].Limit() != r.HighWatermark() {
		t.Fatalf("host clean targets %+v", ts)
	}
	if err := v.Remove(k, true); err != nil {
		t.Fatal(err)
	}
	if ts := h.CleanTargets(); len(ts) != 0 {
		t.Fatalf("clean targets after Remove: %d", len(ts))
	}

	m, err := NewManager(t.TempDir(), fl, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	lv := m.Local()
	p, err := lv.Open("o", k, smallLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(testBatch("v", 2, -1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	ts = m.CleanTargets()
	if len(ts) != 1 || ts[0].Log != p.(*Partition).Log() || ts[0].RetainEmpty || ts[0].Limit() != p.HighWatermark() {
		t.Fatalf("manager clean targets %+v", ts)
	}
	if err := lv.Remove(k); err != nil {
		t.Fatal(err)
	}
	if ts := m.CleanTargets(); len(ts) != 0 {
		t.Fatalf("manager clean targets after Remove: %d", len(ts))
	}
}
