//go:build linux || darwin

package server

import "syscall"

// volumeBytes returns the total and usable (available to this process)
// bytes of the file system holding dir, as Kafka's DescribeLogDirs v4
// reports them (FileStore.getTotalSpace, getUsableSpace); -1 each when
// statfs fails.
func volumeBytes(dir string) (total, usable int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	bs := int64(st.Bsize)
	return int64(st.Blocks) * bs, int64(st.Bavail) * bs
}
