package tiering

import (
	"container/list"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/strata-io/strata/storage/vfs"
)

// The chunk cache: fixed-size pieces (remote.log.cache.chunk.bytes) of
// remote .log objects, one file each under CacheDir, bounded by
// remote.log.cache.bytes on disk.
//
// # Eviction: 2Q, because catch-up readers scan
//
// A consumer catching up from the start of a topic streams gigabytes that
// it reads once; under LRU it would push out the chunks other consumers
// read again and again (the complaint about KIP-405 readers). 2Q (Johnson
// & Shasha, VLDB '94) keeps three lists:
//
//	probation  FIFO of chunks read for the first time, and of every
//	           read-ahead chunk; hits here do NOT promote (a sequential
//	           reader hits its chunk many times in a row: correlated
//	           references, which say nothing about reuse)
//	ghost      FIFO of keys (no data) recently evicted from probation,
//	           up to twice as many as the cache holds chunks
//	protected  LRU of chunks fetched again while their key was a ghost:
//	           proven reuse across time
//
// To make room: while probation holds more than a quarter of the capacity
// (or protected is empty) its oldest chunk goes to the ghost list;
// otherwise the least recently used protected chunk is dropped. A scan
// therefore only ever churns the probation quarter, and the hot working
// set keeps the other three quarters. S3-FIFO was considered and not
// chosen: it promotes on any second hit while a chunk sits in its small
// queue, which a sequential reader's repeated reads of one chunk always
// give.
//
// # Bytes on disk
//
// used counts every chunk file, including ones being written: room is
// reserved before a file is created, so the directory never holds more
// than capacity bytes of chunks. A chunk in use by a reader is pinned and
// never chosen for eviction; Forget of its segment unlinks it when the
// last reader lets go. When nothing unpinned can make room, the chunk is
// served without being cached.
//
// # Files are never written over
//
// Each chunk gets a file of its own, unlinked when the chunk goes, never
// a removed chunk's file written again: the socket a view's regions were
// sendfile(2)d to holds references to the file's page-cache pages, not a
// copy, until the peer reads them (on loopback they wait in the peer's
// receive queue), long after the view is released. A file written over
// in place changes those pages, and the peer reads the new chunk's
// batches where the old one's were sent (a consumer skipping segments:
// TestReaderViewSentWithSendfileKeepsItsBytes). Unlinked, the pages stay
// as they were until the socket lets go of them. Fresh pages are what
// cost: emptying a file and writing it again costs as much as creating
// one (more on ext4, whose auto_da_alloc starts the writeback of a file
// truncated to zero at its close).
//
// # Bytes in memory
//
// A chunk just fetched keeps its buffer (mem) while its file is written
// and after, and is served from it: a sequential reader reads each chunk
// several times in a row right after it arrives (and read-ahead fetched
// it for exactly that), so re-reading the file it was just written to
// would only cost syscalls and copies. At most memMax chunks keep their
// buffer, least recently used first to lose it; a chunk whose file is
// not written yet keeps it until it is (its writer holds a budget slot,
// so those are at most Threads more). Memory is only a faster copy of
// chunks the 2Q cache holds: entering, leaving and eviction are decided
// by the 2Q lists alone, and the disk bound is unchanged.

// chunkFileSuffix names the cache's files; only these are wiped at start.
const chunkFileSuffix = ".chunk"

type cacheQueue uint8

const (
	qNone cacheQueue = iota
	qProbation
	qProtected
)

type chunkKey struct {
	obj string // object key of the .log
	idx int64  // chunk index
}

type chunkEntry struct {
	key  chunkKey
	size int64
	path string
	q    cacheQueue
	elem *list.Element // in probation or protected
	pins int
	dead bool // removed from the cache; unlink at the last unpin
	// written: the file holds the chunk. mem, when set, holds it too
	// (never mutated). An entry with neither is not readable yet.
	written bool
	mem     []byte
	memElem *list.Element // in memList while mem is set
	// ra: cached by read-ahead; used: a reader looked it up since. An
	// ra chunk evicted unused is read-ahead wasted (cacheStats.raWasted).
	ra, used bool
	// spare: mem, dropped while the chunk was pinned (a view may still
	// be reading it): handed to recycle at the last unpin.
	spare []byte
}

func (e *chunkEntry) readable() bool { return e.written || e.mem != nil }

// chunkCache is safe for concurrent use. File reads happen outside its
// lock; creation, unlinking and the accounting happen under it, so used
// is always at least the bytes of chunk files in the directory.
type chunkCache struct {
	dir      string
	capacity int64
	kin      int64 // probation's share of capacity
	ghostCap int

	mu        sync.Mutex // guards everything below
	entries   map[chunkKey]*chunkEntry
	probation list.List // of *chunkEntry, oldest first
	protected list.List // of *chunkEntry, most recent first
	probBytes int64
	ghosts    map[chunkKey]*list.Element
	ghostList list.List // of chunkKey, oldest first
	used      int64
	seq       uint64
	stats     cacheStats
	memMax    int       // chunks that may keep their buffer
	raUnread  int       // entries cached by read-ahead that no reader used yet
	memList   list.List // of *chunkEntry with mem set, most recent first

	// Metric hooks, set before use: bytes accounted change by delta; one
	// chunk evicted. Called under mu; they must not call back.
	onBytes  func(delta int64)
	onEvict  func()
	onWasted func() // a read-ahead chunk evicted unread
	// recycle, if set, takes back a chunk's buffer once the cache let go
	// of it and no reader holds the chunk (no pin): nobody reads it any
	// more. Called under mu.
	recycle func([]byte)
}

type cacheStats struct {
	evictions int64
	raWasted  int64 // read-ahead chunks evicted before any reader used them
	dropped   int64 // files that failed to read back
}

// openChunkCache prepares dir: it is created if missing and every chunk
// file left by a previous run is removed (the cache holds nothing across
// restarts; other files are left alone).
func openChunkCache(dir string, capacity, chunkBytes int64, memMax int) (*chunkCache, error) {
	if dir == "" {
		return nil, fmt.Errorf("tiering: reader: CacheDir is empty")
	}
	// The cache directory is inside the first data directory: its I/O
	// goes through vfs like the rest of it.
	if err := vfs.Default.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tiering: reader: cache dir: %w", err)
	}
	names, err := vfs.Default.List(dir)
	if err != nil {
		return nil, fmt.Errorf("tiering: reader: cache dir: %w", err)
	}
	for _, name := range names {
		if !strings.HasSuffix(name, chunkFileSuffix) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := vfs.Default.Stat(p); err == nil && st.Mode().IsRegular() {
			if err := vfs.Default.Remove(p); err != nil {
				return nil, fmt.Errorf("tiering: reader: wiping cache: %w", err)
			}
		}
	}
	ghosts := int(2 * (capacity / max(chunkBytes, 1)))
	return &chunkCache{
		dir: dir, capacity: capacity, kin: capacity / 4, ghostCap: max(ghosts, 16), memMax: memMax,
		entries: map[chunkKey]*chunkEntry{},
		ghosts:  map[chunkKey]*list.Element{},
		onBytes: func(int64) {}, onEvict: func() {}, onWasted: func() {},
	}, nil
}

// lookup returns the readable chunk for k pinned (the caller must unpin
// it), or nil, with its buffer when it is held in memory (else the caller
// reads e.path). A protected chunk becomes the most recently used; a
// probation chunk stays where it is (see the 2Q note above).
func (c *chunkCache) lookup(k chunkKey) (*chunkEntry, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[k]
	if e == nil || !e.readable() {
		return nil, nil
	}
	if e.q == qProtected {
		c.protected.MoveToFront(e.elem)
	}
	if e.memElem != nil {
		c.memList.MoveToFront(e.memElem)
	}
	e.pins++
	if e.ra && !e.used {
		c.raUnread--
	}
	e.used = true
	return e, e.mem
}

// lookupWritten is lookup, also reporting whether the chunk's file is
// written (read under the lock: the writer sets it).
func (c *chunkCache) lookupWritten(k chunkKey) (*chunkEntry, []byte, bool) {
	e, mem := c.lookup(k)
	if e == nil {
		return nil, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return e, mem, e.written
}

// contains reports whether k is cached, without counting as a use.
func (c *chunkCache) contains(k chunkKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[k] != nil
}

// unpin releases a pin taken by lookup or reserve.
func (c *chunkCache) unpin(e *chunkEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.pins--
	if e.pins == 0 && e.spare != nil {
		c.recycleLocked(e.spare)
		e.spare = nil
	}
	if e.pins == 0 && e.dead {
		c.unlinkLocked(e)
	}
}

func (c *chunkCache) recycleLocked(b []byte) {
	if c.recycle != nil {
		c.recycle(b)
	}
}

// reserve makes room for chunk k, whose bytes are data, and caches it:
// readable at once from data, and pinned so that it is not evicted before
// the caller has written its file and called written (or drop on a
// failed write), then unpin. It returns nil when the chunk should not be
// cached: it is already cached or being written, it is larger than the
// cache, or only pinned chunks could make room. readAhead chunks always
// enter probation and leave ghosts alone: prefetching is no evidence of
// reuse.
func (c *chunkCache) reserve(k chunkKey, data []byte, readAhead bool) *chunkEntry {
	size := int64(len(data))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[k] != nil || size > c.capacity || size <= 0 {
		return nil
	}
	for c.used+size > c.capacity {
		if !c.evictOneLocked() {
			return nil
		}
	}
	q := qProbation
	if g, ok := c.ghosts[k]; ok && !readAhead {
		c.ghostList.Remove(g)
		delete(c.ghosts, k)
		q = qProtected
	}
	c.seq++
	e := &chunkEntry{key: k, size: size, q: q, pins: 1, ra: readAhead,
		path: filepath.Join(c.dir, strconv.FormatUint(c.seq, 10)+chunkFileSuffix)}
	c.used += size
	c.onBytes(size)
	c.entries[k] = e
	if readAhead {
		c.raUnread++
	}
	if q == qProtected {
		e.elem = c.protected.PushFront(e)
	} else {
		e.elem = c.probation.PushBack(e)
		c.probBytes += e.size
	}
	e.mem = data
	e.memElem = c.memList.PushFront(e)
	c.trimMemLocked()
	return e
}

// written records that a reserved chunk's file holds it: from now on the
// chunk may lose its buffer.
func (c *chunkCache) written(e *chunkEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.dead {
		return // forgotten while being written; unpin unlinks it
	}
	e.written = true
	c.trimMemLocked()
}

// trimMemLocked takes the buffers of the least recently used written
// chunks until at most memMax keep one (unwritten chunks keep theirs).
func (c *chunkCache) trimMemLocked() {
	over := c.memList.Len() - c.memMax
	for el := c.memList.Back(); el != nil && over > 0; {
		e := el.Value.(*chunkEntry)
		el = el.Prev()
		if e.written {
			c.dropMemLocked(e)
			over--
		}
	}
}

func (c *chunkCache) dropMemLocked(e *chunkEntry) {
	if e.memElem != nil {
		c.memList.Remove(e.memElem)
		e.memElem = nil
	}
	if e.mem != nil {
		// Pinned, a view or a reader may hold the buffer: it goes back
		// at the last unpin.
		if e.pins == 0 {
			c.recycleLocked(e.mem)
		} else {
			e.spare = e.mem
		}
	}
	e.mem = nil
}

// drop removes e from the cache (a reserved chunk whose write failed, or
// a cached one that failed to read back); its file goes at the last unpin.
func (c *chunkCache) drop(e *chunkEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !e.dead {
		c.removeLocked(e)
		c.stats.dropped++
	}
}

// forget drops every chunk of object obj, those being written included
// (their written then finds them dead). A scan of the entries: there are at
// most CacheBytes/ChunkBytes of them (256 by default).
func (c *chunkCache) forget(obj string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if k.obj == obj {
			c.removeLocked(e)
		}
	}
	for k, g := range c.ghosts {
		if k.obj == obj {
			c.ghostList.Remove(g)
			delete(c.ghosts, k)
		}
	}
}

// removeAll drops every chunk (Close).
func (c *chunkCache) removeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		c.removeLocked(e)
	}
}

// removeLocked takes e out of the lists and the map and unlinks its file
// now, or at the last unpin when a reader holds it.
func (c *chunkCache) removeLocked(e *chunkEntry) {
	if e.dead {
		return
	}
	e.dead = true
	if e.ra && !e.used {
		c.raUnread--
	}
	c.dropMemLocked(e)
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
	if e.elem != nil {
		if e.q == qProtected {
			c.protected.Remove(e.elem)
		} else {
			c.probation.Remove(e.elem)
			c.probBytes -= e.size
		}
		e.elem = nil
	}
	if e.pins == 0 {
		c.unlinkLocked(e)
	}
}

// unlinkLocked deletes e's file and gives its bytes back. The bytes are
// given back even if the unlink fails for a file never created.
func (c *chunkCache) unlinkLocked(e *chunkEntry) {
	if err := vfs.Default.Remove(e.path); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		// The file stays on disk: keep its bytes counted so the bound
		// holds, and forget the entry (it is not reachable any more).
		return
	}
	c.used -= e.size
	c.onBytes(-e.size)
}

// evictOneLocked evicts one unpinned chunk by the 2Q rule; false when
// every candidate is pinned.
func (c *chunkCache) evictOneLocked() bool {
	order := [2]*list.List{&c.probation, &c.protected}
	if c.probBytes <= c.kin && c.protected.Len() > 0 {
		order = [2]*list.List{&c.protected, &c.probation}
	}
	for _, l := range order {
		// Probation: oldest first (front). Protected: least recent (back).
		if l == &c.probation {
			for el := l.Front(); el != nil; el = el.Next() {
				if e := el.Value.(*chunkEntry); e.pins == 0 {
					if e.ra && !e.used {
						c.stats.raWasted++
						c.onWasted()
					}
					c.addGhostLocked(e.key)
					c.removeLocked(e)
					c.stats.evictions++
					c.onEvict()
					return true
				}
			}
		} else {
			for el := l.Back(); el != nil; el = el.Prev() {
				if e := el.Value.(*chunkEntry); e.pins == 0 {
					c.removeLocked(e)
					c.stats.evictions++
					c.onEvict()
					return true
				}
			}
		}
	}
	return false
}

func (c *chunkCache) addGhostLocked(k chunkKey) {
	if _, ok := c.ghosts[k]; ok {
		return
	}
	c.ghosts[k] = c.ghostList.PushBack(k)
	for c.ghostList.Len() > c.ghostCap {
		old := c.ghostList.Remove(c.ghostList.Front()).(chunkKey)
		delete(c.ghosts, old)
	}
}

// raHeld returns how many cached chunks read-ahead fetched that no
// reader used yet.
func (c *chunkCache) raHeld() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.raUnread
}

// wasted returns the read-ahead chunks evicted unused so far.
func (c *chunkCache) wasted() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats.raWasted
}

// snapshot returns the bytes accounted (files and reservations) and the
// counters.
func (c *chunkCache) snapshot() (used int64, chunks int, st cacheStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, len(c.entries), c.stats
}
