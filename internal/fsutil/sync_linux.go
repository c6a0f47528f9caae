//go:build linux

package fsutil

import (
	"os"
	"syscall"
)

// fdatasync skips the inode timestamps that fsync would also write; the
// file size, which an append changes, is still made durable because later
// reads depend on it.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
