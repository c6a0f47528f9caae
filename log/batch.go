package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/sluice-broker/sluice/protocol"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is the parsed fixed header of one v2 batch. Nothing in the hot
// path looks past it.
type batchHeader = protocol.BatchHeader

// parseHeader reads and bounds-checks the fixed header at the start of b
// (protocol.BatchHeader.Decode). It does not check the CRC and does not
// require b to hold the whole batch; on top of the protocol's checks it
// rejects offsets a stored batch cannot have. Errors wrap ErrCorrupt.
func parseHeader(b []byte) (batchHeader, error) {
	var h batchHeader
	if err := h.Decode(b); err != nil {
		return h, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-int64(h.LastOffsetDelta)-1 {
		return h, fmt.Errorf("%w: base offset %d, last offset delta %d", ErrCorrupt, h.BaseOffset, h.LastOffsetDelta)
	}
	// Compaction may leave fewer records than the offset span, never more.
	if int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: %d records for last offset delta %d", ErrCorrupt, h.RecordCount, h.LastOffsetDelta)
	}
	return h, nil
}

// checkCRC verifies the CRC-32C over attributes..end of a whole batch.
func checkCRC(b []byte) bool { return protocol.Batch(b).CRCValid() }

// recordTimestamps calls fn with the offset delta and timestamp of each record
// of an uncompressed batch, in order, until fn returns false. It decodes only
// the varint prefix of each record and skips the rest.
func recordTimestamps(b []byte, h *batchHeader, fn func(offsetDelta int32, ts int64) bool) error {
	p := protocol.BatchHeaderSize
	for i := int32(0); i < h.RecordCount; i++ {
		length, n := binary.Varint(b[p:])
		if n <= 0 || length < 0 || int64(p+n)+length > int64(len(b)) {
			return fmt.Errorf("%w: record %d length", ErrCorrupt, i)
		}
		p += n
		rec := b[p : p+int(length)]
		if len(rec) < 1 {
			return fmt.Errorf("%w: record %d empty", ErrCorrupt, i)
		}
		q := 1 // attributes
		tsDelta, n := binary.Varint(rec[q:])
		if n <= 0 {
			return fmt.Errorf("%w: record %d timestamp", ErrCorrupt, i)
		}
		q += n
		offDelta, n := binary.Varint(rec[q:])
		if n <= 0 || offDelta < 0 || offDelta > math.MaxInt32 {
			return fmt.Errorf("%w: record %d offset delta", ErrCorrupt, i)
		}
		if !fn(int32(offDelta), h.BaseTimestamp+tsDelta) {
			return nil
		}
		p += int(length)
	}
	return nil
}

// RecordTimestamps is recordTimestamps for other packages that serve
// stored batches (package shared answers ListOffsets by timestamp with it,
// exactly as the log does).
func RecordTimestamps(b []byte, h *protocol.BatchHeader, fn func(offsetDelta int32, ts int64) bool) error {
	return recordTimestamps(b, h, fn)
}
