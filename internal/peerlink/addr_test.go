package peerlink

import (
	"net"
	"testing"
)

func TestFromHost(t *testing.T) {
	tcp := func(s string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(s), Port: 40000} }
	for _, tc := range []struct {
		remote net.Addr
		addr   string
		want   bool
	}{
		{tcp("10.0.0.1"), "10.0.0.1:9491", true},
		{tcp("10.0.0.2"), "10.0.0.1:9491", false},
		{tcp("::ffff:10.0.0.1"), "10.0.0.1:9491", true},
		{tcp("127.0.0.1"), "127.0.0.1:9491", true},
		{tcp("127.0.0.2"), "127.0.0.1:9491", true}, // loopback matches loopback
		{tcp("::1"), "127.0.0.1:9491", true},
		{tcp("127.0.0.1"), "10.0.0.1:9491", false},
		{tcp("10.0.0.1"), "127.0.0.1:9491", false},
		{tcp("10.0.0.9"), "broker-1.example.com:9491", true}, // a name: not checked here
		{tcp("10.0.0.9"), "0.0.0.0:9491", true},
		{tcp("10.0.0.9"), "[::]:9491", true},
		{tcp("fd00::1"), "[fd00::1]:9491", true},
		{tcp("fd00::2"), "[fd00::1]:9491", false},
		{tcp("10.0.0.1"), "not an address", false},
		{&net.UnixAddr{Name: "x"}, "10.0.0.1:9491", true},
	} {
		if got := FromHost(tc.remote, tc.addr); got != tc.want {
			t.Errorf("FromHost(%v, %q) = %v, want %v", tc.remote, tc.addr, got, tc.want)
		}
	}
}
