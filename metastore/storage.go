package metastore

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Raft's persistent state lives in the raft and raft_log buckets of the same
// bbolt file as the state machine (schema.go). raft reads the log through a
// raft.MemoryStorage that mirrors what is on disk: it is filled from bbolt
// at start (loadRaftState) and appended to only after the bbolt transaction
// holding the same entries has committed (doc.go, step 1), as raftexample
// does with its WAL. Compaction bounds its size.

// raftDisk is what loadRaftState found on disk.
type raftDisk struct {
	hs      *pb.HardState
	snap    *pb.SnapshotMetadata // nil before the first snapshot
	ents    []*pb.Entry
	applied uint64
}

func loadRaftState(db *bolt.DB) (*raftDisk, error) {
	d := &raftDisk{}
	err := db.View(func(tx *bolt.Tx) error {
		rb := tx.Bucket(bucketRaft)
		if v := rb.Get(keyHardState); v != nil {
			d.hs = &pb.HardState{}
			if err := proto.Unmarshal(v, d.hs); err != nil {
				return fmt.Errorf("hard state: %w", err)
			}
		}
		if v := rb.Get(keySnapshot); v != nil {
			d.snap = &pb.SnapshotMetadata{}
			if err := proto.Unmarshal(v, d.snap); err != nil {
				return fmt.Errorf("snapshot metadata: %w", err)
			}
		}
		first := uint64(0)
		if d.snap != nil {
			first = d.snap.GetIndex()
		}
		c := tx.Bucket(bucketRaftLog).Cursor()
		for k, v := c.Seek(u64(first + 1)); k != nil; k, v = c.Next() {
			e := &pb.Entry{}
			if err := proto.Unmarshal(v, e); err != nil {
				return fmt.Errorf("log entry %d: %w", getU64(k), err)
			}
			d.ents = append(d.ents, e)
		}
		d.applied = getU64(tx.Bucket(bucketMeta).Get(keyApplied))
		return nil
	})
	return d, err
}

// newMemoryStorage rebuilds raft's view of the log from disk.
func (d *raftDisk) newMemoryStorage() (*raft.MemoryStorage, error) {
	ms := raft.NewMemoryStorage()
	if d.snap != nil {
		if err := ms.ApplySnapshot(&pb.Snapshot{Metadata: d.snap}); err != nil {
			return nil, err
		}
	}
	if d.hs != nil {
		if err := ms.SetHardState(d.hs); err != nil {
			return nil, err
		}
	}
	if len(d.ents) > 0 {
		if err := ms.Append(d.ents); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("metastore: marshal %T: %v", m, err))
	}
	return b
}

// saveHardState writes hs (doc.go step 1).
func saveHardState(tx *bolt.Tx, hs *pb.HardState) error {
	return tx.Bucket(bucketRaft).Put(keyHardState, mustMarshal(hs))
}

// appendEntries writes ents, first discarding every persisted entry at or
// after ents[0]'s index (doc.go step 1: "when writing an Entry with Index i,
// any previously-persisted entries with Index >= i must be discarded").
func appendEntries(tx *bolt.Tx, ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	b := tx.Bucket(bucketRaftLog)
	c := b.Cursor()
	for k, _ := c.Seek(u64(ents[0].GetIndex())); k != nil; k, _ = c.Seek(u64(ents[0].GetIndex())) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	for _, e := range ents {
		if err := b.Put(u64(e.GetIndex()), mustMarshal(e)); err != nil {
			return err
		}
	}
	return nil
}

// saveSnapshotMeta records that the log now starts after meta's index and
// deletes the entries up to compactTo (inclusive) from the log.
func saveSnapshotMeta(tx *bolt.Tx, meta *pb.SnapshotMetadata, compactTo uint64) error {
	if err := tx.Bucket(bucketRaft).Put(keySnapshot, mustMarshal(meta)); err != nil {
		return err
	}
	return deleteLogUpTo(tx, compactTo)
}

func deleteLogUpTo(tx *bolt.Tx, upTo uint64) error {
	c := tx.Bucket(bucketRaftLog).Cursor()
	for k, _ := c.First(); k != nil && getU64(k) <= upTo; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// ensureBuckets creates every bucket of the schema.
func ensureBuckets(tx *bolt.Tx) error {
	for _, name := range append(append([][]byte{}, raftBuckets...), stateBuckets...) {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}
