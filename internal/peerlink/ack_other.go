//go:build !linux

package peerlink

import (
	"net"
	"time"
)

// SetAckTimeout is Linux only (TCP_USER_TIMEOUT); elsewhere a silently
// cut connection is found by the write deadline once the send buffer is
// full.
func SetAckTimeout(net.Conn, time.Duration) error { return nil }
