package peerlink

import (
	"errors"
	"net"
	"sync"
	"time"
)

// ErrClosed is returned by Writer.Write once the writer is closed.
var ErrClosed = errors.New("peerlink: connection closed")

// Writer writes whole frames that many goroutines queue to one
// connection, from one goroutine that coalesces whatever is queued into
// one write (many concurrent calls, one syscall). A failed write closes
// the writer and the connection.
type Writer struct {
	c       net.Conn
	q       chan []byte
	timeout time.Duration
	done    chan struct{}
	once    sync.Once
	onClose func()
}

// NewWriter starts a writer on c with a queue of queueLen frames and a
// timeout per write; onClose (optional) runs once when it closes.
func NewWriter(c net.Conn, queueLen int, timeout time.Duration, onClose func()) *Writer {
	w := &Writer{c: c, q: make(chan []byte, queueLen), timeout: timeout, done: make(chan struct{}), onClose: onClose}
	go w.loop()
	return w
}

// Write queues frame, waiting while the queue is full; ErrClosed once the
// writer is closed.
func (w *Writer) Write(frame []byte) error {
	select {
	case <-w.done:
		return ErrClosed
	default:
	}
	select {
	case w.q <- frame:
		return nil
	case <-w.done:
		return ErrClosed
	}
}

// Done is closed when the writer closes.
func (w *Writer) Done() <-chan struct{} { return w.done }

// Close closes the writer and its connection.
func (w *Writer) Close() {
	w.once.Do(func() {
		close(w.done)
		closeConn(w.c)
		if w.onClose != nil {
			w.onClose()
		}
	})
}

func (w *Writer) loop() {
	var frames [][]byte
	var buf []byte
	for {
		var ok bool
		frames, ok = gather(w.q, w.done, frames[:0], 1<<20, func(b []byte) int { return len(b) })
		if !ok {
			return
		}
		buf = buf[:0]
		for _, f := range frames {
			buf = append(buf, f...)
		}
		clear(frames)
		_ = w.c.SetWriteDeadline(time.Now().Add(w.timeout))
		if _, err := w.c.Write(buf); err != nil {
			w.Close()
			return
		}
		if cap(buf) > 4<<20 {
			buf = nil
		}
	}
}
