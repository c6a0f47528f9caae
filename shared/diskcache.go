package shared

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/metastore"
)

// The disk tier of the chunk cache: whole chunks in files under one
// directory, least recently used first out, within a byte bound.
//
// An entry is one file, <name>.chunk, name a hash of the chunk's identity
// (topic id, partition, offsets, object, position, length). It holds a
// header (magic, the identity again, the length and a CRC-32C of the
// bytes) and the chunk's bytes. It is written to a temporary file and
// renamed into place, never fsynced: a crash can leave a temporary file
// (removed at the next start) or, after a power cut, a renamed file whose
// bytes never reached the disk; the header and the CRC are checked on
// every read, and an entry that fails is deleted and counted as a miss,
// so the chunk is read from shared storage again. Nothing is lost with
// the directory: it only saves ranged reads.
//
// Writes never hold up a read: they go through a queue of at most
// diskQueueBytes to one writer goroutine, and what does not fit is not
// written (counted in Skipped).

const (
	diskMagic      = "SLCHUNK1"
	diskExt        = ".chunk"
	diskTmpMarker  = ".tmp-"
	diskQueueBytes = 32 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DiskStats are the disk tier's counters.
type DiskStats struct {
	// Hits and Misses count lookups; Invalid the entries found torn or
	// corrupt (deleted, and counted as misses too).
	Hits, Misses, Invalid int64
	// Writes counts entries written; Skipped the writes left out because
	// the queue was full.
	Writes, Skipped int64
	// Bytes is what the entries take now (headers included); Entries
	// how many there are.
	Bytes, Entries int64
}

type diskCache struct {
	dir   string
	limit int64
	lg    zerolog.Logger

	mu    sync.Mutex
	size  int64
	lru   *list.List // of *diskEntry, most recent at the front
	items map[string]*list.Element

	qmu      sync.Mutex
	queue    []diskWrite
	queued   map[string]bool
	qbytes   int64
	qcond    *sync.Cond
	closed   bool
	inflight int
	wg       sync.WaitGroup

	hits, misses, invalid, writes, skipped atomic.Int64
}

type diskEntry struct {
	name string
	size int64
}

type diskWrite struct {
	name string
	ch   metastore.SharedChunk
	data []byte
}

// openDiskCache opens (creating it if needed) the cache in dir, bounded
// by limit bytes. The entries already there are kept, most recently
// written first, within limit; temporary files a crash left behind are
// removed. Files whose names are not the cache's own are left alone.
func openDiskCache(dir string, limit int64, lg zerolog.Logger) (*diskCache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("shared.cache.dir: %w", err)
	}
	d := &diskCache{dir: dir, limit: limit, lg: lg, lru: list.New(), items: map[string]*list.Element{}, queued: map[string]bool{}}
	d.qcond = sync.NewCond(&d.qmu)
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("shared.cache.dir: %w", err)
	}
	type found struct {
		name  string
		size  int64
		mtime time.Time
	}
	var have []found
	for _, de := range des {
		n := de.Name()
		if !de.Type().IsRegular() {
			continue
		}
		if i := strings.Index(n, diskExt+diskTmpMarker); i > 0 && validEntryName(n[:i]) {
			_ = os.Remove(filepath.Join(dir, n))
			continue
		}
		if !strings.HasSuffix(n, diskExt) || !validEntryName(strings.TrimSuffix(n, diskExt)) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		have = append(have, found{strings.TrimSuffix(n, diskExt), info.Size(), info.ModTime()})
	}
	sort.Slice(have, func(i, j int) bool { return have[i].mtime.After(have[j].mtime) })
	for _, f := range have {
		if d.size+f.size > limit {
			_ = os.Remove(d.path(f.name))
			continue
		}
		d.items[f.name] = d.lru.PushBack(&diskEntry{name: f.name, size: f.size})
		d.size += f.size
	}
	d.wg.Add(1)
	go d.writer()
	return d, nil
}

func validEntryName(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func (d *diskCache) path(name string) string { return filepath.Join(d.dir, name+diskExt) }

// identity is what an entry's header holds besides its bytes' length and
// CRC: enough that an entry is never taken for another chunk's.
func identity(ch metastore.SharedChunk) []byte {
	b := make([]byte, 0, 64+len(ch.Key))
	b = append(b, ch.TopicID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(ch.Partition))
	b = binary.BigEndian.AppendUint64(b, uint64(ch.BaseOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(ch.LastOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(ch.Pos))
	b = binary.BigEndian.AppendUint64(b, uint64(ch.Len))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ch.Key)))
	return append(b, ch.Key...)
}

func entryName(ch metastore.SharedChunk) string {
	sum := sha256.Sum256(identity(ch))
	return hex.EncodeToString(sum[:16])
}

// header: magic, identity length (4), identity, CRC-32C of the bytes (4).
func entryHeader(ch metastore.SharedChunk, data []byte) []byte {
	id := identity(ch)
	h := make([]byte, 0, len(diskMagic)+8+len(id))
	h = append(h, diskMagic...)
	h = binary.BigEndian.AppendUint32(h, uint32(len(id)))
	h = append(h, id...)
	return binary.BigEndian.AppendUint32(h, crc32.Checksum(data, castagnoli))
}

// entrySize is the size of ch's entry file.
func entrySize(ch metastore.SharedChunk) int64 {
	return int64(len(diskMagic)+8+len(identity(ch))) + ch.Len
}

// get returns ch's bytes from its entry, if there is one and it checks
// out; an entry that does not is deleted.
func (d *diskCache) get(ch metastore.SharedChunk) ([]byte, bool) {
	name := entryName(ch)
	d.mu.Lock()
	e, ok := d.items[name]
	if ok {
		d.lru.MoveToFront(e)
	}
	d.mu.Unlock()
	if !ok {
		d.misses.Add(1)
		return nil, false
	}
	b, err := os.ReadFile(d.path(name))
	if err == nil {
		var data []byte
		if data, err = checkEntry(ch, b); err == nil {
			d.hits.Add(1)
			return data, true
		}
		d.invalid.Add(1)
		d.lg.Warn().Err(err).Str("entry", name).Str("key", ch.Key).Msg("disk cache entry failed its check; reading the chunk from shared storage")
	}
	d.drop(name)
	d.misses.Add(1)
	return nil, false
}

func checkEntry(ch metastore.SharedChunk, b []byte) ([]byte, error) {
	id := identity(ch)
	n := len(diskMagic) + 4 + len(id) + 4
	if len(b) < n || string(b[:len(diskMagic)]) != diskMagic {
		return nil, errors.New("no header")
	}
	if int(binary.BigEndian.Uint32(b[len(diskMagic):])) != len(id) || !bytes.Equal(b[len(diskMagic)+4:n-4], id) {
		return nil, errors.New("header names another chunk")
	}
	data := b[n:]
	if int64(len(data)) != ch.Len {
		return nil, fmt.Errorf("holds %d bytes, the chunk %d", len(data), ch.Len)
	}
	if crc32.Checksum(data, castagnoli) != binary.BigEndian.Uint32(b[n-4:n]) {
		return nil, errors.New("CRC mismatch")
	}
	return data, nil
}

// drop forgets and deletes entry name.
func (d *diskCache) drop(name string) {
	d.mu.Lock()
	if e, ok := d.items[name]; ok {
		d.lru.Remove(e)
		delete(d.items, name)
		d.size -= e.Value.(*diskEntry).size
	}
	d.mu.Unlock()
	_ = os.Remove(d.path(name))
}

// has says whether ch has an entry (not checked).
func (d *diskCache) has(ch metastore.SharedChunk) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.items[entryName(ch)]
	return ok
}

// put queues ch's bytes to be written, unless the chunk has an entry or
// is queued already, is larger than the whole bound, or the queue is
// full. It never waits for the disk. data must not change afterwards.
func (d *diskCache) put(ch metastore.SharedChunk, data []byte) {
	if ch.Len != int64(len(data)) || entrySize(ch) > d.limit {
		return
	}
	name := entryName(ch)
	d.mu.Lock()
	_, ok := d.items[name]
	d.mu.Unlock()
	if ok {
		return
	}
	d.qmu.Lock()
	defer d.qmu.Unlock()
	if d.closed || d.queued[name] {
		return
	}
	if d.qbytes+int64(len(data)) > diskQueueBytes {
		d.skipped.Add(1)
		return
	}
	d.queued[name] = true
	d.qbytes += int64(len(data))
	d.queue = append(d.queue, diskWrite{name: name, ch: ch, data: data})
	d.qcond.Broadcast()
}

func (d *diskCache) writer() {
	defer d.wg.Done()
	for {
		d.qmu.Lock()
		for len(d.queue) == 0 && !d.closed {
			d.qcond.Wait()
		}
		if d.closed {
			d.qmu.Unlock()
			return
		}
		w := d.queue[0]
		d.queue = d.queue[1:]
		d.inflight++
		d.qmu.Unlock()

		if err := d.write(w); err != nil {
			d.lg.Warn().Err(err).Str("key", w.ch.Key).Msg("writing a disk cache entry failed")
		}

		d.qmu.Lock()
		d.inflight--
		delete(d.queued, w.name)
		d.qbytes -= int64(len(w.data))
		d.qcond.Broadcast()
		d.qmu.Unlock()
	}
}

// write writes one entry (a temporary file renamed into place) and
// evicts the least recently used ones past the bound.
func (d *diskCache) write(w diskWrite) error {
	hdr := entryHeader(w.ch, w.data)
	f, err := os.CreateTemp(d.dir, w.name+diskExt+diskTmpMarker+"*")
	if errors.Is(err, fs.ErrNotExist) {
		// The directory was deleted under the broker: make it again.
		if err = os.MkdirAll(d.dir, 0o755); err == nil {
			f, err = os.CreateTemp(d.dir, w.name+diskExt+diskTmpMarker+"*")
		}
	}
	if err != nil {
		return err
	}
	_, err = f.Write(hdr)
	if err == nil {
		_, err = f.Write(w.data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), d.path(w.name))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	d.writes.Add(1)
	size := int64(len(hdr) + len(w.data))
	var evict []string
	d.mu.Lock()
	if e, ok := d.items[w.name]; ok { // cannot happen (one writer), but keep the count right
		d.size -= e.Value.(*diskEntry).size
		d.lru.Remove(e)
	}
	d.items[w.name] = d.lru.PushFront(&diskEntry{name: w.name, size: size})
	d.size += size
	for d.size > d.limit {
		e := d.lru.Back()
		de := e.Value.(*diskEntry)
		d.lru.Remove(e)
		delete(d.items, de.name)
		d.size -= de.size
		evict = append(evict, de.name)
	}
	d.mu.Unlock()
	for _, n := range evict {
		_ = os.Remove(d.path(n))
	}
	return nil
}

// flush waits until the queue is written (for tests).
func (d *diskCache) flush() {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	for (len(d.queue) > 0 || d.inflight > 0) && !d.closed {
		d.qcond.Wait()
	}
}

// close stops the writer; queued writes are left out.
func (d *diskCache) close() {
	d.qmu.Lock()
	d.closed = true
	d.queue = nil
	d.qcond.Broadcast()
	d.qmu.Unlock()
	d.wg.Wait()
}

func (d *diskCache) stats() DiskStats {
	d.mu.Lock()
	size, n := d.size, int64(len(d.items))
	d.mu.Unlock()
	return DiskStats{Hits: d.hits.Load(), Misses: d.misses.Load(), Invalid: d.invalid.Load(),
		Writes: d.writes.Load(), Skipped: d.skipped.Load(), Bytes: size, Entries: n}
}
