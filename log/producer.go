package log

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

// ProducerWindow is how many recent batches per producer are kept for
// duplicate detection; Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN, and
// the reason a client may have at most five requests in flight.
const ProducerWindow = 5

// ProducerEntry is one idempotent producer's state in one partition: its
// epoch and its last batches of that epoch. Check and Update are Kafka's
// idempotence rules, once: the log applies them inside Append, and a raft
// replica (package replica) applies them when its leader proposes, over a
// table of its own that every replica updates from the batches it stores.
type ProducerEntry struct {
	Epoch int16
	// CoordEpoch is the coordinator epoch of the producer's last
	// transaction marker here, -1 before one (Kafka's
	// ProducerStateEntry.coordinatorEpoch).
	CoordEpoch int32
	Batches    []ProducerBatch // oldest first, at most ProducerWindow
	// LastTimestamp is the max timestamp of the producer's last batch
	// here, data or marker (Kafka's ProducerStateEntry.lastTimestamp):
	// what Expired compares with the clock.
	LastTimestamp int64
}

// Expired is Kafka's ProducerStateManager.isProducerExpired, the one rule
// every producer table applies: a producer with no transaction open here
// (txnOpen false) whose last batch's timestamp is expiration or more
// before now is forgotten. Its next batch is then taken at any sequence,
// as from a producer never seen (Check). expiration <= 0 never expires.
func (e *ProducerEntry) Expired(now time.Time, expiration time.Duration, txnOpen bool) bool {
	if e == nil || expiration <= 0 || txnOpen {
		return false
	}
	return now.UnixMilli()-e.LastTimestamp >= expiration.Milliseconds()
}

// ProducerState is what the log knows about one idempotent producer.
type ProducerState = partition.ProducerState

// ProducerBatch is one retained batch of an idempotent producer.
type ProducerBatch = partition.ProducerBatch

// producers is the per-partition idempotence state, a map from producer id.
// It is rebuilt from batch headers on Open and after truncation; entries
// leave it when ExpireProducers finds them expired (ProducerEntry.Expired).
type producers map[int64]*ProducerEntry

// Check applies Kafka's ProducerAppendInfo rules to a client batch h before
// it is written; e is the producer's state, nil if there is none. It
// returns the original batch and true if h is a retry of one of the last
// five, or an error if the batch must be rejected.
//
// Rules (Kafka 4):
//   - a duplicate is a batch with the current epoch whose first and last
//     sequence equal a retained batch's; it is answered with that batch's
//     offsets and not written;
//   - an epoch below the current one is fenced: ErrInvalidProducerEpoch;
//   - a higher epoch must start at sequence 0;
//   - the same epoch must continue at last sequence + 1, wrapping from
//     MaxInt32 to 0;
//   - a producer with no state is accepted at any sequence (KIP-360: Kafka
//     no longer answers UNKNOWN_PRODUCER_ID; state may have been lost with
//     deleted segments).
//
// Control batches only check the epoch here; a transaction marker is
// checked by CheckMarker instead. A retained
// batch with FirstSequence -1 (what a replica snapshot of an earlier
// version kept: the last batch alone) matches on its last sequence, and its
// first offset is derived from h's offset delta.
func (e *ProducerEntry) Check(h *protocol.BatchHeader) (ProducerBatch, bool, error) {
	if e == nil {
		return ProducerBatch{}, false, nil
	}
	if h.ProducerEpoch < e.Epoch {
		return ProducerBatch{}, false, fmt.Errorf("%w: producer %d epoch %d, current %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.Epoch)
	}
	if h.IsControl() {
		return ProducerBatch{}, false, nil
	}
	first, last := h.BaseSequence, h.LastSequence()
	if h.ProducerEpoch != e.Epoch {
		if first != 0 {
			return ProducerBatch{}, false, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, not 0", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
		}
		return ProducerBatch{}, false, nil
	}
	for _, b := range e.Batches {
		if b.LastSequence == last && (b.FirstSequence == first || b.FirstSequence == -1) {
			if b.FirstOffset < 0 {
				b.FirstOffset = b.LastOffset - int64(h.LastOffsetDelta)
			}
			return b, true, nil
		}
	}
	lastSeq := int32(-1)
	if n := len(e.Batches); n > 0 {
		lastSeq = e.Batches[n-1].LastSequence
	}
	if !inSequence(lastSeq, first) {
		return ProducerBatch{}, false, fmt.Errorf("%w: producer %d epoch %d: sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first, lastSeq)
	}
	return ProducerBatch{}, false, nil
}

// CheckMarker is Check for a transaction marker of the producer, whose
// value carries coordEpoch (Kafka 4.4's ProducerAppendInfo.
// appendEndTxnMarker and checkProducerEpoch): the producer epoch as in
// Check, except that with transaction version 2 (txnVersion, from
// WriteTxnMarkers v2) it must be above the current one, since EndTxn
// bumped it for the marker; a version 2 marker at the current epoch is
// taken (and written again) only as the retry of the marker that bumped
// it, when no batch of the producer was stored at that epoch since (no
// transaction open here) or the epoch is the last one (32767). A refused
// epoch is ErrInvalidProducerEpoch. A coordinator epoch below the one of
// the producer's last marker here is a zombie coordinator's marker,
// ErrCoordinatorFenced. nil e: no state, accepted.
func (e *ProducerEntry) CheckMarker(h *protocol.BatchHeader, coordEpoch int32, txnVersion int8) error {
	if e == nil {
		return nil
	}
	pid, epoch, markerEpoch := h.ProducerID, e.Epoch, h.ProducerEpoch
	if markerEpoch < epoch || (txnVersion >= 2 && markerEpoch == epoch && len(e.Batches) > 0 && epoch != math.MaxInt16) {
		return fmt.Errorf("%w: producer %d marker epoch %d, current %d (transaction version %d)", ErrInvalidProducerEpoch, pid, markerEpoch, epoch, txnVersion)
	}
	if e.CoordEpoch > coordEpoch {
		return fmt.Errorf("%w: producer %d marker coordinator epoch %d, current %d", ErrCoordinatorFenced, pid, coordEpoch, e.CoordEpoch)
	}
	return nil
}

func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == 1<<31-1)
}

// Update records a batch of the producer stored at h.BaseOffset and returns
// the producer's state (a new entry when e is nil); markerCoordEpoch is
// the coordinator epoch a transaction marker carries, -1 for any other
// batch or an unreadable marker. It never fails:
// replicated batches and batches replayed on open are applied as they are;
// a batch of an older epoch, which only replication can bring, changes
// nothing (Kafka logs it and keeps the newer epoch).
func (e *ProducerEntry) Update(h *protocol.BatchHeader, markerCoordEpoch int32) *ProducerEntry {
	if e == nil {
		e = &ProducerEntry{Epoch: h.ProducerEpoch, CoordEpoch: -1}
	}
	if h.ProducerEpoch != e.Epoch {
		if h.ProducerEpoch < e.Epoch {
			return e
		}
		e.Epoch = h.ProducerEpoch
		e.Batches = e.Batches[:0]
	}
	e.LastTimestamp = h.MaxTimestamp
	if h.IsControl() {
		if markerCoordEpoch >= 0 {
			e.CoordEpoch = markerCoordEpoch
		}
		return e
	}
	if len(e.Batches) == ProducerWindow {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:ProducerWindow-1]
	}
	e.Batches = append(e.Batches, ProducerBatch{
		FirstSequence: h.BaseSequence, LastSequence: h.LastSequence(),
		FirstOffset: h.BaseOffset, LastOffset: h.LastOffset(),
	})
	return e
}

// Clone returns a copy of e that shares no memory with it (nil for nil).
func (e *ProducerEntry) Clone() *ProducerEntry {
	if e == nil {
		return nil
	}
	return &ProducerEntry{Epoch: e.Epoch, CoordEpoch: e.CoordEpoch, Batches: slices.Clone(e.Batches), LastTimestamp: e.LastTimestamp}
}

// check is Check (CheckMarker for a control batch, m its marker) against
// the state of h's producer.
func (p producers) check(h *batchHeader, m marker, txnVersion int8) (ProducerBatch, bool, error) {
	e := p[h.ProducerID]
	if h.IsControl() {
		return ProducerBatch{}, false, e.CheckMarker(h, m.coordEpoch, txnVersion)
	}
	return e.Check(h)
}

// update records a batch written at h.BaseOffset (Update; m: its marker,
// for a control batch).
func (p producers) update(h *batchHeader, m marker) {
	if h.ProducerID < 0 {
		return
	}
	ce := int32(-1)
	if m.typ >= 0 {
		ce = m.coordEpoch
	}
	p[h.ProducerID] = p[h.ProducerID].Update(h, ce)
}

func (p producers) state(id int64) (ProducerState, bool) {
	e := p[id]
	if e == nil {
		return ProducerState{}, false
	}
	s := ProducerState{Epoch: e.Epoch, LastSequence: -1, LastOffset: -1, CoordinatorEpoch: e.CoordEpoch, LastTimestamp: e.LastTimestamp}
	if n := len(e.Batches); n > 0 {
		s.LastSequence, s.LastOffset = e.Batches[n-1].LastSequence, e.Batches[n-1].LastOffset
		s.Batches = slices.Clone(e.Batches)
	}
	return s, true
}

// ActiveProducer is one idempotent producer the log holds state for, as
// DescribeProducers reports it.
type ActiveProducer = partition.ActiveProducer

// ActiveProducers returns every producer the log holds state for, by id,
// with the timestamp of its last batch as the table keeps it.
func (l *Log) ActiveProducers() ([]ActiveProducer, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return nil, err
	}
	out := make([]ActiveProducer, 0, len(l.producers))
	for id, e := range l.producers {
		ap := ActiveProducer{ID: id, Epoch: e.Epoch, LastSequence: -1, LastTimestamp: e.LastTimestamp, CurrentTxnStartOffset: -1, CoordinatorEpoch: e.CoordEpoch}
		if first, open := l.txns.ongoing[id]; open {
			ap.CurrentTxnStartOffset = first
		}
		if n := len(e.Batches); n > 0 {
			ap.LastSequence = e.Batches[n-1].LastSequence
		}
		out = append(out, ap)
	}
	slices.SortFunc(out, func(a, b ActiveProducer) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// ProducerStates returns ProducerState of every producer the log holds
// state for, all read under one hold of the lock. Closed or failed: the
// error.
func (l *Log) ProducerStates() (map[int64]ProducerState, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return nil, err
	}
	out := make(map[int64]ProducerState, len(l.producers))
	for id := range l.producers {
		out[id], _ = l.producers.state(id)
	}
	return out, nil
}

// ExpireProducers forgets the producers ProducerEntry.Expired finds
// expired at now (a producer with a transaction open here is kept) and
// returns how many. It is the periodic sweep of
// producer.id.expiration.check.interval.ms, and runs by the caller's clock:
// each replica expires on its own. Closed or failed: none.
func (l *Log) ExpireProducers(now time.Time, expiration time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.usableLocked() != nil {
		return 0
	}
	n := 0
	for id, e := range l.producers {
		_, open := l.txns.ongoing[id]
		if e.Expired(now, expiration, open) {
			delete(l.producers, id)
			n++
		}
	}
	return n
}
