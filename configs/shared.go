package configs

import (
	"fmt"
	"strings"
)

// SharedStorage is the broker's shared storage (docs/shared-storage.md):
// an S3-compatible bucket or a directory on a shared file system, where
// the partitions of topics in replication.mode=shared keep their data.
// Every broker of a cluster must name the same storage.
type SharedStorage struct {
	// SharedStorageType is "" (none: replication.mode=shared is
	// refused), "dir" or "s3".
	SharedStorageType string `mapstructure:"shared.storage.type"`
	// SharedStorageDir is the shared directory (NFS, CephFS) for "dir".
	SharedStorageDir string `mapstructure:"shared.storage.dir"`
	// The bucket for "s3" (objstore.S3Config). Credentials come from the
	// environment (AWS_ACCESS_KEY_ID, ...), the shared credentials file or
	// the instance role, never from this file.
	SharedS3Endpoint          string `mapstructure:"shared.storage.s3.endpoint"`
	SharedS3Bucket            string `mapstructure:"shared.storage.s3.bucket"`
	SharedS3Prefix            string `mapstructure:"shared.storage.s3.prefix"`
	SharedS3Region            string `mapstructure:"shared.storage.s3.region"`
	SharedS3TLS               bool   `mapstructure:"shared.storage.s3.tls"`
	SharedS3PathStyle         bool   `mapstructure:"shared.storage.s3.path.style"`
	SharedS3ConditionalWrites bool   `mapstructure:"shared.storage.s3.conditional.writes"`
	// SharedUploadBytes and SharedUploadLingerMs bound a write broker's
	// upload buffer: an object is cut when it holds this many bytes or
	// its oldest batch waited this long.
	SharedUploadBytes    int64 `mapstructure:"shared.upload.bytes"`
	SharedUploadLingerMs int64 `mapstructure:"shared.upload.linger.ms"`
	// SharedUploadParallel is how many objects a write broker has in
	// flight at once: uploading, or uploaded and waiting for their turn
	// to commit (commits keep the order the objects were cut in). The
	// buffer and the objects in flight hold at most this many times
	// SharedUploadBytes; beyond it produce requests wait.
	SharedUploadParallel int64 `mapstructure:"shared.upload.parallel"`
	// SharedCacheMemoryBytes bounds the in-memory cache of chunk bytes
	// Fetch reads from.
	SharedCacheMemoryBytes int64 `mapstructure:"shared.cache.memory.bytes"`
	// SharedCacheDir and SharedCacheDiskBytes are the chunk cache's disk
	// tier: chunks read from shared storage or pushed out of memory are
	// kept in files there, within this many bytes (0: no disk tier). The
	// directory holds nothing that cannot be read again from shared
	// storage; "" is data.dir/shared-cache.
	SharedCacheDir       string `mapstructure:"shared.cache.dir"`
	SharedCacheDiskBytes int64  `mapstructure:"shared.cache.disk.bytes"`
	// SharedReadaheadChunks is how many chunks past the one a Fetch ended
	// in are read into that cache in the background, so a consumer
	// replaying history finds its next chunks there (0: none).
	SharedReadaheadChunks int64 `mapstructure:"shared.readahead.chunks"`
	// SharedGCGraceMs is how old an object of shared storage must be
	// before garbage collection deletes it when no committed chunk
	// references it (an upload whose commit never happened).
	SharedGCGraceMs int64 `mapstructure:"shared.gc.grace.ms"`
	// The compactor of a write broker merges, in each partition it
	// writes, every run of more than SharedCompactChunks consecutive
	// chunks smaller than SharedCompactChunkBytes into one object of at
	// most SharedCompactObjectBytes, checking every
	// SharedCompactIntervalMs (0: never).
	SharedCompactIntervalMs  int64 `mapstructure:"shared.compact.interval.ms"`
	SharedCompactChunks      int64 `mapstructure:"shared.compact.chunks"`
	SharedCompactChunkBytes  int64 `mapstructure:"shared.compact.chunk.bytes"`
	SharedCompactObjectBytes int64 `mapstructure:"shared.compact.object.bytes"`
}

// DefaultSharedStorage is no shared storage, with the upload and cache
// bounds docs/shared-storage.md gives.
func DefaultSharedStorage() SharedStorage {
	return SharedStorage{
		SharedS3ConditionalWrites: true,
		SharedUploadBytes:         8 << 20,
		SharedUploadLingerMs:      250,
		SharedUploadParallel:      4,
		SharedCacheMemoryBytes:    64 << 20,
		SharedCacheDiskBytes:      1 << 30,
		SharedReadaheadChunks:     2,
		SharedGCGraceMs:           3600000,
		SharedCompactIntervalMs:   60000,
		SharedCompactChunks:       8,
		SharedCompactChunkBytes:   1 << 20,
		SharedCompactObjectBytes:  32 << 20,
	}
}

// Enabled says whether the broker has shared storage configured.
func (s SharedStorage) Enabled() bool { return s.SharedStorageType != "" }

func (s SharedStorage) validate() error {
	switch s.SharedStorageType {
	case "":
	case "dir":
		if s.SharedStorageDir == "" {
			return fmt.Errorf("shared.storage.type=dir needs shared.storage.dir")
		}
	case "s3":
		if s.SharedS3Endpoint == "" || s.SharedS3Bucket == "" {
			return fmt.Errorf("shared.storage.type=s3 needs shared.storage.s3.endpoint and shared.storage.s3.bucket")
		}
	default:
		return fmt.Errorf("shared.storage.type %q is not dir or s3", s.SharedStorageType)
	}
	if s.SharedUploadBytes < 1024 {
		return fmt.Errorf("shared.upload.bytes must be at least 1024")
	}
	if s.SharedUploadLingerMs < 1 {
		return fmt.Errorf("shared.upload.linger.ms must be at least 1")
	}
	if s.SharedUploadParallel < 1 || s.SharedUploadParallel > 64 {
		return fmt.Errorf("shared.upload.parallel must be between 1 and 64")
	}
	if s.SharedCacheMemoryBytes < 1<<20 {
		return fmt.Errorf("shared.cache.memory.bytes must be at least 1 MiB")
	}
	if s.SharedCacheDiskBytes != 0 && s.SharedCacheDiskBytes < 1<<20 {
		return fmt.Errorf("shared.cache.disk.bytes must be 0 (no disk cache) or at least 1 MiB")
	}
	if s.SharedReadaheadChunks < 0 || s.SharedReadaheadChunks > 64 {
		return fmt.Errorf("shared.readahead.chunks must be between 0 and 64")
	}
	if s.SharedGCGraceMs < 1000 {
		return fmt.Errorf("shared.gc.grace.ms must be at least 1000")
	}
	if s.SharedCompactIntervalMs < 0 {
		return fmt.Errorf("shared.compact.interval.ms must not be negative (0 turns the compactor off)")
	}
	if s.SharedCompactChunks < 1 {
		return fmt.Errorf("shared.compact.chunks must be at least 1")
	}
	if s.SharedCompactChunkBytes < 1 {
		return fmt.Errorf("shared.compact.chunk.bytes must be at least 1")
	}
	if s.SharedCompactObjectBytes < s.SharedCompactChunkBytes {
		return fmt.Errorf("shared.compact.object.bytes must be at least shared.compact.chunk.bytes")
	}
	return nil
}

// CheckReplicationMode refuses replication.mode=shared (as a topic config
// or the cluster default) on a broker without shared storage.
func (c Config) CheckReplicationMode(value string) error {
	if strings.EqualFold(value, "shared") && !c.SharedStorage.Enabled() {
		return fmt.Errorf("replication.mode=shared needs shared storage, and this broker has none configured (set shared.storage.type to dir or s3)")
	}
	return nil
}
