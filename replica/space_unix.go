//go:build linux || darwin

package replica

import "syscall"

// usableBytes is what the file system holding dir has free for this
// process; -1 when statfs fails.
func usableBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
