package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"time"
)

// The clean-shutdown snapshot is the content of cleanShutdownFile. Close
// writes it after every segment is synced, so that Open can skip walking the
// batch headers of every segment (Kafka's producer-state .snapshot files and
// leader-epoch-checkpoint play this part there). Open trusts it only if its
// CRC is right and every segment file it lists exists with the recorded size
// and no other does; otherwise Open falls back to the full recovery walk,
// treating the shutdown as unclean. Correctness never depends on it.
//
//	"SLCS" | version uint16 (4) | crc uint32 (CRC-32C of everything after it)
//	segments uint32, each:  base, size, next, firstBatchMaxTs, maxTs,
//	                        maxTsBase, maxTsLast int64
//	epochs uint32, each:    epoch int32 | start int64
//	producers uint32, each: id int64 | epoch int16 | coordinator epoch int32
//	                        (version 3) | last timestamp int64 (version 4) |
//	                        batches uint8, each:
//	                        firstSeq, lastSeq int32 | firstOffset, lastOffset int64
//	open txns uint32, each: producer id int64 | first offset int64 (version 2)
//	aborted uint32, each:   producer id, first offset, marker offset int64 (version 2)
//
// A snapshot of an earlier version (1: before transactions, 2: before
// the producers' coordinator epochs, 3: before their last timestamps,
// which producer expiry needs) is not used: Open walks the log
// instead and finds the same state.
const (
	snapshotMagic   = "SLCS"
	snapshotVersion = 4
)

var errSnapshot = errors.New("log: clean-shutdown snapshot unusable")

func (l *Log) encodeSnapshotLocked() []byte {
	b := []byte(snapshotMagic)
	b = binary.BigEndian.AppendUint16(b, snapshotVersion)
	b = append(b, 0, 0, 0, 0) // CRC, filled in below
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.segs)))
	for _, s := range l.segs {
		for _, v := range []int64{s.base, s.size, s.next, s.firstBatchMaxTs, s.maxTs, s.maxTsBase, s.maxTsLast} {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.epochs.entries)))
	for _, e := range l.epochs.entries {
		b = binary.BigEndian.AppendUint32(b, uint32(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.start))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.producers)))
	for id, p := range l.producers {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(p.Epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(p.CoordEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(p.LastTimestamp))
		b = append(b, byte(len(p.Batches)))
		for _, m := range p.Batches {
			b = binary.BigEndian.AppendUint32(b, uint32(m.FirstSequence))
			b = binary.BigEndian.AppendUint32(b, uint32(m.LastSequence))
			b = binary.BigEndian.AppendUint64(b, uint64(m.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.LastOffset))
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.txns.ongoing)))
	for id, first := range l.txns.ongoing {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint64(b, uint64(first))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.txns.aborted)))
	for _, a := range l.txns.aborted {
		for _, v := range []int64{a.ProducerID, a.FirstOffset, a.LastOffset} {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
	}
	binary.BigEndian.PutUint32(b[6:], crc32.Checksum(b[10:], castagnoli))
	return b
}

// snapReader reads big-endian fields and remembers the first short read.
type snapReader struct {
	b   []byte
	bad bool
}

func (r *snapReader) next(n int) []byte {
	if r.bad || len(r.b) < n {
		r.bad = true
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *snapReader) u8() uint8   { return r.next(1)[0] }
func (r *snapReader) i16() int16  { return int16(binary.BigEndian.Uint16(r.next(2))) }
func (r *snapReader) i32() int32  { return int32(binary.BigEndian.Uint32(r.next(4))) }
func (r *snapReader) u32() uint32 { return binary.BigEndian.Uint32(r.next(4)) }
func (r *snapReader) i64() int64  { return int64(binary.BigEndian.Uint64(r.next(8))) }

// loadSnapshot opens the segments listed by a clean-shutdown snapshot
// without walking them. On any mismatch it closes what it opened, leaves l
// as it found it and returns an error wrapping errSnapshot; I/O errors on
// files it needs are returned as they are only if they are not about the
// snapshot itself.
func (l *Log) loadSnapshot(bases []int64, now time.Time) error {
	data, err := os.ReadFile(filepath.Join(l.dir, cleanShutdownFile))
	if err != nil {
		return fmt.Errorf("%w: %w", errSnapshot, err)
	}
	if len(data) < 10 || string(data[:4]) != snapshotMagic ||
		binary.BigEndian.Uint16(data[4:]) != snapshotVersion ||
		binary.BigEndian.Uint32(data[6:]) != crc32.Checksum(data[10:], castagnoli) {
		return fmt.Errorf("%w: bad header or CRC", errSnapshot)
	}
	r := &snapReader{b: data[10:]}
	nsegs := int(r.u32())
	if r.bad || nsegs != len(bases) || nsegs == 0 {
		return fmt.Errorf("%w: lists %d segments, directory has %d", errSnapshot, nsegs, len(bases))
	}
	var segs []*segment
	fail := func(format string, args ...any) error {
		for _, s := range segs {
			s.close()
		}
		return fmt.Errorf("%w: %s", errSnapshot, fmt.Sprintf(format, args...))
	}
	prevNext := int64(0)
	for i := 0; i < nsegs; i++ {
		var v [7]int64
		for j := range v {
			v[j] = r.i64()
		}
		if r.bad || v[0] != bases[i] || v[1] < 0 || v[2] < v[0] || v[0] < prevNext {
			return fail("segment %d entry does not match", i)
		}
		s, err := openSegment(l.dir, v[0], false, now, int64(l.cfg.SegmentIndexBytes))
		if err != nil {
			return fail("open segment %d: %v", v[0], err)
		}
		segs = append(segs, s)
		st, err := s.log.Stat()
		if err != nil || st.Size() != v[1] {
			return fail("segment %d size changed", v[0])
		}
		s.size, s.next, s.firstBatchMaxTs, s.maxTs, s.maxTsBase, s.maxTsLast = v[1], v[2], v[3], v[4], v[5], v[6]
		prevNext = s.next
		if err := l.loadIndexFast(s, i == nsegs-1); err != nil {
			return fail("segment %d index: %v", v[0], err)
		}
	}
	var epochs epochCache
	for n := int(r.u32()); n > 0 && !r.bad; n-- {
		e := epochEntry{epoch: r.i32(), start: r.i64()}
		if k := len(epochs.entries); k > 0 && (e.epoch <= epochs.entries[k-1].epoch || e.start < epochs.entries[k-1].start) {
			return fail("epochs out of order")
		}
		epochs.entries = append(epochs.entries, e)
	}
	prods := producers{}
	for n := int(r.u32()); n > 0 && !r.bad; n-- {
		id, epoch, coordEpoch, ts, nb := r.i64(), r.i16(), r.i32(), r.i64(), int(r.u8())
		if nb > ProducerWindow {
			return fail("producer %d has %d batches", id, nb)
		}
		p := &ProducerEntry{Epoch: epoch, CoordEpoch: coordEpoch, LastTimestamp: ts}
		for ; nb > 0; nb-- {
			p.Batches = append(p.Batches, ProducerBatch{FirstSequence: r.i32(), LastSequence: r.i32(), FirstOffset: r.i64(), LastOffset: r.i64()})
		}
		prods[id] = p
	}
	txns := newTxnState()
	for n := int(r.u32()); n > 0 && !r.bad; n-- {
		id := r.i64()
		txns.ongoing[id] = r.i64()
	}
	for n := int(r.u32()); n > 0 && !r.bad; n-- {
		a := AbortedTxn{ProducerID: r.i64(), FirstOffset: r.i64(), LastOffset: r.i64()}
		if k := len(txns.aborted); k > 0 && a.LastOffset <= txns.aborted[k-1].LastOffset {
			return fail("aborted transactions out of order")
		}
		txns.aborted = append(txns.aborted, a)
	}
	if r.bad || len(r.b) != 0 {
		return fail("truncated or trailing bytes")
	}
	l.segs, l.producers, l.epochs, l.txns = segs, prods, epochs, txns
	return nil
}

// loadIndexFast trusts a cleanly closed segment's index files after cheap
// shape checks; only the active segment's entries are loaded into memory.
func (l *Log) loadIndexFast(s *segment, active bool) error {
	if !active {
		ost, err := s.idx.offFile.Stat()
		if err != nil {
			return err
		}
		tst, err := s.idx.timeFile.Stat()
		if err != nil {
			return err
		}
		if ost.Size()%offsetIndexEntrySize != 0 || tst.Size()%timeIndexEntrySize != 0 {
			return errors.New("index sizes are not whole entries")
		}
		s.idx.resident = false
		s.idx.nOffsets, s.idx.nTimes = int(ost.Size()/offsetIndexEntrySize), int(tst.Size()/timeIndexEntrySize)
		return nil
	}
	offs, times, err := readIndexFiles(s.idx.offFile, s.idx.timeFile, int64(l.cfg.SegmentIndexBytes)+1<<20)
	if err != nil {
		return err
	}
	for i, e := range offs {
		if int64(e.pos) >= s.size || int64(e.rel) >= s.next-s.base || (i > 0 && (e.rel <= offs[i-1].rel || e.pos <= offs[i-1].pos)) {
			return errors.New("offset index entries out of range or order")
		}
	}
	for i, e := range times {
		if int64(e.rel) >= s.next-s.base || (i > 0 && e.ts <= times[i-1].ts) {
			return errors.New("time index entries out of range or order")
		}
	}
	s.idx.offsets, s.idx.times, s.idx.resident = offs, times, true
	s.sinceIndex = s.size
	if n := len(offs); n > 0 {
		s.sinceIndex = s.size - int64(offs[n-1].pos)
	}
	return nil
}
