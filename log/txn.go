package log

import (
	"cmp"
	"io"
	"slices"
	"sort"

	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

// Transactions on the partition side (KIP-98), as Kafka's
// ProducerStateManager and transaction index keep them: for each producer
// with an open transaction, the offset of its first transactional batch;
// and the aborted transactions, each from its first batch to its ABORT
// marker (Kafka's .txnindex entries). The last stable offset is the first
// offset of the earliest open transaction (bounded by the high watermark,
// which the replica layer adds); read_committed consumers read below it
// and drop the records of the aborted transactions listed for the range
// they fetched.
//
// Both are rebuilt from the log like producer state (markers are read for
// their control type), kept in the clean-shutdown snapshot, and follow
// truncation. The aborted list lives in memory; entries wholly below the
// log start offset are dropped.

// AbortedTxn is one aborted transaction of a partition: the producer, the
// offset of its first batch, and the offset of its ABORT marker.
type AbortedTxn = partition.AbortedTxn

type txnState struct {
	ongoing map[int64]int64 // producer id -> first offset of its open transaction
	aborted []AbortedTxn    // by LastOffset
}

func newTxnState() txnState { return txnState{ongoing: map[int64]int64{}} }

func (t *txnState) reset() {
	clear(t.ongoing)
	t.aborted = t.aborted[:0]
}

// update applies one stored batch; ctrl is the control type of a control
// batch (ignored otherwise). Raft's own control batches have producer id
// -1 and are not transactional, so they never reach here.
func (t *txnState) update(h *batchHeader, ctrl int16, logStart int64) {
	if h.ProducerID < 0 || !h.IsTransactional() {
		return
	}
	if !h.IsControl() {
		if _, ok := t.ongoing[h.ProducerID]; !ok {
			t.ongoing[h.ProducerID] = h.BaseOffset
		}
		return
	}
	first, ok := t.ongoing[h.ProducerID]
	if !ok {
		return // a marker of a transaction with no data here
	}
	delete(t.ongoing, h.ProducerID)
	if ctrl != protocol.ControlAbort {
		return
	}
	i := 0
	for i < len(t.aborted) && t.aborted[i].LastOffset < logStart {
		i++
	}
	t.aborted = append(t.aborted[i:], AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset})
}

// dropAborted removes the aborted transactions whose ABORT marker (the
// producer and LastOffset of each of ended) the cleaner removed.
func (t *txnState) dropAborted(ended []AbortedTxn) {
	if len(ended) == 0 {
		return
	}
	t.aborted = slices.DeleteFunc(t.aborted, func(a AbortedTxn) bool {
		return slices.ContainsFunc(ended, func(e AbortedTxn) bool {
			return e.ProducerID == a.ProducerID && e.LastOffset == a.LastOffset
		})
	})
}

// firstUnstable is the first offset of the earliest open transaction, -1
// without one.
func (t *txnState) firstUnstable() int64 {
	first := int64(-1)
	for _, o := range t.ongoing {
		if first < 0 || o < first {
			first = o
		}
	}
	return first
}

// marker is what the log reads from a transaction marker's first record:
// its control type and coordinator epoch; typ -1 for a batch that is not
// a readable marker (coordEpoch -1 too).
type marker struct {
	typ        int16
	coordEpoch int32
}

var noMarker = marker{typ: -1, coordEpoch: -1}

// markerAt reads the marker of the control batch h at pos of f; noMarker
// if it cannot be read (never a transaction marker then).
func markerAt(f io.ReaderAt, pos int64, h *batchHeader) marker {
	if !h.IsControl() || !h.IsTransactional() || h.ProducerID < 0 {
		return noMarker
	}
	buf := make([]byte, min(h.Size, protocol.ControlTypeBytes))
	if _, err := f.ReadAt(buf, pos); err != nil {
		return noMarker
	}
	return markerFrom(buf)
}

// markerOf is markerAt for a batch in memory.
func markerOf(batch []byte, h *batchHeader) marker {
	if !h.IsControl() || !h.IsTransactional() || h.ProducerID < 0 {
		return noMarker
	}
	return markerFrom(batch)
}

func markerFrom(b []byte) marker {
	typ, ce, err := protocol.EndTxnMarker(b)
	if err != nil {
		return noMarker
	}
	return marker{typ: typ, coordEpoch: ce}
}

// FirstUnstableOffset is the first offset of the earliest open
// transaction in the log, -1 if none is open. The last stable offset is
// the smaller of it and the high watermark.
func (l *Log) FirstUnstableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.txns.firstUnstable()
}

// InOpenTxn says whether the producer has a transaction open in this
// log: its later transactional batches need no verification (KIP-890).
func (l *Log) InOpenTxn(producerID int64) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.txns.ongoing[producerID]
	return ok
}

// AbortedTxns lists the aborted transactions that a fetch of [from, upTo)
// must be told about: those whose marker is at or after from and whose
// first batch is before upTo (Kafka's collectAbortedTxns), in marker
// order.
func (l *Log) AbortedTxns(from, upTo int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	a := l.txns.aborted
	i := sort.Search(len(a), func(i int) bool { return a[i].LastOffset >= from })
	var out []AbortedTxn
	for ; i < len(a); i++ {
		if AbortedInRange(a[i], from, upTo) {
			out = append(out, a[i])
		}
	}
	return out
}

// TxnTracker keeps a partition's open transactions by the log's rules
// (the same update a Log applies to every batch it stores), for a
// partition whose batches are kept outside a Log (replication.mode=shared):
// the first offset of each producer's open transaction, and the aborted
// transaction each ABORT marker closes. It is not safe for concurrent use.
type TxnTracker struct{ t txnState }

// OpenTxn is one open transaction: its producer and the offset of its
// first batch.
type OpenTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// NewTxnTracker returns a tracker with the transactions open listed.
func NewTxnTracker(open []OpenTxn) *TxnTracker {
	x := &TxnTracker{t: newTxnState()}
	for _, o := range open {
		x.t.ongoing[o.ProducerID] = o.FirstOffset
	}
	return x
}

// Apply records a batch stored at h.BaseOffset (batch: its bytes, read
// for a marker's control type) and returns the aborted transaction its
// ABORT marker closed, if it is one.
func (x *TxnTracker) Apply(batch []byte, h *protocol.BatchHeader) (AbortedTxn, bool) {
	x.t.update(h, markerOf(batch, h).typ, 0)
	if n := len(x.t.aborted); n > 0 {
		a := x.t.aborted[n-1]
		x.t.aborted = x.t.aborted[:0]
		return a, true
	}
	return AbortedTxn{}, false
}

// FirstUnstable is the first offset of the earliest open transaction, -1
// without one (the last stable offset, below the high watermark).
func (x *TxnTracker) FirstUnstable() int64 { return x.t.firstUnstable() }

// Open returns the first offset of the producer's open transaction.
func (x *TxnTracker) Open(producerID int64) (int64, bool) {
	first, ok := x.t.ongoing[producerID]
	return first, ok
}

// OpenTxns lists the open transactions by first offset, then producer.
func (x *TxnTracker) OpenTxns() []OpenTxn {
	out := make([]OpenTxn, 0, len(x.t.ongoing))
	for id, first := range x.t.ongoing {
		out = append(out, OpenTxn{ProducerID: id, FirstOffset: first})
	}
	slices.SortFunc(out, func(a, b OpenTxn) int {
		if a.FirstOffset != b.FirstOffset {
			return cmp.Compare(a.FirstOffset, b.FirstOffset)
		}
		return cmp.Compare(a.ProducerID, b.ProducerID)
	})
	return out
}

// AbortedInRange says whether a fetch of [from, upTo) must be told about
// the aborted transaction a: its marker is at or after from and its first
// batch before upTo (Kafka's collectAbortedTxns).
func AbortedInRange(a AbortedTxn, from, upTo int64) bool {
	return a.LastOffset >= from && a.FirstOffset < upTo
}

// MarkerCoordEpoch is the coordinator epoch of the transaction marker
// batch (what ProducerEntry.Update takes), -1 for any other batch.
func MarkerCoordEpoch(batch []byte, h *protocol.BatchHeader) int32 {
	return markerOf(batch, h).coordEpoch
}
