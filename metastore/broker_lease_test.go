package metastore

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestBrokerLeaseRecorded: the broker lease is recorded with the cluster
// and not changed by a node configured otherwise later; that node expires
// brokers by the longer of the two (never sooner than a broker holding
// the recorded lease believes it holds it); a cluster that predates the
// record gets one from its leader.
func TestBrokerLeaseRecorded(t *testing.T) {
	dir := t.TempDir()
	open := func(lease time.Duration) *Node {
		t.Helper()
		cfg := testConfig(t, 1, dir)
		cfg.LeaseDuration = lease
		n, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.WaitReady(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		return n
	}
	recorded := func(n *Node, want time.Duration) {
		t.Helper()
		checkFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			if got := n.Client().BrokerLease(); got != want {
				return fmt.Errorf("recorded broker lease %v, want %v", got, want)
			}
			return nil
		})
	}

	n := open(2 * time.Second)
	recorded(n, 2*time.Second)
	n.Close()

	// Configured shorter now: the record stands, and brokers are expired
	// by the longer.
	n = open(300 * time.Millisecond)
	recorded(n, 2*time.Second)
	if _, err := n.Client().RegisterBroker(ctxT(t), Broker{ID: 7, Role: RoleRead}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	registered := func() bool {
		for _, b := range n.Client().Brokers() {
			if b.ID == 7 {
				return true
			}
		}
		return false
	}
	for time.Since(start) < 1500*time.Millisecond {
		if !registered() {
			t.Fatalf("broker expired after %v, within the recorded lease of 2s (configured 300ms)", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if registered() {
			return errors.New("broker still registered")
		}
		return nil
	})
	n.Close()

	// A cluster created before the lease was recorded: its first leader
	// records its own.
	db, err := bolt.Open(filepath.Join(dir, dbFileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyBrokerLease) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	n = open(1500 * time.Millisecond)
	recorded(n, 1500*time.Millisecond)
	n.Close()
}
