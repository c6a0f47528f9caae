package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

// testStore is the conformance suite: every backend keeps the contract in
// doc.go. s must be empty (a fresh directory, or a fresh prefix in a
// bucket). conditional says whether s does conditional creates.
func testStore(t *testing.T, s Store, conditional bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("PutGetStat", func(t *testing.T) {
		data := []byte("hello, shared storage")
		mustPut(t, s, "obj/a", data)
		got, err := s.Get(ctx, "obj/a")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get = %q, %v; want %q", got, err, data)
		}
		info, err := s.Stat(ctx, "obj/a")
		if err != nil || info.Key != "obj/a" || info.Size != int64(len(data)) {
			t.Fatalf("Stat = %+v, %v", info, err)
		}
		if age := time.Since(info.ModTime); age > time.Hour || age < -time.Hour {
			t.Errorf("Stat ModTime %v is not about now", info.ModTime)
		}
		// Put replaces (a retried Put, or a rewrite).
		mustPut(t, s, "obj/a", []byte("second"))
		if got, err := s.Get(ctx, "obj/a"); err != nil || string(got) != "second" {
			t.Fatalf("Get after overwrite = %q, %v", got, err)
		}
		// An empty object is an object.
		mustPut(t, s, "obj/empty", nil)
		if got, err := s.Get(ctx, "obj/empty"); err != nil || len(got) != 0 {
			t.Fatalf("Get empty = %q, %v", got, err)
		}
		if info, err := s.Stat(ctx, "obj/empty"); err != nil || info.Size != 0 {
			t.Fatalf("Stat empty = %+v, %v", info, err)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		if _, err := s.Get(ctx, "missing/x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get missing: %v, want ErrNotFound", err)
		}
		if _, err := s.GetRange(ctx, "missing/x", 0, 10); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetRange missing: %v, want ErrNotFound", err)
		}
		if _, err := s.Stat(ctx, "missing/x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Stat missing: %v, want ErrNotFound", err)
		}
		// A key that is a "directory" of other keys is no object.
		mustPut(t, s, "dirlike/child", []byte("c"))
		if _, err := s.Get(ctx, "dirlike"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get of a key's parent: %v, want ErrNotFound", err)
		}
		if _, err := s.Stat(ctx, "dirlike"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Stat of a key's parent: %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, "missing/x"); err != nil {
			t.Errorf("Delete missing: %v, want nil", err)
		}
	})

	t.Run("GetRange", func(t *testing.T) {
		data := randomBytes(t, 5<<20+123) // several MiB: an upload object's size
		mustPut(t, s, "range/big", data)
		cases := []struct{ off, n, wantLen int64 }{
			{0, 1, 1},
			{0, int64(len(data)), int64(len(data))},
			{1 << 20, 256 << 10, 256 << 10},
			{int64(len(data)) - 10, 10, 10},
			{int64(len(data)) - 10, 1000, 10}, // past the end: what is there
			{int64(len(data)) - 1, 1, 1},
			{1, math.MaxInt64, int64(len(data)) - 1}, // no overflow
		}
		for _, c := range cases {
			got, err := s.GetRange(ctx, "range/big", c.off, c.n)
			if err != nil {
				t.Fatalf("GetRange(%d, %d): %v", c.off, c.n, err)
			}
			if int64(len(got)) != c.wantLen || !bytes.Equal(got, data[c.off:c.off+c.wantLen]) {
				t.Fatalf("GetRange(%d, %d): %d bytes, want data[%d:%d]", c.off, c.n, len(got), c.off, c.off+c.wantLen)
			}
		}
		for _, c := range []struct{ off, n int64 }{
			{int64(len(data)), 1},     // at the end
			{int64(len(data)) + 5, 1}, // past it
			{-1, 10},
			{0, 0},
			{0, -1},
		} {
			if _, err := s.GetRange(ctx, "range/big", c.off, c.n); !errors.Is(err, ErrInvalidRange) {
				t.Errorf("GetRange(%d, %d): %v, want ErrInvalidRange", c.off, c.n, err)
			}
		}
		got, err := s.Get(ctx, "range/big")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get big: %d bytes, %v", len(got), err)
		}
	})

	t.Run("List", func(t *testing.T) {
		keys := []string{
			"list/t/1/00000000000000000000",
			"list/t/1/00000000000000000100",
			"list/t/10/00000000000000000000",
			"list/t/2/00000000000000000000",
			"list/a.b",
			"list/a/b",
			"list/a-b",
			"list/a_b",
			"list/z",
		}
		for i, k := range keys {
			mustPut(t, s, k, bytes.Repeat([]byte{'x'}, i))
		}
		sorted := slices.Clone(keys)
		slices.Sort(sorted) // byte order: "a-b" < "a.b" < "a/b" < "a_b"
		if got := listKeys(t, s, "list/"); !slices.Equal(got, sorted) {
			t.Errorf("List(list/) = %q, want %q", got, sorted)
		}
		if got := listKeys(t, s, "list/t/1"); !slices.Equal(got, []string{keys[0], keys[1], keys[2]}) {
			t.Errorf("List(list/t/1) = %q: a prefix is a string prefix, not a directory", got)
		}
		if got := listKeys(t, s, "list/t/1/"); !slices.Equal(got, []string{keys[0], keys[1]}) {
			t.Errorf("List(list/t/1/) = %q", got)
		}
		if got := listKeys(t, s, "list/a"); !slices.Equal(got, []string{"list/a-b", "list/a.b", "list/a/b", "list/a_b"}) {
			t.Errorf("List(list/a) = %q", got)
		}
		if got := listKeys(t, s, "list/none/"); len(got) != 0 {
			t.Errorf("List(list/none/) = %q, want nothing", got)
		}
		if got := listKeys(t, s, "nosuchtop"); len(got) != 0 {
			t.Errorf("List(nosuchtop) = %q, want nothing", got)
		}
		// Sizes come with the keys.
		var sizes []int64
		if err := s.List(ctx, "list/t/", func(o ObjectInfo) error { sizes = append(sizes, o.Size); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sizes, []int64{0, 1, 2, 3}) {
			t.Errorf("List sizes = %v, want [0 1 2 3]", sizes)
		}
		// fn's error stops the listing and is returned.
		stop := errors.New("stop")
		n := 0
		err := s.List(ctx, "list/", func(ObjectInfo) error {
			n++
			if n == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 3 {
			t.Errorf("List with a failing fn: %v after %d calls, want stop after 3", err, n)
		}
		all := listKeys(t, s, "")
		if !slices.IsSorted(all) || !slices.Contains(all, "list/z") || !slices.Contains(all, "obj/a") {
			t.Errorf("List(\"\") = %q: want every key, sorted", all)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		mustPut(t, s, "del/a", []byte("a"))
		mustPut(t, s, "del/b", []byte("b"))
		if err := s.Delete(ctx, "del/a"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "del/a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get after Delete: %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, "del/a"); err != nil {
			t.Errorf("second Delete: %v, want nil", err)
		}
		if got := listKeys(t, s, "del/"); !slices.Equal(got, []string{"del/b"}) {
			t.Errorf("List after Delete = %q", got)
		}
		// A deleted key can be written again.
		mustPut(t, s, "del/a", []byte("again"))
		if got, err := s.Get(ctx, "del/a"); err != nil || string(got) != "again" {
			t.Errorf("Get after re-Put = %q, %v", got, err)
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		for _, k := range []string{"", "/a", "a/", "a//b", ".a", "a/.b", "a/../b", "a b", "a\\b", "ä", string(make([]byte, MaxKeyLen+1))} {
			if err := s.Put(ctx, k, []byte("x")); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Put(%q): %v, want ErrInvalidKey", k, err)
			}
			if _, err := s.Get(ctx, k); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Get(%q): %v, want ErrInvalidKey", k, err)
			}
			if err := s.Delete(ctx, k); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Delete(%q): %v, want ErrInvalidKey", k, err)
			}
		}
		for _, p := range []string{"/", "//", "a//", ".x", "a/.b/"} {
			if err := s.List(ctx, p, func(ObjectInfo) error { return nil }); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("List(%q): %v, want ErrInvalidKey", p, err)
			}
		}
	})

	t.Run("ConcurrentPuts", func(t *testing.T) {
		const n = 16
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				errs <- s.Put(ctx, fmt.Sprintf("conc/%02d", i), []byte(fmt.Sprint(i)))
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := listKeys(t, s, "conc/"); len(got) != n {
			t.Fatalf("List after %d concurrent Puts: %d keys", n, len(got))
		}
	})

	t.Run("PutIfAbsent", func(t *testing.T) {
		if !conditional {
			if err := s.PutIfAbsent(ctx, "cond/x", []byte("x")); !errors.Is(err, ErrUnsupported) {
				t.Fatalf("PutIfAbsent without conditional writes: %v, want ErrUnsupported", err)
			}
			if _, err := s.Get(ctx, "cond/x"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("an unsupported PutIfAbsent stored something: %v", err)
			}
			return
		}
		if err := s.PutIfAbsent(ctx, "cond/a", []byte("first")); err != nil {
			t.Fatal(err)
		}
		if err := s.PutIfAbsent(ctx, "cond/a", []byte("second")); !errors.Is(err, ErrExists) {
			t.Fatalf("second PutIfAbsent: %v, want ErrExists", err)
		}
		if got, err := s.Get(ctx, "cond/a"); err != nil || string(got) != "first" {
			t.Fatalf("after a refused PutIfAbsent: %q, %v", got, err)
		}
		// Many writers race for one key: exactly one wins, and the
		// object is the winner's.
		const n = 8
		var wg sync.WaitGroup
		results := make([]error, n)
		for i := range n {
			wg.Go(func() {
				results[i] = s.PutIfAbsent(ctx, "cond/race", fmt.Appendf(nil, "writer-%d", i))
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range results {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("writers %d and %d both created cond/race", winner, i)
				}
				winner = i
			case !errors.Is(err, ErrExists):
				t.Fatalf("writer %d: %v", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no writer created cond/race")
		}
		if got, err := s.Get(ctx, "cond/race"); err != nil || string(got) != fmt.Sprintf("writer-%d", winner) {
			t.Fatalf("cond/race = %q, %v; writer %d won", got, err, winner)
		}
		if err := VerifyConditional(ctx, s, "probe/"); err != nil {
			t.Fatalf("VerifyConditional: %v", err)
		}
		if got := listKeys(t, s, "probe/"); len(got) != 0 {
			t.Errorf("VerifyConditional left %q behind", got)
		}
	})
}

func mustPut(t *testing.T, s Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, data); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func listKeys(t *testing.T, s Store, prefix string) []string {
	t.Helper()
	var keys []string
	if err := s.List(context.Background(), prefix, func(o ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
