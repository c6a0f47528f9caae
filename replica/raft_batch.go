package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/sluice-broker/sluice/protocol"
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

// ctrlDeleteRecords stores a raft-only command entry (raft_command.go);
// the value is the entry's data.
const ctrlDeleteRecords int16 = 203

var crc32c = crc32.MakeTable(crc32.Castagnoli)

var errBadBatch = errors.New("replica: not a v2 record batch")

// batchInfo is the fixed header of a batch (protocol.BatchHeader.Decode), all
// replication looks at.
type batchInfo = protocol.BatchHeader

// parseBatch reads the fixed header of the batch at the start of b. whole
// requires b to be exactly one batch. Errors wrap errBadBatch.
func parseBatch(b []byte, whole bool) (batchInfo, error) {
	var h batchInfo
	if err := h.Decode(b); err != nil {
		return h, fmt.Errorf("%w: %w", errBadBatch, err)
	}
	if whole && h.Size != int64(len(b)) {
		return h, fmt.Errorf("%w: length says %d bytes, got %d", errBadBatch, h.Size, len(b))
	}
	return h, nil
}

// stamp writes baseOffset and partitionLeaderEpoch, the two header fields
// outside the CRC, in place.
func stamp(b []byte, base int64, epoch int32) {
	protocol.Batch(b).SetBaseOffset(base)
	protocol.Batch(b).SetLeaderEpoch(epoch)
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
	h := protocol.BatchHeader{
		BaseOffset:      base,
		Size:            int64(protocol.BatchHeaderSize + len(recs)),
		LeaderEpoch:     epoch,
		Attributes:      protocol.AttrControl,
		LastOffsetDelta: delta,
		BaseTimestamp:   -1,
		MaxTimestamp:    -1,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		BaseSequence:    -1,
		RecordCount:     n,
	}
	b := make([]byte, protocol.BatchHeaderSize, protocol.BatchHeaderSize+len(recs))
	h.Put(b)
	b = append(b, recs...)
	protocol.Batch(b).SetCRC()
	return b
}

// raftControl reports whether b is a control batch this package wrote for a
// raft entry, its control type and the record value.
func raftControl(b []byte, h *batchInfo) (ctrl int16, value []byte, ok bool) {
	if !h.IsControl() || h.ProducerID != -1 {
		return 0, nil, false
	}
	if h.RecordCount == 0 {
		return ctrlFiller, nil, true
	}
	p := protocol.BatchHeaderSize
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
	case ctrlRaftNoop, ctrlRaftConfChange, ctrlRaftConfChgV2, ctrlDeleteRecords:
		return ctrl, b[p : p+int(vl)], true
	}
	return 0, nil, false
}
