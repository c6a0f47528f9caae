// Package fsutil holds the small durable-file helpers that the log, the raft
// replicas and the metastore share. Every fsync those packages make goes
// through Fdatasync, Fsync or SyncDir here (bbolt syncs its own file and is
// reported with Synced), so a test can observe each point at which a file
// or a directory became durable and rebuild what a power cut would leave
// (internal/powerloss).
package fsutil

import (
	"os"
	"path/filepath"
	"sync/atomic"
)

// Recorder is told of every durability point: a file whose bytes up to size
// (its size when the sync began; -1 if unknown) were just made durable, a
// directory whose entries were, or a file path made durable by code that
// syncs it itself (bbolt). seq orders the file syncs by the instant they
// began: two syncs of one file may end in either order, and the one that
// began later covers every write the earlier one did. Calls come after the
// sync returned without error, from any goroutine, concurrently; an
// implementation must not call back into a sync. Only tests install one.
type Recorder interface {
	FileSynced(f *os.File, size int64, seq uint64)
	DirSynced(dir string)
	PathSynced(path string)
}

type recorderBox struct{ r Recorder }

var (
	recorder atomic.Pointer[recorderBox]
	syncSeq  atomic.Uint64
)

// SetRecorder installs r (nil removes it) and returns the one it replaced.
// The production binary never calls it: without a recorder a sync costs one
// atomic load more.
func SetRecorder(r Recorder) Recorder {
	var old *recorderBox
	if r == nil {
		old = recorder.Swap(nil)
	} else {
		old = recorder.Swap(&recorderBox{r})
	}
	if old == nil {
		return nil
	}
	return old.r
}

// Fdatasync makes f's data and size durable (fdatasync where the platform
// has it, else fsync).
func Fdatasync(f *os.File) error { return syncFile(f, fdatasync) }

// Fsync makes f's data and all its metadata durable.
func Fsync(f *os.File) error { return syncFile(f, (*os.File).Sync) }

func syncFile(f *os.File, sync func(*os.File) error) error {
	b := recorder.Load()
	size, seq := int64(-1), uint64(0)
	if b != nil {
		seq = syncSeq.Add(1)
		// Bytes appended while the sync runs may miss it: only the
		// size it started from is certainly durable.
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
	}
	if err := sync(f); err != nil {
		return err
	}
	if b != nil {
		b.r.FileSynced(f, size, seq)
	}
	return nil
}

// Synced reports that path was just made durable by code that syncs its own
// file descriptor (bbolt commits with its own fdatasync). It does nothing
// unless a test installed a Recorder.
func Synced(path string) {
	if b := recorder.Load(); b != nil {
		b.r.PathSynced(path)
	}
}

// SyncDir makes creations, removals and renames in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if b := recorder.Load(); b != nil {
			b.r.DirSynced(dir)
		}
	}
	return err
}

// MkdirAllSync is os.MkdirAll whose new directories survive a power cut:
// each directory it creates is synced into its parent. A directory created
// without that can vanish with every file synced into it since.
func MkdirAllSync(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !os.IsNotExist(err) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// WriteFileSync replaces dir/name atomically and durably: temporary file,
// fsync, rename, directory fsync.
func WriteFileSync(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := Fsync(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return SyncDir(dir)
}
