package storage

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/storage/vfs"
)

// SealedSegment is a sealed segment's files opened for copying by
// [Log.OpenSealedSegment]: the .log, .index and .timeindex as they are on
// disk, the .txnindex (aborted transactions; [DecodeTxnIndex] reads it)
// when the segment has one, and the producer snapshot at the segment's
// end. Each is read
// through ReaderAt up to its size; they stay readable until Release, even
// if retention deletes the segment meanwhile (its files are unlinked after
// the last reference goes, as for a [ReadView]). The readers are shared:
// ReadAt only, no Close. Release is idempotent; after it the readers must
// not be used.
type SealedSegment struct {
	Info                  SegmentInfo
	Log, Index, TimeIndex SegmentFile
	Snapshot              SegmentFile // Size 0 and R nil when there is none
	TxnIndex              SegmentFile // Size 0 and R nil when the segment has no aborted transaction
	release, closeOwn     func()
	released              bool
}

// SegmentFile is one file of a [SealedSegment].
type SegmentFile struct {
	R    io.ReaderAt
	Size int64
}

// Release drops the segment's reference and closes what was opened for
// it.
func (s *SealedSegment) Release() {
	if s == nil || s.released {
		return
	}
	s.released = true
	s.closeOwn()
	s.release()
}

// OpenSealedSegment opens the sealed segment with base offset base for
// copying (tiering): it takes a reference on the segment (which keeps its
// files from being unlinked, and from being closed by the open-file LRU,
// until Release) and opens its indexes and the producer snapshot at its
// end (the next segment's base, when that segment starts where this one
// ends and a snapshot was written there; none otherwise, as a snapshot
// removed meanwhile). ErrNoSuchSegment when no sealed segment of the log
// has that base.
func (l *Log) OpenSealedSegment(base int64) (*SealedSegment, error) {
	segs := l.segments()
	infos := l.segmentInfos(segs)
	i := -1
	for j, s := range segs {
		if s.base == base {
			i = j
			break
		}
	}
	if i < 0 || i == len(segs)-1 {
		return nil, fmt.Errorf("%w: base %d", ErrNoSuchSegment, base)
	}
	s := segs[i]
	if err := s.acquire(); err != nil {
		if errors.Is(err, errSegmentClosed) {
			return nil, fmt.Errorf("%w: base %d", ErrNoSuchSegment, base)
		}
		return nil, err
	}
	info := infos[i]
	var own []vfs.File
	closeOwn := func() {
		for _, f := range own {
			f.Close()
		}
	}
	fail := func(err error) (*SealedSegment, error) {
		closeOwn()
		s.release()
		return nil, err
	}
	open := func(path string, optional bool) (SegmentFile, error) {
		f, err := l.fs.Open(path)
		if errors.Is(err, errNotExist) {
			// Renamed to .deleted since (retention): the reference keeps
			// that name until it is released.
			f, err = l.fs.Open(path + DeletedFileSuffix)
		}
		if err != nil {
			if optional && errors.Is(err, errNotExist) {
				return SegmentFile{}, nil
			}
			return SegmentFile{}, fmt.Errorf("storage: open %s: %w", path, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return SegmentFile{}, fmt.Errorf("storage: stat %s: %w", path, err)
		}
		own = append(own, f)
		return SegmentFile{R: f, Size: st.Size()}, nil
	}
	out := &SealedSegment{Info: info, release: s.release}
	logSize, err := fileSize(s.log)
	if err != nil {
		return fail(fmt.Errorf("storage: stat %s: %w", s.logPath(), err))
	}
	out.Log = SegmentFile{R: s.log, Size: logSize}
	if out.Index, err = open(s.indexPath(), false); err != nil {
		return fail(err)
	}
	if out.TimeIndex, err = open(s.timeIndexPath(), false); err != nil {
		return fail(err)
	}
	if len(s.abortedTxns()) > 0 {
		if out.TxnIndex, err = open(s.txnIndexPath(), true); err != nil {
			return fail(err)
		}
	}
	if next := infos[i+1]; next.BaseOffset == info.NextOffset && next.SnapshotPath != "" {
		if out.Snapshot, err = open(next.SnapshotPath, true); err != nil {
			return fail(err)
		}
	}
	out.closeOwn = closeOwn
	return out, nil
}

func fileSize(f vfs.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// SetRemoteLogStart sets the log start offset of a remote-storage log to
// off, the remote tier's start: unlike [Log.SetLogStartOffset] it may move
// the log start back below the local log start (after a restart or a
// restore, tiering knows the remote start better than the checkpoint), but
// never above it, and never below 0. Ignored unless remote.storage.enable.
func (l *Log) SetRemoteLogStart(off int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if !l.cfg.Load().RemoteStorageEnable || off < 0 {
		return nil
	}
	local := l.localStart.Load()
	if off > local {
		return fmt.Errorf("%w: remote log start %d above the local log start %d", ErrOffsetOutOfRange, off, local)
	}
	l.logStart.Store(off)
	return nil
}

// RestartAt empties the log and restarts it at next, with log start offset
// logStart (<= next): a partition whose local copy is gone and whose older
// data is in the remote tier (a restore, or a replica on a new disk) serves
// [logStart, next) from the remote tier and appends from next.
func (l *Log) RestartAt(logStart, next int64) error {
	if logStart > next || logStart < 0 {
		return fmt.Errorf("%w: restart at %d with log start %d", ErrOffsetOutOfRange, next, logStart)
	}
	if err := l.TruncateFullyAndStartAt(next); err != nil {
		return err
	}
	return l.SetRemoteLogStart(logStart)
}

// RestartFromTier empties the log and restarts it at next with the
// auxiliary state a replica rebuilt from the remote tier needs (KIP-405's
// follower path, and a leader whose local log is gone): log start offset
// logStart (<= next; the data below next is served from the remote
// tier), the leader-epoch history epochs (what the remote segments
// record; an entry starting at next is kept, a new leader's own epoch as
// KIP-279 wants it, later ones go), and the producer snapshot at next
// (snapshot; nil: no idempotent producer state). The whole change happens
// under the append lock, so no append sees it half done, and a lock-free
// reader that sees the new log end sees the new log start and epochs
// too; on disk the order is: the old segments renamed away and the new
// one created, then the epoch checkpoint, then (the new segment list
// published) <next>.snapshot, then the directory synced. A crash in
// between leaves an empty log at next without the later parts: the
// replica then fetches from next again and, if the leader no longer
// holds it, rebuilds once more.
//
// Errors: ErrOffsetOutOfRange for logStart outside [0, next]; a bad epoch
// list (checkpoint.ErrInvalidEpoch) before anything changes; any I/O
// failure latches the log as for Truncate.
func (l *Log) RestartFromTier(logStart, next int64, epochs []checkpoint.EpochEntry, snapshot []byte) error {
	if logStart > next || logStart < 0 {
		return fmt.Errorf("%w: restart at %d with log start %d", ErrOffsetOutOfRange, next, logStart)
	}
	var keep []checkpoint.EpochEntry
	for _, e := range epochs {
		if e.StartOffset <= next {
			keep = append(keep, e)
		}
	}
	for i, e := range keep {
		if e.Epoch < 0 || e.StartOffset < 0 || i > 0 && (e.Epoch <= keep[i-1].Epoch || e.StartOffset <= keep[i-1].StartOffset) {
			return fmt.Errorf("%w: entry %d (%d, %d)", checkpoint.ErrInvalidEpoch, i, e.Epoch, e.StartOffset)
		}
	}
	l.mu.Lock()
	err := l.restartFromTierLocked(logStart, next, keep, snapshot)
	l.mu.Unlock()
	if err == nil && l.onTruncate != nil {
		l.onTruncate()
	}
	return err
}

func (l *Log) restartFromTierLocked(logStart, next int64, epochs []checkpoint.EpochEntry, snapshot []byte) error {
	if err := l.usableLocked(); err != nil {
		return err
	}
	if err := l.restartLocked(logStart, next, epochs); err != nil {
		return err
	}
	if snapshot != nil {
		if err := vfs.WriteFileAtomicDeferDirSync(l.fs, l.snapshotPath(next), snapshot); err != nil {
			return l.failLocked(fmt.Errorf("producer snapshot at %d: %w", next, err))
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.failLocked(err)
		}
	}
	return nil
}

// SnapshotProducers writes the producer snapshot at the log end now
// (through LogOptions.ProducerSnapshot), durably, as a roll would: the
// broker calls it after installing producer state that came from
// elsewhere (the remote tier), so a restart finds it. A log without a
// snapshot hook, or whose hook has nothing, writes nothing.
func (l *Log) SnapshotProducers() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if l.snapshot == nil {
		return nil
	}
	if err := l.drainSyncLocked(); err != nil {
		return err
	}
	if err := l.writeSnapshotLocked(l.active().next.Load()); err != nil {
		return l.failLocked(err) // names the snapshot and its offset
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(err)
	}
	return nil
}

// ExternalView returns a ReadView over bytes [0, size) of f held by
// someone else (the remote tier's chunk cache): Release calls release.
// first and next are the view's FirstOffset and NextOffset.
func ExternalView(f vfs.File, size, first, next int64, release func()) ReadView {
	return ReadView{File: f, Size: size, FirstOffset: first, NextOffset: next, release: release}
}

// BytesView returns a ReadView over records held in memory (batches read
// from the remote tier): the fetch path sends it like a file region, by
// copying instead of sendfile. first and next are the view's FirstOffset
// and NextOffset. Release is a no-op.
func BytesView(records []byte, first, next int64) ReadView {
	return ReadView{File: &bytesFile{b: records}, Size: int64(len(records)), FirstOffset: first, NextOffset: next}
}

// bytesFile is a read-only vfs.File over a byte slice.
type bytesFile struct{ b []byte }

var errReadOnly = errors.New("storage: read-only in-memory view")

func (f *bytesFile) Read(p []byte) (int, error) { return 0, errReadOnly }
func (f *bytesFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(f.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (f *bytesFile) Write([]byte) (int, error)          { return 0, errReadOnly }
func (f *bytesFile) WriteAt([]byte, int64) (int, error) { return 0, errReadOnly }
func (f *bytesFile) Close() error                       { return nil }
func (f *bytesFile) Sync() error                        { return nil }
func (f *bytesFile) Truncate(int64) error               { return errReadOnly }
func (f *bytesFile) Stat() (os.FileInfo, error)         { return nil, errReadOnly }
func (f *bytesFile) Name() string                       { return "(remote records)" }
func (f *bytesFile) Mmap(int) ([]byte, error)           { return nil, errReadOnly }
func (f *bytesFile) Munmap([]byte) error                { return errReadOnly }
