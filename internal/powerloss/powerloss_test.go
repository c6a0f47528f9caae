//go:build linux

package powerloss

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

func write(t *testing.T, path string, data []byte, flag int) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestImages drives each kind of change the Recorder must undo and checks
// the exact image and many random ones against what a power cut may leave.
func TestImages(t *testing.T) {
	root := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "base"), []byte("baseline"), 0o644))
	r, err := Start(root)
	must(t, err)
	t.Cleanup(r.Stop)
	p := filepath.Join(root, "p")
	must(t, os.Mkdir(p, 0o755))
	must(t, fsutil.SyncDir(root))

	// a: synced, then appended to and overwritten in place without a sync.
	a := write(t, filepath.Join(p, "a"), bytes.Repeat([]byte("A"), 3*pageSize), 0)
	must(t, fsutil.Fdatasync(a))
	must(t, fsutil.SyncDir(p))
	_, err = a.Write(bytes.Repeat([]byte("B"), 5000))
	must(t, err)
	_, err = a.WriteAt([]byte("CC"), pageSize+10)
	must(t, err)
	// c: replaced durably once, then renamed over without the directory sync.
	must(t, fsutil.WriteFileSync(p, "c", []byte("old")))
	tmp := write(t, filepath.Join(p, "c.tmp"), []byte("new"), 0)
	must(t, fsutil.Fsync(tmp))
	must(t, os.Rename(filepath.Join(p, "c.tmp"), filepath.Join(p, "c")))
	// b: synced, but its directory entry never was.
	b := write(t, filepath.Join(p, "b"), []byte("bbb"), 0)
	must(t, fsutil.Fdatasync(b))
	// m/n: directories made with MkdirAllSync survive, with a file synced in.
	must(t, fsutil.MkdirAllSync(filepath.Join(root, "m", "n"), 0o755))
	must(t, fsutil.WriteFileSync(filepath.Join(root, "m", "n"), "y", []byte("y")))
	// base: removed without a directory sync.
	must(t, os.Remove(filepath.Join(root, "base")))
	// q: a synced directory whose own entry was never synced.
	q := filepath.Join(root, "q")
	must(t, os.Mkdir(q, 0o755))
	must(t, fsutil.WriteFileSync(q, "x", []byte("x")))
	must(t, r.Cut())
	// Writes after the cut never reach an image.
	_, err = a.Write([]byte("after"))
	must(t, err)
	must(t, fsutil.SyncDir(p))

	exact := t.TempDir()
	must(t, r.Image(exact, Exact, 0))
	read := func(dir, name string) ([]byte, bool) {
		d, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			return nil, false
		}
		must(t, err)
		return d, true
	}
	if d, ok := read(exact, "p/a"); !ok || !bytes.Equal(d, bytes.Repeat([]byte("A"), 3*pageSize)) {
		t.Fatalf("exact a: %d bytes %v", len(d), ok)
	}
	if _, ok := read(exact, "p/b"); ok {
		t.Fatal("exact image kept b, whose entry was never synced")
	}
	if d, _ := read(exact, "p/c"); string(d) != "old" {
		t.Fatalf("exact c = %q, want the synced old", d)
	}
	if _, ok := read(exact, "p/c.tmp"); ok {
		t.Fatal("exact image kept c.tmp")
	}
	if d, _ := read(exact, "base"); string(d) != "baseline" {
		t.Fatalf("exact image lost the unsynced removal's file: %q", d)
	}
	if d, _ := read(exact, "m/n/y"); string(d) != "y" {
		t.Fatalf("exact image lost a file in directories made with MkdirAllSync: %q", d)
	}
	if _, err := os.Stat(filepath.Join(exact, "q")); !os.IsNotExist(err) {
		t.Fatalf("exact image kept q: %v", err)
	}

	seen := map[string]bool{}
	for seed := int64(1); seed <= 100; seed++ {
		dir := filepath.Join(t.TempDir(), "img")
		must(t, r.Image(dir, Random, seed))
		d, ok := read(dir, "p/a")
		if !ok || len(d) < 3*pageSize || len(d) > 3*pageSize+5000 {
			t.Fatalf("seed %d: a has %d bytes", seed, len(d))
		}
		if !bytes.Equal(d[:pageSize], bytes.Repeat([]byte("A"), pageSize)) || !bytes.Equal(d[2*pageSize:3*pageSize], bytes.Repeat([]byte("A"), pageSize)) {
			t.Fatalf("seed %d: a's untouched pages changed", seed)
		}
		if bytes.Contains(d, []byte("after")) {
			t.Fatalf("seed %d: a write after the cut reached the image", seed)
		}
		switch {
		case len(d) == 3*pageSize:
			seen["a-lost-tail"] = true
		case bytes.Equal(d[3*pageSize:], bytes.Repeat([]byte("B"), 5000)):
			seen["a-whole-tail"] = true
		case !bytes.Equal(d[3*pageSize:], bytes.Repeat([]byte("B"), len(d)-3*pageSize)):
			seen["a-torn-tail"] = true
		}
		if c, _ := read(dir, "p/c"); string(c) != "old" && string(c) != "new" {
			t.Fatalf("seed %d: c = %q", seed, c)
		} else {
			seen["c-"+string(c)] = true
		}
		if bb, ok := read(dir, "p/b"); ok && string(bb) != "bbb" {
			t.Fatalf("seed %d: b = %q", seed, bb)
		} else {
			seen["b-"+map[bool]string{true: "kept", false: "lost"}[ok]] = true
		}
		again := filepath.Join(t.TempDir(), "img")
		must(t, r.Image(again, Random, seed))
		if d2, _ := read(again, "p/a"); !bytes.Equal(d, d2) {
			t.Fatalf("seed %d: two images differ", seed)
		}
	}
	for _, k := range []string{"a-lost-tail", "a-whole-tail", "a-torn-tail", "c-old", "c-new", "b-kept", "b-lost"} {
		if !seen[k] {
			t.Errorf("no image among 100 seeds showed %s", k)
		}
	}
}

// TestCutHoldsSyncs: a sync that ends while Cut reads the files must not
// return to its caller before the read is over. The caller here is a
// checkpoint: it syncs a segment's appended bytes and then deletes the
// write-ahead log file that held them too. If the deletion reached the read
// while the segment sync, which came after the cut instant, did not reach
// the image, an image could lose the bytes both ways: one no power cut
// leaves.
func TestCutHoldsSyncs(t *testing.T) {
	root := t.TempDir()
	r, err := Start(root)
	must(t, err)
	t.Cleanup(r.Stop)
	seg := write(t, filepath.Join(root, "seg"), []byte("old;"), 0)
	must(t, fsutil.Fdatasync(seg))
	w := write(t, filepath.Join(root, "wal"), []byte("new;"), 0)
	must(t, fsutil.Fdatasync(w))
	must(t, w.Close())
	must(t, fsutil.SyncDir(root))
	_, err = seg.Write([]byte("new;")) // in the wal file, not yet synced here
	must(t, err)

	done := make(chan struct{})
	scanHook = func(rel string) {
		if rel != "." {
			return
		}
		scanHook = nil
		n := r.reports.Load()
		go func() {
			defer close(done)
			if err := fsutil.Fdatasync(seg); err != nil {
				t.Error(err)
				return
			}
			if err := os.Remove(filepath.Join(root, "wal")); err != nil {
				t.Error(err)
			}
		}()
		// Go on once the sync has reached the Recorder or has returned.
		for r.reports.Load() == n {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
	t.Cleanup(func() { scanHook = nil })
	must(t, r.Cut())
	<-done
	for seed := int64(0); seed < 100; seed++ {
		mode := Random
		if seed == 0 {
			mode = Exact
		}
		dir := filepath.Join(t.TempDir(), "img")
		must(t, r.Image(dir, mode, seed))
		s, _ := os.ReadFile(filepath.Join(dir, "seg"))
		l, _ := os.ReadFile(filepath.Join(dir, "wal"))
		if !bytes.Contains(s, []byte("new;")) && !bytes.Contains(l, []byte("new;")) {
			t.Fatalf("image %s/%d: the segment has %q and the write-ahead log file %q: synced bytes lost", mode, seed, s, l)
		}
	}
}
