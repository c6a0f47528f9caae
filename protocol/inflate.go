package protocol

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Inflation writes a batch's records into one buffer from the frame pool,
// which ValidateRecords then walks in place. The buffer starts at the size
// the codec declares (snappy, xerial blocks and zstd frames carry it; a
// gzip trailer's is a hint) or a guess, grows by doubling only when the
// data outruns it, and never beyond the limit plus one byte: reading that
// byte is how a stream without a declared size is found too large. Each
// growth is reserved from the caller's budget before the memory is taken.

// Decoder state reserved besides the output: a flate decompressor holds
// its 32 KiB window and Huffman tables; an lz4 frame reader holds about
// two blocks of the frame's declared maximum block size.
const gzipStateBytes = 64 << 10

// zstdMaxBlock is the largest block a zstd frame may hold.
const zstdMaxBlock = 128 << 10

const (
	minInflateGuess = 16 << 10
	// A stream without a declared size starts at this many times its
	// compressed size: Kafka batches of text or JSON compress 3-10x.
	inflateGuessRatio = 8
)

// budgetError carries an InflateBudget's own error through inflate, so
// that ValidateRecords returns it as it is rather than as corruption.
type budgetError struct{ err error }

func (e budgetError) Error() string { return e.err.Error() }

type inflater struct {
	buf    []byte // from GetFrameBuffer; buf[:n] is written
	n      int
	limit  int // bytes the output may hold; limit+1 is the buffer's ceiling
	budget InflateBudget
}

func (f *inflater) reserve(n int) error {
	if f.budget == nil || n <= 0 {
		return nil
	}
	if err := f.budget.Reserve(n); err != nil {
		return budgetError{err}
	}
	return nil
}

// ensure makes room for at least want bytes in total, growing the buffer
// to max(want, twice its length), never beyond limit+1.
func (f *inflater) ensure(want int) error {
	if want <= len(f.buf) {
		return nil
	}
	if want > f.limit+1 {
		want = f.limit + 1
	}
	size := max(want, 2*len(f.buf), minInflateGuess)
	size = min(size, f.limit+1)
	if size <= len(f.buf) {
		return nil
	}
	if err := f.reserve(size - len(f.buf)); err != nil {
		return err
	}
	nb := GetFrameBuffer(size)
	copy(nb, f.buf[:f.n])
	PutFrameBuffer(f.buf)
	f.buf = nb
	return nil
}

func (f *inflater) tooLarge() error {
	return fmt.Errorf("%w: more than %d bytes", ErrRecordsTooLarge, f.limit)
}

// declared checks a size the codec states before anything is inflated.
func (f *inflater) declared(n uint64) error {
	if n > uint64(f.limit) {
		return fmt.Errorf("%w: declares %d bytes, more than %d", ErrRecordsTooLarge, n, f.limit)
	}
	return nil
}

// readFrom streams r into the buffer until EOF, failing once more than
// limit bytes came out.
func (f *inflater) readFrom(r io.Reader) error {
	for empty := 0; ; {
		if f.n == len(f.buf) {
			if f.n > f.limit {
				return f.tooLarge()
			}
			if err := f.ensure(f.n + 1); err != nil {
				return err
			}
		}
		m, err := r.Read(f.buf[f.n:])
		f.n += m
		if m == 0 && err == nil {
			// A reader making no progress: as io.ReadFull's
			// callers do, give up rather than spin.
			if empty++; empty >= 100 {
				return io.ErrNoProgress
			}
			continue
		}
		empty = 0
		if f.n > f.limit {
			return f.tooLarge()
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

var gzipReaders sync.Pool // *gzip.Reader

// emptyGzip is a bare gzip member header (deflate, no flags).
var emptyGzip = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

var lz4Readers = sync.Pool{New: func() any { return lz4.NewReader(nil) }}

// xerialHeader starts snappy data framed the way the Java client frames it.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// lz4BlockMax is the block size an lz4 frame descriptor's BD byte names.
func lz4BlockMax(src []byte) int {
	// magic (4), FLG (1), BD (1): the block max size id is BD bits 4-6.
	if len(src) < 6 {
		return 0
	}
	switch (src[5] >> 4) & 7 {
	case 4:
		return 64 << 10
	case 5:
		return 256 << 10
	case 6:
		return 1 << 20
	case 7:
		return 4 << 20
	}
	return 0
}

// inflate decompresses src with codec into a frame-pool buffer holding at
// most limit bytes and returns it (to be given back with PutFrameBuffer,
// also on error) with the count written.
func inflate(src []byte, codec int8, limit int, budget InflateBudget) ([]byte, int, error) {
	f := &inflater{limit: limit, budget: budget}
	err := f.run(src, codec)
	return f.buf, f.n, err
}

func (f *inflater) run(src []byte, codec int8) error {
	guess := max(min(len(src), maxDecompressedBytes/inflateGuessRatio)*inflateGuessRatio, minInflateGuess)
	switch codec {
	case 1:
		if err := f.reserve(gzipStateBytes); err != nil {
			return err
		}
		if len(src) >= 18 {
			// ISIZE, the last member's size mod 2^32: a hint only.
			if isize := int(binary.LittleEndian.Uint32(src[len(src)-4:])); isize > 0 {
				guess = isize + 1
			}
		}
		var zr *gzip.Reader
		if v := gzipReaders.Get(); v != nil {
			zr = v.(*gzip.Reader)
			if err := zr.Reset(bytes.NewReader(src)); err != nil {
				return err
			}
		} else {
			var err error
			if zr, err = gzip.NewReader(bytes.NewReader(src)); err != nil {
				return err
			}
		}
		defer func() {
			// Point the pooled reader (and its flate decompressor)
			// at an empty member, so that it keeps no reference to
			// src, a frame buffer that is about to be reused.
			if zr.Reset(bytes.NewReader(emptyGzip)) == nil {
				gzipReaders.Put(zr)
			}
		}()
		if err := f.ensure(guess); err != nil {
			return err
		}
		return f.readFrom(zr)
	case 2:
		if bytes.HasPrefix(src, xerialHeader) && len(src) >= 16 {
			return f.xerial(src[16:])
		}
		return f.snappyBlock(src)
	case 3:
		if err := f.reserve(2 * lz4BlockMax(src)); err != nil {
			return err
		}
		zr := lz4Readers.Get().(*lz4.Reader)
		zr.Reset(bytes.NewReader(src))
		defer func() {
			zr.Reset(nil)
			lz4Readers.Put(zr)
		}()
		if err := f.ensure(guess); err != nil {
			return err
		}
		return f.readFrom(zr)
	case 4:
		return f.zstd(src, guess)
	}
	return ErrUnsupportedCompression
}

func (f *inflater) snappyBlock(src []byte) error {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return err
	}
	if err := f.declared(uint64(n)); err != nil {
		return err
	}
	if err := f.ensure(f.n + n); err != nil {
		return err
	}
	if _, err := s2.Decode(f.buf[f.n:f.n+n], src); err != nil {
		return err
	}
	f.n += n
	return nil
}

// xerial decodes the Java client's framing: after the 16-byte header,
// blocks of a 4-byte big-endian length and a snappy block each, decoded
// one after the other into the same buffer.
func (f *inflater) xerial(rest []byte) error {
	for len(rest) > 0 {
		if len(rest) < 4 {
			return errShortRecord
		}
		l := int(binary.BigEndian.Uint32(rest))
		if l < 0 || l > len(rest)-4 {
			return fmt.Errorf("bad xerial block length %d", l)
		}
		n, err := s2.DecodedLen(rest[4 : 4+l])
		if err != nil {
			return err
		}
		if f.n+n > f.limit {
			return f.tooLarge()
		}
		if err := f.snappyBlock(rest[4 : 4+l]); err != nil {
			return err
		}
		rest = rest[4+l:]
	}
	return nil
}

// zstd decodes with DecodeAll into the buffer, which bounds it (the
// decoder is built with WithDecodeAllCapLimit). A frame that declares its
// size gets a buffer of that size at once (one over the limit is refused
// undecoded); one that does not starts at the guess, and when it outgrows
// the buffer is decoded again into one twice as large, up to the limit.
func (f *inflater) zstd(src []byte, guess int) error {
	var h zstd.Header
	if err := h.Decode(src); err == nil && h.HasFCS {
		if err := f.declared(h.FrameContentSize); err != nil {
			return err
		}
		guess = int(h.FrameContentSize) + 1
	}
	if err := f.ensure(guess); err != nil {
		return err
	}
	for {
		// The capacity is what was reserved, not the pooled buffer's.
		out, err := zstdDecoder.DecodeAll(src, f.buf[:0:len(f.buf)])
		if err == nil {
			if len(out) > f.limit {
				return f.tooLarge()
			}
			f.n = len(out)
			return nil
		}
		// Decoding into a full buffer fails with ErrDecoderSizeExceeded
		// between blocks but with a sequence error inside one, and then
		// the output stops within a block (128 KiB) of the end: only
		// an error farther from it is corruption.
		if !errors.Is(err, zstd.ErrDecoderSizeExceeded) && len(out)+zstdMaxBlock <= len(f.buf) {
			return err
		}
		if len(f.buf) > f.limit {
			return f.tooLarge()
		}
		if err := f.ensure(2 * len(f.buf)); err != nil {
			return err
		}
	}
}
