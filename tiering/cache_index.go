package tiering

import (
	"container/list"
	"sync"
)

// indexCache holds fetched .index and .timeindex objects in memory, LRU,
// bounded by remote.log.index.cache.bytes. Index objects are small (8 or
// 12 bytes per ~4 KiB of log: ~2.5 MiB for a 1 GiB segment) and every
// read of a segment needs one, so plain LRU serves: a scan touches one
// index per segment, not one per chunk. Values are never mutated after
// insertion, so callers may keep using a slice after it is evicted.
type indexCache struct {
	capacity int64

	mu    sync.Mutex // guards items, lru, used
	items map[string]*list.Element
	lru   list.List // of *indexItem, most recent first
	used  int64
}

type indexItem struct {
	key  string
	data []byte
}

func newIndexCache(capacity int64) *indexCache {
	return &indexCache{capacity: capacity, items: map[string]*list.Element{}}
}

func (c *indexCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*indexItem).data, true
}

// put caches data under key, evicting the least recently used; an object
// larger than the whole cache is not kept.
func (c *indexCache) put(key string, data []byte) {
	size := int64(len(data)) + int64(len(key))
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.capacity {
		return
	}
	if el, ok := c.items[key]; ok {
		c.removeLocked(el)
	}
	for c.used+size > c.capacity {
		c.removeLocked(c.lru.Back())
	}
	c.items[key] = c.lru.PushFront(&indexItem{key: key, data: data})
	c.used += size
}

func (c *indexCache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.removeLocked(el)
	}
}

func (c *indexCache) removeLocked(el *list.Element) {
	it := c.lru.Remove(el).(*indexItem)
	delete(c.items, it.key)
	c.used -= int64(len(it.data)) + int64(len(it.key))
}

// has reports whether key is cached, without counting as a use.
func (c *indexCache) has(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[key]
	return ok
}
