package server

import (
	"bufio"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/partition"
)

// splicedResponse is a response whose frame includes file ranges (Fetch's
// records): the writer sends the encoded bytes from memory and each range
// from its file, in order, then releases the ranges. A response that is
// dropped (the connection failed) is released too.
type splicedResponse interface {
	kmsg.Response
	appendFrame(dst []byte, corrID int32) ([]byte, []splice)
	release()
}

// inlineRangeBytes: ranges up to this size are always read into the
// writer's buffer (one pread, no allocation; flushing it first if they do
// not fit) rather than sent with sendfile, which costs a flush of what is
// buffered before it: many small ranges (a tail consumer of many
// partitions) then share one write. A larger range is read in too when it
// fits the room left in the buffer, and sent with sendfile otherwise.
const inlineRangeBytes = 16 << 10

// writeSpliced writes a frame made by appendFrame.
func writeSpliced(bw *bufio.Writer, nc net.Conn, frame []byte, splices []splice) error {
	prev := 0
	for _, sp := range splices {
		if _, err := bw.Write(frame[prev:sp.at]); err != nil {
			return err
		}
		prev = sp.at
		if err := writeRange(bw, nc, sp.r); err != nil {
			return err
		}
	}
	_, err := bw.Write(frame[prev:])
	return err
}

func writeRange(bw *bufio.Writer, nc net.Conn, r *partition.FileRange) error {
	n := int(r.Len)
	if n > bw.Available() && n <= inlineRangeBytes && n <= bw.Size() {
		if err := bw.Flush(); err != nil {
			return err
		}
	}
	if n <= bw.Available() {
		buf := bw.AvailableBuffer()[:n]
		if _, err := r.ReadAt(buf, 0); err != nil {
			return err
		}
		_, err := bw.Write(buf)
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return sendRange(nc, r)
}

// copyRange is the portable way to send a range: through a buffer.
func copyRange(nc net.Conn, r *partition.FileRange) error {
	_, err := io.Copy(nc, io.NewSectionReader(r, 0, r.Len))
	return err
}
