//go:build linux

// Package powerloss rebuilds, for tests, the files a power cut would leave
// of a data directory: what the broker wrote but had not made durable is
// lost or torn, and directory entries created, removed or renamed since
// their directory's last fsync may be undone.
//
// A Recorder installed with Start is told of every durability point the
// log, the raft replicas and the metastore reach (they sync only through
// internal/fsutil). At each file sync it copies the file's bytes up to the
// size the file had when the sync began; at each directory sync it records
// the directory's entries (name and file identity); for the metastore's
// bbolt file, which bbolt syncs through its own descriptor, the metastore
// reports each committed transaction (fsutil.Synced). Cut is the power
// cut: the files are read as the page cache holds them and recording
// stops; every sync that ends while they are read waits until the read is
// over, so nothing the code does because of a sync after the cut (deleting
// a file whose data is now synced elsewhere, creating the next one) can
// reach the read. Image then writes one image of the directory as it could
// be found after the power comes back:
//
//   - Exact: the last synced state exactly: every unsynced byte, file and
//     directory change lost. Deterministic; the worst case for data that
//     was never synced.
//   - Random (seeded): each unsynced change is independently kept, lost or
//     torn. A file keeps its synced bytes, then a random prefix of the
//     bytes appended since, possibly followed by a run of zeros or random
//     garbage (a torn write); a page overwritten in place since its sync
//     is old, new or torn at a 512-byte sector. A directory entry added,
//     removed or renamed since the directory's sync is undone or kept.
//   - bbolt files: bbolt writes a commit's pages, fdatasyncs, then writes
//     its meta page and fdatasyncs again, so a cut leaves either the new
//     data pages in any state with the old meta pages, or every new data
//     page with a meta page old, new or torn; both are produced.
//
// Why here rather than a file-system interface under log and replica:
// segments, indexes and the raft files are plain *os.File (the Fetch path
// sends them with sendfile) and bbolt takes only an *os.File, so an
// interface would have to wrap every read path as well and could still not
// see bbolt's writes. Recording the sync points and reading the page cache
// at the cut needs no change to how files are written and covers bbolt.
// The Recorder lives in the process that syncs: the tests run the log, the
// replicas and the metastore in-process. For a real broker killed with
// SIGKILL the same records would have to be journaled by the process
// itself (a build-tagged Recorder writing each sync point to a file) for
// the test to rebuild an image after the kill; not built yet.
// What it does not model: a sync that failed (the code treats that as
// fatal), data lost from a file that was synced (a lying disk), and
// metadata other than size and entries (modes, times).
//
// One Recorder at a time per process; tests that use it must not run in
// parallel with each other. Linux only (statx, /proc/self/fd).
package powerloss

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// Mode chooses how Image treats what was not durable at the cut.
type Mode int

const (
	// Exact loses every byte and directory change made since its sync.
	Exact Mode = iota
	// Random keeps, loses or tears each unsynced change, from the seed.
	Random
)

func (m Mode) String() string {
	if m == Exact {
		return "exact"
	}
	return "random"
}

// fileID names a file across renames: inode, device and birth time (the
// birth time tells an inode number reused after an unlink from the file
// that had it before).
type fileID struct {
	dev, ino uint64
	btime    int64
}

type entry struct {
	id  fileID
	dir bool
}

// listing is a directory's entries by name.
type listing map[string]entry

// Recorder follows the durability points under one root directory.
type Recorder struct {
	root string

	mu     sync.Mutex
	cut    bool
	synced map[fileID][]byte  // each file's bytes at its last sync
	seqs   map[fileID]uint64  // the fsutil sequence of that sync
	dirs   map[string]listing // each directory (relative to root) at its last sync
	bolt   map[fileID]bool    // files reported by Synced (bbolt)
	err    error              // first failure to record; Image returns it

	// The page cache at the cut.
	curDirs map[string]listing
	curData map[fileID][]byte

	// reports counts the sync reports that reached the Recorder, before
	// they wait for mu (tests).
	reports atomic.Int64
	// cutPause: Cut pauses this long at each path it reads (SlowCut).
	cutPause time.Duration
}

// SlowCut makes Cut pause d at each file and directory it reads, so the
// process runs on longer during the cut: a test of something that syncs
// concurrently can widen the window in which a sync ends during the read.
// Call it before Cut.
func (r *Recorder) SlowCut(d time.Duration) {
	r.mu.Lock()
	r.cutPause = d
	r.mu.Unlock()
}

// scanHook, when set (tests), is called by Cut's read of the files with
// each path it visits, while the Recorder is still installed.
var scanHook func(rel string)

// Start records root as it is now as durable (call it on a directory whose
// files were synced, or on an empty or missing one) and installs the
// Recorder. Stop (or Cut) removes it.
func Start(root string) (*Recorder, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	r := &Recorder{root: abs, synced: map[fileID][]byte{}, seqs: map[fileID]uint64{}, dirs: map[string]listing{}, bolt: map[fileID]bool{}}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	dirs, data, err := scan(abs, 0)
	if err != nil {
		return nil, err
	}
	r.dirs, r.synced = dirs, data
	if old := fsutil.SetRecorder(r); old != nil {
		fsutil.SetRecorder(old)
		return nil, errors.New("powerloss: another Recorder is installed")
	}
	return r, nil
}

// Stop uninstalls the Recorder; safe to call more than once.
func (r *Recorder) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

func (r *Recorder) stopLocked() {
	r.cut = true
	if cur := fsutil.SetRecorder(nil); cur != nil && cur != fsutil.Recorder(r) {
		fsutil.SetRecorder(cur)
	}
}

// Cut is the power cut: the files under root are read as they are now (the
// page cache) and recording stops. Whatever the process does afterwards
// (closing files, writing clean-shutdown markers) does not reach an image.
//
// The process keeps running while the files are read, so the read is not
// one instant. What makes it one as far as durability goes: the Recorder
// stays installed until the read is done, and every sync that ends in the
// meantime reports to it and waits (for mu) there, so the code that synced
// cannot act on it before the read is over. Without that, a sync after the
// cut instant, which an image does not keep, could let the code delete a
// file whose records it then held elsewhere (a checkpointed write-ahead log
// file) or create the next file, and the read would find those changes: an
// image no power cut can leave. Writes that need no sync first can still
// land during the read; they are unsynced, as if made just before the cut.
func (r *Recorder) Cut() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.curDirs != nil {
		return errors.New("powerloss: Cut called twice")
	}
	dirs, data, err := scan(r.root, r.cutPause)
	r.stopLocked()
	if err != nil {
		return err
	}
	r.curDirs, r.curData = dirs, data
	return nil
}

func (r *Recorder) rel(path string) (string, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(r.root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

func (r *Recorder) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// FileSynced implements fsutil.Recorder: f's bytes up to size are durable.
func (r *Recorder) FileSynced(f *os.File, size int64, seq uint64) {
	if _, ok := r.rel(f.Name()); !ok {
		return
	}
	fd := int(f.Fd())
	id, err := idOfFd(fd)
	if err != nil {
		r.mu.Lock()
		r.fail(fmt.Errorf("powerloss: %s: %w", f.Name(), err))
		r.mu.Unlock()
		return
	}
	// The descriptor may be write-only: read through /proc.
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d", fd))
	r.reports.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut {
		return
	}
	if err != nil {
		r.fail(fmt.Errorf("powerloss: reading %s: %w", f.Name(), err))
		return
	}
	if seq < r.seqs[id] {
		return // a sync that began before the one recorded, and ended after it
	}
	if size >= 0 && int64(len(data)) > size {
		data = data[:size]
	}
	r.synced[id], r.seqs[id] = data, seq
}

// PathSynced implements fsutil.Recorder for bbolt's commits.
func (r *Recorder) PathSynced(path string) {
	if _, ok := r.rel(path); !ok {
		return
	}
	id, err := idOfPath(path)
	data, rerr := os.ReadFile(path)
	r.reports.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut {
		return
	}
	if err == nil {
		err = rerr
	}
	if err != nil {
		r.fail(fmt.Errorf("powerloss: %s: %w", path, err))
		return
	}
	r.synced[id] = data
	r.bolt[id] = true
}

// DirSynced implements fsutil.Recorder: dir's entries are durable.
func (r *Recorder) DirSynced(dir string) {
	rel, ok := r.rel(dir)
	if !ok {
		return
	}
	l, err := readListing(filepath.Join(r.root, rel))
	r.reports.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut {
		return
	}
	if err != nil {
		r.fail(fmt.Errorf("powerloss: listing %s: %w", dir, err))
		return
	}
	r.dirs[rel] = l
}

// Image writes into dst (created; must not exist or be empty) one image of
// root as a power cut at Cut could leave it. Random images differ by seed;
// the same seed gives the same image.
func (r *Recorder) Image(dst string, mode Mode, seed int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	if r.curDirs == nil {
		return errors.New("powerloss: Image before Cut")
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	b := &builder{r: r, mode: mode, rng: rand.New(rand.NewSource(seed))}
	return b.dir(".", dst)
}

type builder struct {
	r    *Recorder
	mode Mode
	rng  *rand.Rand
}

// keep decides whether an unsynced change reached the disk.
func (b *builder) keep() bool { return b.mode == Random && b.rng.Intn(2) == 0 }

func (b *builder) dir(rel, dst string) error {
	synced := b.r.dirs[rel] // nil: a directory whose entries were never synced
	cur := b.r.curDirs[rel]
	names := map[string]bool{}
	for n := range synced {
		names[n] = true
	}
	for n := range cur {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted) // the same seed gives the same image
	for _, name := range sorted {
		s, inS := synced[name]
		c, inC := cur[name]
		var pick *entry
		switch {
		case inS && inC && s.id == c.id:
			pick = &s
		case inS && inC: // renamed over since the sync
			pick = &s
			if b.keep() {
				pick = &c
			}
		case inS: // removed or renamed away since the sync
			if !b.keep() {
				pick = &s
			}
		default: // created since the sync
			if b.keep() {
				pick = &c
			}
		}
		if pick == nil {
			continue
		}
		path := filepath.Join(dst, name)
		if pick.dir {
			if err := os.Mkdir(path, 0o755); err != nil {
				return err
			}
			if err := b.dir(filepath.Join(rel, name), path); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(path, b.file(pick.id), 0o644); err != nil {
			return err
		}
	}
	return nil
}

const (
	pageSize   = 4096
	sectorSize = 512
)

// file returns the bytes of one file in the image.
func (b *builder) file(id fileID) []byte {
	s := b.r.synced[id] // nil: never synced (an empty file on disk)
	c, alive := b.r.curData[id]
	if b.mode == Exact || !alive {
		return append([]byte(nil), s...)
	}
	if b.r.bolt[id] {
		return b.boltFile(s, c)
	}
	return b.tear(s, c)
}

// tear mixes the synced bytes s with the page cache's c.
func (b *builder) tear(s, c []byte) []byte {
	out := append([]byte(nil), s...)
	b.overwrite(out, c, 0, min(len(s), len(c)))
	switch {
	case len(c) > len(s):
		tail := c[len(s):]
		var k int
		switch b.rng.Intn(4) {
		case 0:
		case 1:
			k = len(tail)
		default:
			k = b.rng.Intn(len(tail) + 1)
		}
		out = append(out, tail[:k]...)
		if rest := len(tail) - k; rest > 0 && b.rng.Intn(2) == 0 {
			g := make([]byte, 1+b.rng.Intn(min(rest, 2*pageSize)))
			if b.rng.Intn(2) == 0 {
				b.rng.Read(g)
			}
			out = append(out, g...)
		}
	case len(c) < len(s) && b.rng.Intn(2) == 0:
		out = out[:len(c)] // the truncation reached the disk
	}
	return out
}

// overwrite makes each page of out[lo:hi] that differs from c old, new or
// torn at a sector.
func (b *builder) overwrite(out, c []byte, lo, hi int) {
	for p := lo; p < hi; p += pageSize {
		q := min(p+pageSize, hi)
		if bytes.Equal(out[p:q], c[p:q]) {
			continue
		}
		switch b.rng.Intn(3) {
		case 0:
		case 1:
			copy(out[p:q], c[p:q])
		default:
			copy(out[p:q], c[p:min(q, p+sectorSize*b.rng.Intn(pageSize/sectorSize))])
		}
	}
}

// boltFile is a cut inside one bbolt commit: either before its second
// fdatasync (data pages in any state, meta pages 0 and 1 as synced) or
// after it (data pages new, a meta page old, new or torn).
func (b *builder) boltFile(s, c []byte) []byte {
	meta := 2 * pageSize
	if len(s) < meta || len(c) < meta {
		return b.tear(s, c)
	}
	if b.rng.Intn(2) == 0 {
		out := b.tear(s, c)
		if len(out) < meta {
			out = append(out, make([]byte, meta-len(out))...)
		}
		copy(out[:meta], s[:meta])
		return out
	}
	out := append([]byte(nil), c...)
	copy(out[:meta], s[:meta])
	b.overwrite(out, c, 0, meta)
	return out
}

// scan reads every directory listing and file under root.
func scan(root string, pause time.Duration) (map[string]listing, map[fileID][]byte, error) {
	dirs := map[string]listing{}
	data := map[fileID][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if scanHook != nil {
			scanHook(rel)
		}
		if pause > 0 {
			time.Sleep(pause)
		}
		if d.IsDir() {
			l, err := readListing(path)
			if err != nil {
				return err
			}
			dirs[rel] = l
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		id, err := idOfPath(path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		data[id] = b
		return nil
	})
	return dirs, data, err
}

func readListing(dir string) (listing, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	l := listing{}
	for _, e := range ents {
		if !e.IsDir() && !e.Type().IsRegular() {
			continue
		}
		id, err := idOfPath(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // removed while listed
		}
		if err != nil {
			return nil, err
		}
		l[e.Name()] = entry{id: id, dir: e.IsDir()}
	}
	return l, nil
}

const statxMask = unix.STATX_INO | unix.STATX_BTIME

func idOfPath(path string) (fileID, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, statxMask, &st); err != nil {
		return fileID{}, &os.PathError{Op: "statx", Path: path, Err: err}
	}
	return idOf(&st), nil
}

func idOfFd(fd int) (fileID, error) {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, statxMask, &st); err != nil {
		return fileID{}, err
	}
	return idOf(&st), nil
}

func idOf(st *unix.Statx_t) fileID {
	id := fileID{dev: uint64(st.Dev_major)<<32 | uint64(st.Dev_minor), ino: st.Ino}
	if st.Mask&unix.STATX_BTIME != 0 {
		id.btime = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
	}
	return id
}

// Describe lists, for a failure message, every file the Recorder knows
// under root after Cut: its path, whether its directory entry was synced
// and is still there at the cut, the bytes recorded as synced (and the
// sequence of that sync) and the bytes in the page cache at the cut.
func (r *Recorder) Describe() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var lines []string
	seen := map[string]bool{}
	add := func(rel, name string, e entry, inS, inC bool) {
		p := filepath.Join(rel, name)
		if e.dir || seen[p+fmt.Sprint(e.id)] {
			return
		}
		seen[p+fmt.Sprint(e.id)] = true
		s, synced := r.synced[e.id]
		c, alive := r.curData[e.id]
		ls := "never synced"
		if synced {
			ls = fmt.Sprintf("synced %d bytes (seq %d)", len(s), r.seqs[e.id])
		}
		lc := "gone at the cut"
		if alive {
			lc = fmt.Sprintf("%d bytes at the cut", len(c))
		}
		lines = append(lines, fmt.Sprintf("%s ino %d: entry synced %v, at the cut %v; %s; %s", p, e.id.ino, inS, inC, ls, lc))
	}
	for rel, l := range r.dirs {
		for name, e := range l {
			_, inC := r.curDirs[rel][name]
			inC = inC && r.curDirs[rel][name].id == e.id
			add(rel, name, e, true, inC)
		}
	}
	for rel, l := range r.curDirs {
		for name, e := range l {
			s, inS := r.dirs[rel][name]
			add(rel, name, e, inS && s.id == e.id, true)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
