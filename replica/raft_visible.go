package replica

import (
	"slices"
	"sync/atomic"
)

// raftOffsets is the sorted Kafka offsets of raft's own entries (empty
// entries and configuration changes, one offset each) in a replica's log.
// Kafka clients are meant to skip control batches, but some deliver them
// to the application (kafka-go) or misbehave on empty batches, so Fetch
// never returns these: it reads the data between them. They are rare (one
// per election or membership change), so the set is small and fetches
// that do not reach one pay a binary search only.
//
// Readers load the slice without a lock; writers (under raftStorage.mu)
// replace it, never modify it. An entry is added when it is stored (doc.go
// step 1), before the high watermark can cover it (step 3), so a reader
// that loads the high watermark first and then the set sees every raft
// entry below that watermark.
type raftOffsets struct{ p atomic.Pointer[[]int64] }

func (r *raftOffsets) load() []int64 {
	if p := r.p.Load(); p != nil {
		return *p
	}
	return nil
}

func (r *raftOffsets) store(offs []int64) {
	if len(offs) == 0 {
		r.p.Store(nil)
		return
	}
	r.p.Store(&offs)
}

// add appends off, which is after every offset in the set.
func (r *raftOffsets) add(off int64) {
	old := r.load()
	r.store(append(old[:len(old):len(old)], off))
}

// cutFrom drops the offsets at or after off (a truncated tail).
func (r *raftOffsets) cutFrom(off int64) {
	old := r.load()
	i, _ := slices.BinarySearch(old, off)
	if i < len(old) {
		r.store(slices.Clone(old[:i]))
	}
}

// dropBelow drops the offsets below off (a log start that moved on).
func (r *raftOffsets) dropBelow(off int64) {
	old := r.load()
	if i, _ := slices.BinarySearch(old, off); i > 0 {
		r.store(slices.Clone(old[i:]))
	}
}

// visibleEnd is the high watermark a client is shown: hw less the raft
// entries directly below it, so that a consumer that read the last data
// batch sees no lag and is never told there is more to read when a fetch
// would return nothing. Never below start (the log start offset). It only
// grows as hw and start do: entries below hw never change.
func visibleEnd(offs []int64, hw, start int64) int64 {
	i, _ := slices.BinarySearch(offs, hw)
	v := hw
	for i > 0 && offs[i-1] == v-1 {
		i--
		v--
	}
	return max(v, start)
}

// dataSpan says what a read from offset up to upTo returns: the batches
// from the first offset at or after offset that is not a raft entry
// (from) up to the next raft entry or upTo (end). Nothing when from >= end.
// An offset inside a data batch is never a raft entry, so from is then
// offset itself and the read starts with that batch, as without raft.
func dataSpan(offs []int64, offset, upTo int64) (from, end int64) {
	i, _ := slices.BinarySearch(offs, offset)
	from = offset
	for i < len(offs) && offs[i] == from {
		i++
		from++
	}
	end = upTo
	if i < len(offs) && offs[i] < end {
		end = offs[i]
	}
	return from, end
}
