package server

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

// fetchWire is a Fetch response whose partitions' records are segment file
// ranges rather than bytes in memory: kmsg encodes everything else, and
// the connection's writer sends each range straight from its file
// (sendfile), so a response of up to fetch.max.bytes is never held whole.
type fetchWire struct {
	*kmsg.FetchResponse
	parts []fetchPart // in encoding order; those with a range carry records
}

// splice is a file range that goes at a position of an encoded frame:
// one per partition with records.
type splice struct {
	at   int // index in the frame where the range's bytes belong
	r    *partition.FileRange
	part int // the index in fetchWire.parts it belongs to, while building
}

// spliceNonce makes the placeholders that mark where a partition's records
// go in kmsg's encoding. It is random per process so that nothing a client
// controls can forge one; the search also checks the length prefix kmsg
// writes before each placeholder, in the order the partitions are encoded.
var spliceNonce = func() (b [16]byte) {
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return b
}()

const markerLen = len(spliceNonce) + 4

// appendFrame appends the response frame (size, correlation id, header,
// body) to dst with every partition's records left out, and says where
// each file range goes. The size field counts the ranges.
func (w *fetchWire) appendFrame(dst []byte, corrID int32) ([]byte, []splice) {
	var splices []splice
	var marks []byte
	nmarks := 0
	for i := range w.parts {
		fp := &w.parts[i]
		if fp.rng.Len == 0 {
			continue
		}
		k := len(marks)
		marks = append(marks, spliceNonce[:]...)
		marks = binary.BigEndian.AppendUint32(marks, uint32(nmarks))
		nmarks++
		fp.resp.RecordBatches = marks[k : k+markerLen : k+markerLen]
		splices = append(splices, splice{r: &fp.rng, part: i})
	}
	start := len(dst)
	dst = protocol.AppendResponse(dst, corrID, w.FetchResponse)
	for i := range w.parts {
		w.parts[i].resp.RecordBatches = []byte{} // empty, never null
	}
	if len(splices) == 0 {
		return dst, nil
	}
	// Cut each placeholder and its length prefix out, in place (the real
	// prefix is never longer than the placeholder it replaces), writing
	// the range's length instead.
	flexible := w.IsFlexible()
	var prefix []byte
	if flexible {
		prefix = binary.AppendUvarint(nil, uint64(markerLen)+1) // compact: length+1
	} else {
		prefix = binary.BigEndian.AppendUint32(nil, uint32(markerLen))
	}
	rd, wr := start+4, start+4
	total := int64(0)
	si := 0
	for m := range nmarks {
		mark := marks[m*markerLen : (m+1)*markerLen]
		at := bytes.Index(dst[rd:], mark)
		if at < 0 || at < len(prefix) || !bytes.Equal(dst[rd+at-len(prefix):rd+at], prefix) {
			return w.inline(dst[:start], corrID)
		}
		at += rd
		wr += copy(dst[wr:], dst[rd:at-len(prefix)])
		part := splices[si].part
		n := w.parts[part].recordsLen()
		if flexible {
			wr += binary.PutUvarint(dst[wr:], uint64(n)+1)
		} else {
			binary.BigEndian.PutUint32(dst[wr:], uint32(n))
			wr += 4
		}
		for ; si < len(splices) && splices[si].part == part; si++ {
			splices[si].at = wr
		}
		total += n
		rd = at + markerLen
	}
	wr += copy(dst[wr:], dst[rd:])
	dst = dst[:wr]
	binary.BigEndian.PutUint32(dst[start:], uint32(int64(len(dst)-start-4)+total))
	return dst, splices
}

// inline is the fallback should a placeholder not be found where expected
// (it cannot be, short of a bug): the records are read into memory and the
// response encoded whole, as before file ranges.
func (w *fetchWire) inline(dst []byte, corrID int32) ([]byte, []splice) {
	for i := range w.parts {
		fp := &w.parts[i]
		if fp.rng.Len == 0 {
			continue
		}
		b, err := fp.rng.Bytes()
		if err != nil {
			fp.resp.ErrorCode = errorCode(err)
			b = []byte{}
		}
		fp.resp.RecordBatches = b
	}
	dst = protocol.AppendResponse(dst, corrID, w.FetchResponse)
	for i := range w.parts {
		w.parts[i].resp.RecordBatches = []byte{}
	}
	return dst, nil
}

// release lets go of the segment files once the response is sent or
// dropped.
func (w *fetchWire) release() {
	for i := range w.parts {
		w.parts[i].releaseRecords()
	}
}
