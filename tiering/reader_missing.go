package tiering

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/tiering/objstore"
)

// Remote segments whose objects are missing from the bucket. A read that finds one records the segment: it is logged
// once with the object's key and counted
// (strata_tiering_remote_missing_segments_total), `tier status` shows it,
// and every later read of it fails at once with the same
// [ErrSegmentMissing] — no GET, no wait — so a consumer sees one steady
// KAFKA_STORAGE_ERROR instead of answers that alternate with empty ones
// while each fetch waits for a doomed GET. Every missingRecheck one read
// goes to the store again, so objects put back (or a bucket that was
// only briefly wrong) are found without a restart.

// ErrSegmentMissing is returned (wrapped) by [Reader.Read] for a segment
// whose objects a read found missing from the bucket.
var ErrSegmentMissing = errors.New("tiering: remote segment objects missing")

// missingRecheck is how often a read of a segment known missing goes to
// the store again rather than failing at once.
const missingRecheck = 30 * time.Second

// MissingSegmentInfo is a remote segment a read found objects of missing; see
// [Reader.Missing].
type MissingSegmentInfo struct {
	Partition
	SegmentID  uuid.UUID
	BaseOffset int64
	EndOffset  int64
	Key        string // the object a read found missing
	Err        string
	Since      time.Time
}

type missingEntry struct {
	info    MissingSegmentInfo
	checked time.Time // last read that went to the store
}

// missingSet is the reader's set of missing segments.
type missingSet struct {
	mu sync.Mutex // guards m
	m  map[uuid.UUID]*missingEntry
}

// brokenObject reports whether err says a segment object is missing
// (not that the store is down or slow). A corrupt object is not: the
// batches before the damage still read, so it stays a per-read
// ErrCorruptObject.
func brokenObject(err error) bool {
	return errors.Is(err, objstore.ErrNotFound)
}

// knownMissing returns the error a read of seg answers without going to
// the store, or nil when the read should go ahead (not known missing, or
// a recheck is due: the caller's read then is the recheck).
func (r *Reader) knownMissing(seg RemoteSegment) error {
	r.missing.mu.Lock()
	defer r.missing.mu.Unlock()
	e := r.missing.m[seg.SegmentID]
	if e == nil {
		return nil
	}
	if now := time.Now(); now.Sub(e.checked) >= missingRecheck {
		e.checked = now
		return nil
	}
	return fmt.Errorf("%w: %s [%d, %d]: %s", ErrSegmentMissing, e.info.Key, seg.BaseOffset, seg.EndOffset, e.info.Err)
}

// noteRead records the outcome of a read of seg that went to the store.
func (r *Reader) noteRead(seg RemoteSegment, err error) error {
	if err != nil && !brokenObject(err) {
		return err
	}
	r.missing.mu.Lock()
	defer r.missing.mu.Unlock()
	e := r.missing.m[seg.SegmentID]
	if err == nil {
		if e != nil {
			delete(r.missing.m, seg.SegmentID)
			r.log.Info("tiering: remote segment readable again", "topic", seg.Topic, "partition", seg.Index,
				"segment", seg.SegmentID, "base_offset", seg.BaseOffset, "end_offset", seg.EndOffset)
		}
		return nil
	}
	if e == nil {
		key := seg.Key(r.prefix, ExtLog)
		now := time.Now()
		e = &missingEntry{checked: now, info: MissingSegmentInfo{
			Partition: seg.Partition, SegmentID: seg.SegmentID, BaseOffset: seg.BaseOffset, EndOffset: seg.EndOffset,
			Key: key, Err: err.Error(), Since: now,
		}}
		if r.missing.m == nil {
			r.missing.m = map[uuid.UUID]*missingEntry{}
		}
		r.missing.m[seg.SegmentID] = e
		r.m.missingSegments.Inc()
		r.log.Error("tiering: remote segment object missing from the bucket; fetches of its offsets answer KAFKA_STORAGE_ERROR",
			"topic", seg.Topic, "partition", seg.Index, "segment", seg.SegmentID,
			"base_offset", seg.BaseOffset, "end_offset", seg.EndOffset, "key", key, "err", err)
	}
	return fmt.Errorf("%w: %s [%d, %d]: %w", ErrSegmentMissing, e.info.Key, seg.BaseOffset, seg.EndOffset, err)
}

// Missing returns the segments of p reads found missing, by base offset.
func (r *Reader) Missing(p Partition) []MissingSegmentInfo {
	r.missing.mu.Lock()
	defer r.missing.mu.Unlock()
	var out []MissingSegmentInfo
	for _, e := range r.missing.m {
		if e.info.Partition == p {
			out = append(out, e.info)
		}
	}
	slices.SortFunc(out, func(a, b MissingSegmentInfo) int { return cmp.Compare(a.BaseOffset, b.BaseOffset) })
	return out
}
