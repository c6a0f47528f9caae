package log

import (
	"os"
	"sync/atomic"

	"github.com/sluice-broker/sluice/partition"
)

// fileRef counts the holders of a segment's .log file: the segment itself
// and every FileRange handed out by ReadRange. The file is closed when the
// last holder lets go, so retention, truncation or Close may drop a segment
// while a fetch response is still being sent from it: the bytes stay
// readable (an unlinked file lives on while open) and the descriptor is
// never closed under a sendfile.
type fileRef struct {
	f    *os.File
	refs atomic.Int32
}

func newFileRef(f *os.File) *fileRef {
	r := &fileRef{f: f}
	r.refs.Store(1) // the segment's own
	return r
}

// acquire adds a holder. The caller holds the Log's mu (read or write), so
// the segment's own reference, dropped only under the write lock, is alive.
func (r *fileRef) acquire() { r.refs.Add(1) }

func (r *fileRef) release() error {
	if r.refs.Add(-1) == 0 {
		return r.f.Close()
	}
	return nil
}

// File and Release make a fileRef the partition.FileHolder of the
// FileRanges read from its segment.
func (r *fileRef) File() *os.File { return r.f }
func (r *fileRef) Release() error { return r.release() }

// FileRange is a byte range of a segment file holding whole record
// batches, exactly as stored (partition.FileRange); the file stays open
// until Release.
type FileRange = partition.FileRange

// RangeResult is the answer to ReadRange.
type RangeResult = partition.RangeResult
