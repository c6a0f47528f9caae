package server

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/sluice-broker/sluice/partition"
)

// sendRange sends a file range to the connection with sendfile(2) at an
// explicit offset: the file's seek position is shared by every fetch
// reading that segment, so Go's own sendfile path (which uses it) cannot
// serve. The kernel copies page cache to socket; nothing goes through our
// memory.
func sendRange(nc net.Conn, r *partition.FileRange) error {
	sc, ok := nc.(syscall.Conn)
	if !ok || r.InMemory() {
		return copyRange(nc, r)
	}
	dst, err := sc.SyscallConn()
	if err != nil {
		return copyRange(nc, r)
	}
	src, err := r.File().SyscallConn()
	if err != nil {
		return err
	}
	off, remain := r.Pos, r.Len
	var serr, werr error
	cerr := src.Control(func(sfd uintptr) {
		werr = dst.Write(func(dfd uintptr) bool {
			for remain > 0 {
				n, err := syscall.Sendfile(int(dfd), int(sfd), &off, int(min(remain, 1<<30)))
				if n > 0 {
					remain -= int64(n)
				}
				switch {
				case errors.Is(err, syscall.EAGAIN):
					return false // wait until the socket is writable
				case errors.Is(err, syscall.EINTR):
				case err != nil:
					serr = err
					return true
				case n == 0:
					// The file is shorter than the range: never
					// for committed data, but do not spin.
					serr = io.ErrUnexpectedEOF
					return true
				}
			}
			return true
		})
	})
	if serr == nil {
		serr = werr
	}
	if serr == nil {
		serr = cerr
	}
	if remain == r.Len && (errors.Is(serr, syscall.EINVAL) || errors.Is(serr, syscall.ENOSYS)) {
		return copyRange(nc, r) // a socket or file sendfile does not take
	}
	return serr
}
