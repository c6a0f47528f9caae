package replica

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-broker/sluice/log"
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
	epoch   int16
	batches []prodBatch // oldest first, at most producerWindow
}

type producerTable map[int64]*prodEntry

func (p producerTable) clone(id int64) *prodEntry {
	e := p[id]
	if e == nil {
		return nil
	}
	c := &prodEntry{epoch: e.epoch, batches: append([]prodBatch(nil), e.batches...)}
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
	e := &prodEntry{epoch: st.Epoch}
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
// state). It returns *errDuplicate for a retry, log.ErrOutOfOrderSequence or
// log.ErrInvalidProducerEpoch to refuse, nil to accept.
func checkProducer(e *prodEntry, h *batchInfo) error {
	if e == nil {
		return nil
	}
	if h.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: producer %d epoch %d, current %d", log.ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	if h.IsControl() {
		return nil
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

// updateEntry records a stored batch, as the log's producers.update does.
func updateEntry(e *prodEntry, h *batchInfo) *prodEntry {
	if e == nil {
		e = &prodEntry{epoch: h.ProducerEpoch}
	}
	if h.ProducerEpoch != e.epoch {
		if h.ProducerEpoch < e.epoch {
			return e
		}
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	if h.IsControl() {
		return e
	}
	if len(e.batches) == producerWindow {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerWindow-1]
	}
	e.batches = append(e.batches, prodBatch{firstSeq: h.BaseSequence, lastSeq: h.LastSequence(), firstOffset: h.BaseOffset, lastOffset: h.LastOffset()})
	return e
}

func (p producerTable) update(h *batchInfo) {
	if h.ProducerID < 0 {
		return
	}
	p[h.ProducerID] = updateEntry(p[h.ProducerID], h)
}

// encode serialises the table for a snapshot, keeping only batches below
// upTo (the offset the snapshot's log starts at): the receiver replays the
// rest from the log. Format: count u32, then per producer id i64 | epoch
// i16 | n u8 | n × (firstSeq i32 | lastSeq i32 | firstOffset i64 | lastOffset i64).
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
	return b
}

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
		e := &prodEntry{epoch: int16(binary.BigEndian.Uint16(b[8:]))}
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
	return p, b, nil
}
