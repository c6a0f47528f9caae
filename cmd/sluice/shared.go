package main

import (
	"fmt"
	"time"

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
	h := shared.NewHost(shared.Config{
		NodeID:      cfg.NodeID,
		Incarnation: incarnation,
		Store:       store,
		Catalog:     catalog,
		UploadBytes: cfg.SharedUploadBytes,
		Linger:      time.Duration(cfg.SharedUploadLingerMs) * time.Millisecond,
		CacheBytes:  cfg.SharedCacheMemoryBytes,
		Logger:      lg.With().Str("component", "shared").Logger(),
	})
	lg.Info().Str("type", cfg.SharedStorageType).Msg("shared storage configured")
	return h, store, nil
}
