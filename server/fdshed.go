package server

import (
	"cmp"
	"crypto/tls"
	"errors"
	"net"
	"slices"
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
// closes the oldest connections that have not sent a byte in silentGrace
// since they were accepted (up to shedBatch) and frees their descriptors
// for the next accepts.
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

// shedBatch is how many silent connections one failed accept closes at
// most (nginx drains up to 32 idle connections at once when it runs out):
// a flood of them is cleared in a few rounds, not one accept each.
const shedBatch = 32

// shedSilent closes the oldest silent connections (see silentGrace), up
// to shedBatch, and says how many; when it closes none but a connection
// that has sent nothing is younger than the grace, retry is how long
// until it is not (0 if there is none).
func (s *Server) shedSilent() (shed int, retry time.Duration) {
	now := s.since()
	s.mu.Lock()
	defer s.mu.Unlock()
	var silent []*conn
	for c := range s.conns {
		if !c.spoke.Load() && c.progress.Load() == 0 {
			silent = append(silent, c)
		}
	}
	slices.SortFunc(silent, func(a, b *conn) int { return cmp.Compare(a.opened, b.opened) })
	for _, c := range silent {
		if shed == shedBatch {
			break
		}
		if age := time.Duration(now - c.opened); age < silentGrace {
			if shed == 0 {
				retry = silentGrace - age
			}
			break
		}
		if unread(c.nc) {
			c.spoke.Store(true) // its first bytes are there
			continue
		}
		c.spoke.Store(true) // not picked twice
		c.cancel()
		c.nc.Close()
		shed++
	}
	if shed > 0 {
		s.metrics.connsDropped.WithLabelValues("silent").Add(float64(shed))
	}
	return shed, retry
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
