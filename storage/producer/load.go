package producer

import "github.com/strata-io/strata/internal/batch"

// LoadResult reports how [Load] rebuilt a State.
type LoadResult struct {
	// From is the offset replay started at: the snapshot's offset, or 0
	// (the log start) when there was no usable snapshot.
	From int64
	// SnapshotErr is why a snapshot that was given could not be used (it
	// wraps [ErrCorruptSnapshot]); Load then replayed the whole log.
	SnapshotErr error
	// Replayed counts the batches with a producer id that were applied.
	Replayed int
	// Expired counts the producers removed as expired at the end.
	Expired int
}

// ReplayFunc reads the partition's batches in offset order, starting with
// the batch that contains from (or the log start, if from is below it),
// and calls apply with each batch's header; it stops at the first error
// apply returns and returns it.
type ReplayFunc func(from int64, apply func(h batch.Header) error) error

// Load rebuilds a partition's producer state when its log opens: restore
// the latest snapshot, taken at snapOffset (the base offset of the segment
// rolled then; snap nil = none), then replay every batch at or after that
// offset with [State.ReplayBatch], then forget producers expired at now
// (ms). A snapshot that does not restore is not fatal: Load starts empty,
// replays from offset 0 and reports the snapshot's error in
// [LoadResult.SnapshotErr], since the log is the source of truth. Only an
// error from replay fails Load.
//
//	off, snap, ok, err := log.LatestProducerSnapshot()
//	if !ok { snap = nil }
//	st, res, err := producer.Load(opts, off, snap, nowMs, func(from int64, apply func(batch.Header) error) error {
//		return scanBatchHeaders(log, from, apply)
//	})
func Load(opts Options, snapOffset int64, snap []byte, now int64, replay ReplayFunc) (*State, LoadResult, error) {
	s := New(opts)
	var res LoadResult
	if snap != nil {
		if err := s.Restore(snap); err != nil {
			res.SnapshotErr = err
		} else {
			res.From = snapOffset
		}
	}
	from := res.From
	err := replay(from, func(h batch.Header) error {
		// The reader may start at the segment holding from; batches below
		// it are already in the snapshot.
		if h.BaseOffset < from || !h.HasProducerID() {
			return nil
		}
		s.ReplayBatch(h)
		res.Replayed++
		return nil
	})
	if err != nil {
		return nil, res, err
	}
	res.Expired = s.RemoveExpired(now)
	return s, res, nil
}
