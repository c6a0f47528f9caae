package protocol

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression is the reverse of inflate, for the two places the broker
// writes records of its own: a batch rewritten by the log cleaner is
// compressed again with the codec its producer chose (Kafka's cleaner
// keeps the original batch's compression type too), and a produced batch
// is recompressed to its topic's compression.type (Batch.Recompress).

// xerialBlock is the uncompressed size of one block of the Java client's
// snappy framing (snappy-java's default block size).
const xerialBlock = 32 << 10

var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Writers  = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// One goroutine and 64 KiB blocks, as Kafka's own
		// KafkaLZ4BlockOutputStream writes them: the cleaner's memory
		// stays small whatever the batch.
		_ = w.Apply(lz4.ConcurrencyOption(1), lz4.BlockSizeOption(lz4.Block64Kb))
		return w
	}}
	zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
)

// xerialVersion is the framing's version and compatible-version words.
var xerialVersion = []byte{0, 0, 0, 1, 0, 0, 0, 1}

// deflate appends raw compressed with codec (1 gzip, 2 snappy, 3 lz4,
// 4 zstd) to dst. Snappy is framed as the Java client frames it (xerial)
// when xerial is set, as a bare block otherwise, so a rewritten batch is
// framed as its original was.
func deflate(dst, raw []byte, codec int8, xerial bool) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	switch codec {
	case 1:
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		w.Reset(buf)
		if _, err := w.Write(raw); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		w.Reset(nil)
		return buf.Bytes(), nil
	case 2:
		if !xerial {
			return append(dst, s2.EncodeSnappy(nil, raw)...), nil
		}
		out := append(append(dst, xerialHeader...), xerialVersion...)
		for len(raw) > 0 {
			n := min(len(raw), xerialBlock)
			at := len(out)
			out = append(out, 0, 0, 0, 0)
			out = append(out, make([]byte, s2.MaxEncodedLen(n))...)
			enc := s2.EncodeSnappy(out[at+4:], raw[:n])
			binary.BigEndian.PutUint32(out[at:], uint32(len(enc)))
			out = out[:at+4+len(enc)]
			raw = raw[n:]
		}
		return out, nil
	case 3:
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(buf)
		if _, err := w.Write(raw); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		w.Reset(nil)
		return buf.Bytes(), nil
	case 4:
		return zstdEncoder.EncodeAll(raw, dst), nil
	}
	return nil, ErrUnsupportedCompression
}

// Deflate appends raw records compressed with codec to dst, snappy in the
// Java client's framing: what a producer sends, for building batches.
func Deflate(dst, raw []byte, codec int8) ([]byte, error) { return deflate(dst, raw, codec, true) }

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
	if codec == CodecNone {
		out = append(out, raw...)
	} else if out, err = deflate(out, raw, codec, true); err != nil {
		return nil, fmt.Errorf("%w: codec %d", err, codec)
	}
	binary.BigEndian.PutUint32(out[BatchLengthAt:], uint32(len(out)-BatchLengthAt-4))
	attrs := uint16(b.Attributes())&^uint16(AttrCompressionMask) | uint16(codec)
	binary.BigEndian.PutUint16(out[BatchAttributesAt:], attrs)
	nb := Batch(out)
	nb.SetCRC()
	return nb, nil
}
