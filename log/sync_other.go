//go:build !linux

package log

import "os"

// lockDir only holds the directory open where flock is not used.
func lockDir(dir string) (*os.File, error) { return os.Open(dir) }

// dropCache leaves the page cache as it is where fadvise is not used.
func dropCache(*os.File, int64, int64) {}
