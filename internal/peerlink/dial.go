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

// AckTimeout bounds how long what a node wrote to a peer may go
// unacknowledged by the peer's kernel before the connection is given up
// and redialled (SetAckTimeout). Without it a connection whose packets are
// silently dropped (a cut link, not a closed one) stays open: writes land
// in the socket buffer, TCP retransmits on an exponentially growing timer,
// and once the link is back the next retransmission can be many seconds
// away (3-9 s after a 5-9 s cut was seen), all that time raft's messages
// to that peer, pre-votes included, wait in the buffer. Two seconds is
// about raft's election timeout here; a peer process that is only slow
// still has its kernel acknowledge.
const AckTimeout = 2 * time.Second

// Dial connects to addr from local (nil: any), giving up after timeout or
// with ctx, turns Nagle's algorithm off (the transports coalesce their
// own writes) and sets AckTimeout.
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
	_ = SetAckTimeout(c, AckTimeout) // best effort: Linux only
	return c, nil
}
