package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// Files a raft replica keeps beside its log's segments (see doc.go).
const (
	indexFileName = "raft.index"
	stateFileName = "raft.state"
	confFileName  = "raft.conf"
	snapFileName  = "raft.snap"
	// forcedFileName holds the index up to which a forced configuration
	// (raft_failover.go) supersedes the log's configuration changes.
	forcedFileName = "raft.forced"
	ccFileName     = "raft.confs"
	// joiningFileName marks a replica opened joining without state that
	// has not yet taken the group's configuration (Replica.joinWait).
	joiningFileName = "raft.joining"

	indexRecordSize = 32
	stateSlotSize   = 128
	stateMagic      = 0x534c5253 // "SLRS"
)

// entryMeta is what the index knows of one raft entry: its term, its kind
// and the Kafka offsets of the batch that stores it. raft's own entries
// (kind other than kindData) have no batch and take no offset: base is the
// offset the next data entry gets and last is base-1, so the offsets of
// consecutive entries stay contiguous (base = previous last + 1) either way.
type entryMeta struct {
	index uint64
	term  uint64
	base  int64
	last  int64
	kind  entryKind
}

// entryKind says what a raft entry holds.
type entryKind uint8

const (
	kindData         entryKind = iota // a record batch of the log
	kindNoop                          // raft's empty entry (a new leader's first)
	kindConfChange                    // raftpb.ConfChange, data in raft.confs
	kindConfChangeV2                  // raftpb.ConfChangeV2, data in raft.confs
	kindCommand                       // a command entry (raft_command.go), data in raft.confs
)

// raft says whether the entry is one of raft's own, with no batch.
func (m entryMeta) raft() bool { return m.kind != kindData }

// hasData says whether the entry's data is kept in raft.confs: every one
// of raft's own entries but the empty one.
func (m entryMeta) hasData() bool { return m.raft() && m.kind != kindNoop }

// indexRaftBit is set in a record's offset-count field (lastOffset-
// baseOffset, never negative for a batch, so the bit is free) for raft's
// own entries; the low byte then holds the entry's kind and the record
// spans no offset.
const indexRaftBit = 1 << 31

func encodeIndexRecord(b []byte, m entryMeta) {
	binary.BigEndian.PutUint64(b[0:], m.index)
	binary.BigEndian.PutUint64(b[8:], m.term)
	binary.BigEndian.PutUint64(b[16:], uint64(m.base))
	d := uint32(m.last - m.base)
	if m.raft() {
		d = indexRaftBit | uint32(m.kind)
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
	if d&indexRaftBit == 0 {
		m.last = m.base + int64(d)
		return m, true
	}
	m.kind, m.last = entryKind(d&0xff), m.base-1
	if m.kind == kindData || m.kind > kindCommand || d&^(indexRaftBit|0xff) != 0 {
		return entryMeta{}, false
	}
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
	return fsutil.Fsync(x.f)
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

// read returns the records of entries [lo, hi), which the file must hold
// (written, synced or not).
func (x *indexFile) read(lo, hi uint64) ([]entryMeta, error) {
	if lo < x.base || hi > x.base+uint64(x.n) || lo >= hi {
		return nil, fmt.Errorf("replica: %s holds entries %d..%d, not %d..%d", indexFileName, x.base, x.base+uint64(x.n)-1, lo, hi-1)
	}
	buf := make([]byte, (hi-lo)*indexRecordSize)
	if _, err := x.f.ReadAt(buf, int64(lo-x.base)*indexRecordSize); err != nil {
		return nil, fmt.Errorf("replica: reading %s: %w", indexFileName, err)
	}
	out := make([]entryMeta, hi-lo)
	for k := range out {
		m, ok := decodeIndexRecord(buf[k*indexRecordSize:])
		if !ok || m.index != lo+uint64(k) {
			return nil, fmt.Errorf("replica: %s record of entry %d is damaged", indexFileName, lo+uint64(k))
		}
		out[k] = m
	}
	return out, nil
}

func (x *indexFile) sync() error { return fsutil.Fsync(x.f) }

func (x *indexFile) close() error { return x.f.Close() }

// ccFile is raft.confs: the data of the configuration-change and command
// entries raft.index lists, which have no batch in the log. Each record is
// index u64 | term u64 | length u32 | data | crc32c u32 of what precedes it
// in the record. Appends are synced before the index records naming them
// are written, so a record the index names is always there; records the
// index does not name (a crash between the two, a truncated tail) are
// dropped at Open. The file is small (one record per membership change or
// DeleteRecords since the last snapshot) and held in memory.
type ccFile struct {
	dir  string
	f    *os.File
	recs []ccRecord // in index order
	size int64
}

type ccRecord struct {
	index, term uint64
	data        []byte
}

const ccHeaderSize = 20

func encodeCCRecord(b []byte, r ccRecord) []byte {
	p := len(b)
	b = binary.BigEndian.AppendUint64(b, r.index)
	b = binary.BigEndian.AppendUint64(b, r.term)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.data)))
	b = append(b, r.data...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[p:], crc32c))
}

func openCCFile(dir string) (*ccFile, error) {
	f, err := os.OpenFile(filepath.Join(dir, ccFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	c := &ccFile{dir: dir, f: f}
	p := 0
	for p+ccHeaderSize+4 <= len(data) {
		n := int(binary.BigEndian.Uint32(data[p+16:]))
		end := p + ccHeaderSize + n + 4
		if n > len(data) || end > len(data) || crc32.Checksum(data[p:end-4], crc32c) != binary.BigEndian.Uint32(data[end-4:]) {
			break
		}
		r := ccRecord{index: binary.BigEndian.Uint64(data[p:]), term: binary.BigEndian.Uint64(data[p+8:])}
		if k := len(c.recs); k > 0 && r.index <= c.recs[k-1].index {
			break
		}
		r.data = append([]byte(nil), data[p+ccHeaderSize:end-4]...)
		c.recs = append(c.recs, r)
		p = end
	}
	c.size = int64(p)
	return c, nil
}

// append adds records after the last and syncs them.
func (c *ccFile) append(rs []ccRecord) error {
	if len(rs) == 0 {
		return nil
	}
	var b []byte
	for _, r := range rs {
		b = encodeCCRecord(b, r)
	}
	if _, err := c.f.WriteAt(b, c.size); err != nil {
		return err
	}
	if err := fsutil.Fdatasync(c.f); err != nil {
		return err
	}
	c.size += int64(len(b))
	c.recs = append(c.recs, rs...)
	return nil
}

// get returns the data of the conf change entry index of term term.
func (c *ccFile) get(index, term uint64) ([]byte, bool) {
	for i := len(c.recs) - 1; i >= 0; i-- {
		if r := c.recs[i]; r.index == index {
			return r.data, r.term == term
		}
	}
	return nil, false
}

// keep rewrites the file with the records keep accepts, durably, if that
// drops any.
func (c *ccFile) keep(keep func(ccRecord) bool) error {
	var rest []ccRecord
	for _, r := range c.recs {
		if keep(r) {
			rest = append(rest, r)
		}
	}
	if len(rest) == len(c.recs) {
		return nil
	}
	var b []byte
	for _, r := range rest {
		b = encodeCCRecord(b, r)
	}
	if err := fsutil.WriteFileSync(c.dir, ccFileName, b); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(c.dir, ccFileName), os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	c.f.Close()
	c.f, c.recs, c.size = f, rest, int64(len(b))
	return nil
}

func (c *ccFile) close() error { return c.f.Close() }

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
	// lastRaft is the index of the last of raft's own entries stored (0
	// for none), saved once its record is durable: Open refuses an
	// index that lost it (raft.index records of raft's own entries
	// cannot be rebuilt from the log).
	lastRaft uint64
}

// State flags. Bit 0 was set by earlier versions, whose raft.index marked
// raft's own entries among entries that all took Kafka offsets.
// stateFlagDenseOffsets marks a group whose raft entries take no offset
// (doc.go, "Offsets"): every group created by this version; Open refuses
// a directory without it.
const stateFlagDenseOffsets = 1 << 1

// stateFile is raft.state: two 128-byte slots written alternately, each
// "SLRS" | version u16 | flags u16 | seq | term | vote | commit | applied |
// snapIndex | snapTerm | snapOffset | lastRaft (u64 each) | zero padding | crc32c of the
// slot before it (last 4 bytes). The slot with the highest seq and a good
// CRC wins. Every write goes to the slot that does not hold the last
// synced state, so a torn write, or one that a power cut never let reach
// the disk, leaves that state readable. save fdatasyncs before it returns;
// saveUnsynced (a commit index that advanced) leaves the write to the
// page cache: it survives a kill, not a power cut.
type stateFile struct {
	f   *os.File
	cur persistentState
	// synced is the slot holding the last synced state (the one read at
	// open, which openStateFile syncs).
	synced int
}

func openStateFile(dir string) (*stateFile, bool, error) {
	path := filepath.Join(dir, stateFileName)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := fsutil.Fsync(f); err != nil {
			f.Close()
			return nil, false, err
		}
		if err := fsutil.SyncDir(dir); err != nil {
			f.Close()
			return nil, false, err
		}
	}
	s := &stateFile{f: f, synced: 1}
	buf := make([]byte, 2*stateSlotSize)
	n, _ := f.ReadAt(buf, 0)
	found := false
	for i := 0; i+stateSlotSize <= n; i += stateSlotSize {
		st, ok := decodeState(buf[i : i+stateSlotSize])
		if ok && (!found || st.seq > s.cur.seq) {
			s.cur, s.synced, found = st, i/stateSlotSize, true
		}
	}
	if found {
		// After a kill the winning slot may be an unsynced write still in
		// the page cache: make it the synced state the next writes keep.
		if err := fsutil.Fdatasync(f); err != nil {
			f.Close()
			return nil, false, err
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
	s.lastRaft = u(8)
	s.flags = binary.BigEndian.Uint16(b[6:])
	return s, true
}

// save writes st into the slot not holding the last synced state and
// syncs it.
func (s *stateFile) save(st persistentState) error {
	if err := s.write(st); err != nil {
		return err
	}
	if err := fsutil.Fdatasync(s.f); err != nil {
		return err
	}
	s.synced = 1 - s.synced
	return nil
}

// saveUnsynced writes st like save without syncing it: the slot it goes to
// is the one the next save writes again, so the last synced state stays
// whole whatever becomes of this write.
func (s *stateFile) saveUnsynced(st persistentState) error {
	return s.write(st)
}

func (s *stateFile) write(st persistentState) error {
	st.seq = s.cur.seq + 1
	b := make([]byte, stateSlotSize)
	binary.BigEndian.PutUint32(b, stateMagic)
	binary.BigEndian.PutUint16(b[4:], 1)
	binary.BigEndian.PutUint16(b[6:], st.flags)
	for i, v := range []uint64{st.seq, st.term, st.vote, st.commit, st.applied, st.snapIndex, st.snapTerm, uint64(st.snapOffset), st.lastRaft} {
		binary.BigEndian.PutUint64(b[8+8*i:], v)
	}
	binary.BigEndian.PutUint32(b[stateSlotSize-4:], crc32.Checksum(b[:stateSlotSize-4], crc32c))
	if _, err := s.f.WriteAt(b, int64(1-s.synced)*stateSlotSize); err != nil {
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

// confIndexField is the protobuf field number under which raft.conf
// carries, after the ConfState, the index of the log entry the
// configuration is as of (the last configuration change applied, or the
// snapshot or forced configuration it came from). ConfState does not use
// it; a binary that does not know it keeps it as an unknown field.
const confIndexField = 1000

// saveConfState writes cs, the configuration as of log entry index.
// Written in one file with it, so that a restart, which hands out again
// the committed entries after the last saved applied index, knows which
// configuration changes cs already holds (Replica.applyConfChangeLocked).
func saveConfState(dir string, cs *raftpb.ConfState, index uint64) error {
	b, err := proto.Marshal(cs)
	if err != nil {
		return err
	}
	b = protowire.AppendTag(b, confIndexField, protowire.VarintType)
	b = protowire.AppendVarint(b, index)
	return saveBlob(dir, confFileName, b)
}

// loadConfState reads raft.conf: the configuration and the index it is as
// of (0 in files written before the index was kept).
func loadConfState(dir string) (*raftpb.ConfState, uint64, error) {
	b, err := loadBlob(dir, confFileName)
	if err != nil {
		return nil, 0, err
	}
	cs := &raftpb.ConfState{}
	if err := proto.Unmarshal(b, cs); err != nil {
		return nil, 0, err
	}
	var index uint64
	unknown := cs.ProtoReflect().GetUnknown()
	for len(unknown) > 0 {
		num, typ, n := protowire.ConsumeTag(unknown)
		if n < 0 {
			return nil, 0, fmt.Errorf("replica: %s: %w", confFileName, protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, unknown[n:])
		if m < 0 {
			return nil, 0, fmt.Errorf("replica: %s: %w", confFileName, protowire.ParseError(m))
		}
		if num == confIndexField && typ == protowire.VarintType {
			index, _ = protowire.ConsumeVarint(unknown[n:])
		}
		unknown = unknown[n+m:]
	}
	cs.ProtoReflect().SetUnknown(nil)
	return cs, index, nil
}

// clearJoinWait ends joinWait: this replica has the group's configuration
// (a configuration change naming it, or a snapshot). Its mark on disk goes
// first, durably, before what applying the change persists: a mark found
// at open means the change was not applied, and is applied again. If the
// mark cannot be removed the replica waits again after a restart, until
// the group's next change or snapshot reaches it (logged).
func (r *Replica) clearJoinWait() {
	r.joinWait = false
	if err := os.Remove(filepath.Join(r.dir, joiningFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.lg.Warn().Err(err).Msg("removing the joining mark")
		return
	}
	if err := fsutil.SyncDir(r.dir); err != nil {
		r.lg.Warn().Err(err).Msg("removing the joining mark")
	}
}
