package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/sluice-broker/sluice/internal/fsutil"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Files a raft replica keeps beside its log's segments (see doc.go).
const (
	indexFileName = "raft.index"
	stateFileName = "raft.state"
	confFileName  = "raft.conf"
	snapFileName  = "raft.snap"

	indexRecordSize = 32
	stateSlotSize   = 128
	stateMagic      = 0x534c5253 // "SLRS"
)

// entryMeta is what the index knows of one raft entry: its term and the
// Kafka offsets of the batch that stores it.
type entryMeta struct {
	index uint64
	term  uint64
	base  int64
	last  int64
	// raft marks raft's own entries (empty entries, configuration
	// changes): control batches that Fetch never returns.
	raft bool
}

// indexRaftBit is set in a record's offset-count field (lastOffset-
// baseOffset, which is never negative, so the bit is free) for raft's own
// entries. Records written before it existed lack it; raft.state's
// stateFlagIndexMarksRaft says whether every record was written with it.
const indexRaftBit = 1 << 31

func encodeIndexRecord(b []byte, m entryMeta) {
	binary.BigEndian.PutUint64(b[0:], m.index)
	binary.BigEndian.PutUint64(b[8:], m.term)
	binary.BigEndian.PutUint64(b[16:], uint64(m.base))
	d := uint32(m.last - m.base)
	if m.raft {
		d |= indexRaftBit
	}
	binary.BigEndian.PutUint32(b[24:], d)
	binary.BigEndian.PutUint32(b[28:], crc32.Checksum(b[:28], crc32c))
}

func decodeIndexRecord(b []byte) (entryMeta, bool) {
	if crc32.Checksum(b[:28], crc32c) != binary.BigEndian.Uint32(b[28:]) {
		return entryMeta{}, false
	}
	m := entryMeta{
		index: binary.BigEndian.Uint64(b[0:]),
		term:  binary.BigEndian.Uint64(b[8:]),
		base:  int64(binary.BigEndian.Uint64(b[16:])),
	}
	d := binary.BigEndian.Uint32(b[24:])
	m.raft = d&indexRaftBit != 0
	m.last = m.base + int64(d&^indexRaftBit)
	return m, true
}

// indexFile is the sidecar raft.index: fixed 32-byte records, one per raft
// entry in index order. Appends are not synced (the file can be rebuilt from
// the log's batch headers); truncations and rewrites are.
type indexFile struct {
	dir  string
	f    *os.File
	n    int64 // records in the file
	base uint64
}

func openIndexFile(dir string) (*indexFile, []entryMeta, error) {
	f, err := os.OpenFile(filepath.Join(dir, indexFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	var metas []entryMeta
	for p := 0; p+indexRecordSize <= len(data); p += indexRecordSize {
		m, ok := decodeIndexRecord(data[p : p+indexRecordSize])
		if !ok || (len(metas) > 0 && (m.index != metas[len(metas)-1].index+1 || m.base != metas[len(metas)-1].last+1)) {
			break
		}
		metas = append(metas, m)
	}
	x := &indexFile{dir: dir, f: f}
	if err := x.reset(metas); err != nil {
		f.Close()
		return nil, nil, err
	}
	return x, metas, nil
}

// append writes records after the last; not synced.
func (x *indexFile) append(ms []entryMeta) error {
	if len(ms) == 0 {
		return nil
	}
	if x.n == 0 {
		x.base = ms[0].index
	}
	buf := make([]byte, len(ms)*indexRecordSize)
	for i, m := range ms {
		encodeIndexRecord(buf[i*indexRecordSize:], m)
	}
	if _, err := x.f.WriteAt(buf, x.n*indexRecordSize); err != nil {
		return err
	}
	x.n += int64(len(ms))
	return nil
}

// truncateFrom drops the records of index i and later, durably.
func (x *indexFile) truncateFrom(i uint64) error {
	if x.n == 0 || i >= x.base+uint64(x.n) {
		return nil
	}
	keep := int64(0)
	if i > x.base {
		keep = int64(i - x.base)
	}
	if err := x.f.Truncate(keep * indexRecordSize); err != nil {
		return err
	}
	x.n = keep
	return x.f.Sync()
}

// reset replaces the whole file with ms, durably (temporary file, fsync,
// rename, directory fsync).
func (x *indexFile) reset(ms []entryMeta) error {
	buf := make([]byte, len(ms)*indexRecordSize)
	for i, m := range ms {
		encodeIndexRecord(buf[i*indexRecordSize:], m)
	}
	if err := fsutil.WriteFileSync(x.dir, indexFileName, buf); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(x.dir, indexFileName), os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if x.f != nil {
		x.f.Close()
	}
	x.f, x.n = f, int64(len(ms))
	if len(ms) > 0 {
		x.base = ms[0].index
	}
	return nil
}

func (x *indexFile) close() error { return x.f.Close() }

// persistentState is one slot of raft.state.
type persistentState struct {
	seq        uint64
	term, vote uint64
	commit     uint64
	applied    uint64
	// The snapshot the log starts after: the entry at snapIndex+1 is the
	// batch at snapOffset.
	snapIndex, snapTerm uint64
	snapOffset          int64
	// flags is the u16 after the version (0 in files written before it
	// was used; older binaries ignore it and write 0).
	flags uint16
}

// stateFlagIndexMarksRaft: every raft.index record carries indexRaftBit
// where it applies. Without it, Open classifies the entries once from the
// log's batch headers.
const stateFlagIndexMarksRaft = 1 << 0

// stateFile is raft.state: two 128-byte slots written alternately, each
// "SLRS" | version u16 | flags u16 | seq | term | vote | commit | applied |
// snapIndex | snapTerm | snapOffset (u64 each) | zero padding | crc32c of the
// slot before it (last 4 bytes). Every write is fdatasynced before it
// returns. The slot with the highest seq and a good CRC wins, so a torn
// write leaves the previous state readable.
type stateFile struct {
	f   *os.File
	cur persistentState
}

func openStateFile(dir string) (*stateFile, bool, error) {
	path := filepath.Join(dir, stateFileName)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, false, err
		}
		if err := fsutil.SyncDir(dir); err != nil {
			f.Close()
			return nil, false, err
		}
	}
	s := &stateFile{f: f}
	buf := make([]byte, 2*stateSlotSize)
	n, _ := f.ReadAt(buf, 0)
	found := false
	for i := 0; i+stateSlotSize <= n; i += stateSlotSize {
		st, ok := decodeState(buf[i : i+stateSlotSize])
		if ok && (!found || st.seq > s.cur.seq) {
			s.cur, found = st, true
		}
	}
	return s, found, nil
}

func decodeState(b []byte) (persistentState, bool) {
	var s persistentState
	if binary.BigEndian.Uint32(b) != stateMagic || binary.BigEndian.Uint16(b[4:]) != 1 {
		return s, false
	}
	if crc32.Checksum(b[:stateSlotSize-4], crc32c) != binary.BigEndian.Uint32(b[stateSlotSize-4:]) {
		return s, false
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[8+8*i:]) }
	s.seq, s.term, s.vote, s.commit, s.applied = u(0), u(1), u(2), u(3), u(4)
	s.snapIndex, s.snapTerm, s.snapOffset = u(5), u(6), int64(u(7))
	s.flags = binary.BigEndian.Uint16(b[6:])
	return s, true
}

// save writes st into the slot not holding the current state and syncs it.
func (s *stateFile) save(st persistentState) error {
	st.seq = s.cur.seq + 1
	b := make([]byte, stateSlotSize)
	binary.BigEndian.PutUint32(b, stateMagic)
	binary.BigEndian.PutUint16(b[4:], 1)
	binary.BigEndian.PutUint16(b[6:], st.flags)
	for i, v := range []uint64{st.seq, st.term, st.vote, st.commit, st.applied, st.snapIndex, st.snapTerm, uint64(st.snapOffset)} {
		binary.BigEndian.PutUint64(b[8+8*i:], v)
	}
	binary.BigEndian.PutUint32(b[stateSlotSize-4:], crc32.Checksum(b[:stateSlotSize-4], crc32c))
	if _, err := s.f.WriteAt(b, int64(st.seq%2)*stateSlotSize); err != nil {
		return err
	}
	if err := fdatasync(s.f); err != nil {
		return err
	}
	s.cur = st
	return nil
}

func (s *stateFile) close() error { return s.f.Close() }

// saveBlob writes a small file as crc32c u32 | bytes, durably.
func saveBlob(dir, name string, data []byte) error {
	b := binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, crc32c))
	return fsutil.WriteFileSync(dir, name, append(b, data...))
}

// loadBlob reads a file saveBlob wrote; os.ErrNotExist if there is none.
func loadBlob(dir, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	if len(b) < 4 || crc32.Checksum(b[4:], crc32c) != binary.BigEndian.Uint32(b) {
		return nil, fmt.Errorf("replica: %s is damaged", name)
	}
	return b[4:], nil
}

func saveConfState(dir string, cs *raftpb.ConfState) error {
	b, err := proto.Marshal(cs)
	if err != nil {
		return err
	}
	return saveBlob(dir, confFileName, b)
}

func loadConfState(dir string) (*raftpb.ConfState, error) {
	b, err := loadBlob(dir, confFileName)
	if err != nil {
		return nil, err
	}
	cs := &raftpb.ConfState{}
	if err := proto.Unmarshal(b, cs); err != nil {
		return nil, err
	}
	return cs, nil
}

func fdatasync(f *os.File) error { return f.Sync() }
