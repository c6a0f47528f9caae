package log

import (
	"cmp"
	"fmt"
	"slices"
)

// producerWindow is how many recent batches per producer are kept for
// duplicate detection; Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN, and
// the reason a client may have at most five requests in flight.
const producerWindow = 5

type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

type producerEntry struct {
	epoch int16
	// coordEpoch is the coordinator epoch of the producer's last
	// transaction marker here, -1 before one (Kafka's
	// ProducerStateEntry.coordinatorEpoch).
	coordEpoch int32
	batches    []batchMeta // oldest first, at most producerWindow
}

// ProducerState is what the log knows about one idempotent producer.
type ProducerState struct {
	Epoch int16
	// LastSequence and LastOffset are those of the producer's last batch in
	// the current epoch, -1 if it has written none in this epoch.
	LastSequence int32
	LastOffset   int64
	// Batches are the producer's retained batches of the current epoch,
	// oldest first, at most five: what a retry is recognised against.
	Batches []ProducerBatch
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// transaction marker in this log, -1 before one.
	CoordinatorEpoch int32
}

// ProducerBatch is one retained batch of an idempotent producer.
type ProducerBatch struct {
	FirstSequence, LastSequence int32
	FirstOffset, LastOffset     int64
}

// producers is the per-partition idempotence state, a map from producer id.
// It is rebuilt from batch headers on Open and after truncation, and entries
// never expire (Kafka's producer.id.expiration.ms is not implemented).
type producers map[int64]*producerEntry

// check applies Kafka's ProducerAppendInfo rules to a client batch, before
// it is written. It returns the original batch if h is a retry of one of the
// last five, or an error if the batch must be rejected.
//
// Rules (Kafka 4):
//   - a duplicate is a batch with the current epoch whose first and last
//     sequence equal a retained batch's; it is answered with that batch's
//     offsets and not written;
//   - an epoch below the current one is fenced: ErrInvalidProducerEpoch;
//   - a higher epoch must start at sequence 0;
//   - the same epoch must continue at last sequence + 1, wrapping from
//     MaxInt32 to 0;
//   - a producer the log has no state for is accepted at any sequence
//     (KIP-360: Kafka no longer answers UNKNOWN_PRODUCER_ID; state may have
//     been lost with deleted segments).
//
// Control batches (transaction markers, m) only check the epochs and bump
// the producer's (Kafka's appendEndTxnMarker): the producer epoch as
// above, except that with transaction version 2 (txnVersion, from
// WriteTxnMarkers v2) it must be above the current one, since EndTxn
// bumped it for the marker; and a coordinator epoch below the one of the
// producer's last marker here is a zombie coordinator's marker,
// ErrCoordinatorFenced.
func (p producers) check(h *batchHeader, m marker, txnVersion int8) (*batchMeta, error) {
	e := p[h.ProducerID]
	if e == nil {
		return nil, nil
	}
	if h.IsControl() {
		return nil, checkMarker(h.ProducerID, e.epoch, e.coordEpoch, h.ProducerEpoch, m.coordEpoch, txnVersion)
	}
	if h.ProducerEpoch < e.epoch {
		return nil, fmt.Errorf("%w: producer %d epoch %d, current %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	first, last := h.BaseSequence, h.LastSequence()
	if h.ProducerEpoch != e.epoch {
		if first != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, not 0", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
		}
		return nil, nil
	}
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == first && b.lastSeq == last {
			return b, nil
		}
	}
	lastSeq := int32(-1)
	if n := len(e.batches); n > 0 {
		lastSeq = e.batches[n-1].lastSeq
	}
	if !inSequence(lastSeq, first) {
		return nil, fmt.Errorf("%w: producer %d epoch %d: sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first, lastSeq)
	}
	return nil, nil
}

// CheckMarker is the leader's check of a transaction marker of producer
// pid against the producer's state (epoch, coordEpoch: its current epoch
// and last marker's coordinator epoch): ErrInvalidProducerEpoch if the
// marker's epoch is below the producer's (with transaction version 2 also
// if equal), ErrCoordinatorFenced if its coordinator epoch is below the
// last one. The raft replica applies it at propose time, Append here.
func CheckMarker(pid int64, epoch int16, coordEpoch int32, markerEpoch int16, markerCoordEpoch int32, txnVersion int8) error {
	return checkMarker(pid, epoch, coordEpoch, markerEpoch, markerCoordEpoch, txnVersion)
}

func checkMarker(pid int64, epoch int16, coordEpoch int32, markerEpoch int16, markerCoordEpoch int32, txnVersion int8) error {
	if markerEpoch < epoch || (txnVersion >= 2 && markerEpoch == epoch) {
		return fmt.Errorf("%w: producer %d marker epoch %d, current %d (transaction version %d)", ErrInvalidProducerEpoch, pid, markerEpoch, epoch, txnVersion)
	}
	if coordEpoch > markerCoordEpoch {
		return fmt.Errorf("%w: producer %d marker coordinator epoch %d, current %d", ErrCoordinatorFenced, pid, markerCoordEpoch, coordEpoch)
	}
	return nil
}

func inSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == 1<<31-1)
}

// update records a batch that was written at h.BaseOffset (m: its marker,
// for a control batch). It never fails: replicated batches and batches
// replayed on Open are applied as they are.
func (p producers) update(h *batchHeader, m marker) {
	if h.ProducerID < 0 {
		return
	}
	e := p[h.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: h.ProducerEpoch, coordEpoch: -1}
		p[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		if h.ProducerEpoch < e.epoch {
			// Only replication can bring an older epoch; Kafka logs and keeps
			// the newer one.
			return
		}
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	if h.IsControl() {
		if m.typ >= 0 {
			e.coordEpoch = m.coordEpoch
		}
		return
	}
	if len(e.batches) == producerWindow {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerWindow-1]
	}
	e.batches = append(e.batches, batchMeta{
		firstSeq: h.BaseSequence, lastSeq: h.LastSequence(),
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(),
	})
}

func (p producers) state(id int64) (ProducerState, bool) {
	e := p[id]
	if e == nil {
		return ProducerState{}, false
	}
	s := ProducerState{Epoch: e.epoch, LastSequence: -1, LastOffset: -1, CoordinatorEpoch: e.coordEpoch}
	if n := len(e.batches); n > 0 {
		s.LastSequence, s.LastOffset = e.batches[n-1].lastSeq, e.batches[n-1].lastOffset
		s.Batches = make([]ProducerBatch, n)
		for i, b := range e.batches {
			s.Batches[i] = ProducerBatch{FirstSequence: b.firstSeq, LastSequence: b.lastSeq, FirstOffset: b.firstOffset, LastOffset: b.lastOffset}
		}
	}
	return s, true
}

// ActiveProducer is one idempotent producer the log holds state for, as
// DescribeProducers reports it.
type ActiveProducer struct {
	ID    int64
	Epoch int16
	// LastSequence is the last sequence of the producer's last batch in
	// its current epoch, -1 if none.
	LastSequence int32
	// LastTimestamp is the max timestamp of that batch (Kafka's
	// ProducerStateEntry.lastTimestamp), -1 if none or no longer stored.
	LastTimestamp int64
	// CurrentTxnStartOffset is the first offset of the producer's open
	// transaction in this log, -1 if none.
	CurrentTxnStartOffset int64
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// transaction marker in this log, -1 if none.
	CoordinatorEpoch int32
}

// ActiveProducers returns every producer the log holds state for, by id.
// The timestamps are read from the last batches' headers (one index
// lookup and a few header reads each), so the clean-shutdown snapshot
// needs no field for them.
func (l *Log) ActiveProducers() ([]ActiveProducer, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return nil, err
	}
	out := make([]ActiveProducer, 0, len(l.producers))
	for id, e := range l.producers {
		ap := ActiveProducer{ID: id, Epoch: e.epoch, LastSequence: -1, LastTimestamp: -1, CurrentTxnStartOffset: -1, CoordinatorEpoch: e.coordEpoch}
		if first, open := l.txns.ongoing[id]; open {
			ap.CurrentTxnStartOffset = first
		}
		if n := len(e.batches); n > 0 {
			last := e.batches[n-1]
			ap.LastSequence = last.lastSeq
			if last.lastOffset >= l.logStart && last.lastOffset < l.leo {
				_, _, h, found, err := l.locateLocked(last.lastOffset)
				if err != nil {
					return nil, err
				}
				if found && h.ProducerID == id {
					ap.LastTimestamp = h.MaxTimestamp
				}
			}
		}
		out = append(out, ap)
	}
	slices.SortFunc(out, func(a, b ActiveProducer) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
