package log

import "sort"

type epochEntry struct {
	epoch int32
	start int64 // first offset written in this leader epoch
}

// epochCache is Kafka's LeaderEpochFileCache kept in memory only: it is
// rebuilt from the batches' partitionLeaderEpoch fields on Open, so it needs
// no checkpoint file of its own.
type epochCache struct {
	entries []epochEntry // epochs and starts strictly increasing
}

// assign notes that epoch was in force at offset start. Batches without an
// epoch (-1) and epochs older than the latest are ignored, as Kafka does.
func (c *epochCache) assign(epoch int32, start int64) {
	if epoch < 0 {
		return
	}
	if n := len(c.entries); n == 0 || epoch > c.entries[n-1].epoch {
		c.entries = append(c.entries, epochEntry{epoch, start})
	}
}

// truncateFromStart keeps only the last epoch that starts before logStart,
// moved to start there, as Kafka's truncateFromStart does.
func (c *epochCache) truncateFromStart(logStart int64) {
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].start > logStart })
	if i == 0 {
		return
	}
	c.entries[i-1].start = logStart
	c.entries = c.entries[i-1:]
}

func (c *epochCache) reset() { c.entries = c.entries[:0] }

// endOffsetFor is Kafka's LeaderEpochFileCache.endOffsetFor: the end offset
// of the largest epoch <= epoch (the start of the next epoch, or leo for the
// latest) and that epoch; (-1, -1) if epoch is unknown or newer than all.
func (c *epochCache) endOffsetFor(epoch int32, leo int64) (int64, int32) {
	n := len(c.entries)
	if epoch < 0 || n == 0 {
		return -1, -1
	}
	if c.entries[n-1].epoch == epoch {
		return leo, epoch
	}
	hi := sort.Search(n, func(i int) bool { return c.entries[i].epoch > epoch })
	if hi == n {
		return -1, -1
	}
	if hi == 0 {
		// Older than every epoch we hold: Kafka answers with the requested
		// epoch and the start of the first one we know.
		return c.entries[0].start, epoch
	}
	return c.entries[hi].start, c.entries[hi-1].epoch
}
