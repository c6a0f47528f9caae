package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/internal/metaprops"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/replica"
)

// claimDataDir checks the partition data directory's identity
// (meta.properties, as Kafka keeps one per log directory) before any
// replica is opened: it must belong to this node.id and to this cluster,
// as Kafka checks. A directory without one (a new disk, or data written
// before meta.properties existed) gets one with a new directory.id. With
// raft replication the metastore then records the directory.id and
// refuses a broker that comes back as a raft voter on a different one
// (metastore.Client.ClaimDirectory): its raft votes are lost.
func claimDataDir(ctx context.Context, catalog *metastore.Client, cfg configs.Config, lg zerolog.Logger) error {
	dir := filepath.Join(cfg.DataDir, "logs")
	// Durably: a power cut must not lose the directory with the identity
	// written into it (a new directory.id would make the metastore refuse
	// this broker as a raft voter).
	if err := fsutil.MkdirAllSync(dir, 0o755); err != nil {
		return err
	}
	p, ok, err := metaprops.Load(dir)
	if err != nil {
		return err
	}
	cluster := catalog.ClusterID()
	switch {
	case ok && p.NodeID != cfg.NodeID:
		return fmt.Errorf("data directory %s belongs to node.id %d, not %d (%s)", dir, p.NodeID, cfg.NodeID, metaprops.FileName)
	case ok && p.ClusterID != "" && cluster != "" && p.ClusterID != cluster:
		return fmt.Errorf("data directory %s belongs to cluster %s, but the metastore is cluster %s (%s)", dir, p.ClusterID, cluster, metaprops.FileName)
	case !ok:
		p = metaprops.Props{NodeID: cfg.NodeID, ClusterID: cluster, DirectoryID: metaprops.NewDirectoryID()}
		if err := metaprops.Write(dir, p); err != nil {
			return fmt.Errorf("writing %s: %w", filepath.Join(dir, metaprops.FileName), err)
		}
		lg.Info().Str("directory_id", p.DirectoryID).Str("dir", dir).Msg("new data directory identity")
	}
	// Every partition is a raft group: a directory of the plain local
	// logs earlier versions kept is refused.
	if err := replica.CheckDir(dir); err != nil {
		return err
	}
	if cfg.ReplicaListen == "" {
		return nil // one broker, one-voter groups: no other voter's votes to lose
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := catalog.ClaimDirectory(cctx, cfg.NodeID, p.DirectoryID); err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	return nil
}
