package coordinator

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The share-partition state table (KIP-932; Kafka's SharePartition): which
// records of one partition a share group has delivered, to whom, how often,
// and which are done. It is a pure state machine: no locks, no I/O, time
// passed in. The share group (share.go) owns one per partition it has
// fetched, under the group's lock, and persists its durable form.
//
// Offsets below start (Kafka's share-partition start offset, SPSO) are done:
// acknowledged or archived. recs is the in-flight window: recs[i] is offset
// start+i, and start+len(recs) (Kafka's SPEO + 1) is the first offset never
// acquired. Records past the window are Available with a delivery count of
// zero; the window never grows past maxLocks records
// (group.share.partition.max.record.locks).
//
// A record's life: Available -> Acquired (delivery count + 1, locked to one
// member until a deadline) -> Acknowledged (accept), Archived (reject, gap,
// or released with the delivery count at its limit), or Available again
// (release, lock timeout, the member leaving). The window's leading
// Acknowledged and Archived records are dropped and start moves past them.

// Record states (Kafka's RecordState, as persisted).
const (
	recAvailable    uint8 = 0
	recAcquired     uint8 = 1
	recAcknowledged uint8 = 2
	recArchived     uint8 = 4
)

// Acknowledge types on the wire (ShareFetch and ShareAcknowledge).
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4 // ShareFetch/ShareAcknowledge v2+ (KIP-1222)
)

type shareRecord struct {
	state    uint8
	count    int16 // delivery count
	owner    string
	deadline time.Time // lock deadline while Acquired
}

// ShareLimits are the broker's share-group limits the table applies.
type ShareLimits struct {
	LockDuration  time.Duration // group.share.record.lock.duration.ms
	DeliveryLimit int16         // group.share.delivery.count.limit
	MaxLocks      int           // group.share.partition.max.record.locks
}

// AcquiredRange is a run of acquired offsets with one delivery count.
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// AckBatch is one acknowledgement batch: types has one entry for every
// offset from First to Last, or a single entry for all of them.
type AckBatch struct {
	First, Last int64
	Types       []int8
}

type sharePartition struct {
	start int64 // -1 until initialized
	recs  []shareRecord
	// dirty: the durable form changed since the last save.
	dirty bool
}

func newSharePartition() *sharePartition { return &sharePartition{start: -1} }

func (sp *sharePartition) initialized() bool { return sp.start >= 0 }

// initialize sets the start offset of a partition the group never read.
func (sp *sharePartition) initialize(start int64) {
	sp.start, sp.recs, sp.dirty = start, nil, true
}

// end is the first offset never acquired.
func (sp *sharePartition) end() int64 { return sp.start + int64(len(sp.recs)) }

// advance drops the window's leading done records.
func (sp *sharePartition) advance() {
	n := 0
	for n < len(sp.recs) && (sp.recs[n].state == recAcknowledged || sp.recs[n].state == recArchived) {
		n++
	}
	if n > 0 {
		sp.recs = append(sp.recs[:0], sp.recs[n:]...)
		sp.start += int64(n)
		sp.dirty = true
	}
}

// truncateTo moves the start up to the log start offset: records removed
// by retention or DeleteRecords can no longer be delivered (Kafka archives
// them).
func (sp *sharePartition) truncateTo(logStart int64) {
	if logStart <= sp.start {
		return
	}
	if logStart >= sp.end() {
		sp.recs = sp.recs[:0]
	} else {
		sp.recs = append(sp.recs[:0], sp.recs[logStart-sp.start:]...)
	}
	sp.start = logStart
	sp.dirty = true
}

// release makes an acquired record available again, or archives it if it
// reached the delivery limit.
func (r *shareRecord) release(limit int16) {
	r.owner, r.deadline = "", time.Time{}
	if r.count >= limit {
		r.state = recArchived
	} else {
		r.state = recAvailable
	}
}

// expire releases every lock past its deadline; it reports whether any did.
func (sp *sharePartition) expire(now time.Time, lim ShareLimits) bool {
	any := false
	for i := range sp.recs {
		r := &sp.recs[i]
		if r.state == recAcquired && !now.Before(r.deadline) {
			r.release(lim.DeliveryLimit)
			any = true
		}
	}
	if any {
		sp.dirty = true
		sp.advance()
	}
	return any
}

// nextDeadline is the earliest lock deadline, zero if nothing is acquired.
func (sp *sharePartition) nextDeadline() time.Time {
	var d time.Time
	for i := range sp.recs {
		if r := &sp.recs[i]; r.state == recAcquired && (d.IsZero() || r.deadline.Before(d)) {
			d = r.deadline
		}
	}
	return d
}

// fetchOffset is where a fetch should read from: the first Available
// record of the window, else its end. ok is false when nothing can be
// acquired (the window is full of records in flight).
func (sp *sharePartition) fetchOffset(lim ShareLimits) (int64, bool) {
	for i := range sp.recs {
		if sp.recs[i].state == recAvailable {
			return sp.start + int64(i), true
		}
	}
	return sp.end(), len(sp.recs) < lim.MaxLocks
}

// acquire locks to member the Available offsets in [from, to), at most
// maxRecords of them (<= 0: no bound), and returns them as runs.
func (sp *sharePartition) acquire(member string, from, to int64, maxRecords int, now time.Time, lim ShareLimits) []AcquiredRange {
	var out []AcquiredRange
	n := 0
	add := func(off int64, count int16) {
		if l := len(out); l > 0 && out[l-1].Last == off-1 && out[l-1].DeliveryCount == count {
			out[l-1].Last = off
		} else {
			out = append(out, AcquiredRange{First: off, Last: off, DeliveryCount: count})
		}
		n++
	}
	deadline := now.Add(lim.LockDuration)
	off := max(from, sp.start)
	for ; off < to && (maxRecords <= 0 || n < maxRecords); off++ {
		if off < sp.end() {
			r := &sp.recs[off-sp.start]
			if r.state != recAvailable {
				continue
			}
			r.state, r.owner, r.deadline = recAcquired, member, deadline
			r.count++
			add(off, r.count)
			continue
		}
		if off > sp.end() || len(sp.recs) >= lim.MaxLocks {
			break
		}
		sp.recs = append(sp.recs, shareRecord{state: recAcquired, count: 1, owner: member, deadline: deadline})
		add(off, 1)
	}
	return out
}

// acknowledge applies one batch from member. Every offset in it must be
// acquired by member, or nothing is applied and the answer is
// INVALID_RECORD_STATE; a malformed batch is INVALID_REQUEST. renew says
// whether the version carries Renew (v2+).
func (sp *sharePartition) acknowledge(member string, b AckBatch, renew bool, now time.Time, lim ShareLimits) int16 {
	if b.First > b.Last || len(b.Types) == 0 || (len(b.Types) != 1 && int64(len(b.Types)) != b.Last-b.First+1) {
		return kerr.InvalidRequest.Code
	}
	for _, t := range b.Types {
		if t < AckGap || t > AckRenew || (t == AckRenew && !renew) {
			return kerr.InvalidRequest.Code
		}
	}
	if b.First < sp.start || b.Last >= sp.end() {
		return kerr.InvalidRecordState.Code
	}
	for off := b.First; off <= b.Last; off++ {
		if r := &sp.recs[off-sp.start]; r.state != recAcquired || r.owner != member {
			return kerr.InvalidRecordState.Code
		}
	}
	for off := b.First; off <= b.Last; off++ {
		t := b.Types[0]
		if len(b.Types) > 1 {
			t = b.Types[off-b.First]
		}
		r := &sp.recs[off-sp.start]
		switch t {
		case AckAccept:
			r.state, r.owner, r.deadline = recAcknowledged, "", time.Time{}
		case AckRelease:
			r.release(lim.DeliveryLimit)
		case AckReject, AckGap:
			r.state, r.owner, r.deadline = recArchived, "", time.Time{}
		case AckRenew:
			r.deadline = now.Add(lim.LockDuration)
			continue
		}
		sp.dirty = true
	}
	sp.advance()
	return 0
}

// releaseMember releases everything member holds (its session closed, or
// it left the group).
func (sp *sharePartition) releaseMember(member string, lim ShareLimits) {
	any := false
	for i := range sp.recs {
		if r := &sp.recs[i]; r.state == recAcquired && r.owner == member {
			r.release(lim.DeliveryLimit)
			any = true
		}
	}
	if any {
		sp.dirty = true
		sp.advance()
	}
}

// storedSharePartition is the durable form (metastore.SaveShareState): the
// start offset and runs of window records that differ from a fresh
// Available record. Locks are not stored: an Acquired record is stored as
// Available with its delivery count, so after a restart or a move to
// another broker it is delivered again and nothing acknowledged is.
type storedSharePartition struct {
	Format int        `json:"format"`
	Start  int64      `json:"start"`
	Runs   [][4]int64 `json:"runs,omitempty"` // first, last, state, delivery count
}

const storedShareFormat = 1

func (sp *sharePartition) encode() ([]byte, error) {
	st := storedSharePartition{Format: storedShareFormat, Start: sp.start}
	for i := range sp.recs {
		r := sp.recs[i]
		state := r.state
		if state == recAcquired {
			state = recAvailable
		}
		if state == recAvailable && r.count == 0 {
			continue
		}
		off := sp.start + int64(i)
		if l := len(st.Runs); l > 0 && st.Runs[l-1][1] == off-1 && st.Runs[l-1][2] == int64(state) && st.Runs[l-1][3] == int64(r.count) {
			st.Runs[l-1][1] = off
			continue
		}
		st.Runs = append(st.Runs, [4]int64{off, off, int64(state), int64(r.count)})
	}
	return json.Marshal(st)
}

func decodeSharePartition(b []byte) (*sharePartition, error) {
	var st storedSharePartition
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	if st.Format != storedShareFormat {
		return nil, fmt.Errorf("share-partition state format %d, want %d", st.Format, storedShareFormat)
	}
	sp := &sharePartition{start: st.Start}
	for _, run := range st.Runs {
		first, last, state, count := run[0], run[1], uint8(run[2]), int16(run[3])
		if first < sp.end() || last < first || last-first > 1<<20 ||
			(state != recAvailable && state != recAcknowledged && state != recArchived) {
			return nil, fmt.Errorf("share-partition state: bad run %v", run)
		}
		for sp.end() < first {
			sp.recs = append(sp.recs, shareRecord{})
		}
		for off := first; off <= last; off++ {
			sp.recs = append(sp.recs, shareRecord{state: state, count: count})
		}
	}
	sp.advance()
	sp.dirty = false
	return sp, nil
}
