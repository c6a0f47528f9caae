package protocol

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxDecompressedBytes bounds what one batch may decompress to, so a
// small hostile batch cannot make the broker allocate gigabytes.
const maxDecompressedBytes = 256 << 20

var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxDecompressedBytes))

// ValidateRecords checks what ParseBatch does not: that the records
// section decompresses with the batch's codec and holds exactly
// RecordCount well-formed records (lengths, varints, keys, values and
// headers in bounds, nothing left over). Kafka's LogValidator does the
// same on every produce; a batch that fails it would otherwise be stored
// and break every consumer. Errors wrap ErrCorruptBatch.
func (b Batch) ValidateRecords() error {
	raw := []byte(b[BatchHeaderSize:])
	if codec := b.Compression(); codec != 0 {
		var err error
		if raw, err = decompress(raw, codec); err != nil {
			return fmt.Errorf("%w: records do not decompress (codec %d): %v", ErrCorruptBatch, codec, err)
		}
	}
	n := int(b.RecordCount())
	for i := 0; i < n; i++ {
		var err error
		if raw, err = skipRecord(raw); err != nil {
			return fmt.Errorf("%w: record %d of %d: %v", ErrCorruptBatch, i, n, err)
		}
	}
	if len(raw) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrCorruptBatch, len(raw), n)
	}
	return nil
}

var errShortRecord = errors.New("truncated")

// skipRecord checks one v2 record and returns what follows it.
func skipRecord(b []byte) ([]byte, error) {
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || length > int64(len(b)-n) {
		return nil, fmt.Errorf("bad record length")
	}
	rec, rest := b[n:n+int(length)], b[n+int(length):]
	if len(rec) < 1 {
		return nil, errShortRecord
	}
	rec = rec[1:] // attributes
	for range 2 { // timestamp delta, offset delta
		if _, n = binary.Varint(rec); n <= 0 {
			return nil, errShortRecord
		}
		rec = rec[n:]
	}
	var err error
	if rec, err = skipBytes(rec, true); err != nil { // key
		return nil, err
	}
	if rec, err = skipBytes(rec, true); err != nil { // value
		return nil, err
	}
	headers, n := binary.Varint(rec)
	if n <= 0 || headers < 0 || headers > int64(len(rec)) {
		return nil, fmt.Errorf("bad header count")
	}
	rec = rec[n:]
	for h := int64(0); h < headers; h++ {
		if rec, err = skipBytes(rec, false); err != nil { // header key
			return nil, err
		}
		if rec, err = skipBytes(rec, true); err != nil { // header value
			return nil, err
		}
	}
	if len(rec) != 0 {
		return nil, fmt.Errorf("%d bytes left inside the record", len(rec))
	}
	return rest, nil
}

func skipBytes(b []byte, nullable bool) ([]byte, error) {
	l, n := binary.Varint(b)
	switch {
	case n <= 0:
		return nil, errShortRecord
	case l == -1 && nullable:
		return b[n:], nil
	case l < 0 || l > int64(len(b)-n):
		return nil, fmt.Errorf("bad length %d", l)
	}
	return b[n+int(l):], nil
}

// xerialHeader starts snappy data framed the way the Java client frames it.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func decompress(src []byte, codec int8) ([]byte, error) {
	switch codec {
	case 1:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		return readLimited(zr)
	case 2:
		if bytes.HasPrefix(src, xerialHeader) && len(src) >= 16 {
			var out []byte
			for rest := src[16:]; len(rest) > 0; {
				if len(rest) < 4 {
					return nil, errShortRecord
				}
				l := int(binary.BigEndian.Uint32(rest))
				if l < 0 || l > len(rest)-4 {
					return nil, fmt.Errorf("bad xerial block length %d", l)
				}
				blk, err := snappyBlock(rest[4 : 4+l])
				if err != nil {
					return nil, err
				}
				if out = append(out, blk...); len(out) > maxDecompressedBytes {
					return nil, fmt.Errorf("decompresses beyond %d bytes", maxDecompressedBytes)
				}
				rest = rest[4+l:]
			}
			return out, nil
		}
		return snappyBlock(src)
	case 3:
		return readLimited(lz4.NewReader(bytes.NewReader(src)))
	case 4:
		return zstdDecoder.DecodeAll(src, nil)
	}
	return nil, ErrUnsupportedCompression
}

func snappyBlock(src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n > maxDecompressedBytes {
		return nil, fmt.Errorf("decompresses to %d bytes, beyond %d", n, maxDecompressedBytes)
	}
	return s2.Decode(nil, src)
}

func readLimited(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressedBytes+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxDecompressedBytes {
		return nil, fmt.Errorf("decompresses beyond %d bytes", maxDecompressedBytes)
	}
	return out, nil
}
