package server

import "golang.org/x/sys/unix"

// pendingBytes is how many bytes fd's receive buffer holds (FIONREAD).
func pendingBytes(fd uintptr) int {
	n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	if err != nil {
		return 0
	}
	return n
}
