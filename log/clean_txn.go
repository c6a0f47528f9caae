package log

import (
	"slices"

	"github.com/sluice-broker/sluice/protocol"
)

// Transactions in a cleaning pass, as Kafka's Cleaner treats them
// (CleanedTransactionMetadata in LogCleaner):
//
//   - The records of an aborted transaction's batches are removed (the
//     aborted transactions come from the log's list, Kafka's transaction
//     index). Their batches then go like any emptied batch: dropped, or
//     kept as a header without records where the producer's last batch
//     or a raft entry must stay.
//   - A marker stays while any batch of its transaction was seen in the
//     pass (an ABORT marker while a batch of the aborted transaction is
//     left; a COMMIT marker while a batch of the committed one is). Once
//     none is, the marker may go, in two steps like a tombstone: the first
//     pass stamps its batch with a delete horizon (now +
//     delete.retention.ms), and a pass after the horizon removes it, so a
//     read_committed consumer part-way through the transaction still sees
//     it. A marker with no records (already removed) may always go.
//   - A removed marker is dropped with its batch unless the batch is its
//     producer's last entry in the log or a raft entry: then its header
//     stays without records, which still closes the transaction when the
//     log is read again. An ABORT marker leaves the aborted list when it
//     is removed, in the same step as its segment is swapped in, so that
//     no read_committed fetch is told of an aborted transaction whose
//     marker it will not find.
//
// With retainEmpty every batch stays as at least its header: there a batch
// without records does not count as a batch of its transaction (nothing of
// it is left to read), or no marker could ever go.
type txnCleaning struct {
	pending     []AbortedTxn // not reached yet, by first offset
	aborted     map[int64]*abortedSeen
	committed   map[int64]bool // producers with a batch of an open, not aborted transaction seen
	retainEmpty bool
}

type abortedSeen struct {
	txn  AbortedTxn
	seen bool
}

func newTxnCleaning(aborted []AbortedTxn, retainEmpty bool) *txnCleaning {
	pending := slices.Clone(aborted)
	slices.SortFunc(pending, func(a, b AbortedTxn) int {
		switch {
		case a.FirstOffset < b.FirstOffset:
			return -1
		case a.FirstOffset > b.FirstOffset:
			return 1
		}
		return 0
	})
	return &txnCleaning{pending: pending, aborted: map[int64]*abortedSeen{}, committed: map[int64]bool{}, retainEmpty: retainEmpty}
}

// reach moves the aborted transactions that began at or before offset to
// the ongoing ones (Kafka's consumeAbortedTxnsUpTo).
func (t *txnCleaning) reach(offset int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		a := t.pending[0]
		t.pending = t.pending[1:]
		if _, ok := t.aborted[a.ProducerID]; !ok {
			t.aborted[a.ProducerID] = &abortedSeen{txn: a}
		}
	}
}

// data takes a data batch in log order and reports whether its records
// are to be removed (it belongs to an aborted transaction).
func (t *txnCleaning) data(h *batchHeader) bool {
	t.reach(h.LastOffset())
	if h.ProducerID < 0 || !h.IsTransactional() {
		return false
	}
	counts := !t.retainEmpty || h.RecordCount > 0
	if a, ok := t.aborted[h.ProducerID]; ok {
		if counts {
			a.seen = true
		}
		return true
	}
	if counts {
		t.committed[h.ProducerID] = true
	}
	return false
}

// marker takes a transaction marker in log order and reports whether it
// may go: no batch of its transaction was seen. ctrl is its control type,
// -1 if it has no records; any other type stays.
func (t *txnCleaning) marker(h *batchHeader, ctrl int16) (discardable bool) {
	t.reach(h.LastOffset())
	switch ctrl {
	case protocol.ControlAbort:
		a, ok := t.aborted[h.ProducerID]
		delete(t.aborted, h.ProducerID)
		return !ok || !a.seen
	case protocol.ControlCommit:
		seen := t.committed[h.ProducerID]
		delete(t.committed, h.ProducerID)
		return !seen
	case -1:
		return true // no records left: the transaction is gone
	}
	return false
}

// isTxnMarker says whether h is a transaction marker (a transactional
// control batch of a producer), not a raft control batch.
func isTxnMarker(h *batchHeader) bool {
	return h.IsControl() && h.IsTransactional() && h.ProducerID >= 0
}

// markerResult is what a pass makes of one transaction marker.
type markerResult struct {
	out     []byte // the batch to write; nil drops it
	changed bool   // out is not the stored batch
	removed int    // records removed
	ended   *AbortedTxn
}

// cleanMarker applies the rules above to the marker batch b.
func cleanMarker(p *cleanPlan, b []byte, h *batchHeader, horizon int64, o cleanOptions, dst []byte) (markerResult, error) {
	ctrl := int16(-1)
	if h.RecordCount > 0 {
		if ctrl = markerOf(b, h).typ; ctrl < 0 {
			ctrl = -2 // unreadable: stays
		}
	}
	keep := markerResult{out: b}
	if !p.txn.marker(h, ctrl) {
		return keep, nil
	}
	// The header stays where the producer's state or raft needs it: the
	// marker is after the producer's last data batch (it may be its last
	// entry, which holds its epoch), or every batch stays.
	last, active := p.lastOfProd[h.ProducerID]
	keepHeader := o.retainEmpty || (active && h.BaseOffset > last)
	pb := protocol.Batch(b)
	switch {
	case h.RecordCount == 0:
		if keepHeader {
			return keep, nil
		}
		return markerResult{}, nil
	case !pb.HasDeleteHorizon():
		res, err := pb.StampDeleteHorizon(dst, p.inflateLimit(), horizon)
		if err != nil || !res.Changed {
			return keep, err
		}
		return markerResult{out: res.Out, changed: true}, nil
	case o.now.UnixMilli() < pb.BaseTimestamp():
		return keep, nil // before its delete horizon
	}
	r := markerResult{removed: int(h.RecordCount)}
	if ctrl == protocol.ControlAbort {
		r.ended = &AbortedTxn{ProducerID: h.ProducerID, LastOffset: h.BaseOffset}
	}
	if keepHeader {
		res, err := pb.Filter(dst, p.inflateLimit(), -1, func(int64, *protocol.Record) bool { return false })
		if err != nil {
			return keep, err
		}
		r.out, r.changed = res.Out, true
	}
	return r, nil
}
