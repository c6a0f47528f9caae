package replica

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/protocol"
)

// withTimestamp restamps a testBatch's max timestamp (and its CRC).
func withTimestamp(b []byte, ts int64) []byte {
	var h protocol.BatchHeader
	if err := h.Decode(b); err != nil {
		panic(err)
	}
	h.BaseTimestamp, h.MaxTimestamp = ts, ts
	h.Put(b)
	protocol.Batch(b).SetCRC()
	return b
}

// Producer expiry on the raft path: the sweep drops a producer from both
// the replica's table and the log's state (seeding the table from the log
// must not bring it back), keeps a producer whose last batch is recent,
// and runs again when the replica opens, so a producer whose old state the
// log rebuilds after a restart is not back either.
func TestRaftProducerExpiry(t *testing.T) {
	expiry := time.Hour
	c := newTestCluster(t, []NodeID{1}, nil, ReplicaOptions{}, func(cfg *HostConfig) { cfg.ProducerIDExpiration = expiry })
	c.leader()
	const old, fresh = 1000, 2000
	// testBatch's timestamps are from 2023: old by any clock now.
	c.produce(testBatch("a", 5, old, 0, 0), AcksAll)
	c.produce(withTimestamp(testBatch("b", 2, fresh, 0, 0), time.Now().UnixMilli()), AcksAll)
	gap := func(pid int64, ts int64) []byte { return withTimestamp(testBatch("gap", 1, pid, 0, 10), ts) }
	if err := c.produceErr(gap(old, 1), AcksAll); !errors.Is(err, log.ErrOutOfOrderSequence) {
		t.Fatalf("a gap before expiry: %v, want ErrOutOfOrderSequence", err)
	}
	r := c.rep(1)
	if n := r.ExpireProducers(time.Now()); n != 2 {
		t.Fatalf("expired %d entries, want 2 (the old producer in the table and in the log)", n)
	}
	ids := func() []int64 {
		ps, err := r.Storage().ActiveProducers()
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, p := range ps {
			out = append(out, p.ID)
		}
		return out
	}
	if got := ids(); len(got) != 1 || got[0] != fresh {
		t.Fatalf("active producers %v, want [%d]", got, fresh)
	}
	// Forgotten everywhere: a later sequence is taken as from a new
	// producer (with an old timestamp: expired again below).
	c.produce(gap(old, 1), AcksAll)
	if err := c.produceErr(gap(fresh, time.Now().UnixMilli()), AcksAll); !errors.Is(err, log.ErrOutOfOrderSequence) {
		t.Fatalf("a gap of the recent producer: %v, want ErrOutOfOrderSequence", err)
	}

	// Restart: the log rebuilds the old producer's state with its old
	// timestamp; opening expires it before any batch is checked.
	c.stop(1)
	r = c.start(1)
	c.leader()
	if got := ids(); len(got) != 1 || got[0] != fresh {
		t.Fatalf("after a restart, active producers %v, want [%d]", got, fresh)
	}
	c.produce(withTimestamp(testBatch("gap2", 1, old, 0, 20), 1), AcksAll)
}

// The snapshot's table keeps each producer's last timestamp; a table
// encoded before the section existed decodes with the decoding time, so
// its producers expire later, never sooner.
func TestRaftProducerTimestampsSnapshot(t *testing.T) {
	tab := producerTable{7: {Epoch: 0, CoordEpoch: 3, LastTimestamp: 12345}, 9: {Epoch: 1, CoordEpoch: -1, LastTimestamp: 777}}
	got, rest, err := decodeProducers(tab.encode(100))
	if err != nil || len(rest) != 0 || got[7].LastTimestamp != 12345 || got[9].LastTimestamp != 777 || got[7].CoordEpoch != 3 {
		t.Fatalf("decoded %+v %+v, rest %d, %v", got[7], got[9], len(rest), err)
	}
	b := tab.encode(100)
	before := time.Now().UnixMilli()
	got, rest, err = decodeProducers(b[:len(b)-(8+2*16)])
	if err != nil || len(rest) != 0 || got[7].LastTimestamp < before || got[7].CoordEpoch != 3 {
		t.Fatalf("a table without timestamps decoded to %+v, rest %d, %v", got[7], len(rest), err)
	}
	if n := got.expire(time.Now(), time.Hour, func(int64) bool { return false }); n != 0 {
		t.Fatalf("expired %d producers of a table without timestamps at once", n)
	}
}
