package storage

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Open files of sealed segments.
//
// A segment holds three descriptors while its files are open (the .log
// and the two mapped indexes). Kept open for every sealed segment, that
// bounds partitions × segments by RLIMIT_NOFILE: 1,000 partitions were
// enough to run a node out of descriptors (issue 12). So a Manager gives
// its logs one fileCache: at most max sealed segments keep their files
// open, and the least recently used of the others are closed. A closed
// (evicted) segment reopens on its next use; the active segment of every
// log is never evicted, so a log costs three descriptors plus whatever of
// the cache it uses.
//
// How a use and an eviction exclude each other without a lock on the read
// path: a user (pin) increments users, then loads open; the evictor
// stores open=false, then loads users, and backs off (open=true again) if
// anyone is in. Both are sequentially consistent atomics, so at least one
// sees the other: either the user sees open=false and takes the slow path
// (fmu, reopening), or the evictor sees the user and keeps the files. A
// pinned segment is never evicted, so a ReadView's file stays open until
// it is released.
//
// Lock order: fileCache.mu → segment.fmu (the evictor); a reopen takes fmu
// alone and calls add only after releasing it.
type fileCache struct {
	max   int
	clock atomic.Int64 // advances at each add; a segment's lastUse is the value at its last use

	mu   sync.Mutex            // guards open, and every member's files' closing by eviction
	open map[*segment]struct{} // sealed segments whose files are open
}

func newFileCache(max int) *fileCache {
	return &fileCache{max: max, open: map[*segment]struct{}{}}
}

// add registers a sealed segment whose files are open and evicts the least
// recently used unpinned members while more than max are open.
func (c *fileCache) add(s *segment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.open[s]; !ok {
		s.cache.Store(c)
		s.lastUse.Store(c.clock.Add(1))
		c.open[s] = struct{}{}
		s.inCache.Store(true)
	}
	c.evictLocked(s)
}

// trim closes the least recently used unpinned members' files while the
// cache is over its bound (after a pin that held it over is dropped: a
// roll's fsyncs, rollsync.go).
func (c *fileCache) trim() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictLocked(nil)
}

// evictLocked evicts members other than keep down to the bound. mu held.
func (c *fileCache) evictLocked(keep *segment) {
	for len(c.open) > c.max {
		var victim *segment
		for m := range c.open {
			if m != keep && m.users.Load() == 0 && (victim == nil || m.lastUse.Load() < victim.lastUse.Load()) {
				victim = m
			}
		}
		if victim == nil || !victim.evict() {
			return // everything else is in use: over the cap (by at most the pins) until the next add
		}
		delete(c.open, victim)
	}
}

// remove forgets a segment (it became the active one again, or is being
// closed for good); its files stay as they are.
func (c *fileCache) remove(s *segment) {
	c.mu.Lock()
	delete(c.open, s)
	s.inCache.Store(false)
	c.mu.Unlock()
}

// len returns how many sealed segments have their files open.
func (c *fileCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

// pin marks the segment's files in use, reopening them if they were
// evicted; unpin ends the use. The caller holds a reference (refs), so the
// segment is not closed for good meanwhile.
func (s *segment) pin() error {
	s.users.Add(1)
	if s.open.Load() {
		if s.inCache.Load() {
			s.lastUse.Store(s.cache.Load().clock.Load())
		}
		return nil
	}
	s.fmu.Lock()
	reopened := false
	if !s.open.Load() {
		if err := s.reopenLocked(); err != nil {
			s.fmu.Unlock()
			s.users.Add(-1)
			return err
		}
		reopened = true
	}
	s.fmu.Unlock()
	if c := s.cache.Load(); reopened && c != nil {
		c.add(s)
	}
	return nil
}

func (s *segment) unpin() { s.users.Add(-1) }

// evict closes the files of an unused sealed segment; false if it is in
// use (or already closed). Called by the cache with its mu held.
func (s *segment) evict() bool {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if !s.open.Load() {
		return true
	}
	s.open.Store(false)
	if s.users.Load() > 0 {
		s.open.Store(true)
		return false
	}
	s.closeFilesLocked()
	return true
}

// reopenLocked opens an evicted sealed segment's files again (the
// indexes at their trimmed size, as recovery opens sealed ones). A deleted
// segment that a reader still holds has its files under .deleted names.
func (s *segment) reopenLocked() error {
	suffix := ""
	if s.deleted.Load() {
		suffix = DeletedFileSuffix
	}
	log, err := s.fs.OpenReadWrite(s.logPath() + suffix)
	if err != nil {
		return fmt.Errorf("storage: reopen segment %d: %w", s.base, err)
	}
	oi, ti, err := openIndexFiles(s.fs, s.indexPath()+suffix, s.timeIndexPath()+suffix, s.base, 0, 0)
	if err != nil {
		log.Close()
		return fmt.Errorf("storage: reopen segment %d: %w", s.base, err)
	}
	s.log, s.oi, s.ti = log, oi, ti
	s.open.Store(true)
	return nil
}

// activate makes a sealed segment the active one again (truncation back
// into it): its files are opened if evicted and it leaves the cache, so it
// is never evicted while it takes appends. Log.mu held.
func (s *segment) activate() error {
	if err := s.pin(); err != nil {
		return err
	}
	defer s.unpin()
	if c := s.cache.Load(); c != nil {
		c.remove(s)
	}
	return nil
}

// cacheSealed hands a sealed segment's open files to the log's cache (no-op
// without one).
func (l *Log) cacheSealed(s *segment) {
	if l.files != nil {
		l.files.add(s)
	}
}
