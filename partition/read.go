package partition

import (
	"io"
	"os"
)

// AppendResult reports where a batch went.
type AppendResult struct {
	BaseOffset, LastOffset int64
	// Duplicate: the batch was a retry of one already in the log; nothing
	// was written and the offsets are the original ones.
	Duplicate bool
}

// ReadResult is the answer to Read.
type ReadResult struct {
	// Data holds whole record batches exactly as stored; the caller owns it.
	Data []byte
	// NextOffset is the offset after the last batch in Data, or the requested
	// offset when Data is empty.
	NextOffset     int64
	LogStartOffset int64
	LogEndOffset   int64
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

// FileHolder keeps a segment file open for the FileRanges read from it
// (the log counts its holders): File is the open file, Release lets go of
// one hold.
type FileHolder interface {
	File() *os.File
	Release() error
}

// FileRange is a byte range of a segment file holding whole record batches,
// exactly as stored; the file stays open until Release. It is what a Fetch
// response sends with sendfile instead of copying the bytes through memory.
type FileRange struct {
	h   FileHolder
	mem []byte // the bytes of an in-memory range (NewMemRange), h nil
	Pos int64  // start in the file
	Len int64  // bytes; 0 for an empty range, which needs no Release
}

// NewMemRange is a range over bytes in memory, not in a file: what a
// shared-storage partition serves from its cache. It is sent by copying;
// b must not change until the range is released.
func NewMemRange(b []byte) FileRange {
	return FileRange{mem: b, Len: int64(len(b))}
}

// InMemory says the range is bytes in memory (NewMemRange), with no file.
func (r *FileRange) InMemory() bool { return r.mem != nil }

// NewFileRange is the range of n bytes at pos of the file h holds; the
// range takes over one hold of h, given back by Release.
func NewFileRange(h FileHolder, pos, n int64) FileRange {
	return FileRange{h: h, Pos: pos, Len: n}
}

// File is the open segment file; valid until Release. Read it with ReadAt
// or sendfile at an explicit offset only: its seek position is shared.
// An in-memory range has none (nil).
func (r *FileRange) File() *os.File {
	if r.h == nil {
		return nil
	}
	return r.h.File()
}

// Release lets go of the file. It is safe to call more than once and on an
// empty range.
func (r *FileRange) Release() {
	if r.h != nil {
		r.h.Release()
		r.h = nil
	}
	r.mem = nil
}

// ReadAt reads from the range (offsets relative to its start), for
// writers that cannot use sendfile and for tests.
func (r *FileRange) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.Len {
		return 0, io.EOF
	}
	if r.mem != nil {
		n := copy(p, r.mem[off:r.Len])
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	if rem := r.Len - off; int64(len(p)) > rem {
		p = p[:rem]
		n, err := r.h.File().ReadAt(p, r.Pos+off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return r.h.File().ReadAt(p, r.Pos+off)
}

// Bytes reads the whole range into a fresh buffer.
func (r *FileRange) Bytes() ([]byte, error) {
	if r.Len == 0 {
		return []byte{}, nil
	}
	b := make([]byte, r.Len)
	if r.mem != nil {
		copy(b, r.mem)
		return b, nil
	}
	if _, err := r.h.File().ReadAt(b, r.Pos); err != nil {
		return nil, err
	}
	return b, nil
}

// AbortedTxn is one aborted transaction of a partition: the producer, the
// offset of its first batch, and the offset of its ABORT marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// ProducerState is what the log knows about one idempotent producer.
type ProducerState struct {
	Epoch int16
	// LastSequence and LastOffset are those of the producer's last batch in
	// the current epoch, -1 if it has written none in this epoch.
	LastSequence int32
	LastOffset   int64
	// Batches are the producer's retained batches of the current epoch,
	// oldest first, at most five: what a retry is recognised against.
	Batches []ProducerBatch
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// transaction marker in this log, -1 before one.
	CoordinatorEpoch int32
	// LastTimestamp is the max timestamp of the producer's last batch in
	// this log (data or marker), what producer expiry compares.
	LastTimestamp int64
}

// ProducerBatch is one retained batch of an idempotent producer.
type ProducerBatch struct {
	FirstSequence, LastSequence int32
	FirstOffset, LastOffset     int64
}

// ActiveProducer is one idempotent producer the log holds state for, as
// DescribeProducers reports it.
type ActiveProducer struct {
	ID    int64
	Epoch int16
	// LastSequence is the last sequence of the producer's last batch in
	// its current epoch, -1 if none.
	LastSequence int32
	// LastTimestamp is the max timestamp of the producer's last batch,
	// data or marker (Kafka's ProducerStateEntry.lastTimestamp).
	LastTimestamp int64
	// CurrentTxnStartOffset is the first offset of the producer's open
	// transaction in this log, -1 if none.
	CurrentTxnStartOffset int64
	// CoordinatorEpoch is the coordinator epoch of the producer's last
	// transaction marker in this log, -1 if none.
	CoordinatorEpoch int32
}
