package raftlog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"google.golang.org/protobuf/proto"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/strata-io/strata/storage/vfs"
)

// Sentinel errors. The raft.Storage methods also return raft's own
// [raft.ErrCompacted], [raft.ErrUnavailable] and [raft.ErrSnapOutOfDate]
// with exactly the meaning raft gives them.
var (
	// ErrCorrupt is returned (wrapped, with the file and offset) by Open when
	// the log cannot be recovered without losing data that may have been
	// acknowledged: damage before the tail of the last segment, a gap between
	// the snapshot and the WAL, or no usable snapshot where one is required.
	ErrCorrupt = errors.New("raftlog: corrupt")
	// ErrFailed is returned by Save, CreateSnapshot and Compact after any
	// earlier write, sync or rename failed: the storage latches into a failed
	// state (its on-disk state is unknown until it is reopened).
	ErrFailed = errors.New("raftlog: storage failed")
	// ErrClosed is returned by writers after Close.
	ErrClosed = errors.New("raftlog: closed")
	// ErrNonContiguous is returned by Save when the first entry given lies
	// beyond the last stored index + 1 (raft never does this).
	ErrNonContiguous = errors.New("raftlog: entries not contiguous with the log")
	// ErrUnsupportedVersion is returned by Open for a WAL segment or a
	// snapshot written in a format version this code does not know.
	ErrUnsupportedVersion = errors.New("raftlog: unsupported format version")
)

// Options configures [Open].
type Options struct {
	// FS is the file system; nil means vfs.Default.
	FS vfs.FS
	// Dir holds the log: metadata.log.dir/__cluster_metadata-0. It is
	// created if missing.
	Dir string
	// SegmentBytes is the size at which the WAL rolls to a new segment
	// file (default 64 MiB). A Save never spans two segments.
	SegmentBytes int64
	// KeepSnapshots is how many snapshot files are kept (default 2, minimum
	// 1). WAL segments are kept back to the oldest kept snapshot so that a
	// corrupt newest snapshot can fall back to an older one plus the WAL.
	KeepSnapshots int
	// Logger receives recovery reports; nil means slog.Default().
	Logger *slog.Logger
}

// RecoveryReport says what Open found and repaired. It is never silently
// empty when something was lost: every truncated byte and skipped file is
// listed.
type RecoveryReport struct {
	// Segments is the number of WAL segments replayed.
	Segments int
	// Entries is the number of entries in the log after recovery.
	Entries int
	// TruncatedSegment is the segment whose torn tail was cut ("" if none);
	// TruncatedAt is the offset it was cut to and TruncatedBytes how many
	// bytes were dropped (an incomplete Save that never returned).
	TruncatedSegment string
	TruncatedAt      int64
	TruncatedBytes   int64
	// RemovedSegments are trailing segments dropped whole because even
	// their header was torn.
	RemovedSegments []string
	// DroppedEntries counts entries after the snapshot that contradicted
	// its term: a stale branch the leader's snapshot replaced, whose
	// installing WAL batch a crash cut off. They were never committed.
	DroppedEntries int
	// CorruptSnapshots are snapshot files that failed their checksum and
	// were renamed to *.corrupt; recovery fell back to an older one.
	CorruptSnapshots []string
	// RemovedTemp are *.tmp leftovers of interrupted snapshot writes.
	RemovedTemp []string
	// SnapshotIndex and SnapshotTerm identify the snapshot loaded (0 if none).
	SnapshotIndex, SnapshotTerm uint64
}

// Stats are counters for metrics. All sizes are bytes.
type Stats struct {
	FirstIndex, LastIndex uint64 // as raft sees them
	Entries               int    // entries held in memory
	EntryBytes            int64  // their encoded size
	WALBytes              int64  // bytes in all WAL segments
	Segments              int    // WAL segment files
	SnapshotIndex         uint64
	SnapshotTerm          uint64
	SnapshotBytes         int64     // size of the newest snapshot file
	SnapshotTime          time.Time // when it was written (zero if none)
	Saves                 uint64    // Save calls that wrote something
	Syncs                 uint64    // fsyncs issued by Save (files and directory)
	LastSaveDuration      time.Duration
}

// Storage is raft's durable log. It implements [raft.Storage]; all methods
// are safe for concurrent use, and readers (the raft.Storage methods,
// Stats) are never blocked by an fsync in progress.
//
// Entries since the last compaction are held in memory, like
// [raft.MemoryStorage] (see memLog for why): returned entries are shared
// and must not be mutated; returned slices belong to the caller (appending
// to them copies). Save keeps the entries it is given (raft never mutates
// them) and clones hard states and snapshots. Save, CreateSnapshot and
// Compact are not idempotent in general (a repeated CreateSnapshot returns
// raft.ErrSnapOutOfDate); re-saving the same entries is harmless.
type Storage struct {
	fs       vfs.FS
	dir      string
	segBytes int64
	keep     int
	logger   *slog.Logger

	// wmu serializes writers (Save, CreateSnapshot, Compact, Close) and
	// guards the fields up to mu. Lock order: wmu, then mu. A writer may read
	// ml, hs and snap without mu, since only writers change them.
	wmu    sync.Mutex
	segs   []*segment // WAL segments in order; the last is open as f
	f      vfs.File   // nil until the first Save creates a segment
	snaps  []snapInfo // snapshot files kept, oldest first
	failed error      // first write failure: latched, see ErrFailed
	closed bool
	buf    []byte // frame buffer, reused
	pbuf   []byte // batch payload buffer, reused

	// mu guards what readers see.
	mu     sync.RWMutex
	ml     *memLog
	hs     *pb.HardState // nil until one is saved
	snap   *pb.Snapshot  // never nil
	st     Stats         // counters other than the ones derived from ml
	report RecoveryReport
}

var _ raft.Storage = (*Storage)(nil)

// Recovery reports what Open found and repaired.
func (s *Storage) Recovery() RecoveryReport {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r := s.report
	r.RemovedSegments = slices.Clone(r.RemovedSegments)
	r.CorruptSnapshots = slices.Clone(r.CorruptSnapshots)
	r.RemovedTemp = slices.Clone(r.RemovedTemp)
	return r
}

// InitialState implements raft.Storage. The hard state is nil when none
// was ever saved; the ConfState is the snapshot's (empty if none).
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var hs *pb.HardState
	if s.hs != nil {
		hs = proto.Clone(s.hs).(*pb.HardState)
	}
	cs := pb.EnsureConfState(proto.Clone(pb.EnsureConfState(s.snap.GetMetadata().GetConfState())).(*pb.ConfState))
	return hs, cs, nil
}

// Entries implements raft.Storage: [lo, hi) limited to maxSize bytes but
// at least one entry. raft.ErrCompacted if lo is at or below the last
// compacted index, raft.ErrUnavailable if the log holds no entries or hi
// is past the end.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ml.entries(lo, hi, maxSize)
}

// Term implements raft.Storage: the term of entry i for i in
// [FirstIndex()-1, LastIndex()]; raft.ErrCompacted below, and
// raft.ErrUnavailable above.
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ml.term(i)
}

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ml.lastIndex(), nil
}

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ml.firstIndex(), nil
}

// Snapshot implements raft.Storage: a copy of the newest snapshot (an
// empty one if there is none).
func (s *Storage) Snapshot() (*pb.Snapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return proto.Clone(s.snap).(*pb.Snapshot), nil
}

// writableLocked reports why writing is refused, if it is.
func (s *Storage) writableLocked() error {
	if s.closed {
		return ErrClosed
	}
	if s.failed != nil {
		return fmt.Errorf("%w: %v", ErrFailed, s.failed)
	}
	return nil
}

// failLocked latches err: the on-disk state after a failed write, sync or
// rename is unknown (a failed fsync may have dropped dirty pages), so
// nothing more is written until the log is reopened and recovered.
func (s *Storage) failLocked(err error) error {
	s.failed = err
	s.logger.Error("raftlog: write failed; storage latched failed until reopened", "dir", s.dir, "err", err)
	return fmt.Errorf("%w: %v", ErrFailed, err)
}

// Save persists, in this order, snap (if non-empty) then ents (replacing
// any conflicting suffix: entries at or after ents[0].Index are replaced,
// as raft.MemoryStorage.Append does) then hs (if non-nil and non-empty).
// The snapshot goes to its own file (tmp, fsync, rename, dir fsync); the
// rest is one batch frame written with one write and one fsync. Save
// returns only once all of it is durable, and only then do the readers
// see it. This is the Ready loop's "persist" step:
// Save(rd.HardState, rd.Entries, rd.Snapshot) before sending rd.Messages.
//
// Errors: raft.ErrSnapOutOfDate for a snapshot not newer than the current
// one, ErrNonContiguous for entries that leave a gap (both change
// nothing); ErrFailed (latched) when a write or sync fails; ErrClosed.
func (s *Storage) Save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot) error {
	hasSnap := snap != nil && !raft.IsEmptySnap(snap)
	hasHS := hs != nil && !raft.IsEmptyHardState(hs)
	if !hasSnap && !hasHS && len(ents) == 0 {
		return nil
	}
	start := time.Now()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}

	// Plan against the log as it will be once snap is installed: raft's
	// snapshot replaces the whole log (MemoryStorage.ApplySnapshot).
	base := s.ml
	var si, st uint64
	if hasSnap {
		si, st = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
		if cur := s.snap.GetMetadata().GetIndex(); cur != 0 && si <= cur {
			return raft.ErrSnapOutOfDate
		}
		base = newMemLog(si, st)
	}
	ents, err := base.trimAppend(ents)
	if err != nil {
		return err
	}
	if !hasSnap && !hasHS && len(ents) == 0 {
		return nil // only entries the log had already compacted away
	}

	roll := s.f == nil || s.segs[len(s.segs)-1].size >= s.segBytes
	p := s.pbuf[:0]
	if roll && s.hs != nil {
		// A new segment starts with the current hard state, so the latest
		// one always lives in the newest segment and compaction may delete
		// older segments without losing the term or the vote.
		if p, err = appendSubProto(p, subHardState, s.hs); err != nil {
			return err
		}
	}
	if hasSnap {
		var body [16]byte
		binary.LittleEndian.PutUint64(body[:], si)
		binary.LittleEndian.PutUint64(body[8:], st)
		p = appendSub(p, subSnapshot, body[:])
	}
	for _, e := range ents {
		if p, err = appendSubProto(p, subEntry, e); err != nil {
			return fmt.Errorf("raftlog: marshal entry %d: %w", e.GetIndex(), err)
		}
	}
	if hasHS {
		if p, err = appendSubProto(p, subHardState, hs); err != nil {
			return err
		}
	}
	s.pbuf = p
	if cap(s.pbuf) > 4<<20 {
		s.pbuf = nil // do not pin the memory of one huge Save
	}
	if len(p)+1 > maxFrameLen {
		return fmt.Errorf("raftlog: save of %d bytes exceeds the %d-byte frame limit", len(p), maxFrameLen)
	}

	// Everything that can be refused has been checked; from here on a
	// failure latches.
	var sinfo snapInfo
	if hasSnap {
		// The snapshot file first: once the WAL says "reset to snapshot i"
		// (below), the file must already be there. A crash between the two
		// leaves a newer snapshot than the WAL knows, which Open reconciles.
		if sinfo, err = writeSnapshotFile(s.fs, s.dir, snap); err != nil {
			return s.failLocked(err)
		}
	}

	syncs := uint64(1)
	if roll {
		next := base.lastIndex() + 1
		if len(ents) > 0 {
			next = ents[0].GetIndex()
		}
		if err := s.rollLocked(next, p); err != nil {
			return s.failLocked(err)
		}
		syncs++ // the directory
	} else {
		sg := s.segs[len(s.segs)-1]
		s.buf = appendFrame(s.buf[:0], recBatch, p)
		if _, err := s.f.WriteAt(s.buf, sg.size); err != nil {
			return s.failLocked(fmt.Errorf("raftlog: write %s: %w", sg.name, err))
		}
		if err := s.f.Sync(); err != nil {
			return s.failLocked(fmt.Errorf("raftlog: sync %s: %w", sg.name, err))
		}
		sg.size += int64(len(s.buf))
	}

	if cap(s.buf) > 4<<20 {
		s.buf = nil
	}

	// Durable: now publish.
	if hasSnap {
		noteReset(s.segs, si)
	}
	if len(ents) > 0 {
		noteAppend(s.segs, ents[0].GetIndex(), ents[len(ents)-1].GetIndex())
	}
	s.mu.Lock()
	if hasSnap {
		s.snap = pb.EnsureSnapshot(proto.Clone(snap).(*pb.Snapshot))
		s.ml = base
		s.st.SnapshotBytes, s.st.SnapshotTime = sinfo.size, sinfo.time
	}
	s.ml.append(ents)
	if hasHS {
		s.hs = proto.Clone(hs).(*pb.HardState)
	}
	s.st.Saves++
	s.st.Syncs += syncs
	s.st.LastSaveDuration = time.Since(start)
	s.mu.Unlock()
	s.segStatsLocked()
	if hasSnap {
		s.snaps = append(s.snaps, sinfo)
		s.pruneSnapsLocked()
	}
	return nil
}

// rollLocked starts a new segment holding a header and the batch payload
// p: create, write, fsync the file, then fsync the directory so the new
// name survives a crash. Only then is the previous segment (already
// fsynced by the Save that wrote it) closed.
func (s *Storage) rollLocked(next uint64, p []byte) error {
	first := next
	if n := len(s.segs); n > 0 && first <= s.segs[n-1].first {
		first = s.segs[n-1].first + 1
	}
	name := walName(first)
	s.buf = appendFrame(s.buf[:0], recHeader, headerPayload(first))
	s.buf = appendFrame(s.buf, recBatch, p)
	f, err := s.fs.Create(joinDir(s.dir, name))
	if err != nil {
		return fmt.Errorf("raftlog: create %s: %w", name, err)
	}
	if _, err := f.WriteAt(s.buf, 0); err != nil {
		f.Close()
		return fmt.Errorf("raftlog: write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("raftlog: sync %s: %w", name, err)
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		f.Close()
		return fmt.Errorf("raftlog: sync dir %s: %w", s.dir, err)
	}
	if s.f != nil {
		if err := s.f.Close(); err != nil {
			s.logger.Warn("raftlog: close segment", "err", err)
		}
	}
	s.f = f
	s.segs = append(s.segs, &segment{name: name, first: first, size: int64(len(s.buf))})
	return nil
}

// CreateSnapshot durably writes a snapshot at index (an applied index)
// with the given ConfState (nil keeps the current snapshot's) and
// state-machine data, and makes it the one Snapshot returns. The storage
// keeps data: the caller must not modify it afterwards. Older snapshot
// files beyond Options.KeepSnapshots are deleted.
//
// Errors: raft.ErrSnapOutOfDate if index is not newer than the current
// snapshot, raft.ErrCompacted if index's term was compacted away,
// raft.ErrUnavailable (wrapped) if index is past the last entry; ErrFailed
// (latched) if the file cannot be made durable; ErrClosed.
func (s *Storage) CreateSnapshot(index uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writableLocked(); err != nil {
		return nil, err
	}
	if index <= s.snap.GetMetadata().GetIndex() {
		return nil, raft.ErrSnapOutOfDate
	}
	if last := s.ml.lastIndex(); index > last {
		return nil, fmt.Errorf("raftlog: snapshot at %d beyond last index %d: %w", index, last, raft.ErrUnavailable)
	}
	term, err := s.ml.term(index)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		cs = s.snap.GetMetadata().GetConfState()
	}
	if cs == nil {
		cs = pb.EnsureConfState(nil)
	}
	snap := &pb.Snapshot{
		Metadata: &pb.SnapshotMetadata{
			Index:     proto.Uint64(index),
			Term:      proto.Uint64(term),
			ConfState: pb.EnsureConfState(proto.Clone(cs).(*pb.ConfState)),
		},
		Data: data,
	}
	si, err := writeSnapshotFile(s.fs, s.dir, snap)
	if err != nil {
		return nil, s.failLocked(err)
	}
	s.mu.Lock()
	s.snap = snap
	s.st.SnapshotBytes, s.st.SnapshotTime = si.size, si.time
	s.mu.Unlock()
	s.snaps = append(s.snaps, si)
	s.pruneSnapsLocked()
	return proto.Clone(snap).(*pb.Snapshot), nil
}

// pruneSnapsLocked deletes the oldest snapshot files beyond s.keep. A
// failed removal is logged and retried next time: an extra snapshot file
// costs disk space, never correctness.
func (s *Storage) pruneSnapsLocked() {
	slices.SortFunc(s.snaps, cmpSnap)
	removed := false
	for len(s.snaps) > s.keep {
		if err := s.fs.Remove(joinDir(s.dir, s.snaps[0].name)); err != nil {
			s.logger.Warn("raftlog: remove old snapshot", "file", s.snaps[0].name, "err", err)
			break
		}
		s.snaps = s.snaps[1:]
		removed = true
	}
	if removed {
		if err := s.fs.SyncDir(s.dir); err != nil {
			s.logger.Warn("raftlog: sync dir after snapshot removal", "err", err)
		}
	}
}

func cmpSnap(a, b snapInfo) int {
	if a.index != b.index {
		return cmp.Compare(a.index, b.index)
	}
	return cmp.Compare(a.term, b.term)
}

// walBoundLocked is the highest index whose WAL entries may be deleted:
// everything at or below it is covered by every snapshot kept, so even if
// the newest snapshot turns out corrupt, the oldest kept one plus the WAL
// still rebuild the log. Until KeepSnapshots snapshots exist, nothing is
// covered twice and the bound is 0.
func (s *Storage) walBoundLocked() uint64 {
	if len(s.snaps) < s.keep {
		return 0
	}
	return s.snaps[0].index
}

// Compact discards entries up to and including index from memory (the
// entry at index stays as the term-only dummy, as in raft.MemoryStorage)
// and deletes the oldest WAL segments whose live entries all lie at or
// below both index and every kept snapshot (see walBoundLocked). The open
// segment is never deleted. Compaction is not itself logged: after a
// reopen the log starts right after the snapshot, which is where raft's
// applied index starts too.
//
// Errors: raft.ErrCompacted if index is already compacted,
// raft.ErrUnavailable (wrapped) if past the last entry, ErrClosed,
// ErrFailed (latched by an earlier failure, or by a failed directory
// fsync here). A failed removal is returned as is: the in-memory
// compaction stands and the next Compact retries.
func (s *Storage) Compact(index uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	s.mu.Lock()
	err := s.ml.compact(index)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	bound := min(index, s.walBoundLocked())
	// Oldest first, one directory fsync per segment: replay needs what
	// remains to be contiguous, and removals made durable together could
	// survive a crash in any combination, leaving a hole.
	defer s.segStatsLocked()
	for len(s.segs) > 1 && s.segs[0].maxLive <= bound {
		name := s.segs[0].name
		if err := s.fs.Remove(joinDir(s.dir, name)); err != nil {
			return fmt.Errorf("raftlog: remove %s: %w", name, err)
		}
		s.segs = s.segs[1:]
		if err := s.fs.SyncDir(s.dir); err != nil {
			return s.failLocked(fmt.Errorf("raftlog: sync dir %s: %w", s.dir, err))
		}
	}
	return nil
}

// Close closes the open segment; further writes return ErrClosed. Reads
// keep working (from memory). Closing twice is harmless.
func (s *Storage) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.f != nil {
		err := s.f.Close()
		s.f = nil
		return err
	}
	return nil
}

// Stats returns counters for metrics. It never waits for a Save.
func (s *Storage) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := s.st
	st.FirstIndex, st.LastIndex = s.ml.firstIndex(), s.ml.lastIndex()
	st.Entries = len(s.ml.ents) - 1
	st.EntryBytes = s.ml.size()
	st.SnapshotIndex, st.SnapshotTerm = s.snap.GetMetadata().GetIndex(), s.snap.GetMetadata().GetTerm()
	return st
}

// segStatsLocked publishes the WAL's size to Stats; wmu must be held.
func (s *Storage) segStatsLocked() {
	var n int64
	for _, sg := range s.segs {
		n += sg.size
	}
	s.mu.Lock()
	s.st.WALBytes, s.st.Segments = n, len(s.segs)
	s.mu.Unlock()
}
