package objstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// SLUICE_OBJSTORE_DIR runs the suite in a directory of another file system
// (an NFS or CephFS mount) instead of a temporary directory.
func TestDir(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	if shared := os.Getenv("SLUICE_OBJSTORE_DIR"); shared != "" {
		var err error
		if root, err = os.MkdirTemp(shared, "sluice-objstore-test-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(root) })
	}
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, d, true)
	// No temporary file outlives its Put.
	filepath.WalkDir(d.Root(), func(p string, e os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

// A writer that died in the middle of a Put leaves a temporary file: List
// never shows it, Get never finds it, SweepTemp removes it once old.
func TestDirTempFiles(t *testing.T) {
	ctx := context.Background()
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, d, "p/a", []byte("a"))
	old := filepath.Join(d.Root(), "p", tempPrefix+"dead")
	fresh := filepath.Join(d.Root(), "p", tempPrefix+"inflight")
	for _, f := range []string{old, fresh} {
		if err := os.WriteFile(f, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, d, ""); !slices.Equal(got, []string{"p/a"}) {
		t.Fatalf("List = %q, want only p/a", got)
	}
	n, err := d.SweepTemp(ctx, time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("SweepTemp = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old temporary file still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh temporary file (a Put in flight) was removed: %v", err)
	}
}

// A second Dir over the same directory (another broker on the same NFS
// mount) sees the first one's objects and is fenced by its creates.
func TestDirTwoClients(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	a, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.PutIfAbsent(ctx, "t/0/00000000000000000000", []byte("from a")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "t/0/00000000000000000000", []byte("from b")); !errors.Is(err, ErrExists) {
		t.Fatalf("b's create of a's key: %v, want ErrExists", err)
	}
	if got, err := b.Get(ctx, "t/0/00000000000000000000"); err != nil || string(got) != "from a" {
		t.Fatalf("b reads %q, %v", got, err)
	}
}

// A key whose parent is an object (on S3 both can exist) is refused by
// the directory backend with an error, not stored elsewhere.
func TestDirKeyUnderObject(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, d, "x", []byte("file"))
	if err := d.Put(context.Background(), "x/y", []byte("child")); err == nil {
		t.Fatal("Put of x/y under the object x succeeded")
	}
	if got, err := d.Get(context.Background(), "x"); err != nil || string(got) != "file" {
		t.Fatalf("x = %q, %v", got, err)
	}
}
