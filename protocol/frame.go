package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxFrameBytes is Kafka's socket.request.max.bytes default (100 MiB).
const DefaultMaxFrameBytes = 100 << 20

var (
	// ErrFrameTooLarge: the size prefix is larger than the configured maximum.
	ErrFrameTooLarge = errors.New("protocol: frame larger than socket.request.max.bytes")
	// ErrNegativeFrame: the size prefix is negative.
	ErrNegativeFrame = errors.New("protocol: negative frame size")
	// ErrShortFrame: the frame is too short to hold a request header.
	ErrShortFrame = errors.New("protocol: frame too short for a request header")
)

// ReadFrame reads one size-prefixed frame from r into buf (grown if needed)
// and returns the frame body. The size is checked before anything is
// allocated, so a hostile prefix costs nothing. The returned slice aliases
// buf and is valid until the next call.
func ReadFrame(r io.Reader, buf []byte, maxBytes int32) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: %d", ErrNegativeFrame, n)
	case n > maxBytes:
		return nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, maxBytes)
	case n < 8: // key, version, correlation id
		return nil, fmt.Errorf("%w: %d bytes", ErrShortFrame, n)
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
