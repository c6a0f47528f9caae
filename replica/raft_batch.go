package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Offsets of the v2 record batch header fields this package reads or
// patches (Kafka DefaultRecordBatch; the log package parses the same).
const (
	bOffBaseOffset      = 0
	bOffBatchLength     = 8
	bOffLeaderEpoch     = 12
	bOffMagic           = 16
	bOffCRC             = 17
	bOffAttributes      = 21
	bOffLastOffsetDelta = 23
	bOffBaseTimestamp   = 27
	bOffMaxTimestamp    = 35
	bOffProducerID      = 43
	bOffProducerEpoch   = 51
	bOffBaseSequence    = 53
	bOffRecordCount     = 57
	batchHeaderLen      = 61

	attrControl = 0x20
)

// Control record types for raft's own entries. Kafka uses 0 (abort) and 1
// (commit) for transaction markers and 2..6 for KRaft; clients skip every
// control batch and ignore types they do not know, so these stay out of the
// way of both.
const (
	ctrlRaftNoop       int16 = 200 // raft's empty entry (a new leader's first)
	ctrlRaftConfChange int16 = 201 // raftpb.ConfChange
	ctrlRaftConfChgV2  int16 = 202 // raftpb.ConfChangeV2
	ctrlFiller         int16 = -1  // no record: offsets skipped by a snapshot install
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

var errBadBatch = errors.New("replica: not a v2 record batch")

// batchInfo is the part of a batch header replication looks at.
type batchInfo struct {
	baseOffset      int64
	size            int
	leaderEpoch     int32
	attributes      int16
	lastOffsetDelta int32
	producerID      int64
	producerEpoch   int16
	baseSequence    int32
	recordCount     int32
}

func (b *batchInfo) lastOffset() int64 { return b.baseOffset + int64(b.lastOffsetDelta) }
func (b *batchInfo) isControl() bool   { return b.attributes&attrControl != 0 }

// lastSequence wraps from MaxInt32 to 0 as Kafka's does.
func (b *batchInfo) lastSequence() int32 {
	seq, inc := b.baseSequence, b.lastOffsetDelta
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

// parseBatch reads the fixed header of the batch at the start of b. whole
// requires b to be exactly one batch.
func parseBatch(b []byte, whole bool) (batchInfo, error) {
	var h batchInfo
	if len(b) < batchHeaderLen || b[bOffMagic] != 2 {
		return h, errBadBatch
	}
	length := int32(binary.BigEndian.Uint32(b[bOffBatchLength:]))
	if length < batchHeaderLen-12 {
		return h, errBadBatch
	}
	h.size = int(length) + 12
	if whole && h.size != len(b) {
		return h, fmt.Errorf("%w: length says %d bytes, got %d", errBadBatch, h.size, len(b))
	}
	h.baseOffset = int64(binary.BigEndian.Uint64(b[bOffBaseOffset:]))
	h.leaderEpoch = int32(binary.BigEndian.Uint32(b[bOffLeaderEpoch:]))
	h.attributes = int16(binary.BigEndian.Uint16(b[bOffAttributes:]))
	h.lastOffsetDelta = int32(binary.BigEndian.Uint32(b[bOffLastOffsetDelta:]))
	h.producerID = int64(binary.BigEndian.Uint64(b[bOffProducerID:]))
	h.producerEpoch = int16(binary.BigEndian.Uint16(b[bOffProducerEpoch:]))
	h.baseSequence = int32(binary.BigEndian.Uint32(b[bOffBaseSequence:]))
	h.recordCount = int32(binary.BigEndian.Uint32(b[bOffRecordCount:]))
	if h.lastOffsetDelta < 0 || h.recordCount < 0 {
		return h, errBadBatch
	}
	return h, nil
}

// stamp writes baseOffset and partitionLeaderEpoch, the two header fields
// outside the CRC, in place.
func stamp(b []byte, base int64, epoch int32) {
	binary.BigEndian.PutUint64(b[bOffBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b[bOffLeaderEpoch:], uint32(epoch))
}

// controlBatch builds the control batch that stores one of raft's own
// entries (ctrl >= 0: one control record whose key is version 0 and type
// ctrl and whose value is data) or fills offsets (ctrlFiller: no records,
// lastOffsetDelta = span-1). Timestamps are -1 and the producer id is -1, so
// the bytes depend only on the arguments and every replica builds the same
// batch.
func controlBatch(base int64, epoch int32, ctrl int16, data []byte, span int32) []byte {
	var recs []byte
	n := int32(0)
	delta := int32(0)
	if ctrl >= 0 {
		var r []byte
		r = append(r, 0)              // record attributes
		r = binary.AppendVarint(r, 0) // timestamp delta
		r = binary.AppendVarint(r, 0) // offset delta
		r = binary.AppendVarint(r, 4) // key length
		r = append(r, 0, 0)           // key: version 0
		r = binary.BigEndian.AppendUint16(r, uint16(ctrl))
		r = binary.AppendVarint(r, int64(len(data)))
		r = append(r, data...)
		r = binary.AppendVarint(r, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
		n = 1
	} else {
		delta = span - 1
	}
	b := make([]byte, batchHeaderLen, batchHeaderLen+len(recs))
	binary.BigEndian.PutUint32(b[bOffBatchLength:], uint32(batchHeaderLen-12+len(recs)))
	b[bOffMagic] = 2
	binary.BigEndian.PutUint16(b[bOffAttributes:], attrControl)
	binary.BigEndian.PutUint32(b[bOffLastOffsetDelta:], uint32(delta))
	binary.BigEndian.PutUint64(b[bOffBaseTimestamp:], math.MaxUint64) // -1
	binary.BigEndian.PutUint64(b[bOffMaxTimestamp:], math.MaxUint64)
	binary.BigEndian.PutUint64(b[bOffProducerID:], math.MaxUint64)
	binary.BigEndian.PutUint16(b[bOffProducerEpoch:], math.MaxUint16)
	binary.BigEndian.PutUint32(b[bOffBaseSequence:], math.MaxUint32)
	binary.BigEndian.PutUint32(b[bOffRecordCount:], uint32(n))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[bOffCRC:], crc32.Checksum(b[bOffAttributes:], crc32c))
	stamp(b, base, epoch)
	return b
}

// raftControl reports whether b is a control batch this package wrote for a
// raft entry, its control type and the record value.
func raftControl(b []byte, h *batchInfo) (ctrl int16, value []byte, ok bool) {
	if !h.isControl() || h.producerID != -1 {
		return 0, nil, false
	}
	if h.recordCount == 0 {
		return ctrlFiller, nil, true
	}
	p := batchHeaderLen
	_, n := binary.Varint(b[p:]) // record length
	if n <= 0 {
		return 0, nil, false
	}
	p += n
	p++           // attributes
	for range 2 { // timestamp delta, offset delta
		_, n = binary.Varint(b[p:])
		if n <= 0 {
			return 0, nil, false
		}
		p += n
	}
	kl, n := binary.Varint(b[p:])
	if n <= 0 || kl != 4 || p+n+4 > len(b) {
		return 0, nil, false
	}
	p += n
	ctrl = int16(binary.BigEndian.Uint16(b[p+2:]))
	p += 4
	vl, n := binary.Varint(b[p:])
	if n <= 0 || vl < 0 || p+n+int(vl) > len(b) {
		return 0, nil, false
	}
	p += n
	switch ctrl {
	case ctrlRaftNoop, ctrlRaftConfChange, ctrlRaftConfChgV2:
		return ctrl, b[p : p+int(vl)], true
	}
	return 0, nil, false
}
