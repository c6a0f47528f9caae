//go:build !linux

package log

import "os"

// fdatasync falls back to fsync where fdatasync is not available.
func fdatasync(f *os.File) error { return f.Sync() }

// lockDir only holds the directory open where flock is not used.
func lockDir(dir string) (*os.File, error) { return os.Open(dir) }
