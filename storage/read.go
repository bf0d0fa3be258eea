package storage

import (
	"errors"
	"fmt"
	"sort"

	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage/vfs"
)

// ReadView is a region of one segment file holding whole batches: send
// File[Pos:Pos+Size] as it is. The file stays open until Release, even if
// retention deletes the segment meanwhile.
type ReadView struct {
	File        vfs.File
	Pos         int64
	Size        int64
	FirstOffset int64 // base offset of the first batch (the requested offset when empty)
	NextOffset  int64 // offset after the last batch included
	release     func()
}

// Release drops the reference that keeps the file open. It must be called
// once for every view (calling it on an empty view is fine).
func (v ReadView) Release() {
	if v.release != nil {
		v.release()
	}
}

// Bytes reads the view's region into a new slice (tests and tools; the
// fetch path sends the file region instead).
func (v ReadView) Bytes() ([]byte, error) {
	b := make([]byte, v.Size)
	if v.Size == 0 {
		return b, nil
	}
	if _, err := v.File.ReadAt(b, v.Pos); err != nil {
		return nil, fmt.Errorf("storage: read view: %w", err)
	}
	return b, nil
}

// findSegment returns the index of the segment holding off: the last one
// whose base offset is <= off.
func findSegment(segs []*segment, off int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > off })
	if i > 0 {
		i--
	}
	return i
}

// acquireAt loads the segment list and takes a reference on the segment
// holding off. It retries when a deletion closed that segment between the
// load and the acquire; ErrClosed once the log is closed, or the error
// reopening the segment's files (file cache).
func (l *Log) acquireAt(off int64) (segs []*segment, i int, err error) {
	for range 100 {
		segs = l.segments()
		i = findSegment(segs, off)
		err := segs[i].acquire()
		if err == nil {
			return segs, i, nil
		}
		if !errors.Is(err, errSegmentClosed) {
			return nil, 0, err
		}
		if l.closed.Load() {
			return nil, 0, ErrClosed
		}
	}
	return nil, 0, ErrClosed
}

// Read returns whole batches starting with the batch containing offset, up
// to maxBytes (but the first batch always whole, KIP-74), never including a
// batch whose last offset is >= maxOffset (the high watermark). An offset
// in a gap resolves to the next batch. offset == maxOffset or the log end
// offset gives an empty view and nil. An offset below the local log start
// offset or above the log end offset gives ErrOffsetOutOfRange.
//
// Read takes no lock and never waits for the writer. The view's file
// region belongs to the log; the caller must Release the view.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (ReadView, error) {
	if l.closed.Load() {
		return ReadView{}, ErrClosed
	}
	leo := l.LogEndOffset()
	if offset < l.localStart.Load() || offset > leo {
		return ReadView{}, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.localStart.Load(), leo)
	}
	empty := ReadView{FirstOffset: offset, NextOffset: offset}
	if offset >= maxOffset || offset == leo {
		return empty, nil
	}
	segs, i, err := l.acquireAt(offset)
	if err != nil {
		return ReadView{}, err
	}
	// Deletions move the local start before publishing the shorter list,
	// so a list that no longer holds offset is caught here.
	if ls := l.localStart.Load(); offset < ls {
		segs[i].release()
		return ReadView{}, fmt.Errorf("%w: %d below local log start %d", ErrOffsetOutOfRange, offset, ls)
	}
	for first := true; i < len(segs); i, first = i+1, false {
		s := segs[i]
		if !first {
			if err := s.acquire(); errors.Is(err, errSegmentClosed) {
				// Deleted under us: only possible for segments below the
				// local start, which a reader asking for offset never needs.
				return empty, nil
			} else if err != nil {
				return ReadView{}, err
			}
		}
		v, found, err := s.read(offset, maxBytes, maxOffset)
		if err != nil || found {
			if err != nil || v.Size == 0 {
				s.release()
				if err != nil {
					return ReadView{}, err
				}
				return empty, nil
			}
			v.release = s.release
			return v, nil
		}
		s.release() // offset lies past this segment (a gap): try the next
	}
	return empty, nil
}

// read finds the batch holding offset (or the first after it) in this
// segment and extends the view. found is false when every batch of the
// segment ends before offset.
func (s *segment) read(offset int64, maxBytes int, maxOffset int64) (v ReadView, found bool, err error) {
	next := s.next.Load()
	limit := s.size.Load()
	if next <= offset || limit == 0 {
		return v, false, nil
	}
	if v, ok := s.readTail(offset, maxBytes, maxOffset, limit); ok {
		return v, true, nil
	}
	cuts := s.cuts.Load()
	// cut reports a truncation (replication) since the read began: its
	// bytes may be gone, which is not corruption.
	cut := func() bool { return cuts%2 == 1 || s.cuts.Load() != cuts || s.size.Load() < limit }
	_, p := s.oi.Lookup(offset)
	pos := int64(p)
	hs := newHeaderScanner(s.log, limit)
	defer hs.release()
	// Forward scan to the batch whose last offset reaches offset.
	var h batch.Header
	for {
		if pos >= limit {
			return v, false, nil
		}
		h, err = hs.header(pos)
		if err != nil {
			if cut() {
				// A truncation (replication) cut the segment under us:
				// the offset is gone, nothing to return.
				return v, true, nil
			}
			return v, false, fmt.Errorf("%w: segment %d at position %d: %v", ErrCorruption, s.base, pos, err)
		}
		if h.LastOffset() >= offset && !hollow(h) {
			break
		}
		pos += int64(h.Size())
	}
	v = ReadView{File: s.log, Pos: pos, FirstOffset: h.BaseOffset, NextOffset: h.BaseOffset}
	if h.LastOffset() >= maxOffset {
		return v, true, nil
	}
	// Extend while under maxBytes and below maxOffset; the first batch
	// goes in whole whatever its size.
	end := pos
	for {
		sz := int64(h.Size())
		if end > pos && end-pos+sz > int64(maxBytes) {
			break
		}
		end += sz
		v.NextOffset = h.LastOffset() + 1
		if end >= limit {
			break
		}
		h, err = hs.header(end)
		if err != nil {
			if cut() {
				break // truncated under us: return what was whole before
			}
			return v, false, fmt.Errorf("%w: segment %d at position %d: %v", ErrCorruption, s.base, end, err)
		}
		if h.LastOffset() >= maxOffset || hollow(h) {
			break
		}
	}
	v.Size = end - pos
	return v, true, nil
}

// hollow reports whether a stored batch is one that readers never get: a
// batch without records, producer id or control marker. The cleaner keeps
// one as the last batch of a cleaned segment whose newest records were all
// superseded, so the segment still ends where the segments it replaced
// ended (cleaner.go); Kafka's cleaner drops such a batch, clients expect
// none (segmentio/kafka-go reads the next batch's bytes as its records),
// and it carries nothing a consumer needs. A read skips it like a gap in
// the offsets. Empty batches with a producer id (an idempotent producer's
// last, kept for its sequence numbers) are served, as Kafka serves them.
func hollow(h batch.Header) bool {
	return h.NumRecords == 0 && !h.Control() && !h.HasProducerID()
}

// OffsetForTimestamp returns the first offset whose record timestamp is
// >= ts, searching batches whose max timestamp is >= ts through the time
// index (ListOffsets semantics). ok is false when no such record exists.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, ok bool, err error) {
	if l.closed.Load() {
		return 0, 0, false, ErrClosed
	}
	start := l.localStart.Load()
	segs := l.segments()
	for i := findSegment(segs, start); i < len(segs); i++ {
		s := segs[i]
		if mts, _ := s.maxTimestamp(); mts < ts {
			continue
		}
		if err := s.acquire(); errors.Is(err, errSegmentClosed) {
			continue
		} else if err != nil {
			return 0, 0, false, err
		}
		off, rts, found, err := s.findTimestamp(ts, start)
		s.release()
		if err != nil {
			return 0, 0, false, err
		}
		if found {
			return off, rts, true, nil
		}
	}
	return 0, 0, false, nil
}

// findTimestamp scans from the time index's entry for ts to the first
// batch whose max timestamp is >= ts, then to its first record that is.
func (s *segment) findTimestamp(ts, minOffset int64) (int64, int64, bool, error) {
	from := s.base
	if o, ok := s.ti.Lookup(ts); ok {
		from = o
	}
	if from < minOffset {
		from = minOffset
	}
	_, p := s.oi.Lookup(from)
	pos, limit := int64(p), s.size.Load()
	hs := newHeaderScanner(s.log, limit)
	defer hs.release()
	for pos < limit {
		h, err := hs.header(pos)
		if err != nil {
			return 0, 0, false, fmt.Errorf("%w: segment %d at position %d: %v", ErrCorruption, s.base, pos, err)
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= minOffset {
			off, rts, err := s.recordAtOrAfter(pos, h, ts, minOffset)
			return off, rts, true, err
		}
		pos += int64(h.Size())
	}
	return 0, 0, false, nil
}

// recordAtOrAfter decodes the batch at pos and returns the first record
// (at or above minOffset) whose timestamp is >= ts. LogAppendTime batches
// carry the append time for every record.
func (s *segment) recordAtOrAfter(pos int64, h batch.Header, ts, minOffset int64) (int64, int64, error) {
	if h.TimestampType() == logAppendTime {
		return max(h.BaseOffset, minOffset), h.MaxTimestamp, nil
	}
	b := make([]byte, h.Size())
	if _, err := s.log.ReadAt(b, pos); err != nil {
		return 0, 0, fmt.Errorf("storage: read batch: %w", err)
	}
	off, rts := int64(-1), int64(-1)
	err := batch.Records(b, func(r batch.Record) error {
		o := h.BaseOffset + int64(r.OffsetDelta)
		t := h.FirstTimestamp + r.TimestampDelta
		if off < 0 && o >= minOffset && t >= ts {
			off, rts = o, t
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("%w: segment %d at position %d: %v", ErrCorruption, s.base, pos, err)
	}
	if off < 0 {
		// Max timestamp says a record qualifies: trust the header.
		return max(h.BaseOffset, minOffset), h.MaxTimestamp, nil
	}
	return off, rts, nil
}

// MaxTimestampOffset returns the offset and timestamp of the record with
// the largest timestamp (ListOffsets -3); (-1, -1) for an empty log.
func (l *Log) MaxTimestampOffset() (offset int64, timestamp int64) {
	var best *segment
	bestTS, bestOff := int64(-1), int64(-1)
	segs := l.segments()
	for _, s := range segs {
		if ts, off := s.maxTimestamp(); ts > bestTS {
			best, bestTS, bestOff = s, ts, off
		}
	}
	if best == nil || best.acquire() != nil {
		return -1, -1
	}
	defer best.release()
	_, p := best.oi.Lookup(bestOff)
	pos, limit := int64(p), best.size.Load()
	for pos < limit {
		h, err := readHeader(best.log, pos, limit)
		if err != nil {
			break
		}
		if h.BaseOffset == bestOff {
			if off, ts, err := best.recordAtOrAfter(pos, h, bestTS, bestOff); err == nil {
				return off, ts
			}
			break
		}
		pos += int64(h.Size())
	}
	return bestOff, bestTS
}
