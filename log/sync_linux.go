//go:build linux

package log

import (
	"os"
	"syscall"
)

// fdatasync makes f's data durable. On Linux fdatasync skips the inode
// timestamps that fsync would also write; the file size, which an append
// changes, is still made durable because later reads depend on it.
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
