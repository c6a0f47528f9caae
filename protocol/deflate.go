package protocol

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression is the reverse of inflate, for the one place the broker
// writes records of its own: a batch rewritten by the log cleaner is
// compressed again with the codec its producer chose (Kafka's cleaner
// keeps the original batch's compression type too).

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
