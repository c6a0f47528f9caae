package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// BatchHeaderSize is the fixed size of a v2 record batch header.
const BatchHeaderSize = 61

// Attribute bits of a v2 batch.
const (
	AttrCompressionMask = 0x07
	AttrLogAppendTime   = 0x08
	AttrTransactional   = 0x10
	AttrControl         = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Validation errors, each mapped to its Kafka code by the server.
var (
	// ErrCorruptBatch: length, magic, CRC or record count is wrong
	// (CORRUPT_MESSAGE).
	ErrCorruptBatch = errors.New("protocol: corrupt record batch")
	// ErrUnsupportedMagic: a message format other than v2 (UNSUPPORTED_VERSION
	// in Kafka 4, which no longer accepts v0/v1 message sets).
	ErrUnsupportedMagic = errors.New("protocol: record batch magic is not 2")
	// ErrInvalidRecord: well formed but not acceptable from a producer, e.g.
	// more than one batch in a partition's records, or a control batch
	// (INVALID_RECORD).
	ErrInvalidRecord = errors.New("protocol: invalid record batch")
	// ErrUnsupportedCompression: an unknown codec (UNSUPPORTED_COMPRESSION_TYPE).
	ErrUnsupportedCompression = errors.New("protocol: unsupported compression type")
	// ErrRecordsTooLarge: compressed records that inflate beyond the
	// limit (the topic's max.message.bytes). MESSAGE_TOO_LARGE, not
	// INVALID_RECORD or CORRUPT_MESSAGE: the batch is well formed, only
	// too big, and Kafka answers MESSAGE_TOO_LARGE (RecordTooLarge)
	// when a batch it has to rebuild comes out larger than
	// max.message.bytes; the Java producer reacts to it by splitting the
	// batch and retrying, which is what such a batch needs.
	ErrRecordsTooLarge = errors.New("protocol: records inflate beyond max.message.bytes")
)

// Batch is a view of one encoded v2 record batch. It never copies; setters
// patch the underlying bytes.
type Batch []byte

// ParseBatch checks that b holds exactly one well-formed v2 batch: the
// length field covers the rest of b, magic is 2, the CRC-32C over
// attributes..end matches, and the record count agrees with lastOffsetDelta.
func ParseBatch(b []byte) (Batch, error) {
	if len(b) < BatchHeaderSize {
		if len(b) > BatchMagicAt && b[BatchMagicAt] != 2 {
			return nil, ErrUnsupportedMagic
		}
		return nil, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptBatch, len(b))
	}
	if b[BatchMagicAt] != 2 {
		return nil, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, b[BatchMagicAt])
	}
	n := int64(int32(binary.BigEndian.Uint32(b[BatchLengthAt:])))
	switch {
	case n+BatchLengthOverhead < BatchHeaderSize:
		return nil, fmt.Errorf("%w: batch length %d", ErrCorruptBatch, n)
	case n+BatchLengthOverhead > int64(len(b)):
		return nil, fmt.Errorf("%w: batch length %d exceeds the %d bytes given", ErrCorruptBatch, n, len(b)-BatchLengthOverhead)
	case n+BatchLengthOverhead < int64(len(b)):
		return nil, fmt.Errorf("%w: more than one batch", ErrInvalidRecord)
	}
	bt := Batch(b)
	if got, want := crc32.Checksum(b[BatchAttributesAt:], castagnoli), bt.CRC(); got != want {
		return nil, fmt.Errorf("%w: crc %08x, header says %08x", ErrCorruptBatch, got, want)
	}
	if c := bt.RecordCount(); c <= 0 || int64(c) != int64(bt.LastOffsetDelta())+1 {
		return nil, fmt.Errorf("%w: %d records but lastOffsetDelta %d", ErrCorruptBatch, c, bt.LastOffsetDelta())
	}
	if bt.Compression() > 4 {
		return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, bt.Compression())
	}
	return bt, nil
}

func (b Batch) BaseOffset() int64  { return int64(binary.BigEndian.Uint64(b[BatchBaseOffsetAt:])) }
func (b Batch) Length() int32      { return int32(binary.BigEndian.Uint32(b[BatchLengthAt:])) }
func (b Batch) LeaderEpoch() int32 { return int32(binary.BigEndian.Uint32(b[BatchLeaderEpochAt:])) }
func (b Batch) CRC() uint32        { return binary.BigEndian.Uint32(b[BatchCRCAt:]) }
func (b Batch) Attributes() int16  { return int16(binary.BigEndian.Uint16(b[BatchAttributesAt:])) }
func (b Batch) Compression() int8  { return int8(b.Attributes() & AttrCompressionMask) }
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[BatchLastOffsetDeltaAt:]))
}
func (b Batch) BaseTimestamp() int64  { return int64(binary.BigEndian.Uint64(b[BatchBaseTimestampAt:])) }
func (b Batch) MaxTimestamp() int64   { return int64(binary.BigEndian.Uint64(b[BatchMaxTimestampAt:])) }
func (b Batch) ProducerID() int64     { return int64(binary.BigEndian.Uint64(b[BatchProducerIDAt:])) }
func (b Batch) ProducerEpoch() int16  { return int16(binary.BigEndian.Uint16(b[BatchProducerEpochAt:])) }
func (b Batch) BaseSequence() int32   { return int32(binary.BigEndian.Uint32(b[BatchBaseSequenceAt:])) }
func (b Batch) RecordCount() int32    { return int32(binary.BigEndian.Uint32(b[BatchRecordCountAt:])) }
func (b Batch) IsTransactional() bool { return b.Attributes()&AttrTransactional != 0 }
func (b Batch) IsControl() bool       { return b.Attributes()&AttrControl != 0 }

// SetBaseOffset patches the base offset. It lies outside the CRC.
func (b Batch) SetBaseOffset(o int64) { binary.BigEndian.PutUint64(b[BatchBaseOffsetAt:], uint64(o)) }

// SetLeaderEpoch patches partitionLeaderEpoch. It lies outside the CRC.
func (b Batch) SetLeaderEpoch(e int32) { binary.BigEndian.PutUint32(b[BatchLeaderEpochAt:], uint32(e)) }

// SetLogAppendTime marks the batch as LogAppendTime with timestamp ts, the
// way Kafka's LogValidator does for message.timestamp.type=LogAppendTime:
// the timestamp type bit and maxTimestamp change and the CRC is recomputed;
// records keep their deltas, which readers ignore for such batches.
func (b Batch) SetLogAppendTime(ts int64) {
	attrs := uint16(b.Attributes()) | AttrLogAppendTime
	binary.BigEndian.PutUint16(b[BatchAttributesAt:], attrs)
	binary.BigEndian.PutUint64(b[BatchMaxTimestampAt:], uint64(ts))
	b.SetCRC()
}
