package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
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

// Frame buffers are recycled through a small free list. A fresh buffer per
// request frame cost about a quarter of the broker's CPU under a produce
// load, nearly all of it the runtime zeroing megabytes that the socket read
// overwrites at once. The list, not a sync.Pool per size class: pooled
// buffers count as live heap, and the collector's goal of twice the live
// heap then let a pool per class fill with near-duplicates before anything
// was freed (peak RSS rose). Here a frame takes the smallest free buffer
// that holds it; when none does, a new one with some headroom replaces
// the largest that was too small, so the buffers in circulation stay about
// as many as the frames being read and handled at once. A collection that
// finds the list unused since the one before empties it, so an idle broker
// gives the memory back, and the list holds at most maxFreeBytes, so a
// burst of large frames does not stay pinned. Only Produce gives frames
// back; other requests leave theirs to the collector, and whatever keeps
// a byte field of a request beyond it copies it (the group coordinator),
// since such a slice would keep its whole frame alive.
const (
	maxFreeFrames    = 32        // buffers kept on the free list (a batch of a large Produce takes one)
	maxFreeBytes     = 64 << 20  // bytes kept on the free list
	minPooledFrame   = 4 << 10   // smaller frames are allocated each time
	maxPooledFrame   = 64 << 20  // larger ones too: rare, and too big to keep
	frameBufferAlign = 64 << 10  // new buffers' capacity is a multiple of it
	maxFrameHeadroom = 256 << 10 // most a new buffer holds beyond its frame
	largeFrame       = 4 << 20   // frames from this size get buffers of
	largeFrameAlign  = 1 << 20   // a multiple of this capacity
)

type framePool struct {
	mu   sync.Mutex
	free [][]byte
	used bool // a Get since the last collection
}

var frames framePool

func init() { frameGCHook() }

// gcSentinel has a pointer so that it never comes from the tiny allocator,
// whose objects may never be finalized.
type gcSentinel struct{ _ *byte }

// frameGCHook runs once after every garbage collection (a finalizer on an
// object nothing references, set again each time).
func frameGCHook() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		frames.mu.Lock()
		if !frames.used {
			clear(frames.free)
			frames.free = frames.free[:0]
		}
		frames.used = false
		frames.mu.Unlock()
		frameGCHook()
	})
}

// frameCap is the capacity of a new buffer for an n-byte frame. Headroom,
// so that frames a little larger than this one (a workload's frames vary
// around a typical size) fit it too: an eighth, at most maxFrameHeadroom,
// rounded up to frameBufferAlign, or to largeFrameAlign for large frames.
// Large frames come from producers that fill requests up to a limit of
// their own (about 8 MB under W1: a full batch for each of 8 partitions,
// between requests of 1 MB or less); an eighth more was 1 MiB a buffer of
// live heap, which the collector's goal doubled, and the coarse rounding
// gives every frame up to the limit one size of buffer, so that a frame a
// little larger than the last does not replace a buffer.
func frameCap(n int) int {
	align := frameBufferAlign
	if n >= largeFrame {
		align = largeFrameAlign
	}
	return (n + min(n/8, maxFrameHeadroom) + align - 1) / align * align
}

// GetFrameBuffer returns a buffer of length n whose contents are
// undefined, recycled when one is free. Give it back with PutFrameBuffer
// once nothing references it, or drop it: a buffer that is never put back
// is collected like any other.
func GetFrameBuffer(n int) []byte {
	if n < minPooledFrame || n > maxPooledFrame {
		return make([]byte, n)
	}
	frames.mu.Lock()
	frames.used = true
	best, small := -1, -1
	for i, b := range frames.free {
		switch {
		case cap(b) >= n && (best < 0 || cap(b) < cap(frames.free[best])):
			best = i
		case cap(b) < n && (small < 0 || cap(b) > cap(frames.free[small])):
			small = i
		}
	}
	if best < 0 {
		// Drop the largest buffer that is too small: the one the new
		// buffer stands in for.
		if small >= 0 {
			frames.removeLocked(small)
		}
		frames.mu.Unlock()
		return make([]byte, n, frameCap(n))
	}
	b := frames.free[best]
	frames.removeLocked(best)
	frames.mu.Unlock()
	return b[:n]
}

// FreeFrameBuffer takes a free buffer off the list without allocating: the
// smallest that holds n bytes (returned with length n), or else the largest
// (returned with length 0, to be outgrown), or nil when the list is empty.
// A reader that takes a large frame's memory only as its bytes arrive
// starts in memory that is there anyway, and copies only when a buffer of
// the whole frame's size would have been a new one.
func FreeFrameBuffer(n int) []byte {
	if n < minPooledFrame || n > maxPooledFrame {
		return nil
	}
	frames.mu.Lock()
	defer frames.mu.Unlock()
	frames.used = true
	best, large := -1, -1
	for i, b := range frames.free {
		switch {
		case cap(b) >= n && (best < 0 || cap(b) < cap(frames.free[best])):
			best = i
		case cap(b) < n && (large < 0 || cap(b) > cap(frames.free[large])):
			large = i
		}
	}
	if best < 0 {
		if large < 0 {
			return nil
		}
		b := frames.free[large]
		frames.removeLocked(large)
		return b[:0]
	}
	b := frames.free[best]
	frames.removeLocked(best)
	return b[:n]
}

func (f *framePool) removeLocked(i int) {
	last := len(f.free) - 1
	f.free[i] = f.free[last]
	f.free[last] = nil
	f.free = f.free[:last]
}

// PutFrameBuffer gives a buffer from GetFrameBuffer back for reuse. The
// caller must hold the only reference to it (and to every slice of it):
// the next GetFrameBuffer may hand it to another request. With the free
// list full, the smallest buffer is dropped.
func PutFrameBuffer(b []byte) {
	if cap(b) < minPooledFrame || cap(b) > maxPooledFrame+maxPooledFrame/8+frameBufferAlign {
		return
	}
	frames.mu.Lock()
	total := 0
	for _, f := range frames.free {
		total += cap(f)
	}
	if len(frames.free) < maxFreeFrames && total+cap(b) <= maxFreeBytes {
		frames.free = append(frames.free, b[:0])
	} else if len(frames.free) > 0 {
		small := 0
		for i, f := range frames.free {
			if cap(f) < cap(frames.free[small]) {
				small = i
			}
		}
		if f := frames.free[small]; cap(b) > cap(f) && total-cap(f)+cap(b) <= maxFreeBytes {
			frames.free[small] = b[:0]
		}
	}
	frames.mu.Unlock()
}
