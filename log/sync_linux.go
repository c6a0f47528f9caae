//go:build linux

package log

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive advisory lock on dir, so that two Logs (or two
// processes) never write one partition directory. The lock lives as long as
// the returned file stays open.
func lockDir(dir string) (*os.File, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, ErrLocked
		}
		return nil, &os.PathError{Op: "flock", Path: dir, Err: err}
	}
	return d, nil
}

// dropCache drops the clean pages of f in [off, off+n) from the page cache.
// SyscallConn keeps the descriptor from being closed under the call.
func dropCache(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED) })
}
