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

func newOffsetMap(bytes int64) *offsetMap {
	slots := max(bytes/slotBytes, 2)
	return &offsetMap{slots: make([]byte, slots*slotBytes), max: max(int(float64(slots)*mapLoadFactor), 1)}
}

func (m *offsetMap) clear() {
	clear(m.slots)
	m.n = 0
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
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
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
		if string(s) == string(h) {
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
