//go:build linux

package peerlink

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// SetAckTimeout makes the kernel abort c when data written to it stays
// unacknowledged for longer than d (TCP_USER_TIMEOUT), so that a write
// after that fails and the connection is redialled.
func SetAckTimeout(c net.Conn, d time.Duration) error {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	}); err != nil {
		return err
	}
	return serr
}
