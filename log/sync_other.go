//go:build !linux

package log

import "os"

// lockDir only holds the directory open where flock is not used.
func lockDir(dir string) (*os.File, error) { return os.Open(dir) }
