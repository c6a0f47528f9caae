//go:build linux

package log

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident reports, per page of the file, whether it is in the page cache.
func resident(t *testing.T, path string) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// TestDropBehind: with CacheTailBytes set, the synced part of the active
// segment further behind its end than that leaves the page cache after a
// sync, and the tail stays; without it, everything written stays cached.
func TestDropBehind(t *testing.T) {
	const tail = 1 << 20
	for _, tc := range []struct {
		name string
		tail int64
	}{{"drop-behind", tail}, {"keep everything", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFlusher(FlusherConfig{Policy: FlushGroup, CacheTailBytes: tc.tail})
			f.Start()
			defer f.Close()
			dir := t.TempDir()
			l := openT(t, dir, testConfig(), Options{Logger: testLogger(t), Flusher: f})
			defer l.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// 8 MiB in 64 KiB batches, each made durable before the next,
			// so syncs happen all along the segment.
			b := mkBatch(spec{n: 64, valueSize: 1000})
			var end int64
			for written := 0; written < 8<<20; written += len(b) {
				r := mustAppend(t, l, b)
				if err := l.WaitDurable(ctx, r.LastOffset+1); err != nil {
					t.Fatal(err)
				}
				end = r.LastOffset + 1
			}
			if d := l.DurableOffset(); d != end {
				t.Fatalf("durable %d, want %d", d, end)
			}
			pages := resident(t, filepath.Join(dir, "00000000000000000000.log"))
			page := os.Getpagesize()
			head := 0 // resident pages of the first 4 MiB
			for _, r := range pages[:4<<20/page] {
				if r {
					head++
				}
			}
			last := 0 // resident pages of the last 512 KiB
			for _, r := range pages[len(pages)-512<<10/page:] {
				if r {
					last++
				}
			}
			t.Logf("%d pages; resident: %d of the first 4 MiB, %d of the last 512 KiB", len(pages), head, last)
			if last != 512<<10/page {
				t.Fatalf("only %d of the last 512 KiB's %d pages are cached", last, 512<<10/page)
			}
			if tc.tail > 0 && head != 0 {
				t.Fatalf("%d pages of the first 4 MiB still cached, long synced and behind the %d-byte tail", head, tc.tail)
			}
			if tc.tail == 0 && head != 4<<20/page {
				t.Fatalf("%d of the first 4 MiB's pages cached with drop-behind off", head)
			}
			// Everything reads back, dropped or not.
			got := readAll(t, l)
			if want := int(end / 64); len(got) != want || baseOf(got[len(got)-1]) != end-64 {
				t.Fatalf("read back %d batches, want %d ending at %d", len(got), want, end-64)
			}
		})
	}
}
