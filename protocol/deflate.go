package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec ids of the batch attributes' compression bits, and the names
// Kafka's compression.type gives them.
const (
	CodecNone   int8 = 0
	CodecGzip   int8 = 1
	CodecSnappy int8 = 2
	CodecLZ4    int8 = 3
	CodecZstd   int8 = 4
)

// CodecOf maps a compression.type value to the codec a broker stores
// batches with; ok is false for "producer" (keep the producer's codec).
func CodecOf(compressionType string) (codec int8, ok bool) {
	switch compressionType {
	case "uncompressed":
		return CodecNone, true
	case "gzip":
		return CodecGzip, true
	case "snappy":
		return CodecSnappy, true
	case "lz4":
		return CodecLZ4, true
	case "zstd":
		return CodecZstd, true
	}
	return 0, false
}

// xerialBlock is the uncompressed size of one block of the snappy framing
// the Java client writes (snappy-java's default block size).
const xerialBlock = 32 << 10

// zstdEncoder compresses whole batches with EncodeAll, which is safe for
// concurrent use; like zstdDecoder it is shared by every caller.
var zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

var lz4Writers = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}

// Recompress returns the batch with its records stored under codec, as
// Kafka's LogValidator rebuilds a batch whose codec differs from the
// topic's compression.type: the records (and every header field but the
// length, the codec bits and the CRC) are unchanged. The records inflate
// into a frame-pool buffer of at most maxInflated bytes charged to budget
// (as in ValidateRecords, which must have accepted the batch), and the
// compressed output is charged too before it is written; both charges
// are the caller's to give back. The returned batch is a new slice.
func (b Batch) Recompress(codec int8, maxInflated int, budget InflateBudget) (Batch, error) {
	raw := []byte(b[BatchHeaderSize:])
	if src := b.Compression(); src != CodecNone {
		buf, n, err := inflate(raw, src, min(maxInflated, maxDecompressedBytes), budget)
		defer PutFrameBuffer(buf)
		if err != nil {
			var be budgetError
			switch {
			case errors.As(err, &be):
				return nil, be.err
			case errors.Is(err, ErrRecordsTooLarge):
				return nil, err
			}
			return nil, fmt.Errorf("%w: records do not decompress (codec %d): %v", ErrCorruptBatch, src, err)
		}
		raw = buf[:n]
	}
	// The output is at most about the input's size for every codec
	// (incompressible data grows by a few bytes per block).
	bound := BatchHeaderSize + len(raw) + len(raw)/64 + 1024
	if budget != nil {
		if err := budget.Reserve(bound); err != nil {
			return nil, err
		}
	}
	out := make([]byte, BatchHeaderSize, bound)
	copy(out, b[:BatchHeaderSize])
	var err error
	if out, err = appendCompressed(out, raw, codec); err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(out[BatchLengthAt:], uint32(len(out)-BatchLengthAt-4))
	attrs := uint16(b.Attributes())&^uint16(AttrCompressionMask) | uint16(codec)
	binary.BigEndian.PutUint16(out[BatchAttributesAt:], attrs)
	nb := Batch(out)
	nb.SetCRC()
	return nb, nil
}

// appendCompressed appends raw compressed with codec to dst in the form
// Kafka's Java client writes: a gzip member, snappy in xerial framing, an
// LZ4 frame of 64 KiB independent blocks, a zstd frame.
func appendCompressed(dst, raw []byte, codec int8) ([]byte, error) {
	w := bytes.NewBuffer(dst)
	switch codec {
	case CodecNone:
		return append(dst, raw...), nil
	case CodecGzip:
		zw := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(zw)
		zw.Reset(w)
		if _, err := zw.Write(raw); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		zw.Reset(nil)
		return w.Bytes(), nil
	case CodecSnappy:
		dst = append(dst, xerialHeader...)
		dst = binary.BigEndian.AppendUint32(dst, 1) // version
		dst = binary.BigEndian.AppendUint32(dst, 1) // compatible version
		for len(raw) > 0 {
			chunk := raw[:min(len(raw), xerialBlock)]
			raw = raw[len(chunk):]
			at := len(dst)
			dst = binary.BigEndian.AppendUint32(dst, 0)
			dst = slices.Grow(dst, s2.MaxEncodedLen(len(chunk)))
			enc := s2.EncodeSnappy(dst[len(dst):cap(dst)], chunk)
			dst = dst[:len(dst)+len(enc)]
			binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
		}
		return dst, nil
	case CodecLZ4:
		zw := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(zw)
		zw.Reset(w)
		if err := zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false)); err != nil {
			return nil, err
		}
		if _, err := zw.Write(raw); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		zw.Reset(nil)
		return w.Bytes(), nil
	case CodecZstd:
		return zstdEncoder.EncodeAll(raw, dst), nil
	}
	return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, codec)
}
