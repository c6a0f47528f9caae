//go:build !linux

package server

import (
	"net"

	"github.com/sluice-broker/sluice/partition"
)

// sendRange copies a file range to the connection; sendfile at an
// explicit offset is used on Linux only.
func sendRange(nc net.Conn, r *partition.FileRange) error { return copyRange(nc, r) }
