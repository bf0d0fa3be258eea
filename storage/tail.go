package storage

import (
	"sync"

	"github.com/strata-io/strata/internal/batch"
)

// The tail ring: where the active segment's last batches lie, kept by the
// writer, so that a read at the log's tail finds its batches without the
// offset-index lookup and the header scan (one or two preads). Reads at the
// tail are the replication path's common case: every follower fetch and
// every tailing consumer's fetch asks for the batches appended since its
// last one, thousands of times a second per partition with small batches.
// A read the ring cannot answer (an offset older than its oldest batch, a
// sealed segment, a segment just truncated) takes the scan as before; the
// ring never changes what a read returns (TestReadTailMatchesScan).

// tailLen is the number of batches the ring remembers. A follower or a
// tailing consumer is a few batches behind; 64 covers it with room.
const tailLen = 64

// tailBatch is one appended batch: the header fields a read needs.
type tailBatch struct {
	base, last int64
	pos        int64
	size       int32
	hollow     bool
}

// tailRing holds the last tailLen batches appended to a segment, oldest
// first from head-n. The writer (holding Log.mu) adds a batch after its
// bytes are written and before the segment's size is published; readers
// use only batches that end at or below the size they loaded, so they
// never see one before its bytes.
type tailRing struct {
	mu   sync.Mutex
	b    [tailLen]tailBatch
	n    int // valid entries
	head int // where the next entry goes
}

// tailAdd records a batch appended at pos. The writer holds Log.mu.
func (s *segment) tailAdd(h *batch.Header, pos int64) {
	r := s.tail.Load()
	if r == nil {
		// Batches before pos (a segment opened with data, or truncated)
		// were never recorded: the ring starts here. It only has to be
		// contiguous from its oldest entry.
		r = &tailRing{}
		s.tail.Store(r)
	}
	r.mu.Lock()
	r.b[r.head] = tailBatch{base: h.BaseOffset, last: h.LastOffset(), pos: pos, size: int32(h.Size()), hollow: hollow(*h)}
	r.head = (r.head + 1) % tailLen
	r.n = min(r.n+1, tailLen)
	r.mu.Unlock()
}

// tailDrop forgets the ring: the segment was sealed (reads of sealed
// segments are not tail reads, and a long log's sealed segments should not
// each keep one) or truncated (its batches are gone). The writer holds
// Log.mu.
func (s *segment) tailDrop() { s.tail.Store(nil) }

// readTail answers segment.read from the ring: ok is false when the ring
// does not hold the batch at or after offset (the caller scans then). The
// rules are read's: the batch holding offset (or the first after it, hollow
// ones skipped) whole, then whole batches while under maxBytes and below
// maxOffset, never past limit (the published size).
func (s *segment) readTail(offset int64, maxBytes int, maxOffset, limit int64) (v ReadView, ok bool) {
	r := s.tail.Load()
	if r == nil {
		return v, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return v, false
	}
	at := func(i int) *tailBatch { return &r.b[(r.head-r.n+i+tailLen)%tailLen] }
	// The oldest entry must not hold a later offset than the one asked
	// for: the batch holding offset could be before the ring.
	if at(0).base > offset {
		return v, false
	}
	i := r.n - 1
	for i > 0 && at(i-1).last >= offset {
		i--
	}
	for i < r.n && (at(i).last < offset || at(i).hollow) {
		i++
	}
	if i == r.n || at(i).pos+int64(at(i).size) > limit {
		return v, false // nothing published at or after offset in the ring
	}
	first := at(i)
	v = ReadView{File: s.log, Pos: first.pos, FirstOffset: first.base, NextOffset: first.base}
	if first.last >= maxOffset {
		return v, true
	}
	end := first.pos
	for ; ; i++ {
		if end >= limit {
			break
		}
		if i == r.n {
			// Published bytes past the ring's newest batch: never
			// expected (the writer records a batch before publishing
			// it); the scan knows better.
			return ReadView{}, false
		}
		b := at(i)
		if b.pos != end {
			return ReadView{}, false // not contiguous: never expected either
		}
		if b.last >= maxOffset || (end > first.pos && (b.hollow || end-first.pos+int64(b.size) > int64(maxBytes))) {
			break
		}
		end += int64(b.size)
		v.NextOffset = b.last + 1
	}
	v.Size = end - first.pos
	return v, true
}
