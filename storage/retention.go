package storage

import (
	"fmt"
	"time"

	"github.com/strata-io/strata/storage/checkpoint"
)

// deleteOldestLocked removes the n oldest segments: the local start offset
// moves first, then the shorter list is published (so a reader holding the
// old list rechecks and answers out of range), then the files are renamed
// to .deleted and unlinked after file.delete.delay.ms, or later if a read
// view still holds them. If every segment would go, the log rolls first so
// an (empty) active segment remains.
func (l *Log) deleteOldestLocked(n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	segs := l.segments()
	if n >= len(segs) {
		if err := l.rollLocked(l.active().next.Load()); err != nil {
			return 0, err
		}
		segs = l.segments()
		n = len(segs) - 1
	}
	gone := segs[:n]
	rest := append([]*segment(nil), segs[n:]...)
	if b := rest[0].base; b > l.localStart.Load() {
		l.localStart.Store(b)
	}
	l.segs.Store(&rest)
	cfg := l.cfg.Load()
	var firstErr error
	for _, s := range gone {
		if err := s.renameDeleted(); err != nil && firstErr == nil {
			firstErr = err
		}
		l.scheduleDeleteLocked(s, time.Duration(cfg.FileDeleteDelayMs)*time.Millisecond)
	}
	// Durable renames, so a crash cannot bring back an older segment
	// whose newer neighbour stayed deleted (a hole in the log).
	if firstErr == nil {
		firstErr = l.fs.SyncDir(l.dir)
	}
	_ = l.deleteSnapshotsLocked(rest[0].base, 1<<62) // nothing above: no fsync
	if firstErr != nil {
		return n, l.failLocked(fmt.Errorf("delete segments: %w", firstErr))
	}
	return n, nil
}

// advanceLogStartLocked moves the log start offset forward (never back)
// and trims the leader-epoch cache to it.
func (l *Log) advanceLogStartLocked(off int64) error {
	if off <= l.logStart.Load() {
		return nil
	}
	l.logStart.Store(off)
	if off > l.localStart.Load() {
		l.localStart.Store(off)
	}
	if err := l.epochs.TruncateFromStart(off); err != nil {
		if noSpaceErr(err) {
			// Deleting must work on a full disk: the cache file keeps
			// entries below the start (harmless: recovery trims it to the
			// checkpointed start) until a later rewrite has room.
			l.logger.Warn("storage: leader epoch cache not trimmed: no space", "dir", l.dir, "log_start", off, "err", err)
			if l.onNoSpace != nil {
				l.onNoSpace(fmt.Errorf("storage: %s: %w", l.dir, err))
			}
			return nil
		}
		return l.failLocked(fmt.Errorf("leader epochs: %w", err))
	}
	return nil
}

// SetLogStartOffset moves the log start offset forward (DeleteRecords) and
// deletes the segments wholly below it (their files are removed later, off
// this path). An offset above the log end offset gives
// ErrOffsetOutOfRange; one at or below the current start is a no-op
// (idempotent).
func (l *Log) SetLogStartOffset(off int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if off > l.active().next.Load() {
		return fmt.Errorf("%w: log start %d past log end %d", ErrOffsetOutOfRange, off, l.active().next.Load())
	}
	if off <= l.logStart.Load() {
		return nil
	}
	if err := l.advanceLogStartLocked(off); err != nil {
		return err
	}
	_, err := l.deleteOldestLocked(l.countBelowLocked(off, true))
	return err
}

// countBelowLocked counts the oldest segments whose next offset is <= off.
// With includeActive the active segment counts too when it holds data
// (deleting it rolls first).
func (l *Log) countBelowLocked(off int64, includeActive bool) int {
	segs := l.segments()
	n := 0
	for i, s := range segs {
		last := i == len(segs)-1
		if last && (!includeActive || s.size.Load() == 0) {
			break
		}
		if s.next.Load() > off {
			break
		}
		n++
	}
	return n
}

// EnforceRetention deletes whole sealed segments, oldest first, by
// retention.ms (the segment's largest timestamp is older than now minus
// retention.ms) and retention.bytes (while the log minus the segment is
// still at least retention.bytes), and advances the log start offset. The
// active segment is never deleted.
//
// For remote-storage logs, local.retention.* drive local deletion and
// only of segments wholly below the remote-uploaded offset, moving the
// local log start offset only; retention.ms then moves the log start
// offset (segments wholly below it go locally whether uploaded or not).
// retention.bytes of a remote log is enforced by tiering, which knows the
// remote size.
func (l *Log) EnforceRetention(now time.Time) (deletedSegments int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	cfg := l.cfg.Load()
	if !cfg.Deletes() {
		return 0, nil // cleanup.policy=compact: the cleaner, not retention, discards
	}
	nowMs := now.UnixMilli()
	total := 0
	if cfg.RemoteStorageEnable {
		if cfg.RetentionMs >= 0 {
			n := l.countBreachingLocked(nowMs, cfg.RetentionMs, -1, 1<<62)
			if n > 0 {
				segs := l.segments()
				if err := l.advanceLogStartLocked(segs[n-1].next.Load()); err != nil {
					return 0, err
				}
				d, err := l.deleteOldestLocked(n)
				total += d
				if err != nil {
					return total, err
				}
			}
		}
		ms, bytes := cfg.localRetention()
		n := l.countBreachingLocked(nowMs, ms, bytes, l.remoteUploaded.Load())
		d, err := l.deleteOldestLocked(n)
		return total + d, err
	}
	n := l.countBreachingLocked(nowMs, cfg.RetentionMs, cfg.RetentionBytes, 1<<62)
	if n == 0 {
		return 0, nil
	}
	if err := l.advanceLogStartLocked(l.segments()[n-1].next.Load()); err != nil {
		return 0, err
	}
	return l.deleteOldestLocked(n)
}

// countBreachingLocked counts the oldest sealed segments that breach
// retention (ms < 0 and bytes < 0 disable each rule) and end at or below
// limit (the remote-uploaded offset, for local retention).
func (l *Log) countBreachingLocked(nowMs, ms, bytes, limit int64) int {
	segs := l.segments()
	var size int64
	for _, s := range segs {
		size += s.size.Load()
	}
	n := 0
	for _, s := range segs[:len(segs)-1] {
		if s.next.Load() > limit {
			break
		}
		ts, _ := s.maxTimestamp()
		if ts < 0 {
			// No batch carries a timestamp: judge by the file's age, as
			// Kafka does.
			if st, err := s.fs.Stat(s.logPath()); err == nil { // its file may be closed (file cache)
				ts = st.ModTime().UnixMilli()
			}
		}
		byTime := ms >= 0 && ts < nowMs-ms
		bySize := bytes >= 0 && size-s.size.Load() >= bytes
		if !byTime && !bySize {
			break
		}
		size -= s.size.Load()
		n++
	}
	return n
}

// SetRemoteUploadedOffset records that everything below next is safely in
// the object store: local retention may delete only below it.
func (l *Log) SetRemoteUploadedOffset(next int64) {
	for {
		cur := l.remoteUploaded.Load()
		if next <= cur || l.remoteUploaded.CompareAndSwap(cur, next) {
			return
		}
	}
}

// RemoteUploadedOffset returns the offset set by SetRemoteUploadedOffset
// (-1 if none).
func (l *Log) RemoteUploadedOffset() int64 { return l.remoteUploaded.Load() }

// DeleteLocalSegmentsBelow deletes the oldest sealed segments whose next
// offset is <= offset (tiering calls it once they are safely remote) and
// advances the local log start offset; the log start offset stays.
func (l *Log) DeleteLocalSegmentsBelow(offset int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	return l.deleteOldestLocked(l.countBelowLocked(offset, false))
}

// SegmentInfo describes one local segment (for tiering).
type SegmentInfo struct {
	BaseOffset, NextOffset int64
	MaxTimestamp           int64
	Size                   int64
	LogPath, IndexPath     string
	TimeIndexPath          string
	SnapshotPath           string // "" when the segment has no producer snapshot
	Sealed                 bool
}

// Segments lists all local segments, oldest first. Sealed segments are
// immutable; their files may be copied as they are.
func (l *Log) Segments() []SegmentInfo { return l.segmentInfos(l.segments()) }

// segmentInfos describes segs (one load of the segment list).
func (l *Log) segmentInfos(segs []*segment) []SegmentInfo {
	snaps := map[int64]bool{}
	for _, o := range l.snapshotOffsets() {
		snaps[o] = true
	}
	out := make([]SegmentInfo, len(segs))
	for i, s := range segs {
		ts, _ := s.maxTimestamp()
		out[i] = SegmentInfo{
			BaseOffset: s.base, NextOffset: s.next.Load(), MaxTimestamp: ts, Size: s.size.Load(),
			LogPath: s.logPath(), IndexPath: s.indexPath(), TimeIndexPath: s.timeIndexPath(),
			Sealed: i < len(segs)-1,
		}
		if snaps[s.base] {
			out[i].SnapshotPath = l.snapshotPath(s.base)
		}
	}
	return out
}

// Truncate drops everything at and above offset (a follower truncating to
// its leader): whole segments above it go, the segment holding it is cut
// (the whole batch holding offset goes) and becomes the active segment,
// indexes, leader epochs and producer snapshots follow. An offset at or
// above the log end offset is a no-op; one below the log start offset
// empties the log and restarts it at offset.
func (l *Log) Truncate(offset int64) error {
	if err := l.truncate(offset); err != nil {
		return err
	}
	if l.onTruncate != nil {
		l.onTruncate()
	}
	return nil
}

func (l *Log) truncate(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	// A pending roll's snapshots must not land over the cut history.
	if err := l.drainSyncLocked(); err != nil {
		return err
	}
	if leo := l.active().next.Load(); offset >= leo {
		// No record goes, but an epoch entry starting at the LEO may: a
		// replica elected leader records (epoch, LEO) before any append
		// (KIP-279), and one that lost leadership before appending keeps
		// an epoch with nothing under it, which it would go on sending
		// as LastFetchedEpoch. Kafka's UnifiedLog.truncateTo always
		// truncates the epoch cache for this reason.
		if err := l.epochs.TruncateFromEnd(leo); err != nil {
			return l.failLocked(fmt.Errorf("leader epochs: %w", err))
		}
		return nil
	}
	segs := l.segments()
	if offset < l.logStart.Load() || offset <= segs[0].base {
		return l.truncateFullyLocked(offset)
	}
	cfg := l.cfg.Load()
	i := findSegment(segs, offset)
	if segs[i].base == offset {
		i-- // the segment starting at offset goes whole
	}
	keep := segs[i]
	gone := segs[i+1:]
	// Order: the segments above go first (renamed, durably), then the kept
	// segment is cut, then the shorter list is published. A crash in
	// between leaves a longer prefix, never a hole.
	for _, s := range gone {
		if err := s.renameDeleted(); err != nil {
			return l.failLocked(fmt.Errorf("truncate: %w", err))
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(err)
	}
	if err := keep.activate(); err != nil {
		return l.failLocked(fmt.Errorf("truncate segment %d: %w", keep.base, err))
	}
	if err := keep.truncateTo(offset, *cfg); err != nil {
		return l.failLocked(fmt.Errorf("truncate segment %d: %w", keep.base, err))
	}
	if keep.size.Load() == 0 {
		keep.firstAppendMs = -1
	}
	rest := append([]*segment(nil), segs[:i+1]...)
	l.segs.Store(&rest)
	for _, s := range gone {
		l.scheduleDeleteLocked(s, 0)
	}
	leo := keep.next.Load()
	if l.recoveryPoint.Load() > leo {
		l.recoveryPoint.Store(leo)
	}
	if err := l.epochs.TruncateFromEnd(leo); err != nil {
		return l.failLocked(fmt.Errorf("leader epochs: %w", err))
	}
	if err := l.deleteSnapshotsLocked(-1, leo); err != nil {
		return l.failLocked(fmt.Errorf("truncate: sync dir: %w", err))
	}
	// Open transactions as of the new end: from the latest transaction
	// snapshot at or below it and the log after it (a marker cut away
	// reopens its transaction; a transaction begun above the cut is gone).
	if err := l.loadTxns(false, l.txnSnaps); err != nil {
		return l.failLocked(fmt.Errorf("truncate: transactions: %w", err))
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and restarts the log,
// empty, at offset (a follower far behind a leader whose log starts later).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	err := l.usableLocked()
	if err == nil {
		err = l.truncateFullyLocked(offset)
	}
	l.mu.Unlock()
	if err == nil && l.onTruncate != nil {
		l.onTruncate()
	}
	return err
}

func (l *Log) truncateFullyLocked(offset int64) error {
	return l.restartLocked(offset, offset, nil)
}

// restartLocked empties the log and restarts it at next with log start
// logStart (<= next) and leader-epoch history epochs (nil: none). The
// epoch cache is written before the new segment list is published, so a
// lock-free reader that sees the new log end sees the new history too.
func (l *Log) restartLocked(logStart, offset int64, epochs []checkpoint.EpochEntry) error {
	if err := l.drainSyncLocked(); err != nil {
		return err
	}
	segs := l.segments()
	// Rename the old files away before creating the new segment: it may
	// reuse a base offset, and so a file name.
	for _, s := range segs {
		if err := s.renameDeleted(); err != nil {
			return l.failLocked(fmt.Errorf("truncate fully: %w", err))
		}
	}
	ns, err := createSegment(l.fs, l.dir, offset, *l.cfg.Load())
	if err != nil {
		return l.failLocked(err)
	}
	ns.jitterMs = jitter(l.cfg.Load())
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(err)
	}
	if err := l.epochs.Reset(epochs); err != nil {
		return l.failLocked(fmt.Errorf("leader epochs: %w", err))
	}
	l.logStart.Store(logStart)
	l.localStart.Store(offset)
	l.recoveryPoint.Store(offset)
	list := []*segment{ns}
	l.segs.Store(&list)
	for _, s := range segs {
		l.scheduleDeleteLocked(s, 0)
	}
	l.unflushed = 0
	if err := l.deleteSnapshotsLocked(-1, -1); err != nil {
		return l.failLocked(fmt.Errorf("truncate fully: sync dir: %w", err))
	}
	l.resetTxnsLocked()
	return nil
}
