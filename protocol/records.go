package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"

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
	for i := 0; i < n; i++ {
		var err error
		if raw, err = skipRecord(raw); err != nil {
			return fmt.Errorf("%w: record %d of %d: %v", ErrCorruptBatch, i, n, err)
		}
	}
	if len(raw) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrCorruptBatch, len(raw), n)
	}
	return nil
}

var errShortRecord = errors.New("truncated")

// skipRecord checks one v2 record and returns what follows it.
func skipRecord(b []byte) ([]byte, error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || length > int64(len(b)-n) {
		return nil, fmt.Errorf("bad record length")
	}
	rec, rest := b[n:n+int(length)], b[n+int(length):]
	if len(rec) < 1 {
		return nil, errShortRecord
	}
	rec = rec[1:] // attributes
	for range 2 { // timestamp delta, offset delta
		if _, n = binary.Varint(rec); n <= 0 {
			return nil, errShortRecord
		}
		rec = rec[n:]
	}
	var err error
	if rec, err = skipBytes(rec, true); err != nil { // key
		return nil, err
	}
	if rec, err = skipBytes(rec, true); err != nil { // value
		return nil, err
	}
	headers, n := binary.Varint(rec)
	if n <= 0 || headers < 0 || headers > int64(len(rec)) {
		return nil, fmt.Errorf("bad header count")
	}
	rec = rec[n:]
	for h := int64(0); h < headers; h++ {
		if rec, err = skipBytes(rec, false); err != nil { // header key
			return nil, err
		}
		if rec, err = skipBytes(rec, true); err != nil { // header value
			return nil, err
		}
	}
	if len(rec) != 0 {
		return nil, fmt.Errorf("%d bytes left inside the record", len(rec))
	}
	return rest, nil
}

func skipBytes(b []byte, nullable bool) ([]byte, error) {
	l, n := binary.Varint(b)
	switch {
	case n <= 0:
		return nil, errShortRecord
	case l == -1 && nullable:
		return b[n:], nil
	case l < 0 || l > int64(len(b)-n):
		return nil, fmt.Errorf("bad length %d", l)
	}
	return b[n+int(l):], nil
}
