package coordinator

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var testLimits = ShareLimits{LockDuration: 30 * time.Second, DeliveryLimit: 3, MaxLocks: 100}

func TestSharePartitionAcquireAcknowledge(t *testing.T) {
	now := time.Unix(1000, 0)
	sp := newSharePartition()
	sp.initialize(10)
	if off, ok := sp.fetchOffset(testLimits); off != 10 || !ok {
		t.Fatalf("fetchOffset = %d %v", off, ok)
	}
	got := sp.acquire("a", 10, 20, 4, now, testLimits)
	if want := []AcquiredRange{{10, 13, 1}}; !slices.Equal(got, want) {
		t.Fatalf("acquire a = %v, want %v", got, want)
	}
	// b reads from the first available offset and gets the rest.
	if off, _ := sp.fetchOffset(testLimits); off != 14 {
		t.Fatalf("fetchOffset = %d, want 14", off)
	}
	got = sp.acquire("b", 10, 20, 0, now, testLimits)
	if want := []AcquiredRange{{14, 19, 1}}; !slices.Equal(got, want) {
		t.Fatalf("acquire b = %v, want %v", got, want)
	}
	// b cannot acknowledge a's records; nothing of the batch applies.
	if code := sp.acknowledge("b", AckBatch{13, 14, []int8{AckAccept}}, false, now, testLimits); code != kerr.InvalidRecordState.Code {
		t.Fatalf("foreign ack = %d", code)
	}
	if sp.recs[14-10].state != recAcquired {
		t.Fatal("a refused batch was partly applied")
	}
	// Malformed batches.
	for _, b := range []AckBatch{{14, 13, []int8{1}}, {14, 16, []int8{1, 1}}, {14, 14, nil}, {14, 14, []int8{5}}, {14, 14, []int8{AckRenew}}} {
		if code := sp.acknowledge("b", b, false, now, testLimits); code != kerr.InvalidRequest.Code {
			t.Fatalf("ack %v = %d, want INVALID_REQUEST", b, code)
		}
	}
	// a accepts 10-11, releases 12, rejects 13: start moves to 12.
	if code := sp.acknowledge("a", AckBatch{10, 13, []int8{AckAccept, AckAccept, AckRelease, AckReject}}, false, now, testLimits); code != 0 {
		t.Fatalf("ack = %d", code)
	}
	if sp.start != 12 {
		t.Fatalf("start = %d, want 12", sp.start)
	}
	// Acknowledged records are never acquired again; released ones are,
	// with their delivery count.
	got = sp.acquire("c", 10, 20, 0, now, testLimits)
	if want := []AcquiredRange{{12, 12, 2}}; !slices.Equal(got, want) {
		t.Fatalf("acquire c = %v, want %v", got, want)
	}
	// b accepts everything: start passes 13 (archived) only once 12 is done.
	if code := sp.acknowledge("b", AckBatch{14, 19, []int8{AckAccept}}, false, now, testLimits); code != 0 {
		t.Fatal(code)
	}
	if sp.start != 12 {
		t.Fatalf("start = %d, want 12", sp.start)
	}
	if code := sp.acknowledge("c", AckBatch{12, 12, []int8{AckAccept}}, false, now, testLimits); code != 0 {
		t.Fatal(code)
	}
	if sp.start != 20 || len(sp.recs) != 0 {
		t.Fatalf("start = %d, window %d", sp.start, len(sp.recs))
	}
	// Acknowledging twice is INVALID_RECORD_STATE.
	if code := sp.acknowledge("c", AckBatch{12, 12, []int8{AckAccept}}, false, now, testLimits); code != kerr.InvalidRecordState.Code {
		t.Fatalf("second ack = %d", code)
	}
}

func TestSharePartitionLockTimeoutAndDeliveryLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	sp := newSharePartition()
	sp.initialize(0)
	for i := int16(1); i <= testLimits.DeliveryLimit; i++ {
		got := sp.acquire("a", 0, 2, 0, now, testLimits)
		if want := []AcquiredRange{{0, 1, i}}; !slices.Equal(got, want) {
			t.Fatalf("delivery %d: %v, want %v", i, got, want)
		}
		if sp.expire(now.Add(testLimits.LockDuration-time.Millisecond), testLimits) {
			t.Fatal("expired before the lock duration")
		}
		if d := sp.nextDeadline(); !d.Equal(now.Add(testLimits.LockDuration)) {
			t.Fatalf("deadline %v", d)
		}
		now = now.Add(testLimits.LockDuration)
		if !sp.expire(now, testLimits) {
			t.Fatal("lock did not expire")
		}
	}
	// Past the delivery limit: archived, the start moves on.
	if sp.start != 2 || len(sp.recs) != 0 {
		t.Fatalf("start %d window %d, want 2 and empty", sp.start, len(sp.recs))
	}
	if got := sp.acquire("a", 0, 2, 0, now, testLimits); got != nil {
		t.Fatalf("archived records acquired again: %v", got)
	}
}

func TestSharePartitionRenewAndRelease(t *testing.T) {
	now := time.Unix(1000, 0)
	sp := newSharePartition()
	sp.initialize(0)
	sp.acquire("a", 0, 3, 0, now, testLimits)
	later := now.Add(testLimits.LockDuration / 2)
	if code := sp.acknowledge("a", AckBatch{0, 0, []int8{AckRenew}}, true, later, testLimits); code != 0 {
		t.Fatal(code)
	}
	sp.expire(now.Add(testLimits.LockDuration), testLimits)
	if sp.recs[0].state != recAcquired || sp.recs[1].state != recAvailable {
		t.Fatalf("after expiry: %+v", sp.recs)
	}
	sp.releaseMember("a", testLimits)
	if sp.recs[0].state != recAvailable || sp.recs[0].count != 1 {
		t.Fatalf("after release: %+v", sp.recs[0])
	}
}

func TestSharePartitionWindowBoundAndTruncate(t *testing.T) {
	now := time.Unix(1000, 0)
	lim := testLimits
	lim.MaxLocks = 5
	sp := newSharePartition()
	sp.initialize(0)
	if got := sp.acquire("a", 0, 100, 0, now, lim); len(got) != 1 || got[0].Last != 4 {
		t.Fatalf("acquire = %v", got)
	}
	if _, ok := sp.fetchOffset(lim); ok {
		t.Fatal("a full window offers more records")
	}
	sp.truncateTo(3)
	if sp.start != 3 || len(sp.recs) != 2 {
		t.Fatalf("start %d window %d", sp.start, len(sp.recs))
	}
	sp.truncateTo(50)
	if sp.start != 50 || len(sp.recs) != 0 {
		t.Fatalf("start %d window %d", sp.start, len(sp.recs))
	}
}

func TestSharePartitionPersistence(t *testing.T) {
	now := time.Unix(1000, 0)
	sp := newSharePartition()
	sp.initialize(100)
	sp.acquire("a", 100, 110, 0, now, testLimits)
	sp.acknowledge("a", AckBatch{101, 102, []int8{AckAccept}}, false, now, testLimits)
	sp.acknowledge("a", AckBatch{104, 104, []int8{AckReject}}, false, now, testLimits)
	sp.acknowledge("a", AckBatch{105, 105, []int8{AckRelease}}, false, now, testLimits)
	blob, err := sp.encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeSharePartition(blob)
	if err != nil {
		t.Fatal(err)
	}
	if back.start != 100 {
		t.Fatalf("start %d", back.start)
	}
	// After a restart, in-flight records (100, 103, 106-109) and the
	// released one (105) are delivered again with their counts; the
	// acknowledged and archived ones never are.
	got := back.acquire("b", 100, 120, 0, now, testLimits)
	want := []AcquiredRange{{100, 100, 2}, {103, 103, 2}, {105, 109, 2}, {110, 119, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("after restore: %v, want %v", got, want)
	}
	for _, bad := range []string{`{"format":2}`, `{"format":1,"start":0,"runs":[[5,4,2,1]]}`, `{"format":1,"start":0,"runs":[[0,0,1,1]]}`, `x`} {
		if _, err := decodeSharePartition([]byte(bad)); err == nil {
			t.Fatalf("decoded %s", bad)
		}
	}
}
