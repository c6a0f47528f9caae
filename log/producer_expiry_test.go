package log

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/protocol"
)

const testExpiry = time.Hour

func idem(pid int64, seq int32, ts int64) []byte {
	return mkBatch(spec{pid: pid, idem: true, seq: seq, ts: ts})
}

func activeIDs(t *testing.T, l *Log) []int64 {
	t.Helper()
	ps, err := l.ActiveProducers()
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	return ids
}

// An idle producer is forgotten at exactly producer.id.expiration.ms after
// its last batch's timestamp; its next batch is then taken at any
// sequence (Kafka 4.4 answers no UNKNOWN_PRODUCER_ID: it accepts a
// producer it holds no state for); a producer with a transaction open is
// kept until its transaction ends.
func TestProducerExpiry(t *testing.T) {
	l := openT(t, t.TempDir(), testConfig())
	defer l.Close()
	mustAppend(t, l, idem(1, 0, 1000))
	mustAppend(t, l, idem(1, 1, 2000)) // p1's last batch: 2000
	mustAppend(t, l, mkBatch(spec{pid: 2, idem: true, seq: 0, ts: 1000, attrs: protocol.AttrTransactional}))
	mustAppend(t, l, idem(3, 0, 5000))

	// With state, a gap in p1's sequence is refused.
	if _, err := l.Append(idem(1, 7, 2000)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap before expiry: %v, want ErrOutOfOrderSequence", err)
	}
	if st, ok := l.ProducerState(1); !ok || st.LastTimestamp != 2000 {
		t.Fatalf("p1 state %+v %v, want last timestamp 2000", st, ok)
	}
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	exp := testExpiry.Milliseconds()
	if n := l.ExpireProducers(at(2000+exp-1), testExpiry); n != 0 {
		t.Fatalf("expired %d producers 1ms early", n)
	}
	if n := l.ExpireProducers(at(2000+exp), testExpiry); n != 1 {
		t.Fatalf("expired %d producers, want 1 (p1; p2 has a transaction open, p3 is newer)", n)
	}
	if _, ok := l.ProducerState(1); ok {
		t.Fatal("p1 still has state after expiry")
	}
	if got := activeIDs(t, l); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("active producers %v, want [2 3]", got)
	}
	// Forgotten: the next batch is taken at any sequence and starts a new
	// entry.
	r := mustAppend(t, l, idem(1, 7, 3000))
	if r.Duplicate {
		t.Fatal("batch after expiry answered as a duplicate")
	}
	if st, ok := l.ProducerState(1); !ok || st.LastSequence != 7 {
		t.Fatalf("p1 after expiry: %+v %v", st, ok)
	}

	// Long after: p2 still kept while its transaction is open, p1 and p3
	// go; once p2's transaction ends (its marker's timestamp counts) it
	// goes too.
	late := at(10_000 + 10*exp)
	if n := l.ExpireProducers(late, testExpiry); n != 2 {
		t.Fatalf("expired %d, want 2 (p1, p3)", n)
	}
	if got := activeIDs(t, l); len(got) != 1 || got[0] != 2 {
		t.Fatalf("active producers %v, want [2] (transaction open)", got)
	}
	markerTs := late.UnixMilli()
	mustAppend(t, l, protocol.TxnMarkerBatch(2, 0, true, 0, markerTs))
	if n := l.ExpireProducers(late, testExpiry); n != 0 {
		t.Fatalf("expired %d right after p2's marker", n)
	}
	if n := l.ExpireProducers(at(markerTs+exp), testExpiry); n != 1 {
		t.Fatalf("expired %d, want p2 once its marker is old", n)
	}
	if n := l.ExpireProducers(at(1<<50), 0); n != 0 {
		t.Fatal("expiration 0 must expire nothing")
	}
}

// The last timestamps survive a restart, from the clean-shutdown snapshot
// and from the recovery walk alike, so a producer expired before the
// restart, which the recovery walk rebuilds, is expired again by the
// same check, and one that was not keeps its age.
func TestProducerExpiryRestart(t *testing.T) {
	for _, clean := range []bool{true, false} {
		name := "crash"
		if clean {
			name = "clean"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, dir, testConfig())
			mustAppend(t, l, idem(1, 0, 1000))
			mustAppend(t, l, idem(3, 0, 500_000))
			now := time.UnixMilli(1000 + testExpiry.Milliseconds())
			if n := l.ExpireProducers(now, testExpiry); n != 1 {
				t.Fatalf("expired %d, want 1", n)
			}
			if clean {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				crash(t, l)
			}
			l = openT(t, dir, testConfig())
			defer l.Close()
			if l.openedFromSnapshot != clean {
				t.Fatalf("opened from snapshot %v, want %v", l.openedFromSnapshot, clean)
			}
			// The snapshot holds the table as it was, without p1; the
			// walk rebuilds p1 from its batch, with its timestamp.
			st, ok := l.ProducerState(1)
			if clean && ok {
				t.Fatalf("p1 back from the snapshot: %+v", st)
			}
			if !clean && (!ok || st.LastTimestamp != 1000) {
				t.Fatalf("p1 rebuilt as %+v %v, want last timestamp 1000", st, ok)
			}
			if st, ok := l.ProducerState(3); !ok || st.LastTimestamp != 500_000 {
				t.Fatalf("p3 rebuilt as %+v %v", st, ok)
			}
			want := 1
			if clean {
				want = 0
			}
			if n := l.ExpireProducers(now, testExpiry); n != want {
				t.Fatalf("after reopening, expired %d, want %d", n, want)
			}
			if got := activeIDs(t, l); len(got) != 1 || got[0] != 3 {
				t.Fatalf("active producers %v, want [3]", got)
			}
		})
	}
}
