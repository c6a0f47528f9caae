package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/klauspost/compress/zstd"
)

// maxDecompressedBytes is the ceiling on what one batch may inflate to,
// whatever limit the caller passes to ValidateRecords.
const maxDecompressedBytes = 256 << 20

// zstdDecoder decodes whole batches with DecodeAll into the caller's
// buffer and never past its capacity (WithDecodeAllCapLimit), so the
// buffer's size is the bound: a frame that claims or decodes to more
// stops with ErrDecoderSizeExceeded after at most one block (128 KiB)
// beyond what the buffer holds, instead of growing it.
var zstdDecoder, _ = zstd.NewReader(nil,
	zstd.WithDecoderConcurrency(0),
	zstd.WithDecoderMaxMemory(maxDecompressedBytes),
	zstd.WithDecodeAllCapLimit(true))

// InflateBudget accounts for the memory a compressed batch inflates into.
// Reserve is called before the inflation buffer takes n more bytes and
// may wait for room; an error stops the inflation (and is returned). The
// caller gives the bytes back once ValidateRecords returns.
type InflateBudget interface {
	Reserve(n int) error
}

// ValidateRecords checks what ParseBatch does not: that the records
// section decompresses with the batch's codec and holds exactly
// RecordCount well-formed records (lengths, varints, keys, values and
// headers in bounds, nothing left over). Kafka's LogValidator does the
// same on every produce; a batch that fails it would otherwise be stored
// and break every consumer. Errors wrap ErrCorruptBatch, or
// ErrRecordsTooLarge when compressed records would inflate to more than
// maxInflated bytes: that is found before they are inflated further (from
// the size the codec declares when it declares one, else as the output
// passes the limit), so a small batch cannot make the broker allocate
// gigabytes. budget (nil: none) is charged for the inflation buffer.
func (b Batch) ValidateRecords(maxInflated int, budget InflateBudget) error {
	return b.EachRecord(maxInflated, budget, nil)
}

// ValidateKeyedRecords is ValidateRecords for a compacted topic, where
// every record must have a key (Kafka's LogValidator.validateKey): a
// record without one is ErrNullKey, which wraps ErrInvalidRecord.
func (b Batch) ValidateKeyedRecords(maxInflated int, budget InflateBudget) error {
	return b.EachRecord(maxInflated, budget, func(r *Record) error {
		if r.Key == nil {
			return ErrNullKey
		}
		return nil
	})
}

// ErrNullKey is a record without a key on a compacted topic
// (INVALID_RECORD, as Kafka answers since 2.4).
var ErrNullKey = fmt.Errorf("%w: compacted topic cannot accept a record without a key", ErrInvalidRecord)

// Record is one decoded v2 record, pointing into the (inflated) records
// section it was read from; it is valid only during the callback that
// receives it.
type Record struct {
	Raw            []byte // the whole record, its length prefix included
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte // nil when null; empty but not nil when empty
	Headers        []byte // header count and headers, as encoded
}

// EachRecord decodes the records section (inflating it with the batch's
// codec, at most maxInflated bytes, charged to budget) and calls fn for
// each of the RecordCount records in order; an error from fn stops the
// walk and is returned as it is. Errors of the decoding itself are those
// of ValidateRecords. fn may be nil: the records are then only checked.
func (b Batch) EachRecord(maxInflated int, budget InflateBudget, fn func(*Record) error) error {
	raw := []byte(b[BatchHeaderSize:])
	if codec := b.Compression(); codec != 0 {
		buf, n, err := inflate(raw, codec, min(maxInflated, maxDecompressedBytes), budget)
		defer PutFrameBuffer(buf)
		if err != nil {
			var be budgetError
			switch {
			case errors.As(err, &be):
				return be.err
			case errors.Is(err, ErrRecordsTooLarge):
				return err
			}
			return fmt.Errorf("%w: records do not decompress (codec %d): %v", ErrCorruptBatch, codec, err)
		}
		raw = buf[:n]
	}
	n := int(b.RecordCount())
	var r Record
	for i := 0; i < n; i++ {
		var err error
		if raw, err = parseRecord(raw, &r); err != nil {
			return fmt.Errorf("%w: record %d of %d: %v", ErrCorruptBatch, i, n, err)
		}
		if fn != nil {
			if err := fn(&r); err != nil {
				return err
			}
		}
	}
	if len(raw) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrCorruptBatch, len(raw), n)
	}
	return nil
}

var errShortRecord = errors.New("truncated")

// parseRecord decodes one v2 record into r and returns what follows it.
// It is the broker's one record parser.
func parseRecord(b []byte, r *Record) ([]byte, error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || length > int64(len(b)-n) {
		return nil, fmt.Errorf("bad record length")
	}
	r.Raw = b[:n+int(length)]
	rec, rest := b[n:n+int(length)], b[n+int(length):]
	if len(rec) < 1 {
		return nil, errShortRecord
	}
	r.Attributes = int8(rec[0])
	rec = rec[1:]
	ts, n := binary.Varint(rec)
	if n <= 0 {
		return nil, errShortRecord
	}
	r.TimestampDelta = ts
	rec = rec[n:]
	od, n := binary.Varint(rec)
	if n <= 0 {
		return nil, errShortRecord
	}
	if od < 0 || od > math.MaxInt32 {
		return nil, fmt.Errorf("bad offset delta %d", od)
	}
	r.OffsetDelta = int32(od)
	rec = rec[n:]
	var err error
	if r.Key, rec, err = readBytes(rec, true); err != nil {
		return nil, err
	}
	if r.Value, rec, err = readBytes(rec, true); err != nil {
		return nil, err
	}
	r.Headers = rec
	headers, n := binary.Varint(rec)
	if n <= 0 || headers < 0 || headers > int64(len(rec)) {
		return nil, fmt.Errorf("bad header count")
	}
	rec = rec[n:]
	for h := int64(0); h < headers; h++ {
		if _, rec, err = readBytes(rec, false); err != nil { // header key
			return nil, err
		}
		if _, rec, err = readBytes(rec, true); err != nil { // header value
			return nil, err
		}
	}
	if len(rec) != 0 {
		return nil, fmt.Errorf("%d bytes left inside the record", len(rec))
	}
	return rest, nil
}

// readBytes reads a varint-length byte string (-1: null, returned as nil)
// and returns it and what follows.
func readBytes(b []byte, nullable bool) (v, rest []byte, err error) {
	l, n := binary.Varint(b)
	switch {
	case n <= 0:
		return nil, nil, errShortRecord
	case l == -1 && nullable:
		return nil, b[n:], nil
	case l < 0 || l > int64(len(b)-n):
		return nil, nil, fmt.Errorf("bad length %d", l)
	}
	return b[n : n+int(l) : n+int(l)], b[n+int(l):], nil
}
