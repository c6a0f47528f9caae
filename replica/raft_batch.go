package replica

import (
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/sluice-broker/sluice/protocol"
)

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

// fillerBatch is a control batch with no records spanning span offsets
// from base (lastOffsetDelta = span-1): what resetLogTo writes to move an
// empty log's end to a snapshot's offset, below the log start it then
// sets, so no reader ever gets it. Timestamps, epoch and producer id are
// -1.
func fillerBatch(base int64, span int32) []byte {
	h := protocol.BatchHeader{
		BaseOffset:      base,
		Size:            int64(protocol.BatchHeaderSize),
		LeaderEpoch:     -1,
		Attributes:      protocol.AttrControl,
		LastOffsetDelta: span - 1,
		BaseTimestamp:   -1,
		MaxTimestamp:    -1,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		BaseSequence:    -1,
	}
	b := make([]byte, protocol.BatchHeaderSize)
	h.Put(b)
	protocol.Batch(b).SetCRC()
	return b
}
