package protocol

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// AttrDeleteHorizon marks a batch whose baseTimestamp holds its delete
// horizon (KIP-534): the time after which the log cleaner may drop its
// tombstones. The records' timestamp deltas are then relative to it.
const AttrDeleteHorizon = 0x40

// HasDeleteHorizon reports a batch that carries a delete horizon.
func (b Batch) HasDeleteHorizon() bool { return b.Attributes()&AttrDeleteHorizon != 0 }

// FilterResult says what Filter made of a batch.
type FilterResult struct {
	Kept, Dropped int  // records
	Tombstones    int  // kept records with a null value
	Changed       bool // Out differs from the input batch
	// Out is the rewritten batch when Changed, nil otherwise. It keeps
	// the input's base offset, lastOffsetDelta, epoch, producer fields and
	// codec, as Kafka's MemoryRecords.filterTo does for v2 batches; with
	// no record kept it is a header without records and without
	// compression (Kafka's empty batch, which keeps a producer's last
	// sequence in the log).
	Out []byte
}

// Filter rewrites the batch with the records keep returns true for, the
// log cleaner's batch rewrite. keep gets each record's absolute offset.
// If horizon >= 0, the batch has no delete horizon yet and a kept record
// is a tombstone, the output carries horizon as its delete horizon
// (baseTimestamp, AttrDeleteHorizon) and every kept record's timestamp
// delta is re-encoded against it. Records are otherwise copied byte for
// byte. maxInflated bounds the inflation of a compressed batch (see
// EachRecord). dst is reused for Out when large enough.
func (b Batch) Filter(dst []byte, maxInflated int, horizon int64, keep func(offset int64, r *Record) bool) (FilterResult, error) {
	return b.filter(dst, maxInflated, horizon, false, keep)
}

// StampDeleteHorizon is the batch with every record kept and horizon as
// its delete horizon, unless it has one already (then Changed is false):
// the log cleaner's first step in removing a transaction marker whose
// transaction has no data left (Kafka's containsMarkerForEmptyTxn). The
// records' timestamp deltas are re-encoded against the horizon.
func (b Batch) StampDeleteHorizon(dst []byte, maxInflated int, horizon int64) (FilterResult, error) {
	return b.filter(dst, maxInflated, horizon, true, func(int64, *Record) bool { return true })
}

func (b Batch) filter(dst []byte, maxInflated int, horizon int64, stamp bool, keep func(offset int64, r *Record) bool) (FilterResult, error) {
	var res FilterResult
	base, baseTs := b.BaseOffset(), b.BaseTimestamp()
	var kept []byte
	var tsDeltas []int64 // per kept record, when re-encoding
	err := b.EachRecord(maxInflated, nil, func(r *Record) error {
		if !keep(base+int64(r.OffsetDelta), r) {
			res.Dropped++
			return nil
		}
		res.Kept++
		if r.Value == nil {
			res.Tombstones++
		}
		kept = append(kept, r.Raw...)
		tsDeltas = append(tsDeltas, r.TimestampDelta)
		return nil
	})
	if err != nil {
		return res, err
	}
	setHorizon := horizon >= 0 && (res.Tombstones > 0 || stamp) && !b.HasDeleteHorizon()
	if res.Dropped == 0 && !setHorizon {
		return res, nil
	}
	res.Changed = true
	attrs := uint16(b.Attributes())
	if setHorizon {
		attrs |= AttrDeleteHorizon
		kept = rebaseTimestamps(kept, tsDeltas, baseTs-horizon)
		baseTs = horizon
	}
	out := append(dst[:0], b[:BatchHeaderSize]...)
	codec := b.Compression()
	switch {
	case res.Kept == 0:
		attrs &^= AttrCompressionMask
	case codec == 0:
		out = append(out, kept...)
	default:
		xerial := codec == 2 && bytes.HasPrefix(b[BatchHeaderSize:], xerialHeader)
		if out, err = deflate(out, kept, codec, xerial); err != nil {
			return res, fmt.Errorf("recompressing records (codec %d): %w", codec, err)
		}
	}
	binary.BigEndian.PutUint32(out[BatchLengthAt:], uint32(len(out)-BatchLengthOverhead))
	binary.BigEndian.PutUint16(out[BatchAttributesAt:], attrs)
	binary.BigEndian.PutUint64(out[BatchBaseTimestampAt:], uint64(baseTs))
	binary.BigEndian.PutUint32(out[BatchRecordCountAt:], uint32(res.Kept))
	Batch(out).SetCRC()
	res.Out = out
	return res, nil
}

// rebaseTimestamps re-encodes each record of recs (whole records, length
// prefix included, in order) with its timestamp delta plus shift, the
// other fields copied as they are.
func rebaseTimestamps(recs []byte, deltas []int64, shift int64) []byte {
	out := make([]byte, 0, len(recs)+len(deltas)*8)
	var tmp [2 * binary.MaxVarintLen64]byte
	for i := 0; len(recs) > 0; i++ {
		length, n := binary.Varint(recs)
		body := recs[n : n+int(length)]
		recs = recs[n+int(length):]
		_, m := binary.Varint(body[1:]) // the old delta
		rest := body[1+m:]
		k := binary.PutVarint(tmp[:], deltas[i]+shift)
		out = binary.AppendVarint(out, int64(1+k+len(rest)))
		out = append(out, body[0])
		out = append(out, tmp[:k]...)
		out = append(out, rest...)
	}
	return out
}
