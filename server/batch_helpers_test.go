package server

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// makeTestBatch encodes an uncompressed, non-idempotent v2 batch of n
// records with values of size bytes.
func makeTestBatch(n, size int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = make([]byte, size)
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1) // kmsg writes Length as given
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.LastOffsetDelta = int32(n - 1)
	b.FirstTimestamp, b.MaxTimestamp = now, now
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	b.NumRecords = int32(n)
	b.Records = recs
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
