package metastore

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestBackupRestore: a backup taken from a serving node restores into a new
// node (another id) that starts as a quorum of one with the same cluster
// id, topics, brokers, offsets and decommissioned brokers, and takes new
// writes; a truncated backup and an existing database are refused.
func TestBackupRestore(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, filepath.Join(dir, "a"))
	cfg.LeaseDuration = time.Hour
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := n.Client()
	ctx := ctxT(t)
	registerBrokers(t, c, []Broker{{ID: 1, Role: RoleWrite}, {ID: 2, Role: RoleWrite}, {ID: 10, Role: RoleRead}}...)
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "kept", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	offs := []OffsetCommit{{TopicPartition: TopicPartition{Topic: "kept", Partition: 1}, Offset: 42, LeaderEpoch: -1}}
	if err := c.CommitOffsets(ctx, Fence{}, "g", offs); err != nil {
		t.Fatal(err)
	}
	if err := c.DecommissionBroker(ctx, 2); err != nil {
		t.Fatal(err)
	}
	want, _ := c.TopicByName("kept")
	backup := filepath.Join(dir, "meta.backup")
	f, err := os.Create(backup)
	if err != nil {
		t.Fatal(err)
	}
	size, err := n.Backup(f)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Written after the backup: not in it.
	if _, err := c.CreateTopic(ctx, TopicSpec{Name: "later", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	clusterID := c.ClusterID()
	n.Close()

	b, err := os.ReadFile(backup)
	if err != nil || int64(len(b)) != size {
		t.Fatalf("backup file: %d bytes, %v; Backup said %d", len(b), err, size)
	}
	cut := filepath.Join(dir, "cut.backup")
	if err := os.WriteFile(cut, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadBackup(cut); err == nil {
		t.Fatal("a truncated backup was accepted")
	}
	info, err := ReadBackup(backup)
	if err != nil {
		t.Fatal(err)
	}
	if info.ClusterID != clusterID || info.Topics != 1 || info.Brokers != 3 {
		t.Fatalf("backup info %+v", info)
	}

	rdir := filepath.Join(dir, "restored")
	if _, err := Restore(backup, rdir, 7, "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(backup, rdir, 7, "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("restore over an existing database: %v", err)
	}
	rcfg := testConfig(t, 7, rdir)
	rcfg.LeaseDuration = time.Hour
	r, err := Open(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rc := r.Client()
	if rc.ClusterID() != clusterID {
		t.Fatalf("cluster id %q, want %q", rc.ClusterID(), clusterID)
	}
	if got, ok := rc.TopicByName("kept"); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("restored topic %+v, want %+v", got, want)
	}
	if _, ok := rc.TopicByName("later"); ok {
		t.Fatal("a topic created after the backup is in it")
	}
	if len(rc.Brokers()) != 3 || !reflect.DeepEqual(rc.Decommissioned(), []int32{2}) {
		t.Fatalf("brokers %v, decommissioned %v", rc.Brokers(), rc.Decommissioned())
	}
	got, err := rc.FetchOffsets(ctx, "g", nil)
	if err != nil || len(got) != 1 || got[0].Offset != 42 {
		t.Fatalf("restored offsets %+v, %v", got, err)
	}
	// The restored node is a quorum of one that takes writes.
	if _, err := rc.CreateTopic(ctx, TopicSpec{Name: "after", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if st := r.Status(); len(st.Voters) != 1 || st.Voters[0] != 7 || st.Applied <= info.Applied {
		t.Fatalf("restored node status %+v (backup applied %d)", st, info.Applied)
	}
}

// FuzzReadBackup: whatever a backup file holds, ReadBackup returns an
// error or a description, never a crash; what it accepts has a cluster id
// and an applied index. Seeded with a small metastore database, whole and
// cut.
func FuzzReadBackup(f *testing.F) {
	db, err := bolt.Open(filepath.Join(f.TempDir(), "seed.db"), 0o600, nil)
	if err != nil {
		f.Fatal(err)
	}
	var whole []byte
	err = db.Update(func(tx *bolt.Tx) error {
		if err := ensureBuckets(tx); err != nil {
			return err
		}
		m := tx.Bucket(bucketMeta)
		if err := m.Put(keyClusterID, []byte("seed-cluster")); err != nil {
			return err
		}
		if err := m.Put(keyApplied, u64(7)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketTopics).Put([]byte("t"), []byte(`{"Name":"t"}`)); err != nil {
			return err
		}
		g, err := tx.Bucket(bucketOffsets).CreateBucket([]byte("g"))
		if err != nil {
			return err
		}
		return g.Put(offsetKey("t", 0), []byte("x"))
	})
	if err == nil {
		var buf strings.Builder
		err = db.View(func(tx *bolt.Tx) error { _, err := tx.WriteTo(&buf); return err })
		whole = []byte(buf.String())
	}
	db.Close()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(whole)
	f.Add(whole[:4096])
	f.Add(whole[:len(whole)-4096])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "backup")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		info, err := ReadBackup(path)
		if err == nil && (info.ClusterID == "" || info.Applied == 0) {
			t.Fatalf("accepted %+v", info)
		}
	})
}

// TestImageChecks: a peer's snapshot image is accepted by the guard
// (checkImage) and installed when it was applied at least to the
// snapshot's index, and refused by both when it is behind it or has no
// meta bucket; bytes that are no bbolt file are refused by the guard.
func TestImageChecks(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, filepath.Join(dir, "a"))
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.Client().CreateTopic(ctxT(t), TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := n.Backup(&buf); err != nil {
		t.Fatal(err)
	}
	image := buf.Bytes()
	path := filepath.Join(dir, "image")
	if err := os.WriteFile(path, image, 0o600); err != nil {
		t.Fatal(err)
	}
	info, err := ReadBackup(path)
	if err != nil {
		t.Fatal(err)
	}
	// The same image without its meta bucket.
	bare := filepath.Join(dir, "bare")
	if err := os.WriteFile(bare, image, 0o600); err != nil {
		t.Fatal(err)
	}
	deleteBucket(t, bare, bucketMeta)
	noMeta, err := os.ReadFile(bare)
	if err != nil {
		t.Fatal(err)
	}

	install := func(data []byte, index uint64) error {
		_, err := installImage(t, data, index)
		return err
	}
	check := func(data []byte, index uint64) error {
		return n.checkImage(&pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(index), Term: proto.Uint64(1)}})
	}
	for _, c := range []struct {
		name  string
		data  []byte
		index uint64
		ok    bool
	}{
		{"at its applied index", image, info.Applied, true},
		{"past the snapshot's index", image, info.Applied - 1, true},
		{"behind the snapshot's index", image, info.Applied + 1, false},
		{"without a meta bucket", noMeta, 1, false},
	} {
		if err := check(c.data, c.index); (err == nil) != c.ok {
			t.Errorf("%s: checkImage: %v, want ok %v", c.name, err, c.ok)
		}
		if err := install(c.data, c.index); (err == nil) != c.ok {
			t.Errorf("%s: installSnapshot: %v, want ok %v", c.name, err, c.ok)
		}
	}
	if err := check([]byte("not a bbolt file"), 1); err == nil {
		t.Error("checkImage accepted bytes that are no bbolt file")
	}
	left, _ := filepath.Glob(filepath.Join(cfg.DataDir, "snapshot.*"))
	if len(left) != 0 {
		t.Errorf("images left behind: %v", left)
	}
}

// deleteBucket deletes bucket name from the bbolt file at path.
func deleteBucket(t *testing.T, path string, name []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(name) }); err != nil {
		t.Fatal(err)
	}
}

// installImage installs image as a snapshot at index into a new database
// (its buckets made, as at a node's first start) and returns the
// database, closed when the test ends, and the install's error.
func installImage(t *testing.T, image []byte, index uint64) (*bolt.DB, error) {
	t.Helper()
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "meta.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	inst := &Node{cfg: Config{DataDir: dir}}
	return db, db.Update(func(tx *bolt.Tx) error {
		if err := ensureBuckets(tx); err != nil {
			return err
		}
		_, err := inst.installSnapshot(tx, &pb.Snapshot{Data: image,
			Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(index), Term: proto.Uint64(1)}})
		return err
	})
}
