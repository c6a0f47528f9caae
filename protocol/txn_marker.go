package protocol

import (
	"encoding/binary"
	"errors"
)

// Transaction markers (KIP-98): the control batch a transaction
// coordinator has written to every partition of a transaction once it is
// decided. It is transactional and control, carries the producer's id and
// epoch, sequence -1, and one record whose key is version 0 and the
// control type (Kafka's ControlRecordType: 0 ABORT, 1 COMMIT) and whose
// value is version 0 and the coordinator epoch (EndTransactionMarker).
// Like every batch it takes an offset.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// ErrNotControl: the batch is not a control batch with a readable first
// record key.
var ErrNotControl = errors.New("protocol: not a control batch with a control record")

// TxnMarkerBatch builds the marker batch for a producer's transaction.
// baseOffset and the leader epoch are left 0: the log stamps both.
func TxnMarkerBatch(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, timestamp int64) Batch {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	var r []byte
	r = append(r, 0)              // record attributes
	r = binary.AppendVarint(r, 0) // timestamp delta
	r = binary.AppendVarint(r, 0) // offset delta
	r = binary.AppendVarint(r, 4) // key length
	r = append(r, 0, 0)           // key version 0
	r = binary.BigEndian.AppendUint16(r, uint16(typ))
	r = binary.AppendVarint(r, 6) // value length
	r = append(r, 0, 0)           // value version 0
	r = binary.BigEndian.AppendUint32(r, uint32(coordinatorEpoch))
	r = binary.AppendVarint(r, 0) // headers
	recs := binary.AppendVarint(nil, int64(len(r)))
	recs = append(recs, r...)
	h := BatchHeader{
		Size:          int64(BatchHeaderSize + len(recs)),
		Attributes:    AttrControl | AttrTransactional,
		BaseTimestamp: timestamp,
		MaxTimestamp:  timestamp,
		ProducerID:    producerID,
		ProducerEpoch: epoch,
		BaseSequence:  -1,
		RecordCount:   1,
	}
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+len(recs))
	h.Put(b)
	b = append(b, recs...)
	Batch(b).SetCRC()
	return b
}

// ControlType returns the control type in the key of the first record of
// a control batch. b needs to hold only the header and the start of that
// record (ControlTypeBytes of the batch suffice); the CRC is not checked.
func ControlType(b []byte) (int16, error) {
	typ, _, err := EndTxnMarker(b)
	return typ, err
}

// EndTxnMarker returns the control type and the coordinator epoch of a
// control batch's first record (Kafka's EndTransactionMarker: the key's
// type, the value's coordinatorEpoch after its version). The coordinator
// epoch is -1 where the value is missing or too short (never so in a
// marker this broker writes). b needs to hold only the header and the
// start of the record (ControlTypeBytes); the CRC is not checked.
func EndTxnMarker(b []byte) (typ int16, coordinatorEpoch int32, err error) {
	var h BatchHeader
	if err := h.Decode(b); err != nil || !h.IsControl() || h.RecordCount < 1 || h.Compressed() {
		return 0, -1, ErrNotControl
	}
	p := BatchHeaderSize
	_, n := binary.Varint(b[p:]) // record length
	if n <= 0 {
		return 0, -1, ErrNotControl
	}
	p += n + 1 // and the attributes
	for range 2 {
		if p >= len(b) {
			return 0, -1, ErrNotControl
		}
		_, n := binary.Varint(b[p:])
		if n <= 0 {
			return 0, -1, ErrNotControl
		}
		p += n
	}
	if p >= len(b) {
		return 0, -1, ErrNotControl
	}
	kl, n := binary.Varint(b[p:])
	if n <= 0 || kl < 4 || p+n+4 > len(b) {
		return 0, -1, ErrNotControl
	}
	p += n
	typ = int16(binary.BigEndian.Uint16(b[p+2:]))
	coordinatorEpoch = -1
	if kl >= int64(len(b)-p) {
		return typ, coordinatorEpoch, nil
	}
	p += int(kl)
	vl, n := binary.Varint(b[p:])
	if n > 0 && vl >= 6 && p+n+6 <= len(b) {
		coordinatorEpoch = int32(binary.BigEndian.Uint32(b[p+n+2:]))
	}
	return typ, coordinatorEpoch, nil
}

// ControlTypeBytes is how much of a control batch EndTxnMarker needs at
// most: the header and the first record's prefix up to the coordinator
// epoch of a marker's value (a key of 4 bytes, as markers have).
const ControlTypeBytes = BatchHeaderSize + 5 + 1 + 10 + 10 + 5 + 4 + 5 + 6
