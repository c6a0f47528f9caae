package log

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
)

const (
	offsetIndexEntrySize = 8  // relative offset uint32 | position uint32
	timeIndexEntrySize   = 12 // timestamp int64 | relative offset uint32
)

type offsetEntry struct {
	rel uint32 // last offset of the indexed batch, minus the segment base
	pos uint32 // file position of the batch
}

type timeEntry struct {
	ts  int64
	rel uint32 // last offset of the batch that first reached ts, minus base
}

// index holds a segment's sparse offset and time indexes. While the segment
// is active (or being scanned) the entries are resident in memory and every
// new one is also written to its file; once the segment is inactive only the
// files are kept and lookups binary-search them with preads, so memory does
// not grow with the number of segments. The files are a cache: Open checks
// them against the segment and rewrites them if they disagree, so they are
// only synced when a segment stops being active and at Close.
type index struct {
	resident bool
	offsets  []offsetEntry // only while resident
	times    []timeEntry   // only while resident
	nOffsets int           // entries in the files when not resident
	nTimes   int
	offFile  *os.File
	timeFile *os.File
	buf      [timeIndexEntrySize]byte
}

// evict drops the in-memory entries; the files hold them.
func (x *index) evict() {
	x.nOffsets, x.nTimes = len(x.offsets), len(x.times)
	x.offsets, x.times = nil, nil
	x.resident = false
}

// lookup returns the position to start scanning from for rel: that of the
// last indexed batch whose last offset is <= rel, or 0.
func (x *index) lookup(rel uint32) (int64, error) {
	if x.resident {
		i := sort.Search(len(x.offsets), func(i int) bool { return x.offsets[i].rel > rel })
		if i == 0 {
			return 0, nil
		}
		return int64(x.offsets[i-1].pos), nil
	}
	var b [offsetIndexEntrySize]byte
	var err error
	i := sort.Search(x.nOffsets, func(i int) bool {
		if err != nil {
			return true
		}
		_, err = x.offFile.ReadAt(b[:], int64(i)*offsetIndexEntrySize)
		return err != nil || binary.BigEndian.Uint32(b[0:]) > rel
	})
	if err != nil || i == 0 {
		return 0, err
	}
	if _, err := x.offFile.ReadAt(b[:], int64(i-1)*offsetIndexEntrySize); err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint32(b[4:])), nil
}

// lookupTime returns the relative offset to start scanning from for the first
// batch with a timestamp >= ts: that of the last entry with a smaller
// timestamp, so that no batch reaching ts can lie before it.
func (x *index) lookupTime(ts int64) (uint32, bool, error) {
	if x.resident {
		i := sort.Search(len(x.times), func(i int) bool { return x.times[i].ts >= ts })
		if i == 0 {
			return 0, false, nil
		}
		return x.times[i-1].rel, true, nil
	}
	var b [timeIndexEntrySize]byte
	var err error
	i := sort.Search(x.nTimes, func(i int) bool {
		if err != nil {
			return true
		}
		_, err = x.timeFile.ReadAt(b[:], int64(i)*timeIndexEntrySize)
		return err != nil || int64(binary.BigEndian.Uint64(b[0:])) >= ts
	})
	if err != nil || i == 0 {
		return 0, false, err
	}
	if _, err := x.timeFile.ReadAt(b[:], int64(i-1)*timeIndexEntrySize); err != nil {
		return 0, false, err
	}
	return binary.BigEndian.Uint32(b[8:]), true, nil
}

func (x *index) appendOffset(e offsetEntry) error {
	binary.BigEndian.PutUint32(x.buf[0:], e.rel)
	binary.BigEndian.PutUint32(x.buf[4:], e.pos)
	if _, err := writeAt(x.offFile, x.buf[:offsetIndexEntrySize], int64(len(x.offsets))*offsetIndexEntrySize); err != nil {
		return err
	}
	x.offsets = append(x.offsets, e)
	return nil
}

// maybeAppendTime adds an entry only if ts is larger than the last one, as
// Kafka's TimeIndex.maybeAppend does, so timestamps stay strictly increasing.
func (x *index) maybeAppendTime(e timeEntry) error {
	if e.ts < 0 || (len(x.times) > 0 && e.ts <= x.times[len(x.times)-1].ts) {
		return nil
	}
	binary.BigEndian.PutUint64(x.buf[0:], uint64(e.ts))
	binary.BigEndian.PutUint32(x.buf[8:], e.rel)
	if _, err := writeAt(x.timeFile, x.buf[:timeIndexEntrySize], int64(len(x.times))*timeIndexEntrySize); err != nil {
		return err
	}
	x.times = append(x.times, e)
	return nil
}

// rewrite replaces both files' contents with the in-memory entries.
func (x *index) rewrite() error {
	ob := make([]byte, len(x.offsets)*offsetIndexEntrySize)
	for i, e := range x.offsets {
		binary.BigEndian.PutUint32(ob[i*8:], e.rel)
		binary.BigEndian.PutUint32(ob[i*8+4:], e.pos)
	}
	tb := make([]byte, len(x.times)*timeIndexEntrySize)
	for i, e := range x.times {
		binary.BigEndian.PutUint64(tb[i*12:], uint64(e.ts))
		binary.BigEndian.PutUint32(tb[i*12+8:], e.rel)
	}
	for _, w := range []struct {
		f *os.File
		b []byte
	}{{x.offFile, ob}, {x.timeFile, tb}} {
		if err := w.f.Truncate(0); err != nil {
			return err
		}
		if _, err := w.f.WriteAt(w.b, 0); err != nil {
			return err
		}
	}
	return nil
}

func (x *index) sync() error {
	if err := syncFile(x.offFile); err != nil {
		return err
	}
	return syncFile(x.timeFile)
}

func (x *index) close() error {
	err1 := x.offFile.Close()
	err2 := x.timeFile.Close()
	if err1 != nil {
		return err1
	}
	return err2
}

// readIndexFiles loads both index files as they are on disk. Shape errors
// (a size that is not a whole number of entries, a huge file) come back as an
// error; the caller then rebuilds instead of trusting the contents.
func readIndexFiles(off, tim *os.File, maxBytes int64) ([]offsetEntry, []timeEntry, error) {
	ob, err := readSmallFile(off, maxBytes)
	if err != nil {
		return nil, nil, err
	}
	tb, err := readSmallFile(tim, maxBytes)
	if err != nil {
		return nil, nil, err
	}
	if len(ob)%offsetIndexEntrySize != 0 || len(tb)%timeIndexEntrySize != 0 {
		return nil, nil, fmt.Errorf("index sizes %d and %d are not whole entries", len(ob), len(tb))
	}
	offs := make([]offsetEntry, len(ob)/offsetIndexEntrySize)
	for i := range offs {
		offs[i] = offsetEntry{rel: binary.BigEndian.Uint32(ob[i*8:]), pos: binary.BigEndian.Uint32(ob[i*8+4:])}
	}
	times := make([]timeEntry, len(tb)/timeIndexEntrySize)
	for i := range times {
		times[i] = timeEntry{ts: int64(binary.BigEndian.Uint64(tb[i*12:])), rel: binary.BigEndian.Uint32(tb[i*12+8:])}
	}
	return offs, times, nil
}

func readSmallFile(f *os.File, maxBytes int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxBytes {
		return nil, fmt.Errorf("index file %s has %d bytes, more than %d", f.Name(), st.Size(), maxBytes)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return b, nil
}

// floor returns the position of the last indexed batch that starts in
// (from, to] and whose last offset is below maxRel: every batch before it
// ends by to and lies wholly below maxRel, so a reader may skip to it
// without reading their headers. ok is false when no entry qualifies.
func (x *index) floor(from, to int64, maxRel int64) (pos int64, ok bool, err error) {
	bad := func(e offsetEntry) bool { return int64(e.pos) > to || int64(e.rel) >= maxRel }
	var e offsetEntry
	if x.resident {
		i := sort.Search(len(x.offsets), func(i int) bool { return bad(x.offsets[i]) })
		if i == 0 {
			return 0, false, nil
		}
		e = x.offsets[i-1]
	} else {
		var b [offsetIndexEntrySize]byte
		read := func(i int) (offsetEntry, error) {
			_, err := x.offFile.ReadAt(b[:], int64(i)*offsetIndexEntrySize)
			return offsetEntry{rel: binary.BigEndian.Uint32(b[0:]), pos: binary.BigEndian.Uint32(b[4:])}, err
		}
		i := sort.Search(x.nOffsets, func(i int) bool {
			if err != nil {
				return true
			}
			var e offsetEntry
			e, err = read(i)
			return err != nil || bad(e)
		})
		if err != nil || i == 0 {
			return 0, false, err
		}
		if e, err = read(i - 1); err != nil {
			return 0, false, err
		}
	}
	if int64(e.pos) <= from {
		return 0, false, nil
	}
	return int64(e.pos), true, nil
}
