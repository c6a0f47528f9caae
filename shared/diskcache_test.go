package shared

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/objstore"
)

func testChunk(i int, n int) (metastore.SharedChunk, []byte) {
	data := bytes.Repeat([]byte{byte('a' + i%26)}, n)
	return metastore.SharedChunk{TopicID: metastore.TopicID{1}, Partition: 0, BaseOffset: int64(10 * i), LastOffset: int64(10*i + 9),
		Key: "data/1/1/" + fmt.Sprint(i), Pos: 0, Len: int64(n)}, data
}

func entryFiles(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+diskExt))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestDiskCacheBound: the disk tier never holds more bytes than its bound
// (headers counted), drops the least recently used entry first, keeps no
// chunk larger than the bound, and its files are exactly its entries.
func TestDiskCacheBound(t *testing.T) {
	dir := t.TempDir()
	ch0, d0 := testChunk(0, 300)
	entry := int64(len(entryHeader(ch0, d0)) + len(d0))
	limit := 3*entry + entry/2 // room for three entries
	d, err := openDiskCache(dir, limit, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	for i := 0; i < 10; i++ {
		ch, data := testChunk(i, 300)
		d.put(ch, data)
		d.flush()
		if st := d.stats(); st.Bytes > limit || int(st.Entries) != entryFiles(t, dir) {
			t.Fatalf("after %d puts: %d bytes (bound %d), %d entries, %d files", i+1, st.Bytes, limit, st.Entries, entryFiles(t, dir))
		}
		if i == 1 {
			if _, ok := d.get(ch0); !ok { // 0 is now more recent than 1
				t.Fatal("chunk 0 not found")
			}
		}
		if i == 3 {
			ch1, _ := testChunk(1, 300)
			if _, ok := d.get(ch1); ok {
				t.Fatal("chunk 1, least recently used, was kept over chunk 0")
			}
			if _, ok := d.get(ch0); !ok {
				t.Fatal("chunk 0, used recently, was dropped")
			}
		}
	}
	for i := 7; i < 10; i++ {
		ch, data := testChunk(i, 300)
		got, ok := d.get(ch)
		if !ok || !bytes.Equal(got, data) {
			t.Fatalf("chunk %d, among the last three, not served (%v)", i, ok)
		}
	}
	big, data := testChunk(20, int(limit))
	d.put(big, data)
	d.flush()
	if _, ok := d.get(big); ok || d.stats().Bytes > limit {
		t.Fatalf("a chunk over the bound was kept (%d bytes held)", d.stats().Bytes)
	}
	if st := d.stats(); st.Writes != 10 || st.Invalid != 0 {
		t.Fatalf("stats %+v: want 10 writes, none invalid", st)
	}
}

// countingStore counts ranged reads; while gate is set, each waits for it
// to be closed.
type countingStore struct {
	*objstore.Dir
	gets atomic.Int64
	mu   sync.Mutex
	gate chan struct{}
}

func (s *countingStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	s.gets.Add(1)
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Dir.GetRange(ctx, key, off, n)
}

// diskEnv writes n objects of one chunk each to partition 0 and returns
// the records' values.
func diskEnv(t *testing.T, n int) (*env, []string) {
	e := newEnv(t)
	p := e.open(e.host(1, time.Millisecond), 0)
	var want []string
	for i := 0; i < n; i++ {
		tag := fmt.Sprintf("d%02d-%s", i, bytes.Repeat([]byte{'x'}, 200))
		e.produceObject(2, tag, p)
		want = append(want, tag, tag)
	}
	return e, want
}

// diskReader is a Host of broker 3 reading through store with a chunk
// cache of 1 KiB in memory (less than two chunks) and dir on disk.
func diskReader(e *env, store objstore.Store, dir string) (*Host, *Partition) {
	h := e.host(3, time.Millisecond, func(c *Config) {
		c.Store, c.CacheBytes, c.CacheDir, c.CacheDiskBytes = store, 1024, dir, 1<<20
	})
	return h, e.open(h, 0)
}

// TestSharedDiskCacheRestart: a reader whose memory cache holds less than
// two chunks reads a history of 12 chunks once from shared storage (one
// GET each), and from then on from its disk tier, also after a restart
// (a new Host on the same directory: no GET at all). Its leftover
// temporary file is removed at the start and a file that is not the
// cache's is left alone. A cache directory deleted under a running
// broker, or at its start, costs GETs and nothing else.
func TestSharedDiskCacheRestart(t *testing.T) {
	const chunks = 12
	e, want := diskEnv(t, chunks)
	dir := filepath.Join(t.TempDir(), "cache")
	store := &countingStore{Dir: e.store}

	r, rp := diskReader(e, store, dir)
	for round := 0; round < 2; round++ {
		if got := values(t, rp); !equal(got, want) {
			t.Fatalf("round %d: %d records, want %d", round, len(got), len(want))
		}
		r.disk.flush()
	}
	st := r.Stats()
	if st.Gets != chunks || st.Disk.Writes != chunks || st.Disk.Hits < chunks {
		t.Fatalf("two rounds over %d chunks: %d GETs, %d written to disk, %d disk hits", chunks, st.Gets, st.Disk.Writes, st.Disk.Hits)
	}
	t.Logf("first reader: %d GETs, memory hits/misses %d/%d, disk %+v", st.Gets, st.MemoryHits, st.MemoryMisses, st.Disk)
	r.Close()

	junk := filepath.Join(dir, "README")
	tmp := filepath.Join(dir, "0123456789abcdef0123456789abcdef"+diskExt+diskTmpMarker+"42")
	for _, f := range []string{junk, tmp} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := store.gets.Load()
	r2, rp2 := diskReader(e, store, dir)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("leftover temporary file still there: %v", err)
	}
	if _, err := os.Stat(junk); err != nil {
		t.Fatalf("a file not the cache's was touched: %v", err)
	}
	if got := values(t, rp2); !equal(got, want) {
		t.Fatalf("after restart: %d records, want %d", len(got), len(want))
	}
	if st := r2.Stats(); store.gets.Load() != before || st.Gets != 0 || st.Disk.Hits != chunks {
		t.Fatalf("after restart: %d GETs, %d disk hits, want 0 and %d", st.Gets, st.Disk.Hits, chunks)
	}

	// The directory deleted under the running reader: read again from
	// shared storage and written again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if got := values(t, rp2); !equal(got, want) {
		t.Fatalf("cache dir deleted: %d records, want %d", len(got), len(want))
	}
	r2.disk.flush()
	st = r2.Stats()
	if st.Gets != chunks || entryFiles(t, dir) != chunks {
		t.Fatalf("cache dir deleted: %d GETs, %d entries on disk, want %d", st.Gets, entryFiles(t, dir), chunks)
	}
	r2.Close()

	// Deleted before a start: fine too.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r3, rp3 := diskReader(e, store, dir)
	if got := values(t, rp3); !equal(got, want) {
		t.Fatalf("empty cache dir: %d records, want %d", len(got), len(want))
	}
	if st := r3.Stats(); st.Gets != chunks {
		t.Fatalf("empty cache dir: %d GETs, want %d", st.Gets, chunks)
	}
}

// TestSharedDiskCacheCorrupt: entries that are torn (cut short), corrupt
// (a byte flipped) or another chunk's (a file under the wrong name) are
// never served: each is dropped and its chunk read again from shared
// storage (one GET each), the records are right, and the entries are
// rewritten whole.
func TestSharedDiskCacheCorrupt(t *testing.T) {
	const chunks = 6
	e, want := diskEnv(t, chunks)
	dir := t.TempDir()
	store := &countingStore{Dir: e.store}
	r, rp := diskReader(e, store, dir)
	if got := values(t, rp); !equal(got, want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	r.disk.flush()
	rp.mu.Lock()
	known := append(rp.chunks[:0:0], rp.chunks...)
	rp.mu.Unlock()
	r.Close()
	if len(known) != chunks {
		t.Fatalf("reader knows %d chunks", len(known))
	}
	file := func(i int) string { return filepath.Join(dir, entryName(known[i])+diskExt) }
	// 0: torn; 1: a byte of the records flipped; 2: chunk 3's entry under
	// chunk 2's name.
	b, err := os.ReadFile(file(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file(0), b[:len(b)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile(file(1))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-20] ^= 0x01
	if err := os.WriteFile(file(1), b, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile(file(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file(2), b, 0o644); err != nil {
		t.Fatal(err)
	}

	before := store.gets.Load()
	r2, rp2 := diskReader(e, store, dir)
	if got := values(t, rp2); !equal(got, want) {
		t.Fatalf("with bad entries: %v, want %v", got, want)
	}
	st := r2.Stats()
	if got := store.gets.Load() - before; got != 3 || st.Disk.Invalid != 3 || st.Disk.Hits != chunks-3 {
		t.Fatalf("three bad entries: %d GETs, %d invalid, %d disk hits", got, st.Disk.Invalid, st.Disk.Hits)
	}
	r2.disk.flush()
	for i := 0; i < 3; i++ {
		if _, ok := r2.disk.get(known[i]); !ok {
			t.Fatalf("entry %d not rewritten whole", i)
		}
	}
}

// TestSharedChunkOneGet: eight readers asking at once for a chunk that is
// in no cache share one ranged read; a ninth, later, finds it in memory.
func TestSharedChunkOneGet(t *testing.T) {
	e, want := diskEnv(t, 1)
	store := &countingStore{Dir: e.store, gate: make(chan struct{})}
	r, rp := diskReader(e, store, t.TempDir())
	const readers = 8
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := rp.Read(0, 1<<20)
			if err == nil && res.NextOffset != int64(len(want)) {
				err = fmt.Errorf("read ended at %d", res.NextOffset)
			}
			errs <- err
		}()
	}
	// Every reader missed the memory cache; then let the GET through.
	deadline := time.Now().Add(10 * time.Second)
	for r.Stats().MemoryMisses < readers && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	store.mu.Lock()
	close(store.gate)
	store.gate = nil
	store.mu.Unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := store.gets.Load(); n != 1 || r.Stats().MemoryMisses != readers {
		t.Fatalf("%d readers of one chunk (%d memory misses): %d GETs, want 1", readers, r.Stats().MemoryMisses, n)
	}
	// The chunk (about 500 bytes) fits in the 1 KiB memory cache: the
	// next read is a memory hit.
	if _, err := rp.Read(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.MemoryHits != 1 || st.MemoryMisses != readers || store.gets.Load() != 1 {
		t.Fatalf("a ninth read: %d memory hits, %d misses, %d GETs", st.MemoryHits, st.MemoryMisses, store.gets.Load())
	}
}
