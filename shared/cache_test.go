package shared

import (
	"testing"

	"github.com/sluice-broker/sluice/metastore"
)

// TestCacheBound: the chunk cache never holds more than its limit, drops
// the least recently used chunk first, and does not keep a chunk larger
// than the whole limit.
func TestCacheBound(t *testing.T) {
	c := newCache(1000)
	for i := 0; i < 10; i++ {
		c.put(metastore.SharedChunk{Key: "o", Pos: int64(i), Len: 300}, make([]byte, 300))
		if c.bytes() > 1000 {
			t.Fatalf("after %d puts the cache holds %d bytes", i+1, c.bytes())
		}
		if i == 1 {
			c.get("o", 0) // 0 is now more recent than 1
		}
		if i == 3 {
			if _, ok := c.get("o", 1); ok {
				t.Fatal("chunk 1, least recently used, was kept over chunk 0")
			}
			if _, ok := c.get("o", 0); !ok {
				t.Fatal("chunk 0, used recently, was dropped")
			}
		}
	}
	for i := 7; i < 10; i++ {
		if _, ok := c.get("o", int64(i)); !ok {
			t.Fatalf("chunk %d, among the last three, was dropped", i)
		}
	}
	c.put(metastore.SharedChunk{Key: "big", Len: 1001}, make([]byte, 1001))
	if _, ok := c.get("big", 0); ok || c.bytes() > 1000 {
		t.Fatalf("a chunk over the limit was kept (%d bytes held)", c.bytes())
	}
}
