package peerlink

import (
	"net"
	"net/netip"
)

// FromHost reports whether a connection from remote may be the member
// registered at addr (host:port). When addr's host is an IP literal, the
// connection's source IP must be that IP, or both loopback (a member
// registered at 127.0.0.1 may dial from ::1 or 127.0.0.2: the same
// host). A host name or an unspecified IP cannot be checked here and
// passes; an addr that does not parse does not.
func FromHost(remote net.Addr, addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	want, err := netip.ParseAddr(host)
	if err != nil {
		return true // a host name
	}
	want = want.Unmap()
	if want.IsUnspecified() {
		return true
	}
	ra, ok := remote.(*net.TCPAddr)
	if !ok {
		return true // not a network connection (tests' pipes)
	}
	got, ok := netip.AddrFromSlice(ra.IP)
	if !ok {
		return false
	}
	got = got.Unmap()
	return got == want || (got.IsLoopback() && want.IsLoopback())
}
