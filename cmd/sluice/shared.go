package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/objstore"
	"github.com/sluice-broker/sluice/shared"
)

// openSharedStorage opens the broker's shared storage and the host of its
// shared-mode partitions (docs/shared-storage.md); nil and nil when
// shared.storage.type is not set. incarnation returns the broker's
// current registration (0 before it registered: nothing is claimed or
// committed until then, since the metastore refuses that fence).
func openSharedStorage(cfg configs.Config, catalog *metastore.Client, incarnation func() uint64, lg zerolog.Logger) (*shared.Host, objstore.Store, error) {
	var store objstore.Store
	switch cfg.SharedStorageType {
	case "":
		return nil, nil, nil
	case "dir":
		d, err := objstore.OpenDir(cfg.SharedStorageDir)
		if err != nil {
			return nil, nil, fmt.Errorf("shared.storage.dir: %w", err)
		}
		store = d
	case "s3":
		s, err := objstore.OpenS3(objstore.S3Config{
			Endpoint: cfg.SharedS3Endpoint, TLS: cfg.SharedS3TLS, Bucket: cfg.SharedS3Bucket, Prefix: cfg.SharedS3Prefix,
			Region: cfg.SharedS3Region, PathStyle: cfg.SharedS3PathStyle, ConditionalWrites: cfg.SharedS3ConditionalWrites,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("shared storage (s3): %w", err)
		}
		store = s
	default:
		return nil, nil, fmt.Errorf("shared.storage.type %q is not dir or s3", cfg.SharedStorageType)
	}
	cacheDir := cfg.SharedCacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(cfg.DataDir, "shared-cache")
	}
	if cfg.SharedCacheDiskBytes > 0 {
		// Fail here, loudly, rather than run without the disk tier.
		if err := os.MkdirAll(cacheDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("shared.cache.dir: %w", err)
		}
	}
	h := shared.NewHost(shared.Config{
		NodeID:         cfg.NodeID,
		Incarnation:    incarnation,
		Store:          store,
		Catalog:        catalog,
		UploadBytes:    cfg.SharedUploadBytes,
		Linger:         time.Duration(cfg.SharedUploadLingerMs) * time.Millisecond,
		Parallel:       int(cfg.SharedUploadParallel),
		CacheBytes:     cfg.SharedCacheMemoryBytes,
		CacheDir:       cacheDir,
		CacheDiskBytes: cfg.SharedCacheDiskBytes,
		Readahead:      int(cfg.SharedReadaheadChunks),
		GCGrace:        time.Duration(cfg.SharedGCGraceMs) * time.Millisecond,
		Compact: shared.CompactConfig{
			Interval:    time.Duration(cfg.SharedCompactIntervalMs) * time.Millisecond,
			Chunks:      int(cfg.SharedCompactChunks),
			ChunkBytes:  cfg.SharedCompactChunkBytes,
			ObjectBytes: cfg.SharedCompactObjectBytes,
		},
		Logger: lg.With().Str("component", "shared").Logger(),
	})
	lg.Info().Str("type", cfg.SharedStorageType).Msg("shared storage configured")
	return h, store, nil
}

// sharedMetrics exports a shared host's counters.
func sharedMetrics(reg prometheus.Registerer, h *shared.Host) {
	for _, m := range []struct {
		name, help string
		counter    bool
		value      func(shared.Stats) int64
	}{
		{"sluice_shared_puts_total", "Objects this broker wrote to shared storage (one PUT each).", true, func(s shared.Stats) int64 { return s.Puts }},
		{"sluice_shared_put_bytes_total", "Bytes of the objects this broker wrote to shared storage.", true, func(s shared.Stats) int64 { return s.PutBytes }},
		{"sluice_shared_commits_total", "commit_shared_chunks commands of this broker that the metastore applied (one per object; refused chunks included).", true, func(s shared.Stats) int64 { return s.Commits }},
		{"sluice_shared_deletes_total", "Objects this broker deleted from shared storage (retention, DeleteRecords, garbage collection).", true, func(s shared.Stats) int64 { return s.Deletes }},
		{"sluice_shared_compactions_total", "Merged objects this broker's compactor committed in place of runs of small chunks.", true, func(s shared.Stats) int64 { return s.Compactions }},
		{"sluice_shared_compacted_chunks_total", "Chunks this broker's compactor replaced by merged ones.", true, func(s shared.Stats) int64 { return s.CompactedChunks }},
		{"sluice_shared_gets_total", "Ranged reads of chunks from shared storage (cache misses; one GET each).", true, func(s shared.Stats) int64 { return s.Gets }},
		{"sluice_shared_readaheads_total", "Chunks read ahead into the chunk cache for consumers reading history (shared.readahead.chunks; their GETs are in sluice_shared_gets_total).", true, func(s shared.Stats) int64 { return s.Readaheads }},
		{"sluice_shared_cache_bytes", "Bytes of chunks the in-memory chunk cache holds (bounded by shared.cache.memory.bytes).", false, func(s shared.Stats) int64 { return s.CacheBytes }},
		{"sluice_shared_cache_memory_hits_total", "Chunk reads served from the in-memory chunk cache.", true, func(s shared.Stats) int64 { return s.MemoryHits }},
		{"sluice_shared_cache_memory_misses_total", "Chunk reads that did not find their chunk in memory (looked for on disk, then in shared storage).", true, func(s shared.Stats) int64 { return s.MemoryMisses }},
		{"sluice_shared_cache_disk_hits_total", "Chunk reads served from the chunk cache's disk tier (shared.cache.dir).", true, func(s shared.Stats) int64 { return s.Disk.Hits }},
		{"sluice_shared_cache_disk_misses_total", "Chunk lookups the disk tier could not serve (then read from shared storage); invalid entries included.", true, func(s shared.Stats) int64 { return s.Disk.Misses }},
		{"sluice_shared_cache_disk_invalid_total", "Disk cache entries found torn or corrupt on read (deleted; the chunk is read from shared storage again).", true, func(s shared.Stats) int64 { return s.Disk.Invalid }},
		{"sluice_shared_cache_disk_writes_total", "Chunks written to the disk tier.", true, func(s shared.Stats) int64 { return s.Disk.Writes }},
		{"sluice_shared_cache_disk_skipped_total", "Chunks not written to the disk tier because its write queue was full.", true, func(s shared.Stats) int64 { return s.Disk.Skipped }},
		{"sluice_shared_cache_disk_bytes", "Bytes of the disk tier's entries (bounded by shared.cache.disk.bytes).", false, func(s shared.Stats) int64 { return s.Disk.Bytes }},
	} {
		v := m.value
		f := func() float64 { return float64(v(h.Stats())) }
		if m.counter {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help}, f))
		} else {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: m.name, Help: m.help}, f))
		}
	}
}
