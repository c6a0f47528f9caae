package objstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// TestDirKill9 kills a writer process with SIGKILL in the middle of a
// stream of Puts: every object it reported as stored is there whole, and
// no other key shows anything but a whole object (a Put is all or nothing
// to readers). Power loss is the fsyncs' part, which a kill does not test.
func TestDirKill9(t *testing.T) {
	if os.Getenv("OBJSTORE_KILL9_WRITER") != "" {
		kill9Writer()
		return
	}
	root := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDirKill9$")
	cmd.Env = append(os.Environ(), "OBJSTORE_KILL9_WRITER="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	sc := bufio.NewScanner(out)
	deadline := time.Now().Add(2 * time.Minute)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "stored "); ok {
			acked = append(acked, k)
		}
		if len(acked) == 100 || time.Now().After(deadline) {
			break
		}
	}
	cmd.Process.Kill() //nolint:errcheck
	cmd.Wait()         //nolint:errcheck
	if len(acked) < 20 {
		t.Fatalf("the writer stored only %d objects", len(acked))
	}
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range acked {
		got, err := d.Get(ctx, k)
		if err != nil {
			t.Fatalf("acknowledged %s: %v", k, err)
		}
		if !bytes.Equal(got, kill9Body(k)) {
			t.Fatalf("acknowledged %s: %d bytes, not the object written", k, len(got))
		}
	}
	for _, k := range listKeys(t, d, "") {
		got, err := d.Get(ctx, k)
		if err != nil || !bytes.Equal(got, kill9Body(k)) {
			t.Fatalf("%s after the kill: %d bytes, %v: a torn object", k, len(got), err)
		}
	}
	t.Logf("%d objects acknowledged before the kill, %d listed after", len(acked), len(listKeys(t, d, "")))
}

// kill9Body is the object stored under key: 256 KiB derived from the key.
func kill9Body(key string) []byte {
	b := bytes.Repeat([]byte(key+"|"), (256<<10)/(len(key)+1)+1)
	return b[:256<<10]
}

func kill9Writer() {
	d, err := OpenDir(os.Getenv("OBJSTORE_KILL9_WRITER"))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	// Four writers, so that the kill finds Puts in every stage.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				k := fmt.Sprintf("w%d/%08d", w, i)
				if err := d.Put(context.Background(), k, kill9Body(k)); err != nil {
					fmt.Println("put:", err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Println("stored", k)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
