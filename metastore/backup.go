package metastore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Backup and restore of the metadata quorum's state.
//
// A backup is the node's bbolt file as one read transaction sees it
// (bbolt's Tx.WriteTo, the way a snapshot image is made for a peer), so it
// is consistent while the node serves: the state machine at one applied
// index, with the raft state of that moment. Any member's copy holds
// everything committed and applied on it.
//
// Restore builds a new node's database from a backup, offline: the state
// buckets are copied whole, and the raft state is a snapshot at the
// backup's applied index whose only voter is the new node, so the node
// starts as a quorum of one at that index (a fresh raft history would
// start at 0, below the state). Further meta nodes join it empty
// (meta.join) and get the state as a snapshot. What was committed after
// the backup is not in it (offsets committed since, for instance).

// Backup writes a consistent copy of the node's database to w and returns
// its size.
func (n *Node) Backup(w io.Writer) (int64, error) {
	var size int64
	err := n.db.View(func(tx *bolt.Tx) error {
		var err error
		size, err = tx.WriteTo(w)
		return err
	})
	return size, err
}

// BackupInfo describes a backup file.
type BackupInfo struct {
	ClusterID string
	Applied   uint64
	Term      uint64
	Topics    int
	Brokers   int
}

// ReadBackup opens a backup file read-only and checks that it is a
// complete metastore database (every state bucket, a cluster id and an
// applied index), so a truncated copy is refused before it is restored.
func ReadBackup(path string) (info BackupInfo, err error) {
	// bbolt trusts its file: a corrupt page makes it panic, and a page
	// past the end of a cut file faults in the memory map. A backup is
	// input, so both become an error (SetPanicOnFault turns the fault
	// into a panic of this goroutine).
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			info, err = BackupInfo{}, fmt.Errorf("metastore backup %s: corrupt: %v", path, p)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return info, fmt.Errorf("metastore backup %s: %w", path, err)
	}
	defer db.Close()
	fi, err := os.Stat(path)
	if err != nil {
		return info, err
	}
	err = db.View(func(tx *bolt.Tx) error {
		// A copy cut short ends before the pages its meta page counts;
		// reading them through the map would fault, so check first.
		if fi.Size() < tx.Size() {
			return fmt.Errorf("truncated: %d bytes of %d", fi.Size(), tx.Size())
		}
		// A key takes at least a 16-byte element header, so a walk that
		// meets more keys than that is going round a cycle of corrupt
		// page references.
		budget := fi.Size()/16 + 1
		// Every page a restore copies is read here, in this goroutine
		// (bbolt's Tx.Check reads them in one of its own, where a
		// corrupt page's panic could not be recovered).
		for _, name := range append([][]byte{bucketRaft}, stateBuckets...) {
			b := tx.Bucket(name)
			if b == nil && laterBucket(name) {
				continue // a backup of a version before the bucket existed
			}
			if b == nil {
				return fmt.Errorf("bucket %q missing: not a metastore database", name)
			}
			if err := walkBucket(b, 0, &budget); err != nil {
				return err
			}
		}
		m := tx.Bucket(bucketMeta)
		info.ClusterID = string(m.Get(keyClusterID))
		info.Applied = getU64(m.Get(keyApplied))
		if info.ClusterID == "" || info.Applied == 0 {
			return errors.New("no cluster id or applied index: the quorum had not started when it was taken")
		}
		if v := tx.Bucket(bucketRaft).Get(keyHardState); v != nil {
			hs := &pb.HardState{}
			if err := proto.Unmarshal(v, hs); err != nil {
				return fmt.Errorf("hard state: %w", err)
			}
			info.Term = hs.GetTerm()
		}
		info.Topics = tx.Bucket(bucketTopics).Stats().KeyN
		info.Brokers = tx.Bucket(bucketBrokers).Stats().KeyN
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("metastore backup %s: %w", path, err)
	}
	return info, nil
}

// walkBucket reads every key and value of b and its nested buckets (the
// schema nests one level), within budget keys in all.
func walkBucket(b *bolt.Bucket, depth int, budget *int64) error {
	return b.ForEach(func(k, v []byte) error {
		if *budget--; *budget < 0 {
			return errors.New("corrupt: more keys than the file can hold")
		}
		if v == nil {
			sub := b.Bucket(k)
			if sub == nil || depth >= 2 {
				return fmt.Errorf("corrupt: key %q is an unexpected bucket", k)
			}
			return walkBucket(sub, depth+1, budget)
		}
		return nil
	})
}

// Restore creates the database of meta node id (raft address listen) in
// dataDir, the metastore's directory (a node's data.dir/meta), from the
// backup file. It refuses to overwrite an existing database.
func Restore(backup, dataDir string, id uint64, listen string) (BackupInfo, error) {
	info, err := ReadBackup(backup)
	if err != nil {
		return info, err
	}
	if id == 0 || listen == "" {
		return info, fmt.Errorf("metastore restore: a node id and its meta.listen address are needed")
	}
	dst := filepath.Join(dataDir, dbFileName)
	if _, err := os.Stat(dst); err == nil {
		return info, fmt.Errorf("metastore restore: %s exists; restore into an empty data directory", dst)
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return info, fmt.Errorf("metastore restore: %w", err)
	}
	src, err := bolt.Open(backup, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return info, fmt.Errorf("metastore restore: %w", err)
	}
	defer src.Close()
	// Built under a temporary name and renamed, so a failed restore
	// leaves no database a node would start from.
	tmp := dst + ".restore"
	_ = os.Remove(tmp)
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return info, fmt.Errorf("metastore restore: %w", err)
	}
	err = src.View(func(stx *bolt.Tx) error {
		return db.Update(func(tx *bolt.Tx) error {
			if err := ensureBuckets(tx); err != nil {
				return err
			}
			// ReadBackup refused a backup missing a bucket other than
			// a later version's.
			if err := replaceState(tx, stx); err != nil {
				return err
			}
			term := max(info.Term, 1)
			rb := tx.Bucket(bucketRaft)
			if err := rb.Put(keyNodeID, u64(id)); err != nil {
				return err
			}
			if err := saveHardState(tx, &pb.HardState{Term: proto.Uint64(term), Commit: proto.Uint64(info.Applied)}); err != nil {
				return err
			}
			snap := &pb.SnapshotMetadata{Index: proto.Uint64(info.Applied), Term: proto.Uint64(term), ConfState: &pb.ConfState{Voters: []uint64{id}}}
			if err := saveSnapshotMeta(tx, snap, ^uint64(0)); err != nil {
				return err
			}
			return tx.Bucket(bucketMeta).Put(keyMembers, mustJSON(map[uint64]string{id: listen}))
		})
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return info, fmt.Errorf("metastore restore: %w", err)
	}
	return info, nil
}
