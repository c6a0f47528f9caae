package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/log"
)

// raftStorage is raft.Storage over the partition log and the raft.index
// sidecar: entry i (snapIndex < i <= lastIndex) is the batch at metas[i-
// snapIndex-1].base in the log, or, for raft's own entries, no batch at
// all (an empty entry, or a configuration change whose data raft.confs
// keeps). Nothing else keeps entry bytes.
//
// Raft calls the Storage methods with the replica's raftMu held; the write
// methods are called by the replica with raftMu held too. mu guards the
// fields against the few readers outside raftMu (offset lookups for the high
// watermark and snapshots built for the transport).
type raftStorage struct {
	dir string
	log *log.Log
	lg  zerolog.Logger

	mu    sync.Mutex
	idx   *indexFile
	ccs   *ccFile
	state *stateFile
	hs    *raftpb.HardState
	cs    *raftpb.ConfState
	// metas holds the records of entries memFrom.. (the newest): those
	// between snapIndex and memFrom are read from raft.index when asked
	// for (metaAtLocked). Records leave memory with the entry cache's
	// rule (applied here, held by every replica) or when the host's
	// budget is over (evictLocked), so the index in memory follows what is
	// in flight, not the retention; metaBytes of it count in the budget.
	metas     []entryMeta
	memFrom   uint64
	metaBytes int
	// snapIndex/snapTerm/snapOffset mirror state.cur: the entry at
	// snapIndex+1 is the batch at snapOffset.
	snapIndex, snapTerm uint64
	snapOffset          int64
	// lastRaft is the index of the last of raft's own entries stored;
	// saveRaftMark persists it (persistentState.lastRaft).
	lastRaft uint64
	// durIdx is the last index known durable here (the replica raises it
	// when the log's fsync covers an append). A persisted commit index
	// never passes it: entries are made durable after they are stored
	// (doc.go, "Ready loop"), and Open refuses a commit past the log.
	durIdx uint64
	// forcedAt: the configuration was forced (an async promotion,
	// raft_failover.go) as of this index; the configuration changes of the
	// log up to it are superseded and not applied.
	forcedAt uint64
	// confIndex: cs (and raft.conf) is the configuration as of this
	// index; the configuration changes of the log up to it are in it
	// already (raft hands them out again after a restart: the applied
	// index is saved only at checkpoints) and are not applied again.
	confIndex uint64
	// truncated, when set, counts the data offsets a divergent tail cut
	// from the log (Host.TruncatedRecords).
	truncated *atomic.Int64

	producers producerTable
	snapProds []byte // producer table of the last installed snapshot
	// prodExpiry is producer.id.expiration.ms (0: producers never
	// expire); set once after openStorage.
	prodExpiry time.Duration

	// cache holds the most recently stored entries (contiguous, ending at
	// the last index), as CockroachDB's raft entry cache does, so raft's
	// reads of fresh entries (appends to followers, committed entries)
	// need no pread. Entries are never mutated once stored. Entries every
	// replica has and this one has applied are dropped (cacheTrimLocked),
	// and all groups of a host share one byte budget, so memory follows
	// what is in flight, not the partition count.
	cache      []*raftpb.Entry
	cacheBytes int
	budget     *cacheBudget
	// solo: the group has no member but this leader, so a cached
	// reference (raft_ref.go) may be served; otherwise Entries reads
	// what a reference names from the log.
	solo bool

	savedAt time.Time // last save of raft.state by saveHardState
}

const (
	maxCacheEntries = 512
	maxCacheBytes   = 8 << 20
)

// cacheBudget is the entry cache and index record bytes every group of a
// host may hold together (raft.entry.cache.max.bytes). A group over it drops its own
// oldest entries, keeping its newest, so a busy group cannot keep the
// others' recent entries out and idle groups hold nothing once their
// entries are everywhere (cacheTrimLocked).
type cacheBudget struct {
	max  int64
	used atomic.Int64
}

func (b *cacheBudget) over() bool { return b != nil && b.used.Load() > b.max }

func (b *cacheBudget) add(n int) {
	if b != nil {
		b.used.Add(int64(n))
	}
}

func (s *raftStorage) cacheAddLocked(e *raftpb.Entry) {
	s.cache = append(s.cache, e)
	s.cacheBytes += len(e.GetData())
	s.budget.add(len(e.GetData()))
	for len(s.cache) > maxCacheEntries || (len(s.cache) > 1 && (s.cacheBytes > maxCacheBytes || s.budget.over())) {
		s.cacheDropFirstLocked()
	}
}

func (s *raftStorage) cacheDropFirstLocked() {
	n := len(s.cache[0].GetData())
	s.cacheBytes -= n
	s.budget.add(-n)
	s.cache[0] = nil
	s.cache = s.cache[1:]
	if len(s.cache) == 0 {
		s.cache = nil // let the array go
	}
}

// cacheTrimLocked drops cached entries at index i and below: entries that
// are applied here and that every other replica has (see
// Replica.trimCacheLocked).
func (s *raftStorage) cacheTrimLocked(i uint64) {
	for len(s.cache) > 0 && s.cache[0].GetIndex() <= i {
		s.cacheDropFirstLocked()
	}
	s.evictLocked(i)
}

// cacheCutLocked drops cached entries at index i and later.
func (s *raftStorage) cacheCutLocked(i uint64) {
	for n := len(s.cache); n > 0 && s.cache[n-1].GetIndex() >= i; n = len(s.cache) {
		s.cacheBytes -= len(s.cache[n-1].GetData())
		s.budget.add(-len(s.cache[n-1].GetData()))
		s.cache[n-1] = nil
		s.cache = s.cache[:n-1]
	}
}

// cachedLocked serves Entries from the cache when it holds all of [lo, hi).
func (s *raftStorage) cachedLocked(lo, hi, maxSize uint64) ([]*raftpb.Entry, bool) {
	if len(s.cache) == 0 || lo < s.cache[0].GetIndex() || hi-1 > s.cache[len(s.cache)-1].GetIndex() {
		return nil, false
	}
	first := s.cache[0].GetIndex()
	var out []*raftpb.Entry
	var size uint64
	for i := lo; i < hi; i++ {
		e := s.cache[i-first]
		if !s.solo && isRef(e.GetData()) {
			return nil, false
		}
		sz := uint64(len(e.GetData())) + 24
		if len(out) > 0 && size+sz > maxSize {
			break
		}
		out = append(out, e)
		size += sz
	}
	return out, true
}

// openStorage loads or creates the raft state in dir over l and makes the
// log and the sidecar agree (see doc.go, "Recovery").
func openStorage(dir string, l *log.Log, initial *raftpb.ConfState, lg zerolog.Logger) (*raftStorage, error) {
	s := &raftStorage{dir: dir, log: l, lg: lg, producers: producerTable{}, savedAt: time.Now()}
	st, found, err := openStateFile(dir)
	if err != nil {
		return nil, err
	}
	s.state = st
	if found && st.cur.flags&stateFlagDenseOffsets == 0 {
		st.close()
		return nil, fmt.Errorf("%w: %s was written by an earlier sluice, in which raft's own entries took Kafka offsets; this one keeps offsets dense and does not read it: empty the broker's data directory (the partition's data is lost) or copy the topic to a new cluster with a Kafka client first", ErrOldFormat, dir)
	}
	cs, confIndex, err := loadConfState(dir)
	if errors.Is(err, os.ErrNotExist) {
		if found {
			return nil, fmt.Errorf("replica: %s exists but %s is missing", stateFileName, confFileName)
		}
		cs = initial
		if err := saveConfState(dir, cs, 0); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	s.cs, s.confIndex = cs, confIndex
	if !found {
		if l.LogEndOffset() != l.LogStartOffset() {
			return nil, fmt.Errorf("replica: log in %s holds data but no raft state", dir)
		}
		st.cur.snapOffset = l.LogStartOffset()
		st.cur.flags |= stateFlagDenseOffsets
		if err := st.save(st.cur); err != nil {
			return nil, err
		}
	}
	cur := st.cur
	s.snapIndex, s.snapTerm, s.snapOffset = cur.snapIndex, cur.snapTerm, cur.snapOffset
	s.memFrom = s.snapIndex + 1
	s.hs = &raftpb.HardState{Term: new(cur.term), Vote: new(cur.vote), Commit: new(cur.commit)}
	if b, err := loadBlob(dir, snapFileName); err == nil {
		s.snapProds = b
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if b, err := loadBlob(dir, forcedFileName); err == nil && len(b) == 8 {
		s.forcedAt = binary.BigEndian.Uint64(b)
	} else if err == nil {
		return nil, fmt.Errorf("replica: bad %s in %s", forcedFileName, dir)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	idx, metas, err := openIndexFile(dir)
	if err != nil {
		return nil, err
	}
	s.idx = idx
	ccs, err := openCCFile(dir)
	if err != nil {
		idx.close()
		return nil, err
	}
	s.ccs = ccs
	if cur.commit < cur.snapIndex {
		return nil, fmt.Errorf("replica: bad raft state in %s", dir)
	}
	if err := s.recover(metas); err != nil {
		idx.close()
		ccs.close()
		st.close()
		return nil, err
	}
	if err := s.resetProducers(); err != nil {
		return nil, err
	}
	s.durIdx = s.lastIndexLocked()
	// Applied entries' records are in the file: memory holds the rest.
	s.evictLocked(s.state.cur.applied &^ stateFlagPendingBit)
	return s, nil
}

// recover reconciles the sidecar records with the log after Open.
func (s *raftStorage) recover(metas []entryMeta) error {
	pending := s.pendingReset()
	// Only records after the snapshot, contiguous from it, count.
	i := 0
	for i < len(metas) && metas[i].index <= s.snapIndex {
		i++
	}
	metas = metas[i:]
	if len(metas) > 0 && (metas[0].index != s.snapIndex+1 || metas[0].base != s.snapOffset) {
		metas = nil
	}
	rewrite := len(metas) != int(s.idx.n)
	if pending {
		// A snapshot install was cut short after raft.state recorded it:
		// finish the log reset.
		metas = nil
		if err := resetLogTo(s.log, s.snapOffset); err != nil {
			return err
		}
		rewrite = true
	}
	leo, ls := s.log.LogEndOffset(), s.log.LogStartOffset()
	for len(metas) > 0 && metas[len(metas)-1].last >= leo {
		metas = metas[:len(metas)-1]
		rewrite = true
	}
	// Entries wholly below the log start: retention or DeleteRecords ran
	// and the compaction after it was not persisted.
	compacted := false
	// One of raft's own entries counts as below the start only if data
	// after it was deleted (its base, the next data batch's offset, is
	// below the start): at the start it may not be committed.
	for len(metas) > 0 && metas[0].last < ls && metas[0].base < ls {
		s.snapIndex, s.snapTerm, s.snapOffset = metas[0].index, metas[0].term, metas[0].last+1
		metas = metas[1:]
		compacted, rewrite = true, true
	}
	// raft's own entries have no batch: a record of one that was durable
	// and is gone cannot be rebuilt, and without it the batches after it
	// would be given wrong indexes. Checked before anything is rewritten.
	if lr := s.state.cur.lastRaft; lr > s.snapIndex {
		if k := lr - s.snapIndex - 1; k >= uint64(len(metas)) || !metas[k].raft() {
			return fmt.Errorf("%w: %s lost the record of raft entry %d", ErrLostCommitted, indexFileName, lr)
		}
	}
	next := s.snapOffset
	if n := len(metas); n > 0 {
		next = metas[n-1].last + 1
	}
	if next < ls || next > leo {
		// The log starts after the last entry the index knows (so the raft
		// indexes of its batches are unknown), or ends before the state's
		// snapshot: either way entries this replica had are gone.
		return fmt.Errorf("%w: raft log continues at offset %d, partition log holds %d..%d", ErrLostCommitted, next, ls, leo)
	}
	if next < leo {
		// Batches the sidecar did not get to disk before a crash: they
		// continue the log, one entry each, term = partitionLeaderEpoch.
		rebuilt, err := s.scanEntries(metas, next, leo)
		if err != nil {
			return err
		}
		metas = rebuilt
		rewrite = true
		next = s.snapOffset
		if n := len(metas); n > 0 {
			next = metas[n-1].last + 1
		}
		if next < leo {
			s.lg.Warn().Int64("from", next).Int64("log_end", leo).Msg("truncating log batches that are no raft entries")
			if err := s.log.TruncateTo(next); err != nil {
				return err
			}
		}
	}
	s.setMetasLocked(metas)
	if rewrite {
		if err := s.idx.reset(metas); err != nil {
			return err
		}
	}
	if err := s.recoverConfChanges(); err != nil {
		return err
	}
	for _, m := range s.metas {
		if m.raft() {
			s.lastRaft = m.index
		}
	}
	if pending || compacted {
		cur := s.state.cur
		cur.applied &^= stateFlagPendingBit
		cur.snapIndex, cur.snapTerm, cur.snapOffset = s.snapIndex, s.snapTerm, s.snapOffset
		cur.applied = max(cur.applied, s.snapIndex)
		cur.commit = max(cur.commit, s.snapIndex)
		s.hs.Commit = new(cur.commit)
		if err := s.state.save(cur); err != nil {
			return err
		}
	}
	// The persisted commit index is written only after the entries it
	// covers were synced, and only ever lags. Past the log's end it means
	// the log lost synced, committed entries (a damaged segment truncated
	// by recovery, a disk that lied): this replica must not vote or lead
	// on that log (docs/architecture.md, "Safety rules") until it is
	// re-seeded.
	if last := s.lastIndexLocked(); s.hs.GetCommit() > last {
		return fmt.Errorf("%w: commit index %d, last entry %d", ErrLostCommitted, s.hs.GetCommit(), last)
	}
	return nil
}

// recoverConfChanges drops the raft.confs records of entries the index
// does not hold (a crash between the two files' writes, a truncation or
// compaction cut short) and checks that every configuration change the
// index lists has its data.
func (s *raftStorage) recoverConfChanges() error {
	err := s.ccs.keep(func(r ccRecord) bool {
		m, ok := s.metaLocked(r.index)
		return ok && m.term == r.term && m.hasData()
	})
	if err != nil {
		return err
	}
	for _, m := range s.metas {
		if !m.hasData() {
			continue
		}
		if _, ok := s.ccs.get(m.index, m.term); !ok {
			return fmt.Errorf("replica: %s in %s lacks the data of raft entry %d (term %d, kind %d)", ccFileName, s.dir, m.index, m.term, m.kind)
		}
	}
	return nil
}

// stateFlagPendingBit marks, in the applied field of raft.state, a snapshot
// install whose log reset may not have finished.
const stateFlagPendingBit = 1 << 62

func (s *raftStorage) pendingReset() bool { return s.state.cur.applied&stateFlagPendingBit != 0 }

// syncIndex makes every record written so far durable: before the log
// deletes segments, so that a crash before the compaction that follows
// still finds the raft index of every batch left.
func (s *raftStorage) syncIndex() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fsutil.Fsync(s.idx.f)
}

// scanEntries appends to metas one entry per batch in [from, to). Every
// batch is a data entry: the records of raft's own entries, which have no
// batch, are synced before any later batch is written (append), so none
// lies among the batches after the last record.
func (s *raftStorage) scanEntries(metas []entryMeta, from, to int64) ([]entryMeta, error) {
	idx, term := s.snapIndex, s.snapTerm
	if n := len(metas); n > 0 {
		idx, term = metas[n-1].index, metas[n-1].term
	}
	off := from
	for off < to {
		rr, err := s.log.Read(off, 1, to)
		if err != nil {
			return nil, err
		}
		b := rr.Data
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			h, err := parseBatch(b, false)
			if err != nil || h.Size > int64(len(b)) || h.BaseOffset != off || h.LeaderEpoch <= 0 || uint64(h.LeaderEpoch) < term {
				return metas, nil
			}
			idx++
			term = uint64(h.LeaderEpoch)
			metas = append(metas, entryMeta{index: idx, term: term, base: h.BaseOffset, last: h.LastOffset()})
			off = h.LastOffset() + 1
			b = b[h.Size:]
		}
	}
	return metas, nil
}

// resetLogTo empties l and makes it start at off. The log package has no
// call for "empty, starting at off" when off is past its end, so a
// record-less control batch fills the gap and DeleteRecordsBefore moves the
// log start over it.
func resetLogTo(l *log.Log, off int64) error {
	if l.LogEndOffset() != l.LogStartOffset() {
		if err := l.TruncateTo(l.LogStartOffset()); err != nil {
			return err
		}
	}
	if start := l.LogStartOffset(); off < start {
		// TruncateTo at or below the start restarts an empty log there.
		return l.TruncateTo(off)
	}
	for l.LogEndOffset() < off {
		span := min(off-l.LogEndOffset(), math.MaxInt32)
		if err := l.AppendReplicated(fillerBatch(l.LogEndOffset(), int32(span))); err != nil {
			return err
		}
	}
	return l.DeleteRecordsBefore(off)
}

func (s *raftStorage) lastIndexLocked() uint64 { return s.memFrom - 1 + uint64(len(s.metas)) }

// entryMetaSize is what one in-memory record costs.
const entryMetaSize = int(unsafe.Sizeof(entryMeta{}))

// metaAtLocked returns the record of entry i, snapIndex < i <= last index.
func (s *raftStorage) metaAtLocked(i uint64) (entryMeta, error) {
	if i >= s.memFrom {
		return s.metas[i-s.memFrom], nil
	}
	ms, err := s.idx.read(i, i+1)
	if err != nil {
		return entryMeta{}, err
	}
	return ms[0], nil
}

// metasLocked returns the records of entries [lo, hi), snapIndex < lo <=
// hi <= last index + 1: the older part from raft.index, the rest from
// memory.
func (s *raftStorage) metasLocked(lo, hi uint64) ([]entryMeta, error) {
	if lo >= hi {
		return nil, nil
	}
	if lo >= s.memFrom {
		return s.metas[lo-s.memFrom : hi-s.memFrom], nil
	}
	out, err := s.idx.read(lo, min(hi, s.memFrom))
	if err != nil {
		return nil, err
	}
	if hi > s.memFrom {
		out = append(out, s.metas[:hi-s.memFrom]...)
	}
	return out, nil
}

// setMetasLocked replaces the records in memory with ms (from snapIndex+1).
func (s *raftStorage) setMetasLocked(ms []entryMeta) {
	s.metas, s.memFrom = ms, s.snapIndex+1
	s.accountMetasLocked()
}

// loadMetasLocked brings the records from i on back into memory (before
// a truncation or a compaction changes them).
func (s *raftStorage) loadMetasLocked(i uint64) error {
	if i >= s.memFrom {
		return nil
	}
	ms, err := s.idx.read(i, s.memFrom)
	if err != nil {
		return err
	}
	s.metas, s.memFrom = append(ms, s.metas...), i
	s.accountMetasLocked()
	return nil
}

// evictLocked drops from memory the records of entries at index upTo and
// below, all but the last record when the host's budget is over. raft.index
// holds them all: data records are written (not synced) when stored and
// read back through the page cache.
func (s *raftStorage) evictLocked(upTo uint64) {
	n := 0
	if s.budget.over() {
		n = len(s.metas) - 1
	} else if upTo >= s.memFrom {
		n = int(min(upTo-s.memFrom+1, uint64(len(s.metas))))
		n = min(n, len(s.metas)-1) // the last one gives the next offset
	}
	if n <= 0 {
		return
	}
	if rest := len(s.metas) - n; rest <= n || rest < 64 {
		s.metas = append(make([]entryMeta, 0, rest), s.metas[n:]...)
	} else {
		s.metas = s.metas[n:]
	}
	s.memFrom += uint64(n)
	s.accountMetasLocked()
}

// accountMetasLocked counts the records in memory in the host's budget,
// all but the last, which every group with entries keeps.
func (s *raftStorage) accountMetasLocked() {
	b := max(len(s.metas)-1, 0) * entryMetaSize
	s.budget.add(b - s.metaBytes)
	s.metaBytes = b
}

// InitialState implements raft.Storage.
func (s *raftStorage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneHS(s.hs), cloneCS(s.cs), nil
}

// Entries implements raft.Storage: it reads the batches from the log and
// turns each back into the entry raft appended.
func (s *raftStorage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lo <= s.snapIndex {
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndexLocked()+1 || lo > hi {
		return nil, raft.ErrUnavailable
	}
	if lo == hi {
		return nil, nil
	}
	if out, ok := s.cachedLocked(lo, hi, maxSize); ok {
		return out, nil
	}
	var out []*raftpb.Entry
	var size uint64
	var b []byte // batches read from the log, not yet turned into entries
	ms, err := s.metasLocked(lo, hi)
	if err != nil {
		return nil, err
	}
	upTo := ms[len(ms)-1].last + 1
	for i := lo; i < hi; i++ {
		m := ms[i-lo]
		var e *raftpb.Entry
		if m.raft() {
			var err error
			if e, err = s.raftEntryLocked(m); err != nil {
				return nil, err
			}
		} else {
			if len(b) == 0 {
				want := max(int(min(maxSize-size, 8<<20)), 1)
				rr, err := s.log.Read(max(m.base, s.log.LogStartOffset()), want, upTo)
				if err != nil {
					return nil, fmt.Errorf("replica: reading raft entry %d at offset %d: %w", i, m.base, err)
				}
				if b = rr.Data; len(b) == 0 {
					return nil, fmt.Errorf("replica: raft entry %d at offset %d missing from the log", i, m.base)
				}
			}
			h, err := parseBatch(b, false)
			if err != nil || h.Size > int64(len(b)) || h.BaseOffset != m.base || h.LastOffset() != m.last {
				return nil, fmt.Errorf("replica: log batch at offset %d does not match raft entry %d", m.base, i)
			}
			e = &raftpb.Entry{Term: new(m.term), Index: new(m.index), Type: new(raftpb.EntryNormal), Data: b[:h.Size:h.Size]}
			b = b[h.Size:]
		}
		sz := uint64(len(e.GetData())) + 24
		if len(out) > 0 && size+sz > maxSize {
			break
		}
		out = append(out, e)
		size += sz
	}
	return out, nil
}

// raftEntryLocked rebuilds one of raft's own entries from its record (and
// raft.confs for a configuration change or a command, which is a normal
// entry).
func (s *raftStorage) raftEntryLocked(m entryMeta) (*raftpb.Entry, error) {
	e := &raftpb.Entry{Term: new(m.term), Index: new(m.index), Type: new(raftpb.EntryNormal)}
	switch m.kind {
	case kindNoop:
		return e, nil
	case kindConfChange:
		e.Type = new(raftpb.EntryConfChange)
	case kindConfChangeV2:
		e.Type = new(raftpb.EntryConfChangeV2)
	}
	data, ok := s.ccs.get(m.index, m.term)
	if !ok {
		return nil, fmt.Errorf("replica: raft entry %d (term %d, kind %d) missing from %s", m.index, m.term, m.kind, ccFileName)
	}
	e.Data = data // never mutated: raft and the transport only read it
	return e, nil
}

// Term implements raft.Storage.
func (s *raftStorage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.termLocked(i)
}

func (s *raftStorage) termLocked(i uint64) (uint64, error) {
	switch {
	case i < s.snapIndex:
		return 0, raft.ErrCompacted
	case i == s.snapIndex:
		return s.snapTerm, nil
	case i > s.lastIndexLocked():
		return 0, raft.ErrUnavailable
	}
	m, err := s.metaAtLocked(i)
	return m.term, err
}

// LastIndex implements raft.Storage.
func (s *raftStorage) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastIndexLocked(), nil
}

// FirstIndex implements raft.Storage.
func (s *raftStorage) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapIndex + 1, nil
}

// seedProducersLocked loads into the table every producer the log holds
// state for: the table only has those seen since Open, a truncation or a
// snapshot, and a snapshot encodes the table. A producer idle since then
// would otherwise be missing from the snapshot, and a replica caught up by
// it, once leader, would take a late retry of one of its batches for a
// new batch. The log's states are read in one go (the log's producers
// change only under s.mu, which the caller holds, so reading them one by
// one would give the same: one go is simply fewer lock rounds).
func (s *raftStorage) seedProducersLocked() {
	states, err := s.log.ProducerStates()
	if err != nil {
		return // a closed or failed log: the table is what there is
	}
	for id, st := range states {
		if s.producers[id] == nil {
			s.producers.put(id, st)
		}
	}
}

// Snapshot implements raft.Storage. A partition snapshot is small: where the
// log starts (snapIndex+1 is the batch at snapOffset) and the producer table
// as of that offset; the receiver resets its log there and gets the entries
// after it by ordinary appends.
func (s *raftStorage) Snapshot() (*raftpb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked(), nil
}

func (s *raftStorage) snapshotLocked() *raftpb.Snapshot {
	s.seedProducersLocked()
	data := binary.BigEndian.AppendUint32(nil, snapMagic)
	data = binary.BigEndian.AppendUint64(data, uint64(s.snapOffset))
	data = append(data, s.producers.encode(s.snapOffset)...)
	return &raftpb.Snapshot{
		Data: data,
		Metadata: &raftpb.SnapshotMetadata{
			Index:     new(s.snapIndex),
			Term:      new(s.snapTerm),
			ConfState: cloneCS(s.cs),
		},
	}
}

const snapMagic = 0x534c534e // "SLSN"

func decodeSnapshotData(b []byte) (int64, producerTable, error) {
	if len(b) < 12 || binary.BigEndian.Uint32(b) != snapMagic {
		return 0, nil, errBadSnapshot
	}
	off := int64(binary.BigEndian.Uint64(b[4:]))
	p, _, err := decodeProducers(b[12:])
	return off, p, err
}

// nextOffsetLocked is the Kafka offset the entry after the last gets.
func (s *raftStorage) nextOffsetLocked() int64 {
	if n := len(s.metas); n > 0 {
		return s.metas[n-1].last + 1
	}
	return s.snapOffset
}

// metaLocked returns the index record of entry i.
func (s *raftStorage) metaLocked(i uint64) (entryMeta, bool) {
	if i <= s.snapIndex || i > s.lastIndexLocked() {
		return entryMeta{}, false
	}
	m, err := s.metaAtLocked(i)
	if err != nil {
		s.lg.Error().Err(err).Uint64("index", i).Msg("reading raft index record")
		return entryMeta{}, false
	}
	return m, true
}

// endOffsetOf is the offset after entry i: the high watermark when i is the
// commit index.
func (s *raftStorage) endOffsetOf(i uint64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i == s.snapIndex {
		return s.snapOffset
	}
	if m, ok := s.metaLocked(i); ok {
		return m.last + 1
	}
	if i < s.snapIndex {
		return s.snapOffset
	}
	return s.nextOffsetLocked()
}

// append stores entries (doc.go step 1), truncating a conflicting tail
// first. It writes the batches to the page cache; the caller makes them
// durable with WaitDurable before sending anything that depends on them.
// ref gives the batch a reference entry names (raft_ref.go); the cache
// keeps the reference.
func (s *raftStorage) append(ents []*raftpb.Entry, ref func([]byte) ([]byte, error)) error {
	if len(ents) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	first := ents[0].GetIndex()
	if first <= s.snapIndex {
		k := s.snapIndex + 1 - first
		if k >= uint64(len(ents)) {
			return nil
		}
		ents = ents[k:]
		first = s.snapIndex + 1
	}
	last := s.lastIndexLocked()
	if first > last+1 {
		return fmt.Errorf("replica: raft entry %d appended after last index %d", first, last)
	}
	if first <= last {
		if _, err := s.truncateFromLocked(first, "truncating divergent uncommitted tail: the new leader's log replaces these records"); err != nil {
			return err
		}
	}
	next := s.nextOffsetLocked()
	added := make([]entryMeta, 0, len(ents))
	var ccs []ccRecord
	unsynced := false // a raft entry's record is in added, not yet synced
	for _, e := range ents {
		term := e.GetTerm()
		kind := kindData
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.Data) == 0 {
				kind = kindNoop
			} else if isCommand(e.Data) {
				kind = kindCommand
			}
		case raftpb.EntryConfChange:
			kind = kindConfChange
		case raftpb.EntryConfChangeV2:
			kind = kindConfChangeV2
		default:
			return fmt.Errorf("replica: raft entry %d has unknown type %v", e.GetIndex(), e.GetType())
		}
		if kind != kindData {
			// No batch, no offset: the record (and a conf change's or a
			// command's data) is all that stores it.
			m := entryMeta{index: e.GetIndex(), term: term, base: next, last: next - 1, kind: kind}
			if kind != kindNoop {
				ccs = append(ccs, ccRecord{index: m.index, term: term, data: append([]byte(nil), e.Data...)})
			}
			s.metas = append(s.metas, m)
			s.cacheAddLocked(e)
			added = append(added, m)
			unsynced = true
			s.lastRaft = m.index
			continue
		}
		if unsynced {
			// The log cannot tell where raft's entries were among its
			// batches: their records must be durable before a batch after
			// them can reach the disk (scanEntries rebuilds records only
			// for batches).
			if err := s.persistRecordsLocked(added, ccs); err != nil {
				return err
			}
			added, ccs, unsynced = added[:0], nil, false
		}
		data := e.Data
		if isRef(data) {
			if ref == nil {
				return fmt.Errorf("replica: raft entry %d is a reference to a batch not held here", e.GetIndex())
			}
			var err error
			if data, err = ref(data); err != nil {
				return err
			}
		}
		h, err := parseBatch(data, true)
		if err != nil {
			return fmt.Errorf("replica: raft entry %d: %w", e.GetIndex(), err)
		}
		b := data
		if h.BaseOffset != next || h.LeaderEpoch != int32(term) {
			// The leader stamps both when it proposes; if it did not,
			// every replica stamps the same values here. Never write
			// into raft's copy of the entry.
			b = append([]byte(nil), b...)
			stamp(b, next, int32(term))
			h.BaseOffset, h.LeaderEpoch = next, int32(term)
		}
		if h.ProducerID >= 0 {
			// Before the log has the batch: a producer the table has not
			// seen since Open, a truncation or a snapshot starts from the
			// log's window of its earlier batches, not from this one
			// alone. Otherwise a replica restarted (or truncated) while
			// the producer had batches in flight, once leader, finds its
			// older retries out of sequence and answers
			// OUT_OF_ORDER_SEQUENCE, on which clients bump their epoch
			// and write them again.
			s.producers.seed(s.log, h.ProducerID)
		}
		if err := s.log.AppendReplicated(b); err != nil {
			return fmt.Errorf("replica: storing raft entry %d at offset %d: %w", e.GetIndex(), next, err)
		}
		m := entryMeta{index: e.GetIndex(), term: term, base: next, last: h.LastOffset()}
		s.metas = append(s.metas, m)
		if &b[0] != &data[0] {
			// Stamped copy: cache what the log holds.
			e = &raftpb.Entry{Term: new(term), Index: new(e.GetIndex()), Type: new(raftpb.EntryNormal), Data: b}
		}
		s.cacheAddLocked(e)
		added = append(added, m)
		s.producers.update(&h, markerOf(b, &h))
		next = m.last + 1
	}
	s.accountMetasLocked()
	if unsynced {
		return s.persistRecordsLocked(added, ccs)
	}
	return s.idx.append(added)
}

// truncateFromLocked cuts the log from entry first (at most the last
// index, past the snapshot), logging why with the range cut, and returns
// the records cut, which it also counts (truncated).
func (s *raftStorage) truncateFromLocked(first uint64, why string) (int64, error) {
	last := s.lastIndexLocked()
	// The entry before first stays in memory: it gives the next
	// offset; lastRaft may be looked for in all of them (below).
	from := first - 1
	if from <= s.snapIndex || s.lastRaft >= first {
		from = s.snapIndex + 1
	}
	if err := s.loadMetasLocked(from); err != nil {
		return 0, err
	}
	m := s.metas[first-s.memFrom]
	// A divergent tail appended over was never committed: raft mode
	// never answered acks=all for it, but acks=1, async and a semi-sync
	// fallback may have. An async master that a promotion replaced
	// (raft_failover.go) may even have committed it on its own. Either
	// way the range is logged and counted, so what a returning leader
	// loses to its successor's log is never silent.
	end := s.log.LogEndOffset()
	s.lg.Warn().Uint64("index", first).Uint64("last_index", last).Int64("from_offset", m.base).Int64("end_offset", end).
		Int64("records", end-m.base).Msg(why)
	if s.truncated != nil && end > m.base {
		s.truncated.Add(end - m.base)
	}
	keep := s.metas[:first-s.memFrom]
	if s.lastRaft >= first {
		// Before the log or the index loses what the mark names: a
		// crash part-way must not find it missing.
		s.lastRaft = 0
		for _, m := range keep {
			if m.raft() {
				s.lastRaft = m.index
			}
		}
		if s.lastRaft < s.state.cur.lastRaft {
			cur := s.state.cur
			cur.lastRaft = s.lastRaft
			if err := s.state.save(cur); err != nil {
				return 0, err
			}
		}
	}
	if err := s.log.TruncateTo(m.base); err != nil {
		return 0, err
	}
	s.metas = keep
	s.durIdx = min(s.durIdx, first-1)
	s.cacheCutLocked(first)
	if err := s.idx.truncateFrom(first); err != nil {
		return 0, err
	}
	// After the index: a record the index holds always has its data.
	if err := s.ccs.keep(func(r ccRecord) bool { return r.index < first }); err != nil {
		return 0, err
	}
	if err := s.resetProducers(); err != nil {
		return 0, err
	}
	return max(end-m.base, 0), nil
}

// persistRecordsLocked writes the records ms, among them some of raft's
// own entries, and makes them durable: the conf changes' data first, so
// the index never names one that is not there.
func (s *raftStorage) persistRecordsLocked(ms []entryMeta, ccs []ccRecord) error {
	if err := s.ccs.append(ccs); err != nil {
		return err
	}
	if err := s.idx.append(ms); err != nil {
		return err
	}
	return s.idx.sync()
}

// setDurable notes that the entries up to i are durable in the log.
func (s *raftStorage) setDurable(i uint64) {
	s.mu.Lock()
	s.durIdx = max(s.durIdx, min(i, s.lastIndexLocked()))
	s.mu.Unlock()
}

// saveRaftMark persists lastRaft once the entries up to it are durable
// (step 1, once the log's fsync covers them): only then may Open count on
// finding its record. Rare: once per election or membership change.
// upTo is the last index known durable; a later raft entry's mark waits
// for its own append to be durable.
func (s *raftStorage) saveRaftMark(upTo uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastRaft <= s.state.cur.lastRaft || s.lastRaft > upTo {
		return nil
	}
	cur := s.state.cur
	cur.lastRaft = s.lastRaft
	return s.state.save(cur)
}

// resetProducers rebuilds the producer table after Open or a truncation:
// the last installed snapshot's table, with the log's own state preferred
// for producers the log has batches of.
func (s *raftStorage) resetProducers() error {
	s.producers = producerTable{}
	if s.snapProds == nil {
		return nil
	}
	_, p, err := decodeSnapshotData(s.snapProds)
	if err != nil {
		return err
	}
	for id, e := range p {
		if _, ok := s.log.ProducerState(id); ok {
			continue // seeded from the log on first use
		}
		s.producers[id] = e
	}
	s.expireProducersLocked(time.Now())
	return nil
}

// expireProducersLocked applies producer expiry (log.ProducerEntry's
// Expired) to the log's producer state and to the table at once, so that
// seeding the table from the log never brings back what the table
// expired. It returns how many entries left the table and the log. The
// table is rebuilt with the old timestamps after Open, a truncation or a
// snapshot, so each of them runs it too: a producer expired before is
// dropped again before the replica checks a batch against it.
func (s *raftStorage) expireProducersLocked(now time.Time) int {
	if s.prodExpiry <= 0 {
		return 0
	}
	n := s.log.ExpireProducers(now, s.prodExpiry)
	return n + s.producers.expire(now, s.prodExpiry, s.log.InOpenTxn)
}

// expireProducers is expireProducersLocked for the periodic sweep.
func (s *raftStorage) expireProducers(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expireProducersLocked(now)
}

// saveHardState persists hs when its term or vote changed (MustSync); a
// commit-only change is kept in memory and written with the next sync.
func (s *raftStorage) saveHardState(hs *raftpb.HardState, applied uint64, force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hs != nil {
		must := hs.GetTerm() != s.hs.GetTerm() || hs.GetVote() != s.hs.GetVote()
		s.hs = cloneHS(hs)
		force = force || must
	}
	if !force {
		return nil
	}
	cur := s.state.cur
	cur.term, cur.vote, cur.commit = s.hs.GetTerm(), s.hs.GetVote(), min(s.hs.GetCommit(), s.durIdx)
	cur.applied = applied | (cur.applied & stateFlagPendingBit)
	s.savedAt = time.Now()
	return s.state.save(cur)
}

// Checkpoints of the applied index: after a crash raft hands back the
// committed entries after the persisted applied index, read from the log,
// so it is saved every checkpointEntries entries or checkpointInterval.
const (
	checkpointEntries  = 10000
	checkpointInterval = time.Minute
)

// maybeCheckpoint saves the applied index when enough has been applied
// since the last save. Called after step 3, when everything up to applied
// is durable.
func (s *raftStorage) maybeCheckpoint(applied uint64, now time.Time) error {
	s.mu.Lock()
	saved := s.state.cur.applied &^ stateFlagPendingBit
	due := applied > saved && (applied-saved >= checkpointEntries || now.Sub(s.savedAt) >= checkpointInterval)
	if !due {
		// The commit index, as far as it is durable here, goes to the
		// page cache at every advance, so that after a kill Open knows
		// how far the log was committed and refuses a log that lost part
		// of that (a damaged tail cut back by recovery) instead of voting
		// on it. Synced only with the next save: after a power cut it is
		// the last synced one.
		err := error(nil)
		if c := min(s.hs.GetCommit(), s.durIdx); c > s.state.cur.commit {
			cur := s.state.cur
			cur.commit = c
			err = s.state.saveUnsynced(cur)
		}
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	return s.saveHardState(nil, applied, true)
}

// applySnapshot installs a snapshot received from the leader: the log is
// reset to start at the snapshot's offset, the sidecar emptied and the
// producer table replaced. raft.state records the snapshot first, with the
// pending flag, so a crash part-way is finished by the next Open.
func (s *raftStorage) applySnapshot(snap *raftpb.Snapshot, hs *raftpb.HardState) error {
	off, prods, err := decodeSnapshotData(snap.GetData())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	md := snap.GetMetadata()
	if err := saveBlob(s.dir, snapFileName, snap.GetData()); err != nil {
		return err
	}
	if err := saveConfState(s.dir, md.GetConfState(), md.GetIndex()); err != nil {
		return err
	}
	if hs != nil {
		s.hs = cloneHS(hs)
	}
	cur := s.state.cur
	// The snapshot is all this replica holds durably once installed.
	cur.term, cur.vote, cur.commit = s.hs.GetTerm(), s.hs.GetVote(), md.GetIndex()
	cur.snapIndex, cur.snapTerm, cur.snapOffset = md.GetIndex(), md.GetTerm(), off
	cur.applied = md.GetIndex() | stateFlagPendingBit
	cur.lastRaft = 0
	if err := s.state.save(cur); err != nil {
		return err
	}
	if err := s.idx.reset(nil); err != nil {
		return err
	}
	if err := s.ccs.keep(func(ccRecord) bool { return false }); err != nil {
		return err
	}
	if err := resetLogTo(s.log, off); err != nil {
		return err
	}
	cur.applied &^= stateFlagPendingBit
	if err := s.state.save(cur); err != nil {
		return err
	}
	s.snapIndex, s.snapTerm, s.snapOffset = cur.snapIndex, cur.snapTerm, off
	s.setMetasLocked(nil)
	s.lastRaft = 0
	s.durIdx = cur.snapIndex
	clear(s.cache)
	s.budget.add(-s.cacheBytes)
	s.cache, s.cacheBytes = nil, 0
	s.cs, s.confIndex = cloneCS(md.GetConfState()), md.GetIndex()
	s.snapProds = snap.GetData()
	s.producers = prods
	s.expireProducersLocked(time.Now())
	return nil
}

// compact drops the index records of entries wholly below the log start
// (after retention or DeleteRecords) so raft sends a snapshot to replicas
// that need them. Only applied entries are dropped.
func (s *raftStorage) compact(applied uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.log.LogStartOffset()
	if err := s.loadMetasLocked(s.snapIndex + 1); err != nil {
		return err
	}
	k := 0
	for k < len(s.metas) && s.metas[k].last < ls && s.metas[k].index <= applied {
		k++
	}
	if k == 0 {
		return nil
	}
	gone := s.metas[k-1]
	rest := append([]entryMeta(nil), s.metas[k:]...)
	next := gone.last + 1
	// The snapshot's producer table is the table as of the new start.
	s.seedProducersLocked()
	snapData := binary.BigEndian.AppendUint32(nil, snapMagic)
	snapData = binary.BigEndian.AppendUint64(snapData, uint64(next))
	snapData = append(snapData, s.producers.encode(next)...)
	if err := saveBlob(s.dir, snapFileName, snapData); err != nil {
		return err
	}
	cur := s.state.cur
	cur.snapIndex, cur.snapTerm, cur.snapOffset = gone.index, gone.term, next
	cur.term, cur.vote, cur.commit = s.hs.GetTerm(), s.hs.GetVote(), max(s.hs.GetCommit(), gone.index)
	if err := s.state.save(cur); err != nil {
		return err
	}
	if err := s.idx.reset(rest); err != nil {
		return err
	}
	s.snapIndex, s.snapTerm, s.snapOffset = gone.index, gone.term, next
	s.setMetasLocked(rest)
	s.evictLocked(applied)
	if err := s.ccs.keep(func(r ccRecord) bool { return r.index > gone.index }); err != nil {
		return err
	}
	s.snapProds = snapData
	return nil
}

// setConfState persists the configuration after the conf change at index
// was applied.
func (s *raftStorage) setConfState(cs *raftpb.ConfState, index uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := saveConfState(s.dir, cs, index); err != nil {
		return err
	}
	s.cs, s.confIndex = cloneCS(cs), index
	return nil
}

func (s *raftStorage) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.cache)
	s.budget.add(-s.cacheBytes - s.metaBytes)
	s.cache, s.cacheBytes = nil, 0
	s.metas, s.metaBytes = nil, 0
	return errors.Join(s.idx.close(), s.ccs.close(), s.state.close())
}

func cloneHS(hs *raftpb.HardState) *raftpb.HardState {
	return &raftpb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote()), Commit: new(hs.GetCommit())}
}

func cloneCS(cs *raftpb.ConfState) *raftpb.ConfState {
	return raftpb.EnsureConfState(&raftpb.ConfState{
		Voters:         append([]uint64(nil), cs.GetVoters()...),
		Learners:       append([]uint64(nil), cs.GetLearners()...),
		VotersOutgoing: append([]uint64(nil), cs.GetVotersOutgoing()...),
		LearnersNext:   append([]uint64(nil), cs.GetLearnersNext()...),
		AutoLeave:      new(cs.GetAutoLeave()),
	})
}
