package replica

import (
	"context"
	"testing"

	"github.com/sluice-broker/sluice/log"
)

// BenchmarkOneVoterProduceRead is the Produce and Fetch hot path of one
// partition as `sluice dev` runs it (a one-voter group): Propose, Wait
// for acks=all, then ReadRange of the batch and Release, with its
// allocations per round trip (-benchmem).
func BenchmarkOneVoterProduceRead(b *testing.B) {
	fl := log.NewFlusher(log.FlusherConfig{Policy: log.FlushNever, Logger: testLogger(b)})
	fl.Start()
	defer fl.Close()
	h, err := NewHost(HostConfig{Node: 1, Dir: b.TempDir(), Transport: NewLocalTransport(), Flusher: fl, Logger: testLogger(b), ElectionTicks: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	r, err := h.Open("t", Key{TopicID: [16]byte{1}}, Members{Voters: []NodeID{1}}, ReplicaOptions{Mode: ModeRaft, Log: log.DefaultConfig()})
	if err != nil {
		b.Fatal(err)
	}
	batch := testBatch("value-of-a-record", 10, -1, 0, 0)
	buf := make([]byte, len(batch))
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		copy(buf, batch)
		p, err := r.Propose(buf, AcksAll)
		if err != nil {
			b.Fatal(err)
		}
		res, err := p.Wait(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rr, err := r.ReadRange(res.BaseOffset, 1<<20, res.LastOffset+1)
		if err != nil || rr.Range.Len == 0 {
			b.Fatalf("read %d bytes: %v", rr.Range.Len, err)
		}
		rr.Range.Release()
	}
}
