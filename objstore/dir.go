package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// tempPrefix starts the names of the directory backend's temporary files.
// No key segment starts with '.', so no key names one and List skips them.
const tempPrefix = ".tmp-"

// Dir is a Store in a directory of a shared POSIX file system. An object is
// a file at root/key; its parent directories are created as needed and
// never removed (an empty directory costs an inode and keeps Put free of
// races with a concurrent Delete).
//
// Durability follows the file system: Put fsyncs the file, renames it into
// place and fsyncs the directory, and fsyncs the parent of every directory
// it creates. On NFS this relies on the server honouring COMMIT (the
// default "sync" export); CephFS and local file systems honour fsync.
type Dir struct {
	root string
}

// OpenDir opens (creating it if needed) the directory store at root.
func OpenDir(root string) (*Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("objstore: open %s: %w", abs, err)
	}
	return &Dir{root: abs}, nil
}

// Root is the directory the store keeps its objects in.
func (d *Dir) Root() string { return d.root }

func (d *Dir) path(key string) string { return filepath.Join(d.root, filepath.FromSlash(key)) }

// Put writes data to a temporary file beside the key's file, fsyncs it,
// renames it over the key and fsyncs the directory.
func (d *Dir) Put(ctx context.Context, key string, data []byte) error {
	return d.put(ctx, key, data, false)
}

// PutIfAbsent writes and fsyncs a temporary file, then hard-links it to the
// key: link(2) fails if the name exists, atomically on local file systems,
// NFS and CephFS alike. The temporary name is then removed and the
// directory fsynced.
func (d *Dir) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return d.put(ctx, key, data, true)
}

func (d *Dir) put(ctx context.Context, key string, data []byte, exclusive bool) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	final := d.path(key)
	dir := filepath.Dir(final)
	if err := d.mkdirs(dir); err != nil {
		return err
	}
	tmp, err := writeTemp(dir, data)
	if err != nil {
		return fmt.Errorf("objstore: put %q: %w", key, err)
	}
	if exclusive {
		err = os.Link(tmp, final)
		if err != nil && errors.Is(err, fs.ErrExist) && sameFile(tmp, final) {
			// NFS: the reply to a link that succeeded was lost and the
			// client's retry found the name taken, by our own file.
			err = nil
		}
		os.Remove(tmp) //nolint:errcheck // a leftover temporary file is ignored by List and swept by SweepTemp
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%w: %q", ErrExists, key)
			}
			return fmt.Errorf("objstore: put %q: %w", key, err)
		}
	} else if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp) //nolint:errcheck
		return fmt.Errorf("objstore: put %q: %w", key, err)
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return fmt.Errorf("objstore: put %q: sync directory: %w", key, err)
	}
	return nil
}

// writeTemp writes data to a new temporary file in dir and fsyncs it.
func writeTemp(dir string, data []byte) (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	name := filepath.Join(dir, tempPrefix+hex.EncodeToString(r[:]))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name) //nolint:errcheck
		return "", err
	}
	return name, nil
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// mkdirs creates dir and its missing parents below the root, fsyncing the
// parent of each directory it creates so the new entry survives a crash.
func (d *Dir) mkdirs(dir string) error {
	if dir == d.root {
		return nil
	}
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("objstore: %s is not a directory", dir)
		}
		return nil
	}
	if err := d.mkdirs(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // a concurrent Put made it
		}
		return fmt.Errorf("objstore: %w", err)
	}
	return fsutil.SyncDir(filepath.Dir(dir))
}

// Get reads the whole object.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(d.path(key))
	if err != nil {
		return nil, d.readErr(key, err)
	}
	return b, nil
}

// GetRange reads part of the object with one pread.
func (d *Dir) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := checkRange(key, off, n); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(d.path(key))
	if err != nil {
		return nil, d.readErr(key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, d.readErr(key, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	size := fi.Size()
	if off >= size {
		return nil, fmt.Errorf("%w: %q offset %d of %d bytes", ErrInvalidRange, key, off, size)
	}
	buf := make([]byte, min(n, size-off))
	m, err := f.ReadAt(buf, off)
	if err != nil && !(errors.Is(err, io.EOF) && m > 0) {
		return nil, d.readErr(key, err)
	}
	return buf[:m], nil
}

// Stat returns the object's size and modification time.
func (d *Dir) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Stat(d.path(key))
	if err != nil {
		return ObjectInfo{}, d.readErr(key, err)
	}
	if fi.IsDir() {
		return ObjectInfo{}, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

func (d *Dir) readErr(key string, err error) error {
	// ENOTDIR: a path segment of the key is an object, not a directory.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return fmt.Errorf("objstore: %q: %w", key, err)
}

// List walks the directories that can hold keys with the prefix, then calls
// fn in key order (a directory walk visits "a/b" before "a.b", S3 lists them
// the other way round, so the keys are sorted first).
func (d *Dir) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if !validPrefix(prefix) {
		return fmt.Errorf("%w: prefix %q", ErrInvalidKey, prefix)
	}
	start := d.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = d.path(prefix[:i])
	}
	var found []ObjectInfo
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == start && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if p == d.root {
			return nil
		}
		if strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if e.IsDir() {
			// Descend only where keys with the prefix can be.
			if dk := key + "/"; !strings.HasPrefix(dk, prefix) && !strings.HasPrefix(prefix, dk) {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(key, prefix) || !ValidKey(key) {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		found = append(found, ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	slices.SortFunc(found, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, o := range found {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the object's file and fsyncs its directory.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := d.path(key)
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return fmt.Errorf("objstore: delete %q: %w", key, err)
	}
	if err := fsutil.SyncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("objstore: delete %q: sync directory: %w", key, err)
	}
	return nil
}

// SweepTemp removes the temporary files that writers which crashed in the
// middle of a Put left behind, those last modified more than olderThan ago
// (choose it far above the longest Put, as another writer's Put may be in
// flight), and returns how many it removed.
func (d *Dir) SweepTemp(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if e.IsDir() || !strings.HasPrefix(e.Name(), tempPrefix) {
			return nil
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			return nil
		}
		if err := os.Remove(p); err == nil {
			removed++
		}
		return nil
	})
	return removed, err
}

// Close does nothing: a Dir holds no open files between calls.
func (d *Dir) Close() error { return nil }

var _ Store = (*Dir)(nil)
