package partition

import (
	"math"
	"time"
)

// LogConfig holds the topic-level settings one partition log obeys. Names
// follow Kafka's topic configs. The log package's Config is this type.
type LogConfig struct {
	SegmentBytes       int64         // segment.bytes: roll when the next batch would pass it
	SegmentMs          time.Duration // segment.ms: roll when a segment's timestamps span more
	RetentionMs        time.Duration // retention.ms; < 0 keeps segments forever
	RetentionBytes     int64         // retention.bytes; < 0 is unlimited
	IndexIntervalBytes int           // index.interval.bytes between offset index entries
	SegmentIndexBytes  int           // segment.index.bytes: roll when an index would pass it

	// cleanup.policy: Delete applies retention.ms and retention.bytes,
	// Compact lets the Cleaner keep only the latest record of each key.
	Delete, Compact        bool
	DeleteRetentionMs      time.Duration // delete.retention.ms: tombstones live this long after their first cleaning
	MinCleanableDirtyRatio float64       // min.cleanable.dirty.ratio
	MinCompactionLagMs     time.Duration // min.compaction.lag.ms: younger records are not cleaned
	MaxCompactionLagMs     time.Duration // max.compaction.lag.ms: older dirty records are cleaned whatever the ratio

	// MaxMessageBytes is max.message.bytes: the log cleaner inflates a
	// compressed batch's records to at most this, as the produce path
	// does (protocol's maxInflated); a stored batch that inflates
	// further is kept as it is, uncleaned. 0: protocol's own ceiling.
	MaxMessageBytes int
}

// DefaultLogConfig returns Kafka's defaults.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * time.Hour,
		RetentionMs:        7 * 24 * time.Hour,
		RetentionBytes:     -1,
		IndexIntervalBytes: 4096,
		SegmentIndexBytes:  10 << 20,

		Delete:                 true,
		DeleteRetentionMs:      24 * time.Hour,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLagMs:     math.MaxInt64,
		MaxMessageBytes:        1048588,
	}
}

// CleanerTotals are the log cleaner's counters since it started.
type CleanerTotals struct {
	Passes, Segments, Errors                int64
	BytesRead, BytesWritten, RecordsGone    int64
	LastPassMillis, MaxDirtyRatioPercent    int64
	BytesReadLastPass, BytesWrittenLastPass int64
}
