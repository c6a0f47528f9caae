package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-broker/sluice/protocol"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

// segmentName is Kafka's file name for a segment: the base offset as 20
// digits, so that names sort like offsets.
func segmentName(base int64, suffix string) string {
	return fmt.Sprintf("%020d%s", base, suffix)
}

// parseSegmentName returns the base offset of a name made by segmentName.
func parseSegmentName(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return base, true
}

// segment is one .log file and its two indexes. Fields are guarded by the
// owning Log's mu; the files may be read (pread) under mu's read lock.
type segment struct {
	base    int64
	log     *os.File
	ref     *fileRef // log's holders; close releases the segment's own
	closed  bool
	size    int64 // bytes of whole batches; nothing past it is valid
	next    int64 // offset after the last batch, base when empty
	created time.Time

	// Kafka's rollingBasedTimestamp: the first batch's max timestamp, or -1.
	firstBatchMaxTs int64
	// Largest batch max timestamp so far and the batch that first reached it
	// (its base and last offset), -1 when there is none.
	maxTs       int64
	maxTsBase   int64
	maxTsLast   int64
	sinceIndex  int64 // bytes appended since the last offset index entry
	idx         index
	maxIdxBytes int64
}

func openSegment(dir string, base int64, truncate bool, now time.Time, maxIdxBytes int64) (*segment, error) {
	flags := os.O_RDWR | os.O_CREATE
	if truncate {
		flags |= os.O_TRUNC
	}
	var files [3]*os.File
	for i, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		f, err := os.OpenFile(filepath.Join(dir, segmentName(base, suf)), flags, 0o644)
		if err != nil {
			for _, g := range files[:i] {
				g.Close()
			}
			return nil, err
		}
		files[i] = f
	}
	s := &segment{base: base, log: files[0], ref: newFileRef(files[0]), next: base, created: now, maxIdxBytes: maxIdxBytes}
	s.idx.offFile, s.idx.timeFile = files[1], files[2]
	s.reset()
	return s, nil
}

// reset forgets everything learnt about the contents; scan refills it.
func (s *segment) reset() {
	s.size, s.next = 0, s.base
	s.firstBatchMaxTs, s.maxTs, s.maxTsBase, s.maxTsLast = -1, -1, -1, -1
	s.sinceIndex = 0
	s.idx.offsets, s.idx.times = s.idx.offsets[:0], s.idx.times[:0]
	s.idx.resident = true
}

// track accounts for a batch written at pos, in Kafka's order: the max
// timestamp first, then an index entry if more than interval bytes were
// appended since the last one. With write, new index entries also go to the
// files.
func (s *segment) track(pos int64, h *batchHeader, interval int, write bool) error {
	if s.firstBatchMaxTs < 0 && s.size == 0 {
		s.firstBatchMaxTs = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsBase, s.maxTsLast = h.MaxTimestamp, h.BaseOffset, h.LastOffset()
	}
	if s.sinceIndex > int64(interval) {
		oe := offsetEntry{rel: uint32(h.LastOffset() - s.base), pos: uint32(pos)}
		te := timeEntry{ts: s.maxTs, rel: uint32(s.maxTsLast - s.base)}
		if write {
			if err := s.idx.appendOffset(oe); err != nil {
				return err
			}
			if err := s.idx.maybeAppendTime(te); err != nil {
				return err
			}
		} else {
			s.idx.offsets = append(s.idx.offsets, oe)
			if te.ts >= 0 && (len(s.idx.times) == 0 || te.ts > s.idx.times[len(s.idx.times)-1].ts) {
				s.idx.times = append(s.idx.times, te)
			}
		}
		s.sinceIndex = 0
	}
	s.sinceIndex += h.Size
	s.size = pos + h.Size
	s.next = h.LastOffset() + 1
	return nil
}

// finalTimeEntry is the entry Kafka adds when a segment stops being active,
// so a time lookup never has to scan past the segment's largest timestamp.
func (s *segment) finalTimeEntry() timeEntry {
	return timeEntry{ts: s.maxTs, rel: uint32(s.maxTsLast - s.base)}
}

func (s *segment) indexFull() bool {
	return int64(len(s.idx.offsets)+1)*offsetIndexEntrySize > s.maxIdxBytes ||
		int64(len(s.idx.times)+1)*timeIndexEntrySize > s.maxIdxBytes
}

func (s *segment) sync() error {
	if err := syncFile(s.log); err != nil {
		return err
	}
	return s.idx.sync()
}

func (s *segment) close() error {
	if s.closed {
		return nil // the reference must not be released twice
	}
	s.closed = true
	// The file closes once no FileRange holds it any more.
	err1 := s.ref.release()
	err2 := s.idx.close()
	if err1 != nil {
		return err1
	}
	return err2
}

func (s *segment) remove(dir string) error {
	s.close()
	var first error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := os.Remove(filepath.Join(dir, segmentName(s.base, suf))); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = err
		}
	}
	return first
}

// scanResult says how far a scan found whole valid batches.
type scanResult struct {
	validEnd int64 // bytes of whole valid batches from the start
	fileSize int64
	bad      error // why the scan stopped before fileSize; nil if it did not
}

// scan walks the segment file from the start, rebuilding s's statistics and
// in-memory index entries (index files are not touched) and calling visit for
// every valid batch. With verifyCRC it reads every byte and checks each CRC;
// without, it reads only headers (for segments synced when they were rolled).
// minOffset is the smallest base offset the first batch may have. An I/O
// error is returned as err; damage is reported in scanResult.bad.
func (s *segment) scan(minOffset int64, verifyCRC bool, interval int, visit func(h *batchHeader)) (scanResult, error) {
	s.reset()
	st, err := s.log.Stat()
	if err != nil {
		return scanResult{}, err
	}
	res := scanResult{fileSize: st.Size()}
	if minOffset < s.base {
		minOffset = s.base
	}
	var br *bufio.Reader
	if verifyCRC {
		br = bufio.NewReaderSize(io.NewSectionReader(s.log, 0, res.fileSize), 1<<20)
	}
	var hb [protocol.BatchHeaderSize]byte
	var body []byte
	pos := int64(0)
	for pos < res.fileSize {
		if res.fileSize-pos < protocol.BatchHeaderSize {
			res.bad = fmt.Errorf("%w: torn batch header at position %d", ErrCorrupt, pos)
			break
		}
		if verifyCRC {
			if _, err := io.ReadFull(br, hb[:]); err != nil {
				return res, err
			}
		} else if _, err := s.log.ReadAt(hb[:], pos); err != nil {
			return res, err
		}
		h, err := parseHeader(hb[:])
		if err != nil {
			res.bad = fmt.Errorf("position %d: %w", pos, err)
			break
		}
		switch {
		case h.Size > res.fileSize-pos:
			res.bad = fmt.Errorf("%w: torn batch at position %d: %d bytes, %d left", ErrCorrupt, pos, h.Size, res.fileSize-pos)
		case pos+h.Size > math.MaxInt32:
			res.bad = fmt.Errorf("%w: batch at position %d ends past 2 GiB", ErrCorrupt, pos)
		case h.BaseOffset < minOffset || h.BaseOffset < s.next:
			res.bad = fmt.Errorf("%w: batch at position %d has base offset %d, expected at least %d", ErrCorrupt, pos, h.BaseOffset, max(minOffset, s.next))
		case h.LastOffset()-s.base > math.MaxInt32:
			res.bad = fmt.Errorf("%w: batch at position %d: offset %d too far from segment base %d", ErrCorrupt, pos, h.LastOffset(), s.base)
		}
		if res.bad != nil {
			break
		}
		if verifyCRC {
			if cap(body) < int(h.Size) {
				body = make([]byte, h.Size)
			}
			body = body[:h.Size]
			copy(body, hb[:])
			if _, err := io.ReadFull(br, body[protocol.BatchHeaderSize:]); err != nil {
				return res, err
			}
			if !checkCRC(body) {
				res.bad = fmt.Errorf("%w: CRC mismatch in batch at position %d (offset %d)", ErrCorrupt, pos, h.BaseOffset)
				break
			}
		}
		s.track(pos, &h, interval, false)
		if visit != nil {
			visit(&h)
		}
		pos += h.Size
	}
	res.validEnd = pos
	if res.bad == nil && pos != res.fileSize {
		res.bad = fmt.Errorf("%w: scan ended at %d of %d", ErrCorrupt, pos, res.fileSize)
	}
	if s.maxTs >= 0 {
		// The entry Kafka writes when a segment becomes inactive or is closed;
		// adding it here makes a rebuilt index equal the one left by Close.
		fe := s.finalTimeEntry()
		if len(s.idx.times) == 0 || fe.ts > s.idx.times[len(s.idx.times)-1].ts {
			s.idx.times = append(s.idx.times, fe)
		}
	}
	return res, nil
}
