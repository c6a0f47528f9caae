package shared

import (
	"container/list"
	"sync"
)

// cache holds whole chunks' bytes in memory, least recently used first
// out, within a byte bound. A chunk larger than the bound is served but
// not kept.
type cache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	lru   *list.List // of *cacheEntry, most recent at the front
	items map[cacheKey]*list.Element
}

type cacheKey struct {
	object string
	pos    int64
}

type cacheEntry struct {
	key  cacheKey
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

func (c *cache) put(object string, pos int64, data []byte) {
	if int64(len(data)) > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{object, pos}
	if e, ok := c.items[k]; ok {
		c.lru.MoveToFront(e)
		return
	}
	c.items[k] = c.lru.PushFront(&cacheEntry{key: k, data: data})
	c.size += int64(len(data))
	for c.size > c.limit {
		e := c.lru.Back()
		ce := e.Value.(*cacheEntry)
		c.lru.Remove(e)
		delete(c.items, ce.key)
		c.size -= int64(len(ce.data))
	}
}

// bytes is what the cache holds now.
func (c *cache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
