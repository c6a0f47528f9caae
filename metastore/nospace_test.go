package metastore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

// TestPageWriteNoSpace: only a page write that found the disk full is
// retried by the Ready loop; a failed fsync, whatever its errno, and
// every other error stay fatal.
func TestPageWriteNoSpace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"nil", nil, false},
		{"pwrite ENOSPC", &os.PathError{Op: "write", Path: "meta.db", Err: syscall.ENOSPC}, true},
		{"pwrite EDQUOT", &os.PathError{Op: "write", Path: "meta.db", Err: syscall.EDQUOT}, true},
		{"wrapped pwrite ENOSPC", fmt.Errorf("commit: %w", &os.PathError{Op: "write", Path: "meta.db", Err: syscall.ENOSPC}), true},
		{"pwrite EIO", &os.PathError{Op: "write", Path: "meta.db", Err: syscall.EIO}, false},
		{"fdatasync ENOSPC (bare errno)", syscall.ENOSPC, false},
		{"file sync ENOSPC", &os.PathError{Op: "sync", Path: "meta.db", Err: syscall.ENOSPC}, false},
		{"grow truncate ENOSPC", &os.PathError{Op: "truncate", Path: "meta.db", Err: syscall.ENOSPC}, false},
		{"other", errors.New("boom"), false},
	} {
		if got := pageWriteNoSpace(tc.err); got != tc.retry {
			t.Errorf("%s: retry %v, want %v", tc.name, got, tc.retry)
		}
	}
}
