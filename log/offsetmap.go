package log

import (
	"crypto/md5"
	"encoding/binary"
)

// offsetMap is Kafka's SkimpyOffsetMap: a fixed-size open-addressing hash
// table from the MD5 of a record key to the last offset seen for it. Its
// memory is allocated once (log.cleaner.dedupe.buffer.size divided among
// the cleaner threads) and never grows: an entry costs 24 bytes (16 of
// hash, 8 of offset), and the cleaner stops mapping a dirty section once
// the table is loadFactor full, leaving the rest for the next pass. Two
// keys with the same MD5 are taken for one key, as in Kafka.
type offsetMap struct {
	limit   int64  // slots the buffer may grow to (the thread's share)
	buf     []byte // allocated so far; slots is a prefix of it
	slots   []byte // hashSize+8 bytes per slot; an all-zero slot is empty
	n       int    // slots in use
	max     int    // entries allowed (slots x load factor)
	scratch [md5.Size]byte
}

const (
	hashSize  = md5.Size
	slotBytes = hashSize + 8
	// mapLoadFactor is log.cleaner.io.buffer.load.factor's default.
	mapLoadFactor = 0.9
)

// newOffsetMap returns a map that may take bytes; reset allocates it.
func newOffsetMap(bytes int64) *offsetMap {
	return &offsetMap{limit: max(bytes/slotBytes, 2)}
}

// reset empties the map for a dirty section of at most entries records.
// It uses (and clears) only as much memory as that many entries need at
// the load factor, at most the configured share: a small section is not
// spread over a large buffer (a clear of all of it and a cache miss per
// lookup), and a broker whose compacted logs are small never allocates
// the whole log.cleaner.dedupe.buffer.size. The buffer grows when a
// larger section comes and is kept for the next pass.
func (m *offsetMap) reset(entries int64) {
	want := m.limit
	if entries < m.limit {
		want = min(max(int64(float64(entries)/mapLoadFactor)+1, 1024), m.limit)
	}
	if int64(len(m.buf)) < want*slotBytes {
		m.buf = make([]byte, want*slotBytes)
	}
	m.slots = m.buf[:want*slotBytes]
	clear(m.slots)
	m.n = 0
	m.max = max(int(float64(want)*mapLoadFactor), 1)
}

// full reports that n more entries might not fit.
func (m *offsetMap) full(n int) bool { return m.n+n > m.max }

func (m *offsetMap) hash(key []byte) []byte {
	m.scratch = md5.Sum(key)
	h := m.scratch[:]
	if isZero(h) {
		// The zero hash marks an empty slot; move the one key that
		// hashes to it (probability 2^-128) next door.
		h[0] = 1
	}
	return h
}

func isZero(b []byte) bool {
	return binary.LittleEndian.Uint64(b) == 0 && binary.LittleEndian.Uint64(b[8:]) == 0
}

// slot finds the slot of h, or the empty slot where it would go.
func (m *offsetMap) slot(h []byte) (int, bool) {
	n := len(m.slots) / slotBytes
	i := int(binary.BigEndian.Uint64(h) % uint64(n))
	for {
		s := m.slots[i*slotBytes : i*slotBytes+hashSize]
		if isZero(s) {
			return i, false
		}
		if binary.LittleEndian.Uint64(s) == binary.LittleEndian.Uint64(h) &&
			binary.LittleEndian.Uint64(s[8:]) == binary.LittleEndian.Uint64(h[8:]) {
			return i, true
		}
		if i++; i == n {
			i = 0
		}
	}
}

// put records offset as the latest for key. The caller checks full first.
func (m *offsetMap) put(key []byte, offset int64) {
	h := m.hash(key)
	i, found := m.slot(h)
	if !found {
		copy(m.slots[i*slotBytes:], h)
		m.n++
	}
	binary.BigEndian.PutUint64(m.slots[i*slotBytes+hashSize:], uint64(offset))
}

// get returns the latest offset mapped for key, -1 if none.
func (m *offsetMap) get(key []byte) int64 {
	i, found := m.slot(m.hash(key))
	if !found {
		return -1
	}
	return int64(binary.BigEndian.Uint64(m.slots[i*slotBytes+hashSize:]))
}
