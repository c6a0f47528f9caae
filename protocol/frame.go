package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"unsafe"
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
	n, err := ReadFrameSize(r, maxBytes)
	if err != nil {
		return nil, err
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if err := ReadFrameBody(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// ReadFrameSize reads and checks a frame's size prefix. Read the body with
// ReadFrameBody into a buffer of exactly that length; the split lets a
// server account for the bytes (or wait for room) before it holds them.
func ReadFrameSize(r io.Reader, maxBytes int32) (int, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return 0, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	switch {
	case n < 0:
		return 0, fmt.Errorf("%w: %d", ErrNegativeFrame, n)
	case n > maxBytes:
		return 0, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, maxBytes)
	case n < 8: // key, version, correlation id
		return 0, fmt.Errorf("%w: %d bytes", ErrShortFrame, n)
	}
	return int(n), nil
}

// ReadFrameBody fills buf with the frame body that follows a size prefix.
// An EOF in the middle of it is io.ErrUnexpectedEOF.
func ReadFrameBody(r io.Reader, buf []byte) error {
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// Frame buffers are pooled in power-of-two size classes from 4 KiB to
// 16 MiB. A fresh buffer per request frame cost about a quarter of the
// broker's CPU under a produce load, nearly all of it the runtime zeroing
// megabytes that the socket read overwrites at once; a pooled buffer is
// neither zeroed nor left for the garbage collector. Larger frames are
// rare (a produce request is capped by the client's batch and request
// sizes) and are allocated as before.
const (
	minFrameClass = 12 // 4 KiB
	maxFrameClass = 24 // 16 MiB
)

// framePools[i] holds buffers of capacity 1<<(minFrameClass+i). A pool
// stores the pointer to a buffer's first byte, not a slice, so Put does not
// allocate a slice header; the capacity follows from the class.
var framePools [maxFrameClass - minFrameClass + 1]sync.Pool

// frameClass is the smallest class whose buffers hold n bytes, -1 when n
// is beyond the largest.
func frameClass(n int) int {
	if n <= 1<<minFrameClass {
		return 0
	}
	c := bits.Len(uint(n-1)) - minFrameClass
	if c >= len(framePools) {
		return -1
	}
	return c
}

// GetFrameBuffer returns a buffer of length n whose contents are
// undefined, from the pool when n is within the pooled sizes. Give it back
// with PutFrameBuffer once nothing references it, or drop it: a buffer that
// is never put back is collected like any other.
func GetFrameBuffer(n int) []byte {
	c := frameClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	size := 1 << (minFrameClass + c)
	if p, ok := framePools[c].Get().(*byte); ok {
		return unsafe.Slice(p, size)[:n]
	}
	return make([]byte, n, size)
}

// PutFrameBuffer returns a buffer from GetFrameBuffer to the pool. The
// caller must hold the only reference to it (and to every slice of it):
// the next GetFrameBuffer may hand it to another request. Buffers whose
// capacity is not one of the pooled sizes are ignored.
func PutFrameBuffer(b []byte) {
	c := cap(b)
	if c < 1<<minFrameClass || c&(c-1) != 0 {
		return
	}
	i := bits.Len(uint(c)) - 1 - minFrameClass
	if i >= len(framePools) {
		return
	}
	framePools[i].Put(unsafe.SliceData(b[:1]))
}
