package replica

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/protocol"
)

// The replicated path checks idempotence when the leader proposes, not when
// the log appends: a batch the leader refuses must never become a raft
// entry, and one it accepts must be stored by every replica. The log's own
// check runs inside Append, which a replica cannot use (it would write), so
// this file keeps the same Kafka rules over a producer table that every
// replica updates from the batches it stores, in log order.
//
// The table starts empty at Open and is seeded from log.ProducerState for a
// producer it has not seen: the log's own window of the producer's last five
// batches, rebuilt from the segments (or its snapshot) at open, so a retry
// of any of them after a restart is answered as the duplicate it is. (With
// only the last batch, an older retry was answered OUT_OF_ORDER_SEQUENCE,
// on which clients bump their epoch and send the batch again: written
// twice.)

const producerWindow = 5

type prodBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

type prodEntry struct {
	epoch int16
	// coordEpoch: the coordinator epoch of the producer's last
	// transaction marker, -1 before one (log.ProducerState's).
	coordEpoch int32
	batches    []prodBatch // oldest first, at most producerWindow
}

type producerTable map[int64]*prodEntry

func (p producerTable) clone(id int64) *prodEntry {
	e := p[id]
	if e == nil {
		return nil
	}
	c := &prodEntry{epoch: e.epoch, coordEpoch: e.coordEpoch, batches: append([]prodBatch(nil), e.batches...)}
	return c
}

// seed loads what the log knows for id when the table has nothing.
func (p producerTable) seed(l *log.Log, id int64) *prodEntry {
	if e := p[id]; e != nil {
		return e
	}
	st, ok := l.ProducerState(id)
	if !ok {
		return nil
	}
	e := &prodEntry{epoch: st.Epoch, coordEpoch: st.CoordinatorEpoch}
	for _, b := range st.Batches {
		e.batches = append(e.batches, prodBatch{firstSeq: b.FirstSequence, lastSeq: b.LastSequence, firstOffset: b.FirstOffset, lastOffset: b.LastOffset})
	}
	p[id] = e
	return e
}

// errDuplicate carries the original offsets of a retried batch.
type errDuplicate struct{ base, last int64 }

func (e *errDuplicate) Error() string {
	return fmt.Sprintf("replica: duplicate batch at offsets %d..%d", e.base, e.last)
}

// checkProducer applies log/producer.go's rules to h against e (nil: no
// state); mk is h's transaction marker and txnVersion the version the
// coordinator sent it with, for a control batch (log.CheckMarker). It
// returns *errDuplicate for a retry, log.ErrOutOfOrderSequence,
// log.ErrInvalidProducerEpoch or log.ErrCoordinatorFenced to refuse, nil
// to accept.
func checkProducer(e *prodEntry, h *batchInfo, mk txnMarker, txnVersion int8) error {
	if e == nil {
		return nil
	}
	if h.IsControl() {
		return log.CheckMarker(h.ProducerID, e.epoch, e.coordEpoch, h.ProducerEpoch, mk.coordEpoch, txnVersion)
	}
	if h.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: producer %d epoch %d, current %d", log.ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	first, last := h.BaseSequence, h.LastSequence()
	if h.ProducerEpoch != e.epoch {
		if first != 0 {
			return fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d", log.ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first)
		}
		return nil
	}
	for _, b := range e.batches {
		// firstSeq -1: an entry seeded by an earlier version with the
		// last batch alone, which may still be in a snapshot.
		if b.lastSeq == last && (b.firstSeq == first || b.firstSeq == -1) {
			base := b.firstOffset
			if base < 0 {
				base = b.lastOffset - int64(h.LastOffsetDelta)
			}
			return &errDuplicate{base: base, last: b.lastOffset}
		}
	}
	lastSeq := int32(-1)
	if n := len(e.batches); n > 0 {
		lastSeq = e.batches[n-1].lastSeq
	}
	if !(int64(first) == int64(lastSeq)+1 || (first == 0 && lastSeq == 1<<31-1)) {
		return fmt.Errorf("%w: producer %d epoch %d: sequence %d after %d", log.ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, first, lastSeq)
	}
	return nil
}

// txnMarker is what a transaction marker's first record says (ok false
// for a batch that is not a readable marker).
type txnMarker struct {
	ok         bool
	coordEpoch int32
}

// markerOf reads the marker of the transactional control batch b.
func markerOf(b []byte, h *batchInfo) txnMarker {
	if h.ProducerID < 0 || !h.IsControl() || !h.IsTransactional() {
		return txnMarker{coordEpoch: -1}
	}
	_, ce, err := protocol.EndTxnMarker(b)
	if err != nil {
		return txnMarker{coordEpoch: -1}
	}
	return txnMarker{ok: true, coordEpoch: ce}
}

// updateEntry records a stored batch (mk: its marker), as the log's
// producers.update does.
func updateEntry(e *prodEntry, h *batchInfo, mk txnMarker) *prodEntry {
	if e == nil {
		e = &prodEntry{epoch: h.ProducerEpoch, coordEpoch: -1}
	}
	if h.ProducerEpoch != e.epoch {
		if h.ProducerEpoch < e.epoch {
			return e
		}
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	if h.IsControl() {
		if mk.ok {
			e.coordEpoch = mk.coordEpoch
		}
		return e
	}
	if len(e.batches) == producerWindow {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerWindow-1]
	}
	e.batches = append(e.batches, prodBatch{firstSeq: h.BaseSequence, lastSeq: h.LastSequence(), firstOffset: h.BaseOffset, lastOffset: h.LastOffset()})
	return e
}

func (p producerTable) update(h *batchInfo, mk txnMarker) {
	if h.ProducerID < 0 {
		return
	}
	p[h.ProducerID] = updateEntry(p[h.ProducerID], h, mk)
}

// encode serialises the table for a snapshot, keeping only batches below
// upTo (the offset the snapshot's log starts at): the receiver replays the
// rest from the log. Format: count u32, then per producer id i64 | epoch
// i16 | n u8 | n × (firstSeq i32 | lastSeq i32 | firstOffset i64 | lastOffset i64);
// then the coordinator epochs of the producers whose markers set one:
// "SLCE" | count u32 | count × (id i64 | coordinator epoch i32). A
// snapshot from before the coordinator epochs ends after the producers
// (decoded with none), and a decoder from before ignores the section.
func (p producerTable) encode(upTo int64) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(p)))
	for id, e := range p {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		var keep []prodBatch
		for _, x := range e.batches {
			if x.lastOffset < upTo {
				keep = append(keep, x)
			}
		}
		b = append(b, byte(len(keep)))
		for _, x := range keep {
			b = binary.BigEndian.AppendUint32(b, uint32(x.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(x.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(x.firstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(x.lastOffset))
		}
	}
	b = binary.BigEndian.AppendUint32(b, coordEpochsMagic)
	n := len(b)
	b = binary.BigEndian.AppendUint32(b, 0)
	count := uint32(0)
	for id, e := range p {
		if e.coordEpoch >= 0 {
			b = binary.BigEndian.AppendUint64(b, uint64(id))
			b = binary.BigEndian.AppendUint32(b, uint32(e.coordEpoch))
			count++
		}
	}
	binary.BigEndian.PutUint32(b[n:], count)
	return b
}

const coordEpochsMagic = 0x534c4345 // "SLCE"

var errBadSnapshot = errors.New("replica: malformed snapshot data")

func decodeProducers(b []byte) (producerTable, []byte, error) {
	if len(b) < 4 {
		return nil, nil, errBadSnapshot
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	p := producerTable{}
	for range n {
		if len(b) < 11 {
			return nil, nil, errBadSnapshot
		}
		id := int64(binary.BigEndian.Uint64(b))
		e := &prodEntry{epoch: int16(binary.BigEndian.Uint16(b[8:])), coordEpoch: -1}
		k := int(b[10])
		b = b[11:]
		if len(b) < k*24 || k > producerWindow {
			return nil, nil, errBadSnapshot
		}
		for range k {
			e.batches = append(e.batches, prodBatch{
				firstSeq:    int32(binary.BigEndian.Uint32(b)),
				lastSeq:     int32(binary.BigEndian.Uint32(b[4:])),
				firstOffset: int64(binary.BigEndian.Uint64(b[8:])),
				lastOffset:  int64(binary.BigEndian.Uint64(b[16:])),
			})
			b = b[24:]
		}
		p[id] = e
	}
	if len(b) >= 8 && binary.BigEndian.Uint32(b) == coordEpochsMagic {
		n := binary.BigEndian.Uint32(b[4:])
		b = b[8:]
		if uint64(len(b)) < uint64(n)*12 {
			return nil, nil, errBadSnapshot
		}
		for range n {
			id, ce := int64(binary.BigEndian.Uint64(b)), int32(binary.BigEndian.Uint32(b[8:]))
			b = b[12:]
			if e := p[id]; e != nil {
				e.coordEpoch = ce
			}
		}
	}
	return p, b, nil
}
