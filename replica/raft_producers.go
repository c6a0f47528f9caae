package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/protocol"
)

// The replicated path checks idempotence when the leader proposes, not when
// the log appends: a batch the leader refuses must never become a raft
// entry, and one it accepts must be stored by every replica. The log's
// Append, which checks inside the write, is no use to a replica, so this
// file keeps a producer table that every replica updates from the batches
// it stores, in log order, and applies the log's rules to it
// (log.ProducerEntry's Check and Update: one implementation of them).
//
// The table starts empty at Open (and after a truncation) and is seeded
// from log.ProducerState for a producer it has not seen: the log's own
// window of the producer's last five batches, rebuilt from the segments (or
// its snapshot) at open, so a retry of any of them after a restart is
// answered as the duplicate it is. (With only the last batch, an older
// retry was answered OUT_OF_ORDER_SEQUENCE, on which clients bump their
// epoch and send the batch again: written twice.) It is seeded both where
// the leader checks a batch and where any replica stores one, before the
// log has it: a follower restarted while a producer had batches in flight
// that then stored the producer's later batches from the leader would
// otherwise hold those alone, and, once leader, refuse a retry of an
// earlier one as out of sequence.

// prodEntry is one producer's state; the rules are log.ProducerEntry's
// Check and Update, the same the log applies inside Append.
type prodEntry = log.ProducerEntry

type producerTable map[int64]*prodEntry

func (p producerTable) clone(id int64) *prodEntry { return p[id].Clone() }

// seed loads what the log knows for id when the table has nothing.
func (p producerTable) seed(l *log.Log, id int64) *prodEntry {
	if e := p[id]; e != nil {
		return e
	}
	st, ok := l.ProducerState(id)
	if !ok {
		return nil
	}
	return p.put(id, st)
}

// put enters the log's state st of producer id.
func (p producerTable) put(id int64, st log.ProducerState) *prodEntry {
	e := &prodEntry{Epoch: st.Epoch, CoordEpoch: st.CoordinatorEpoch, Batches: st.Batches, LastTimestamp: st.LastTimestamp}
	p[id] = e
	return e
}

// errDuplicate carries the original offsets of a retried batch.
type errDuplicate struct{ base, last int64 }

func (e *errDuplicate) Error() string {
	return fmt.Sprintf("replica: duplicate batch at offsets %d..%d", e.base, e.last)
}

// checkProducer applies log.ProducerEntry's Check to h against e (nil: no
// state), or CheckMarker for a control batch (mk: h's transaction marker,
// txnVersion the version the coordinator sent it with). It returns
// *errDuplicate for a retry, log.ErrOutOfOrderSequence,
// log.ErrInvalidProducerEpoch or log.ErrCoordinatorFenced to refuse, nil
// to accept.
func checkProducer(e *prodEntry, h *batchInfo, mk txnMarker, txnVersion int8) error {
	if h.IsControl() {
		return e.CheckMarker(h, mk.coordEpoch, txnVersion)
	}
	dup, isDup, err := e.Check(h)
	if err != nil {
		return err
	}
	if isDup {
		return &errDuplicate{base: dup.FirstOffset, last: dup.LastOffset}
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

// updateEntry records a stored batch (mk: its marker), as the log does
// (log.ProducerEntry's Update).
func updateEntry(e *prodEntry, h *batchInfo, mk txnMarker) *prodEntry {
	ce := int32(-1)
	if mk.ok {
		ce = mk.coordEpoch
	}
	return e.Update(h, ce)
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
// "SLCE" | count u32 | count × (id i64 | coordinator epoch i32); then the
// producers' last timestamps, for expiry: "SLTS" | count u32 | count ×
// (id i64 | last timestamp i64). A snapshot from before a section ends
// without it (decoded with no coordinator epochs, and with the decoding
// time as every last timestamp: such a producer expires a full
// producer.id.expiration.ms later, never earlier), and a decoder from
// before ignores the sections it does not know.
func (p producerTable) encode(upTo int64) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(p)))
	for id, e := range p {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(e.Epoch))
		var keep []log.ProducerBatch
		for _, x := range e.Batches {
			if x.LastOffset < upTo {
				keep = append(keep, x)
			}
		}
		b = append(b, byte(len(keep)))
		for _, x := range keep {
			b = binary.BigEndian.AppendUint32(b, uint32(x.FirstSequence))
			b = binary.BigEndian.AppendUint32(b, uint32(x.LastSequence))
			b = binary.BigEndian.AppendUint64(b, uint64(x.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(x.LastOffset))
		}
	}
	b = binary.BigEndian.AppendUint32(b, coordEpochsMagic)
	n := len(b)
	b = binary.BigEndian.AppendUint32(b, 0)
	count := uint32(0)
	for id, e := range p {
		if e.CoordEpoch >= 0 {
			b = binary.BigEndian.AppendUint64(b, uint64(id))
			b = binary.BigEndian.AppendUint32(b, uint32(e.CoordEpoch))
			count++
		}
	}
	binary.BigEndian.PutUint32(b[n:], count)
	b = binary.BigEndian.AppendUint32(b, timestampsMagic)
	b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
	for id, e := range p {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastTimestamp))
	}
	return b
}

const (
	coordEpochsMagic = 0x534c4345 // "SLCE"
	timestampsMagic  = 0x534c5453 // "SLTS"
)

var errBadSnapshot = errors.New("replica: malformed snapshot data")

func decodeProducers(b []byte) (producerTable, []byte, error) {
	if len(b) < 4 {
		return nil, nil, errBadSnapshot
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	p := producerTable{}
	now := time.Now().UnixMilli()
	for range n {
		if len(b) < 11 {
			return nil, nil, errBadSnapshot
		}
		id := int64(binary.BigEndian.Uint64(b))
		e := &prodEntry{Epoch: int16(binary.BigEndian.Uint16(b[8:])), CoordEpoch: -1, LastTimestamp: now}
		k := int(b[10])
		b = b[11:]
		if len(b) < k*24 || k > log.ProducerWindow {
			return nil, nil, errBadSnapshot
		}
		for range k {
			e.Batches = append(e.Batches, log.ProducerBatch{
				FirstSequence: int32(binary.BigEndian.Uint32(b)),
				LastSequence:  int32(binary.BigEndian.Uint32(b[4:])),
				FirstOffset:   int64(binary.BigEndian.Uint64(b[8:])),
				LastOffset:    int64(binary.BigEndian.Uint64(b[16:])),
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
				e.CoordEpoch = ce
			}
		}
	}
	if len(b) >= 8 && binary.BigEndian.Uint32(b) == timestampsMagic {
		n := binary.BigEndian.Uint32(b[4:])
		b = b[8:]
		if uint64(len(b)) < uint64(n)*16 {
			return nil, nil, errBadSnapshot
		}
		for range n {
			id, ts := int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))
			b = b[16:]
			if e := p[id]; e != nil {
				e.LastTimestamp = ts
			}
		}
	}
	return p, b, nil
}

// expire drops the entries log.ProducerEntry's Expired finds expired at
// now (inOpenTxn says whether the producer has a transaction open in the
// log) and returns how many.
func (p producerTable) expire(now time.Time, expiration time.Duration, inOpenTxn func(int64) bool) int {
	n := 0
	for id, e := range p {
		if e.Expired(now, expiration, inOpenTxn(id)) {
			delete(p, id)
			n++
		}
	}
	return n
}
