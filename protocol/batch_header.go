package protocol

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Positions of the fields of a v2 record batch header (Kafka's
// DefaultRecordBatch), big-endian. The storage (log) and the raft replicas
// (replica) read and write batches with these and BatchHeader, so the
// layout is written down once.
const (
	BatchBaseOffsetAt      = 0  // baseOffset int64, outside the CRC
	BatchLengthAt          = 8  // batchLength int32: the bytes after itself
	BatchLeaderEpochAt     = 12 // partitionLeaderEpoch int32, outside the CRC
	BatchMagicAt           = 16 // magic int8, 2
	BatchCRCAt             = 17 // crc uint32: CRC-32C of attributes..end
	BatchAttributesAt      = 21 // attributes int16
	BatchLastOffsetDeltaAt = 23 // lastOffsetDelta int32
	BatchBaseTimestampAt   = 27 // baseTimestamp int64
	BatchMaxTimestampAt    = 35 // maxTimestamp int64
	BatchProducerIDAt      = 43 // producerId int64
	BatchProducerEpochAt   = 51 // producerEpoch int16
	BatchBaseSequenceAt    = 53 // baseSequence int32
	BatchRecordCountAt     = 57 // recordCount int32

	// BatchLengthOverhead is what batchLength does not count: baseOffset
	// and batchLength itself (Kafka's LOG_OVERHEAD).
	BatchLengthOverhead = 12
)

// BatchHeader is the decoded fixed header of one v2 record batch: all a
// reader needs to walk a log, index it and keep producer state without
// looking at the records.
type BatchHeader struct {
	BaseOffset      int64
	Size            int64 // the whole batch in bytes, header included: batchLength + 12
	LeaderEpoch     int32
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// Decode reads the fixed header at the start of b into h. It checks what
// every reader of stored or replicated batches relies on: b holds a whole
// header, magic is 2, batchLength covers at least the header, and
// lastOffsetDelta and recordCount are not negative. It does not need b to
// hold the whole batch and does not check the CRC (Batch.CRCValid does);
// ParseBatch is the stricter check for a producer's batch. Errors wrap
// ErrCorruptBatch, and h then holds what was decoded so far. It does not
// allocate unless it fails; it fills h in place because the log decodes a
// header for every batch it appends, scans or serves.
func (h *BatchHeader) Decode(b []byte) error {
	if len(b) < BatchHeaderSize {
		return fmt.Errorf("%w: %d bytes, shorter than a batch header", ErrCorruptBatch, len(b))
	}
	if m := int8(b[BatchMagicAt]); m != 2 {
		return fmt.Errorf("%w: magic %d, want 2", ErrCorruptBatch, m)
	}
	length := int32(binary.BigEndian.Uint32(b[BatchLengthAt:]))
	if length < BatchHeaderSize-BatchLengthOverhead {
		return fmt.Errorf("%w: batch length %d", ErrCorruptBatch, length)
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[BatchBaseOffsetAt:]))
	h.Size = int64(length) + BatchLengthOverhead
	h.LeaderEpoch = int32(binary.BigEndian.Uint32(b[BatchLeaderEpochAt:]))
	h.CRC = binary.BigEndian.Uint32(b[BatchCRCAt:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[BatchAttributesAt:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[BatchLastOffsetDeltaAt:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[BatchBaseTimestampAt:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[BatchMaxTimestampAt:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[BatchProducerIDAt:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[BatchProducerEpochAt:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[BatchBaseSequenceAt:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[BatchRecordCountAt:]))
	if h.LastOffsetDelta < 0 || h.RecordCount < 0 {
		return fmt.Errorf("%w: last offset delta %d, %d records", ErrCorruptBatch, h.LastOffsetDelta, h.RecordCount)
	}
	return nil
}

// Put writes h into the first BatchHeaderSize bytes of b: magic 2,
// batchLength from Size, the CRC field as h.CRC (Batch.SetCRC recomputes
// it once the records follow).
func (h *BatchHeader) Put(b []byte) {
	_ = b[BatchHeaderSize-1]
	binary.BigEndian.PutUint64(b[BatchBaseOffsetAt:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[BatchLengthAt:], uint32(h.Size-BatchLengthOverhead))
	binary.BigEndian.PutUint32(b[BatchLeaderEpochAt:], uint32(h.LeaderEpoch))
	b[BatchMagicAt] = 2
	binary.BigEndian.PutUint32(b[BatchCRCAt:], h.CRC)
	binary.BigEndian.PutUint16(b[BatchAttributesAt:], uint16(h.Attributes))
	binary.BigEndian.PutUint32(b[BatchLastOffsetDeltaAt:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[BatchBaseTimestampAt:], uint64(h.BaseTimestamp))
	binary.BigEndian.PutUint64(b[BatchMaxTimestampAt:], uint64(h.MaxTimestamp))
	binary.BigEndian.PutUint64(b[BatchProducerIDAt:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[BatchProducerEpochAt:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[BatchBaseSequenceAt:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[BatchRecordCountAt:], uint32(h.RecordCount))
}

// LastOffset is the offset of the batch's last record slot.
func (h *BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// IsControl reports a control batch (transaction markers).
func (h *BatchHeader) IsControl() bool { return h.Attributes&AttrControl != 0 }

// IsTransactional reports a batch written inside a transaction.
func (h *BatchHeader) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// Compressed reports a batch whose records are compressed.
func (h *BatchHeader) Compressed() bool { return h.Attributes&AttrCompressionMask != 0 }

// LogAppendTime reports a batch whose timestamp is the broker's append time.
func (h *BatchHeader) LogAppendTime() bool { return h.Attributes&AttrLogAppendTime != 0 }

// LastSequence is Kafka's DefaultRecordBatch.lastSequence: the producer
// sequence of the last record, wrapping from MaxInt32 to 0.
func (h *BatchHeader) LastSequence() int32 {
	seq, inc := h.BaseSequence, h.LastOffsetDelta
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

// CRCValid reports whether the CRC-32C over attributes..end of the whole
// batch b matches its header.
func (b Batch) CRCValid() bool {
	return crc32.Checksum(b[BatchAttributesAt:], castagnoli) == b.CRC()
}

// SetCRC recomputes the CRC-32C of the whole batch b into its header.
func (b Batch) SetCRC() {
	binary.BigEndian.PutUint32(b[BatchCRCAt:], crc32.Checksum(b[BatchAttributesAt:], castagnoli))
}
