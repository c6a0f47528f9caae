package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Offsets of the fields of a v2 record batch header (Kafka DefaultRecordBatch).
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// batchHeaderSize is the fixed v2 header: everything before the records.
	batchHeaderSize = 61
	// batchLengthBase is what batchLength does not count: baseOffset and
	// batchLength itself.
	batchLengthBase = 12

	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is the parsed fixed header of one v2 batch. Nothing in the hot
// path looks past it.
type batchHeader struct {
	baseOffset      int64
	size            int64 // whole batch in bytes, header included
	leaderEpoch     int32
	crc             uint32
	attributes      int16
	lastOffsetDelta int32
	baseTimestamp   int64
	maxTimestamp    int64
	producerID      int64
	producerEpoch   int16
	baseSequence    int32
	recordCount     int32
}

func (h *batchHeader) lastOffset() int64 { return h.baseOffset + int64(h.lastOffsetDelta) }
func (h *batchHeader) isControl() bool   { return h.attributes&attrControl != 0 }
func (h *batchHeader) compressed() bool  { return h.attributes&attrCompressionMask != 0 }
func (h *batchHeader) logAppendTime() bool {
	return h.attributes&attrLogAppendTime != 0
}

// lastSequence is Kafka's DefaultRecordBatch.lastSequence: sequences wrap
// from MaxInt32 to 0.
func (h *batchHeader) lastSequence() int32 {
	return incrementSequence(h.baseSequence, h.lastOffsetDelta)
}

func incrementSequence(seq, inc int32) int32 {
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

// parseHeader reads and bounds-checks the fixed header at the start of b. It
// does not check the CRC and does not require b to hold the whole batch; it
// does reject any header whose fields cannot belong to a well-formed batch.
func parseHeader(b []byte) (batchHeader, error) {
	var h batchHeader
	if len(b) < batchHeaderSize {
		return h, fmt.Errorf("%w: %d bytes, shorter than a batch header", ErrCorrupt, len(b))
	}
	if m := int8(b[offMagic]); m != 2 {
		return h, fmt.Errorf("%w: magic %d, want 2", ErrCorrupt, m)
	}
	length := int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	if length < batchHeaderSize-batchLengthBase {
		return h, fmt.Errorf("%w: batch length %d", ErrCorrupt, length)
	}
	h.baseOffset = int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	h.size = int64(length) + batchLengthBase
	h.leaderEpoch = int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
	h.crc = binary.BigEndian.Uint32(b[offCRC:])
	h.attributes = int16(binary.BigEndian.Uint16(b[offAttributes:]))
	h.lastOffsetDelta = int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	h.baseTimestamp = int64(binary.BigEndian.Uint64(b[offBaseTimestamp:]))
	h.maxTimestamp = int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
	h.producerID = int64(binary.BigEndian.Uint64(b[offProducerID:]))
	h.producerEpoch = int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
	h.baseSequence = int32(binary.BigEndian.Uint32(b[offBaseSequence:]))
	h.recordCount = int32(binary.BigEndian.Uint32(b[offRecordCount:]))
	if h.baseOffset < 0 || h.lastOffsetDelta < 0 || h.baseOffset > math.MaxInt64-int64(h.lastOffsetDelta)-1 {
		return h, fmt.Errorf("%w: base offset %d, last offset delta %d", ErrCorrupt, h.baseOffset, h.lastOffsetDelta)
	}
	// Compaction may leave fewer records than the offset span, never more.
	if h.recordCount < 0 || int64(h.recordCount) > int64(h.lastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: %d records for last offset delta %d", ErrCorrupt, h.recordCount, h.lastOffsetDelta)
	}
	return h, nil
}

// checkCRC verifies the CRC-32C over attributes..end of a whole batch.
func checkCRC(b []byte) bool {
	return crc32.Checksum(b[offAttributes:], castagnoli) == binary.BigEndian.Uint32(b[offCRC:])
}

// recordTimestamps calls fn with the offset delta and timestamp of each record
// of an uncompressed batch, in order, until fn returns false. It decodes only
// the varint prefix of each record and skips the rest.
func recordTimestamps(b []byte, h *batchHeader, fn func(offsetDelta int32, ts int64) bool) error {
	p := batchHeaderSize
	for i := int32(0); i < h.recordCount; i++ {
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
		if !fn(int32(offDelta), h.baseTimestamp+tsDelta) {
			return nil
		}
		p += int(length)
	}
	return nil
}
