package log

import (
	"io"
	"os"
	"sync/atomic"
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

// FileRange is a byte range of a segment file holding whole record batches,
// exactly as stored; the file stays open until Release. It is what a Fetch
// response sends with sendfile instead of copying the bytes through memory.
type FileRange struct {
	ref *fileRef
	Pos int64 // start in the file
	Len int64 // bytes; 0 for an empty range, which needs no Release
}

// File is the open segment file; valid until Release. Read it with ReadAt
// or sendfile at an explicit offset only: its seek position is shared.
func (r *FileRange) File() *os.File { return r.ref.f }

// Release lets go of the file. It is safe to call more than once and on an
// empty range.
func (r *FileRange) Release() {
	if r.ref != nil {
		r.ref.release()
		r.ref = nil
	}
}

// ReadAt reads from the range (offsets relative to its start), for
// writers that cannot use sendfile and for tests.
func (r *FileRange) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.Len {
		return 0, io.EOF
	}
	if rem := r.Len - off; int64(len(p)) > rem {
		p = p[:rem]
		n, err := r.ref.f.ReadAt(p, r.Pos+off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return r.ref.f.ReadAt(p, r.Pos+off)
}

// Bytes reads the whole range into a fresh buffer.
func (r *FileRange) Bytes() ([]byte, error) {
	if r.Len == 0 {
		return []byte{}, nil
	}
	b := make([]byte, r.Len)
	if _, err := r.ref.f.ReadAt(b, r.Pos); err != nil {
		return nil, err
	}
	return b, nil
}

// RangeResult is the answer to ReadRange.
type RangeResult struct {
	// Range holds whole record batches exactly as stored; the caller
	// must Release it.
	Range FileRange
	// NextOffset is the offset after the last batch in Range, or the
	// requested offset when Range is empty.
	NextOffset     int64
	LogStartOffset int64
	LogEndOffset   int64
	// Hidden: the range stopped before a batch without records (left by
	// compaction) that it does not send; a read from NextOffset skips it
	// and goes on.
	Hidden bool
}
