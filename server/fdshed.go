package server

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
	"time"
)

// Out of file descriptors, an accept loop cannot take the next connection
// from the kernel's backlog until one of the broker's own closes: a flood
// of connections that never send a byte would hold every descriptor, and
// a client connecting meanwhile would wait behind them in the backlog
// until they went (connections.max.idle.ms, ten minutes). So, as nginx
// drains its idle keep-alive connections when it runs out of connection
// slots, an accept that fails for want of descriptors (EMFILE, ENFILE)
// closes the oldest connection that has not sent a byte in silentGrace
// since it was accepted and frees its descriptor for the next accept.
// Every Kafka client sends its first request (ApiVersions, or a SASL
// handshake; a TLS client its ClientHello) as soon as it connects, so a
// connection that said nothing for that long is not a client waiting for
// an answer. A connection with bytes in its socket's receive buffer
// counts as having spoken even if the broker has not read them yet (it
// may be waiting for a core). Only Kafka connections past their TLS
// handshake are candidates; one still in its handshake has
// socket.request.timeout.ms.
const silentGrace = 25 * time.Millisecond

func isDescriptorErr(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// shedSilent closes the oldest silent connection (see silentGrace) and
// says so; otherwise, if a connection that has sent nothing is younger
// than the grace, retry is how long until it is not (0 if there is none).
func (s *Server) shedSilent() (shed bool, retry time.Duration) {
	now := s.since()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		var oldest *conn
		for c := range s.conns {
			if c.spoke.Load() || c.progress.Load() != 0 {
				continue
			}
			if oldest == nil || c.opened < oldest.opened {
				oldest = c
			}
		}
		if oldest == nil {
			return false, 0
		}
		if age := time.Duration(now - oldest.opened); age < silentGrace {
			return false, silentGrace - age
		}
		if unread(oldest.nc) {
			oldest.spoke.Store(true) // its first bytes are there
			continue
		}
		oldest.spoke.Store(true) // not picked twice
		oldest.cancel()
		oldest.nc.Close()
		s.metrics.connsDropped.WithLabelValues("silent").Inc()
		return true, 0
	}
}

// unread says whether nc's socket holds received bytes not yet read.
func unread(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if err := rc.Control(func(fd uintptr) { n = pendingBytes(fd) }); err != nil {
		return false
	}
	return n > 0
}
