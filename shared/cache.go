package shared

import (
	"container/list"
	"sync"

	"github.com/sluice-broker/sluice/metastore"
)

// cache holds whole chunks' bytes in memory, least recently used first
// out, within a byte bound. A chunk larger than the bound is served but
// not kept. onEvict, when set, is given each chunk the bound pushes out
// (outside the lock; it must not block): the disk tier keeps it.
type cache struct {
	mu      sync.Mutex
	limit   int64
	size    int64
	lru     *list.List // of *cacheEntry, most recent at the front
	items   map[cacheKey]*list.Element
	onEvict func(ch metastore.SharedChunk, data []byte)
}

type cacheKey struct {
	object string
	pos    int64
}

type cacheEntry struct {
	ch   metastore.SharedChunk
	data []byte
}

func newCache(limit int64) *cache {
	return &cache{limit: limit, lru: list.New(), items: map[cacheKey]*list.Element{}}
}

func (c *cache) get(object string, pos int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[cacheKey{object, pos}]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*cacheEntry).data, true
}

// put keeps chunk ch's bytes.
func (c *cache) put(ch metastore.SharedChunk, data []byte) {
	if int64(len(data)) > c.limit {
		if c.onEvict != nil {
			c.onEvict(ch, data)
		}
		return
	}
	var out []*cacheEntry
	c.mu.Lock()
	k := cacheKey{ch.Key, ch.Pos}
	if e, ok := c.items[k]; ok {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		return
	}
	c.items[k] = c.lru.PushFront(&cacheEntry{ch: ch, data: data})
	c.size += int64(len(data))
	for c.size > c.limit {
		e := c.lru.Back()
		ce := e.Value.(*cacheEntry)
		c.lru.Remove(e)
		delete(c.items, cacheKey{ce.ch.Key, ce.ch.Pos})
		c.size -= int64(len(ce.data))
		out = append(out, ce)
	}
	c.mu.Unlock()
	if c.onEvict != nil {
		for _, ce := range out {
			c.onEvict(ce.ch, ce.data)
		}
	}
}

// bytes is what the cache holds now.
func (c *cache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
