package peerlink

import (
	"context"
	"net"
	"time"
)

// LocalIP is the IP a node dials its peers from, given the address it
// listens on: that IP when it is a specific one, so that peers, which
// know this node by that address, see connections come from it (FromHost)
// also on a host with several addresses; nil (the system's choice) when
// it listens on every address.
func LocalIP(listen net.Addr) net.IP {
	a, ok := listen.(*net.TCPAddr)
	if !ok || a.IP.IsUnspecified() {
		return nil
	}
	return a.IP
}

// Dial connects to addr from local (nil: any), giving up after timeout or
// with ctx, and turns Nagle's algorithm off: the transports coalesce
// their own writes.
func Dial(ctx context.Context, addr string, local net.IP, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return c, nil
}
