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
// before anything is allocated.
func ReadFrame(r io.Reader, buf []byte, limit int) ([]byte, error) {
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if uint64(n) > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, limit)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// AppendHeader appends the length prefix of a frame whose body is n bytes.
func AppendHeader(dst []byte, n int) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}
