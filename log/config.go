package log

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rs/zerolog"
	"github.com/sluice-broker/sluice/partition"
	"github.com/sluice-broker/sluice/protocol"
)

// Config holds the topic-level settings one partition log obeys. Names follow
// Kafka's topic configs. It can change at runtime through Log.SetConfig.
type Config = partition.LogConfig

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config { return partition.DefaultLogConfig() }

// maxSegmentMs is Kafka's LogConfig.maxSegmentMs: a compacted log also
// rolls by max.compaction.lag.ms, since the active segment is never
// cleaned.
func maxSegmentMs(c Config) time.Duration {
	if c.Compact && c.MaxCompactionLagMs > 0 {
		return min(c.SegmentMs, c.MaxCompactionLagMs)
	}
	return c.SegmentMs
}

func validateConfig(c Config) error {
	var errs []error
	// Positions in the offset index are 32-bit, like Kafka's.
	if c.SegmentBytes < protocol.BatchHeaderSize || c.SegmentBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("segment.bytes %d not in [%d, %d]", c.SegmentBytes, protocol.BatchHeaderSize, math.MaxInt32))
	}
	if c.SegmentMs <= 0 {
		errs = append(errs, fmt.Errorf("segment.ms %v must be positive", c.SegmentMs))
	}
	if c.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("index.interval.bytes %d is negative", c.IndexIntervalBytes))
	}
	if c.SegmentIndexBytes < 4*timeIndexEntrySize {
		errs = append(errs, fmt.Errorf("segment.index.bytes %d is below %d", c.SegmentIndexBytes, 4*timeIndexEntrySize))
	}
	if c.MinCleanableDirtyRatio < 0 || c.MinCleanableDirtyRatio > 1 {
		errs = append(errs, fmt.Errorf("min.cleanable.dirty.ratio %v not in [0, 1]", c.MinCleanableDirtyRatio))
	}
	if c.DeleteRetentionMs < 0 || c.MinCompactionLagMs < 0 {
		errs = append(errs, fmt.Errorf("delete.retention.ms and min.compaction.lag.ms must not be negative"))
	}
	if c.MaxCompactionLagMs <= 0 || c.MaxCompactionLagMs < c.MinCompactionLagMs {
		errs = append(errs, fmt.Errorf("max.compaction.lag.ms %v must be positive and at least min.compaction.lag.ms", c.MaxCompactionLagMs))
	}
	return errors.Join(errs...)
}

// Options are the per-process collaborators of a Log.
type Options struct {
	// Logger receives recovery warnings and fatal errors; the zero value
	// discards them.
	Logger zerolog.Logger
	// Flusher is the broker-wide group-commit flusher. Nil means WaitDurable
	// syncs the log itself (still group-committed among this log's waiters).
	Flusher *Flusher
	// Now is the clock for segment.ms when batches carry no timestamps and
	// for retention of such segments; nil means time.Now.
	Now func() time.Time
}
