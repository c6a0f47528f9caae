package peerlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrFrameTooLarge is returned by ReadFrame for a length above its limit;
// the caller closes the connection (the rest of the stream cannot be
// trusted).
var ErrFrameTooLarge = errors.New("peerlink: frame exceeds the limit")

// HeaderLen is the size of a frame's length prefix.
const HeaderLen = 4

// ReadFrame reads one frame (a u32 big-endian length, then that many
// bytes) and returns its body. buf is reused when it is large enough
// (pass nil for a body the caller keeps). A length above limit is refused
// before anything is allocated, and a large body's memory is taken as its
// bytes arrive (ReadBody), not when its length is read.
func ReadFrame(r io.Reader, buf []byte, limit int) ([]byte, error) {
	n, err := ReadHeader(r)
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, limit)
	}
	return ReadBody(r, buf, n)
}

// ReadHeader reads a frame's length prefix; the caller checks it against
// its limit before reading the body (a transport whose limit depends on
// what follows, a frame's kind, reads that first).
func ReadHeader(r io.Reader) (int, error) {
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, err
	}
	return int(binary.BigEndian.Uint32(h[:])), nil
}

// growStep is the smallest first allocation for a body that does not fit
// the caller's buffer; it doubles from there as bytes arrive.
const growStep = 64 << 10

// ReadBody reads a frame's body of n bytes into buf when it is large
// enough, and otherwise into a buffer that grows as the bytes arrive,
// doubling from twice buf's capacity (at least 64 KiB): a peer that
// declares a huge frame and sends nothing more holds that much, not the
// declared length, and a reader that reuses its buffer for a stream of
// frames growing a little (a replication stream) allocates once per
// doubling, not from 64 KiB again each time.
func ReadBody(r io.Reader, buf []byte, n int) ([]byte, error) {
	if cap(buf) >= n {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, unexpected(err)
		}
		return buf, nil
	}
	buf = make([]byte, 0, min(n, max(growStep, 2*cap(buf))))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, unexpected(err)
		}
	}
	return buf, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendHeader appends the length prefix of a frame whose body is n bytes.
func AppendHeader(dst []byte, n int) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}
